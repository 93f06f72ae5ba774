"""Temperature scaling and Gumbel-max sampling.

``apply_temperature(logits [T, V], expanded_idx_mapping [T], temperature [R])``: divides each
row by its request's temperature in place (rows with temperature 0 or 1 are left alone).

``gumbel_sample(logits [T, V], expanded_idx_mapping, temperature, seed, pos, apply_temperature,
output_processed_logits=None, output_processed_logits_col=None, use_fp64=False) -> [T] int64``:
``argmax_v(x[v] / t + g(seed, pos, v))``, plain argmax (lowest id on ties) where ``t == 0``.
The noise ``g = -log(-log(1 - u))`` (fp32; ``-log(-log(u))`` on a 64-bit uniform with
``use_fp64``) comes from Triton's Philox generator keyed by ``(seed[req], pos[row], v)``, never
by the row index, so a copy of a row with the same slot and position samples the same token.
The fp32 path spends one Philox call on four vocab ids: ``u`` for id ``v`` converts word
``v % 4`` of ``tl.randint4x(stream, v // 4)`` as ``tl.rand`` would (the fp64 path takes words
0 and 1 of ``tl.randint4x(stream, v)``). The optional side output stores each row's scaled
logits into ``output_processed_logits [R, K, V]`` at ``[req, col]`` (``col`` from
``output_processed_logits_col``: one int for all rows, or one per row; 0 when absent). Rows
that share a ``(req, col)`` race for it; the engine gives each row its own.

Each program handles one (row, 1024-entry block) and writes the block's best (value, id); the
host then picks the best block per row.

Passes over the logits: temperature reads and writes each row once; sampling reads each row
once (writing it to the side output when asked) and writes one (value, id) per block, which the
host reduces per row: a pass split over blocks so that a small batch still fills the device.

Products that can exceed 2**31: ``row * logits_stride`` (row = program id, up to T - 1),
``req * processed_stride`` (req loaded from the int32 ``expanded_idx_mapping``: slots past
~2**31 / (K * V) in the side output) and ``row * num_blocks`` in the block buffers.
"""

import torch
import triton
import triton.language as tl

from kernels._launch import (check_flag, check_index_range, check_logits, check_table,
                             check_tensor, check_value_range)

LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_TEMPERATURE_BLOCK = 8192
_SAMPLE_BLOCK = 1024
TINY_UNIFORM_FP32 = 4.6566127342e-10
TINY_UNIFORM_FP64 = 2.2250738585072014e-308


@triton.jit
def _temperature_kernel(
    logits_ptr,  # [n_rows, vocab_size], scaled in place
    logits_stride,
    idx_mapping_ptr,  # [n_rows] int32 request slot of each row
    temperature_ptr,  # [max_num_reqs] fp32
    vocab_size,
    BLOCK: tl.constexpr = 8192,
):
    # Widened: row * logits_stride passes 2**31 once T * V does.
    row = tl.program_id(0).to(tl.int64)
    temperature = tl.load(temperature_ptr + tl.load(idx_mapping_ptr + row))
    if (temperature == 0.0) | (temperature == 1.0):
        return
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # overflow-lint: tl.program_id(1) * BLOCK bounded by vocab_size
    in_row = offs < vocab_size
    row_ptr = logits_ptr + row * logits_stride
    x = tl.load(row_ptr + offs, mask=in_row).to(tl.float32)
    tl.store(row_ptr + offs, x / temperature, mask=in_row)


