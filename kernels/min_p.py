"""Min-p filtering of logits, in place.

``apply_min_p(logits [T, V], expanded_idx_mapping [T], min_p [R])``: for each row with
``mp = min_p[expanded_idx_mapping[row]] > 0``, every entry below ``max(row) + log(mp)`` (a
probability below ``mp`` times the largest) becomes -inf. Rows with ``mp == 0`` are untouched.

The vocabulary is split into blocks so that a small batch still fills the device: one launch
writes each block's maximum, a second reduces them per row and masks its block.

Passes over the logits: two reads and one write. The cutoff depends on the row's max, which is
known only after the whole row was read, so the block maxima come first and the masking pass
reads the row again and writes every entry back (vector stores).

Products that can exceed 2**31: ``row * logits_stride`` (row = program id, up to T - 1) and
``row * num_blocks`` in the block-maximum buffer.
"""

import torch
import triton
import triton.language as tl

from kernels._launch import check_index_range, check_logits, check_table, check_value_range

LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_BLOCK = 8192


@triton.jit
def _block_max_kernel(
    block_max_ptr,  # [n_rows, num_blocks] fp32
    logits_ptr,  # [n_rows, vocab_size]
    logits_stride,  # elements between logits rows
    idx_mapping_ptr,  # [n_rows] int32 request slot of each row
    min_p_ptr,  # [max_num_reqs] fp32
    vocab_size,
    num_blocks,
    BLOCK: tl.constexpr = 8192,
):
    # Widened: row * logits_stride passes 2**31 once T * V does.
    row = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    min_p = tl.load(min_p_ptr + tl.load(idx_mapping_ptr + row))
    if min_p == 0.0:
        return
    offs = block * BLOCK + tl.arange(0, BLOCK)  # overflow-lint: block * BLOCK bounded by vocab_size
    x = tl.load(logits_ptr + row * logits_stride + offs, mask=offs < vocab_size,
                other=float("-inf")).to(tl.float32)
    tl.store(block_max_ptr + row * num_blocks + block, tl.max(x, 0))


@triton.jit
def _min_p_kernel(
    logits_ptr,  # [n_rows, vocab_size], masked in place
    logits_stride,
    idx_mapping_ptr,  # [n_rows] int32
    min_p_ptr,  # [max_num_reqs] fp32
    block_max_ptr,  # [n_rows, num_blocks] fp32 from _block_max_kernel
    vocab_size,
    num_blocks,
    BLOCK: tl.constexpr = 8192,
    PADDED_BLOCKS: tl.constexpr = 32,
):
    # Widened: row * logits_stride passes 2**31 once T * V does.
    row = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    min_p = tl.load(min_p_ptr + tl.load(idx_mapping_ptr + row))
    if min_p == 0.0:
        return
    blocks = tl.arange(0, PADDED_BLOCKS)
    row_max = tl.max(tl.load(block_max_ptr + row * num_blocks + blocks, mask=blocks < num_blocks,
                             other=float("-inf")), 0)
    threshold = row_max + tl.log(min_p)
    offs = block * BLOCK + tl.arange(0, BLOCK)  # overflow-lint: block * BLOCK bounded by vocab_size
    row_ptr = logits_ptr + row * logits_stride
    in_row = offs < vocab_size
    x = tl.load(row_ptr + offs, mask=in_row, other=0.0).to(tl.float32)
    # Every entry is written back: a mask that depends on the values would split the store
    # into one access per entry and leave sectors partly written.
    tl.store(row_ptr + offs, tl.where(x < threshold, float("-inf"), x), mask=in_row)


def apply_min_p(logits: torch.Tensor, expanded_idx_mapping: torch.Tensor, min_p: torch.Tensor, *,
                check_values: bool = True) -> None:
    """Mask ``logits [T, V]`` in place: entries with probability < min_p x the row's largest.

    ``expanded_idx_mapping``: int32 ``[T]``, each row's request slot. ``min_p``: fp32
    ``[max_num_reqs]`` in [0, 1]; 0 leaves the row alone. ``check_values=False`` skips the
    range checks (host synchronisations).
    """
    check_logits(logits, "logits", LOGITS_DTYPES)
    n_rows, vocab_size = logits.shape
    check_table(expanded_idx_mapping, "expanded_idx_mapping", n_rows, logits.device, (torch.int32, ))
    check_table(min_p, "min_p", None, logits.device, (torch.float32, ))
    if check_values:
        check_index_range(expanded_idx_mapping, "expanded_idx_mapping", min_p.numel())
    check_value_range(min_p, "min_p", 0.0, 1.0, check_values)
    if n_rows == 0 or vocab_size == 0:
        return
    num_blocks = triton.cdiv(vocab_size, _BLOCK)
    block_max = torch.empty((n_rows, num_blocks), dtype=torch.float32, device=logits.device)
    grid = (n_rows, num_blocks)
    _block_max_kernel[grid](block_max, logits, logits.stride(0), expanded_idx_mapping, min_p,
                            vocab_size, num_blocks, BLOCK=_BLOCK, num_warps=8)
    _min_p_kernel[grid](logits, logits.stride(0), expanded_idx_mapping, min_p, block_max,
                        vocab_size, num_blocks, BLOCK=_BLOCK,
                        PADDED_BLOCKS=triton.next_power_of_2(num_blocks), num_warps=8)
