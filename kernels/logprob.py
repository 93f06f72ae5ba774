"""Log-probabilities and ranks of chosen tokens, one program per logits row.

``compute_token_logprobs(logits [B, V], token_ids [B, K]) -> [B, K] fp32``: the log-softmax of
each row, read at the given ids (one pass: online max and rescaled sum of exponentials).

``compute_token_ranks(logits [B, V], token_ids [B]) -> [B] int64``: the rank of each row's
token, the number of entries >= its logit, so the largest entry has rank 1 and ties share the
worse rank. A -inf token ranks V, since every entry compares >= -inf; NaN entries are never
counted, and a NaN token ranks 0.

Logits may be fp32, fp16 or bf16; arithmetic is fp32. A row whose entries are all -inf has NaN
log-probabilities, as ``torch.log_softmax`` gives.

Passes over the logits: each kernel reads its row once and writes nothing back. Log-probs need
the row's max and sum of exponentials, which one online pass gives (the sum is rescaled as the
max grows); ranks need only a count of entries >= the token's logit, after one load of it.

Products that can exceed 2**31: ``row * logits_stride`` (row = program id, up to B - 1) and
``row * num_ids`` for the id and output tables.
"""

import torch
import triton
import triton.language as tl

from kernels._launch import check_index_range, check_logits

LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_LOGPROB_BLOCK = 4096
_RANK_BLOCK = 8192
_NUM_WARPS = 8


@triton.jit
def _token_logprobs_kernel(
    out_ptr,  # [n_rows, num_ids] fp32
    logits_ptr,  # [n_rows, vocab_size] fp32 / fp16 / bf16
    logits_stride,  # elements between logits rows
    ids_ptr,  # [n_rows, num_ids] int64, each in [0, vocab_size)
    num_ids,
    vocab_size,
    BLOCK: tl.constexpr = 4096,
    PADDED_IDS: tl.constexpr = 16,
):
    # Widened: row * logits_stride passes 2**31 once B * V does.
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * logits_stride
    # 1. Per-lane running max and sum of exp(x - max), merged once at the end.
    lane_max = tl.full((BLOCK, ), float("-inf"), tl.float32)
    lane_sum = tl.zeros((BLOCK, ), dtype=tl.float32)
    for start in range(0, vocab_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + offs, mask=offs < vocab_size, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(lane_max, x)
        # A lane that has seen only -inf keeps sum 0: shift by 0 there instead of by -inf.
        shift = tl.where(new_max > float("-inf"), new_max, 0.0)
        lane_sum = lane_sum * tl.exp(lane_max - shift) + tl.exp(x - shift)
        lane_max = new_max
    row_max = tl.max(lane_max, 0)
    row_shift = tl.where(row_max > float("-inf"), row_max, 0.0)
    log_total = row_shift + tl.log(tl.sum(lane_sum * tl.exp(lane_max - row_shift), 0))
    # 2. Read the chosen ids' logits.
    slots = tl.arange(0, PADDED_IDS)
    in_ids = slots < num_ids
    ids = tl.load(ids_ptr + row * num_ids + slots, mask=in_ids, other=0)
    valid = in_ids & (ids >= 0) & (ids < vocab_size)
    chosen = tl.load(row_ptr + ids, mask=valid, other=float("nan")).to(tl.float32)
    tl.store(out_ptr + row * num_ids + slots, chosen - log_total, mask=in_ids)


@triton.jit
def _token_ranks_kernel(
    out_ptr,  # [n_rows] int64
    logits_ptr,  # [n_rows, vocab_size] fp32 / fp16 / bf16
    logits_stride,  # elements between logits rows
    ids_ptr,  # [n_rows] int64, each in [0, vocab_size)
    vocab_size,
    BLOCK: tl.constexpr = 8192,
):
    # Widened: row * logits_stride passes 2**31 once B * V does.
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * logits_stride
    token = tl.load(ids_ptr + row)
    token_logit = tl.load(row_ptr + token, mask=(token >= 0) & (token < vocab_size),
                          other=float("nan")).to(tl.float32)
    count = tl.zeros((BLOCK, ), dtype=tl.int32)
    for start in range(0, vocab_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        in_row = offs < vocab_size
        x = tl.load(row_ptr + offs, mask=in_row, other=float("-inf")).to(tl.float32)
        count += (in_row & (x >= token_logit)).to(tl.int32)
    tl.store(out_ptr + row, tl.sum(count, 0))


def _check_ids(logits, token_ids, name, ndim, check_values):
    check_logits(logits, "logits", LOGITS_DTYPES)
    if not isinstance(token_ids, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor; got {type(token_ids).__name__}")
    if token_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name} must be int32 or int64; got {token_ids.dtype}")
    if token_ids.device != logits.device:
        raise ValueError(f"{name} is on {token_ids.device} but logits are on {logits.device}")
    if token_ids.dim() != ndim or token_ids.size(0) != logits.size(0):
        want = "[B, K]" if ndim == 2 else "[B]"
        raise ValueError(f"{name} must have shape {want} with B = {logits.size(0)}; got "
                         f"{tuple(token_ids.shape)}")
    if check_values:
        check_index_range(token_ids, name, logits.size(1))


def compute_token_logprobs(logits: torch.Tensor, token_ids: torch.Tensor, *,
                           check_values: bool = True) -> torch.Tensor:
    """Return ``log_softmax(logits[b])[token_ids[b, j]]`` as fp32 ``[B, K]``.

    ``check_values=False`` skips the id range check, which reads the ids back to the host (a
    synchronisation); an out-of-range id then gives NaN, never an out-of-bounds access.
    """
    _check_ids(logits, token_ids, "token_ids", 2, check_values)
    n_rows, num_ids = token_ids.shape
    out = torch.empty((n_rows, num_ids), dtype=torch.float32, device=logits.device)
    if out.numel() == 0:
        return out
    if logits.size(1) == 0:
        raise ValueError("logits must have at least one vocab entry")
    ids = token_ids.to(torch.int64).contiguous()
    _token_logprobs_kernel[(n_rows, )](
        out, logits, logits.stride(0), ids, num_ids, logits.size(1),
        BLOCK=_LOGPROB_BLOCK, PADDED_IDS=triton.next_power_of_2(num_ids), num_warps=_NUM_WARPS)
    return out


def compute_token_ranks(logits: torch.Tensor, token_ids: torch.Tensor, *,
                        check_values: bool = True) -> torch.Tensor:
    """Return, per row, ``#{v : logits[b, v] >= logits[b, token_ids[b]]}`` as int64 ``[B]``.

    ``check_values=False`` skips the id range check (a host synchronisation); an out-of-range
    id then ranks 0, never reads out of bounds.
    """
    _check_ids(logits, token_ids, "token_ids", 1, check_values)
    n_rows = token_ids.size(0)
    out = torch.empty((n_rows, ), dtype=torch.int64, device=logits.device)
    if n_rows == 0:
        return out
    if logits.size(1) == 0:
        raise ValueError("logits must have at least one vocab entry")
    ids = token_ids.to(torch.int64).contiguous()
    _token_ranks_kernel[(n_rows, )](out, logits, logits.stride(0), ids, logits.size(1),
                                    BLOCK=_RANK_BLOCK, num_warps=_NUM_WARPS)
    return out