@triton.jit
def gumbel_block_argmax(
    x,  # [BLOCK] fp32 logits of this block, -inf where masked
    block_start,  # global vocab id of the block's first entry, a multiple of 4
    mask,  # [BLOCK] lanes inside the row
    row,  # logits row (int64)
    idx_mapping_ptr,  # [n_rows] int32 request slot of each row
    temperature_ptr,  # [max_num_reqs] fp32
    seed_ptr,  # [max_num_reqs] int64
    pos_ptr,  # [n_rows] int64
    processed_ptr,  # [max_num_reqs, K, V] side output, or None
    processed_stride,  # elements between request slots of processed_ptr
    processed_col_ptr,  # int32 column(s) of the side output, or None
    vocab_size,
    APPLY_TEMPERATURE: tl.constexpr,
    USE_FP64: tl.constexpr,
    PER_ROW_COL: tl.constexpr = False,
):
    """Best (value, block-local index) of ``x + Gumbel noise`` after optional temperature."""
    BLOCK: tl.constexpr = x.shape[0]
    vocab_ids = block_start + tl.arange(0, BLOCK)
    # Widened: req * processed_stride passes 2**31 for slots past 2**31 / (K * V).
    req = tl.load(idx_mapping_ptr + row).to(tl.int64)
    temperature = tl.load(temperature_ptr + req)
    if APPLY_TEMPERATURE:
        x = tl.where(temperature != 0.0, x / temperature, x)
    if processed_ptr is not None:
        col = 0
        if processed_col_ptr is not None:
            if PER_ROW_COL:
                col = tl.load(processed_col_ptr + row).to(tl.int64)  # overflow-lint: col * vocab_size bounded by K * V
            else:
                col = tl.load(processed_col_ptr).to(tl.int64)  # overflow-lint: col * vocab_size bounded by K * V
        tl.store(processed_ptr + req * processed_stride + col * vocab_size + vocab_ids, x,
                 mask=mask)
    if USE_FP64:
        score = x.to(tl.float64)
    else:
        score = x
    if temperature != 0.0:
        stream = tl.randint(tl.load(seed_ptr + req), tl.load(pos_ptr + row))
        if USE_FP64:
            word_hi, word_lo, _, _ = tl.randint4x(stream, vocab_ids)
            bits = (word_hi.to(tl.uint64) << 32) | word_lo.to(tl.uint64)
            uniform = tl.maximum(bits.to(tl.float64) * 5.421010862427522e-20, 2.2250738585072014e-308)
            noise = -tl.log(-tl.log(uniform))
        else:
            # One Philox call gives four words: word k of counter v // 4 serves vocab id v.
            counters = block_start // 4 + tl.arange(0, BLOCK // 4)
            word_0, word_1, word_2, word_3 = tl.randint4x(stream, counters)
            words = tl.interleave(tl.interleave(word_0, word_2), tl.interleave(word_1, word_3))
            uniform = tl.maximum(tl.uint_to_uniform_float(words), 4.6566127342e-10)
            noise = -tl.log(-tl.log(1.0 - uniform))
        score = tl.where(mask, score + noise, float("-inf"))
    return tl.max(score, 0, return_indices=True, return_indices_tie_break_left=True)


@triton.jit
def _gumbel_sample_kernel(
    block_id_ptr,  # [n_rows, num_blocks] int64 best vocab id of each block
    block_value_ptr,  # [n_rows, num_blocks] fp32 (fp64 with USE_FP64) its score
    processed_ptr,  # [max_num_reqs, K, V] fp32 side output, or None
    processed_stride,
    processed_col_ptr,  # int32 [] or [n_rows], or None
    logits_ptr,  # [n_rows, vocab_size]
    logits_stride,
    idx_mapping_ptr,  # [n_rows] int32
    seed_ptr,  # [max_num_reqs] int64
    pos_ptr,  # [n_rows] int64
    temperature_ptr,  # [max_num_reqs] fp32
    vocab_size,
    num_blocks,
    BLOCK: tl.constexpr = 1024,
    APPLY_TEMPERATURE: tl.constexpr = True,
    USE_FP64: tl.constexpr = False,
    PER_ROW_COL: tl.constexpr = False,
):
    # Widened: row * logits_stride passes 2**31 once T * V does.
    row = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    block_start = block * BLOCK  # overflow-lint: block * BLOCK bounded by vocab_size
    vocab_ids = block_start + tl.arange(0, BLOCK)
    mask = vocab_ids < vocab_size
    x = tl.load(logits_ptr + row * logits_stride + vocab_ids, mask=mask,
                other=float("-inf")).to(tl.float32)
    value, index = gumbel_block_argmax(x, block_start, mask, row, idx_mapping_ptr, temperature_ptr,
                                       seed_ptr, pos_ptr, processed_ptr, processed_stride,
                                       processed_col_ptr, vocab_size, APPLY_TEMPERATURE, USE_FP64,
                                       PER_ROW_COL)
    tl.store(block_id_ptr + row * num_blocks + block, block_start + index)
    tl.store(block_value_ptr + row * num_blocks + block, value)


def _check_common(logits, expanded_idx_mapping, temperature, check_values):
    check_logits(logits, "logits", LOGITS_DTYPES)
    check_table(expanded_idx_mapping, "expanded_idx_mapping", logits.size(0), logits.device,
                (torch.int32, ))
    check_table(temperature, "temperature", None, logits.device, (torch.float32, ))
    if check_values:
        check_index_range(expanded_idx_mapping, "expanded_idx_mapping", temperature.numel())
    check_value_range(temperature, "temperature", 0.0, float("inf"), check_values)


def apply_temperature(logits: torch.Tensor, expanded_idx_mapping: torch.Tensor,
                      temperature: torch.Tensor, *, check_values: bool = True) -> None:
    """Divide each row of ``logits [T, V]`` in place by its request's temperature (0 and 1: no-op)."""
    _check_common(logits, expanded_idx_mapping, temperature, check_values)
    n_rows, vocab_size = logits.shape
    if n_rows == 0 or vocab_size == 0:
        return
    grid = (n_rows, triton.cdiv(vocab_size, _TEMPERATURE_BLOCK))
    _temperature_kernel[grid](logits, logits.stride(0), expanded_idx_mapping, temperature,
                              vocab_size, BLOCK=_TEMPERATURE_BLOCK, num_warps=8)


def gumbel_sample(
    logits: torch.Tensor,
    expanded_idx_mapping: torch.Tensor,
    temperature: torch.Tensor,
    seed: torch.Tensor,
    pos: torch.Tensor,
    apply_temperature: bool,
    output_processed_logits: torch.Tensor | None = None,
    output_processed_logits_col: torch.Tensor | None = None,
    use_fp64: bool = False,
    *,
    check_values: bool = True,
) -> torch.Tensor:
    """Sample one token per row of ``logits [T, V]``; return int64 ``[T]`` (see module doc)."""
    _check_common(logits, expanded_idx_mapping, temperature, check_values)
    n_rows, vocab_size = logits.shape
    device = logits.device
    check_table(seed, "seed", temperature.numel(), device, (torch.int64, ))
    check_table(pos, "pos", n_rows, device, (torch.int64, ))
    check_flag(apply_temperature, "apply_temperature")
    check_flag(use_fp64, "use_fp64")
    processed, processed_stride, col, per_row_col = None, 0, None, False
    if output_processed_logits is not None:
        processed = output_processed_logits
        check_tensor(processed, "output_processed_logits")
        # K >= 1: without a column table every row writes column 0.
        if (processed.dim() != 3 or processed.dtype != torch.float32 or processed.device != device
                or processed.size(1) < 1 or processed.size(2) != vocab_size
                or not processed.is_contiguous()):
            raise ValueError("output_processed_logits must be a contiguous fp32 [max_num_reqs, K "
                             f">= 1, {vocab_size}] tensor on {device}; got {processed.dtype} "
                             f"{tuple(processed.shape)} on {processed.device}")
        if check_values:
            check_index_range(expanded_idx_mapping, "expanded_idx_mapping", processed.size(0))
        processed_stride = processed.stride(0)
        if output_processed_logits_col is not None:
            col = output_processed_logits_col
            check_tensor(col, "output_processed_logits_col")
            if col.dtype != torch.int32 or col.device != device or col.dim() > 1 or (
                    col.dim() == 1 and col.numel() not in (1, n_rows)):
                raise ValueError("output_processed_logits_col must be int32 with one entry or one "
                                 f"per row on {device}; got {col.dtype} {tuple(col.shape)}")
            per_row_col = col.dim() == 1 and col.numel() == n_rows and n_rows != 1
            col = col.contiguous()
            if check_values:
                check_index_range(col, "output_processed_logits_col", processed.size(1))
    elif output_processed_logits_col is not None:
        raise ValueError("output_processed_logits_col needs output_processed_logits")
    if n_rows == 0:
        return torch.empty(0, dtype=torch.int64, device=device)
    if vocab_size == 0:
        raise ValueError("logits must have at least one vocab entry")
    num_blocks = triton.cdiv(vocab_size, _SAMPLE_BLOCK)
    block_ids = torch.empty((n_rows, num_blocks), dtype=torch.int64, device=device)
    block_values = torch.empty((n_rows, num_blocks),
                               dtype=torch.float64 if use_fp64 else torch.float32, device=device)
    _gumbel_sample_kernel[(n_rows, num_blocks)](
        block_ids, block_values, processed, processed_stride, col, logits, logits.stride(0),
        expanded_idx_mapping, seed, pos, temperature, vocab_size, num_blocks,
        BLOCK=_SAMPLE_BLOCK, APPLY_TEMPERATURE=apply_temperature, USE_FP64=use_fp64,
        PER_ROW_COL=per_row_col, num_warps=4)
    best_block = block_values.argmax(dim=1, keepdim=True)
    return block_ids.gather(1, best_block).squeeze(1)
