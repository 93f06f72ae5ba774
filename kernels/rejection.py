"""Speculative-decoding rejection sampling: block statistics, rejection, resampling.

``rejection_sample(target_logits [N, V], draft_logits [R, K, V] | None, draft_sampled [N],
cu_num_logits [B + 1], pos [N], idx_mapping [B], expanded_idx_mapping [N],
expanded_local_pos [N], temperature [R], seed [R], num_speculative_steps K,
synthetic_conditional_rates [K] | None, use_fp64=False) -> (sampled [B, K + 1] int64,
num_sampled [B] int32)``.

Request ``i`` owns logit rows ``cu[i] .. cu[i + 1] - 1``; row ``r`` proposes the draft token
``draft_sampled[r + 1]``, the last row is the bonus row. Drafts are checked in order until one
is rejected: greedy requests (temperature 0) accept a draft equal to the target argmax (and
record the argmax where it differs); random requests accept when ``log p > log u + log q`` with
``p`` the target and ``q`` the draft probability (``q = 1`` without draft logits) and ``u`` a
64-bit uniform from ``(seed, pos)``. With ``synthetic_conditional_rates`` the test is
``u < rate[j]`` instead. The first rejected position (or the bonus row when all are accepted)
is then resampled: from ``max(p - q, 0)`` with draft logits, from ``p`` without the rejected
token otherwise, from ``p`` at the bonus row, by Gumbel-max with the noise of
``kernels.gumbel`` keyed by the row's ``(seed, pos)``. Unused entries of ``sampled`` are -1.

Four launches, no host work between them: ``_block_stats_kernel`` (one program per (row,
8192-entry block): max, argmax, sum of exponentials of target and draft), ``_verify_kernel``
(one per request: checks the drafts in order and writes them out), ``_resample_kernel`` (one
per (request, block): Gumbel-max over its part of the row to resample) and ``_insert_kernel``
(one per request: picks the best block and writes the resampled token).

Passes over the logits: two reads of each target row (and of each draft row with draft
logits), no writes. The block statistics need the whole row; the resample reads the row to
resample again, since its Gumbel-max depends on the rejected position that only the
verification knows. Verification and insertion read single entries and the block statistics.

Products that can exceed 2**31: ``row * target_stride`` (row a program id, or a row start
loaded from the int32 ``cu_num_logits`` plus a step), ``req * draft_stride_0`` (req loaded from
the int32 ``idx_mapping`` / ``expanded_idx_mapping``: slots past 2**31 / (K * V)), ``step *
draft_stride_1`` and the block-statistics offsets ``row * num_blocks``.
"""

import torch
import triton
import triton.language as tl

from kernels._launch import (check_flag, check_index_range, check_int, check_logits, check_table,
                             check_tensor, check_value_range)
from kernels.gumbel import best_block_id, gumbel_block_argmax

LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_STATS_BLOCK = 8192
_RESAMPLE_BLOCK = 2048
_RESAMPLE_WARPS = 4


@triton.jit
def _uniform64(seed, pos):
    # A float64 uniform in (0, 1] from 53 bits of Philox keyed by (seed, pos).
    word_hi, word_lo, _, _ = tl.randint4x(seed, pos)
    bits = (word_hi.to(tl.uint64) << 32) | word_lo.to(tl.uint64)
    return ((bits >> 11) + 1).to(tl.float64) * 1.1102230246251565e-16


@triton.jit
def _block_stats_kernel(
    target_argmax_ptr,  # [N, num_blocks] int64 first argmax of each block (greedy rows)
    target_max_ptr,  # [N, num_blocks] fp32
    target_sumexp_ptr,  # [N, num_blocks] fp32 sum of exp(x - block max)
    draft_max_ptr,  # [N, num_blocks] fp32
    draft_sumexp_ptr,  # [N, num_blocks] fp32
    target_ptr,  # [N, V] target logits
    target_stride,
    draft_ptr,  # [max_num_reqs, K, V] draft logits (a dummy without HAS_DRAFT_LOGITS)
    draft_stride_0,
    draft_stride_1,
    idx_mapping_ptr,  # [N] int32 request slot of each row
    local_pos_ptr,  # [N] int32 position of the row within its request's rows
    temperature_ptr,  # [max_num_reqs] fp32
    vocab_size,
    num_blocks,
    num_steps,  # K: rows at local position >= K are bonus rows, skipped
    BLOCK: tl.constexpr = 8192,
    HAS_DRAFT_LOGITS: tl.constexpr = True,
):
    # Widened: row * target_stride passes 2**31 once N * V does.
    row = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    # Widened: step * draft_stride_1 is small, but the sum with req * draft_stride_0 is not.
    step = tl.load(local_pos_ptr + row).to(tl.int64)  # overflow-lint: step * draft_stride_1 bounded by K * V
    if step >= num_steps:
        return
    # Widened: req * draft_stride_0 passes 2**31 for slots past 2**31 / (K * V).
    req = tl.load(idx_mapping_ptr + row).to(tl.int64)
    temperature = tl.load(temperature_ptr + req)
    block_start = block * BLOCK  # overflow-lint: block * BLOCK bounded by vocab_size
    vocab_ids = block_start + tl.arange(0, BLOCK)
    in_row = vocab_ids < vocab_size
    stat = row * num_blocks + block
    x = tl.load(target_ptr + row * target_stride + vocab_ids, mask=in_row,
                other=float("-inf")).to(tl.float32)
    if temperature == 0.0:
        value, index = tl.max(x, 0, return_indices=True, return_indices_tie_break_left=True)
        tl.store(target_max_ptr + stat, value)
        tl.store(target_argmax_ptr + stat, block_start + index)
    else:
        top = tl.max(x, 0)
        shift = tl.where(top > float("-inf"), top, 0.0)
        tl.store(target_max_ptr + stat, top)
        tl.store(target_sumexp_ptr + stat, tl.sum(tl.exp(x - shift), 0))
        if HAS_DRAFT_LOGITS:
            draft_row = draft_ptr + req * draft_stride_0 + step * draft_stride_1
            q = tl.load(draft_row + vocab_ids, mask=in_row, other=float("-inf")).to(tl.float32)
            draft_top = tl.max(q, 0)
            draft_shift = tl.where(draft_top > float("-inf"), draft_top, 0.0)
            tl.store(draft_max_ptr + stat, draft_top)
            tl.store(draft_sumexp_ptr + stat, tl.sum(tl.exp(q - draft_shift), 0))


@triton.jit
def _log_sum_exp(max_ptr, sumexp_ptr, base, num_blocks, PADDED_BLOCKS: tl.constexpr):
    blocks = tl.arange(0, PADDED_BLOCKS)
    inside = blocks < num_blocks
    maxima = tl.load(max_ptr + base + blocks, mask=inside, other=float("-inf"))
    sums = tl.load(sumexp_ptr + base + blocks, mask=inside, other=0.0)
    top = tl.max(maxima, 0)
    shift = tl.where(top > float("-inf"), top, 0.0)
    # Each block's sum is relative to its own max (or 0 where the block is all -inf).
    block_shift = tl.where(maxima > float("-inf"), maxima, 0.0)
    return shift + tl.log(tl.sum(sums * tl.exp(block_shift - shift), 0))


@triton.jit
def _verify_kernel(
    sampled_ptr,  # [B, K + 1] int64
    sampled_stride,
    num_sampled_ptr,  # [B] int32: accepted drafts + 1
    target_lse_ptr,  # [B] fp32 target log-sum-exp of the last row examined
    draft_lse_ptr,  # [B] fp32 draft log-sum-exp of the last row examined
    target_ptr,  # [N, V]
    target_stride,
    target_argmax_ptr,  # block statistics, [N, num_blocks]
    target_max_ptr,
    target_sumexp_ptr,
    draft_sampled_ptr,  # [N] int32 or int64: entry r + 1 is the draft proposed at row r
    draft_ptr,  # [max_num_reqs, K, V]
    draft_stride_0,
    draft_stride_1,
    draft_max_ptr,
    draft_sumexp_ptr,
    cu_num_logits_ptr,  # [B + 1] int32 first row of each request
    idx_mapping_ptr,  # [B] int32 request slot of each request
    temperature_ptr,  # [max_num_reqs] fp32
    seed_ptr,  # [max_num_reqs] int64
    pos_ptr,  # [N] int64
    rates_ptr,  # [K] fp32 synthetic acceptance rates (SYNTHETIC_MODE)
    num_steps,  # K
    num_blocks,
    PADDED_BLOCKS: tl.constexpr = 32,
    HAS_DRAFT_LOGITS: tl.constexpr = True,
    SYNTHETIC_MODE: tl.constexpr = False,
):
    # Widened with the rest: i * sampled_stride is small, but sums with int64 offsets below.
    i = tl.program_id(0).to(tl.int64)  # overflow-lint: i * sampled_stride bounded by B * (K + 1)
    # Widened: the request's row start and slot multiply the logits and draft strides.
    req = tl.load(idx_mapping_ptr + i).to(tl.int64)
    start = tl.load(cu_num_logits_ptr + i).to(tl.int64)
    end = tl.load(cu_num_logits_ptr + i + 1).to(tl.int64)
    seed = tl.load(seed_ptr + req)
    temperature = tl.load(temperature_ptr + req)
    out = sampled_ptr + i * sampled_stride
    accepted = tl.full((), 1, tl.int32)
    num_accepted = tl.zeros((), dtype=tl.int32)
    target_lse = tl.zeros((), dtype=tl.float32)
    draft_lse = tl.zeros((), dtype=tl.float32)
    for j in range(0, end - start - 1):
        if accepted != 0:
            row = start + j
            stat = row * num_blocks
            draft = tl.load(draft_sampled_ptr + row + 1).to(tl.int64)
            if temperature == 0.0:
                target_best = best_block_id(target_max_ptr + stat, target_argmax_ptr + stat,
                                            num_blocks, PADDED_BLOCKS)
                if SYNTHETIC_MODE:
                    ok = (_uniform64(seed, tl.load(pos_ptr + row)) < tl.load(rates_ptr + j)) & (draft >= 0)
                else:
                    ok = target_best == draft
                accepted = ok.to(tl.int32)
                tl.store(out + j, tl.where(ok, draft, target_best))
            else:
                valid = draft >= 0
                token = tl.maximum(draft, 0)
                target_lse = _log_sum_exp(target_max_ptr, target_sumexp_ptr, stat, num_blocks,
                                          PADDED_BLOCKS)
                log_p = tl.load(target_ptr + row * target_stride + token).to(tl.float32) - target_lse
                log_q = 0.0
                if HAS_DRAFT_LOGITS:
                    draft_lse = _log_sum_exp(draft_max_ptr, draft_sumexp_ptr, stat, num_blocks,
                                             PADDED_BLOCKS)
                    log_q = tl.load(draft_ptr + req * draft_stride_0 + j * draft_stride_1 +
                                    token).to(tl.float32) - draft_lse
                uniform = _uniform64(seed, tl.load(pos_ptr + row))
                if SYNTHETIC_MODE:
                    ok = uniform < tl.load(rates_ptr + j)
                else:
                    ok = log_p > tl.log(uniform).to(tl.float32) + log_q
                accepted = (ok & valid).to(tl.int32)
                tl.store(out + j, draft)
            num_accepted += accepted
    # Entries after the one that the resampled token (or a greedy correction) takes.
    for unused in range(num_accepted + 1, num_steps + 1):
        tl.store(out + unused, -1)
    tl.store(num_sampled_ptr + i, num_accepted + 1)
    tl.store(target_lse_ptr + i, target_lse)
    tl.store(draft_lse_ptr + i, draft_lse)


@triton.jit
def _resample_kernel(
    block_id_ptr,  # [B, num_blocks] int64 best vocab id of each block
    block_value_ptr,  # [B, num_blocks] fp32 (fp64 with USE_FP64)
    num_sampled_ptr,  # [B] int32 from _verify_kernel: accepted drafts + 1
    target_lse_ptr,  # [B] fp32 from _verify_kernel
    draft_lse_ptr,  # [B] fp32 from _verify_kernel
    target_ptr,  # [N, V]
    target_stride,
    draft_ptr,  # [max_num_reqs, K, V]
    draft_stride_0,
    draft_stride_1,
    draft_sampled_ptr,  # [N]
    cu_num_logits_ptr,  # [B + 1] int32
    expanded_idx_mapping_ptr,  # [N] int32 request slot of each row
    temperature_ptr,  # [max_num_reqs] fp32
    seed_ptr,  # [max_num_reqs] int64
    pos_ptr,  # [N] int64
    vocab_size,
    num_blocks,
    BLOCK: tl.constexpr = 1024,
    HAS_DRAFT_LOGITS: tl.constexpr = True,
    USE_FP64: tl.constexpr = False,
):
    # Widened with the rest: i * num_blocks is small, but sums with int64 offsets below.
    i = tl.program_id(0).to(tl.int64)  # overflow-lint: i * num_blocks bounded by B * cdiv(V, 2048)
    block = tl.program_id(1)
    # Widened: step * draft_stride_1 is small, but the sum with req * draft_stride_0 is not.
    step = (tl.load(num_sampled_ptr + i) - 1).to(tl.int64)  # overflow-lint: step * draft_stride_1 bounded by K * V
    # Widened: the row start loaded from cu_num_logits multiplies the target stride.
    row = tl.load(cu_num_logits_ptr + i).to(tl.int64) + step
    bonus = (row == tl.load(cu_num_logits_ptr + i + 1).to(tl.int64) - 1).to(tl.int32)
    # Widened: req * draft_stride_0 passes 2**31 for slots past 2**31 / (K * V).
    req = tl.load(expanded_idx_mapping_ptr + row).to(tl.int64)
    temperature = tl.load(temperature_ptr + req)
    if (temperature == 0.0) & (bonus == 0):
        return
    block_start = block * BLOCK  # overflow-lint: block * BLOCK bounded by vocab_size
    vocab_ids = block_start + tl.arange(0, BLOCK)
    in_row = vocab_ids < vocab_size
    x = tl.load(target_ptr + row * target_stride + vocab_ids, mask=in_row,
                other=float("-inf")).to(tl.float32)
    if bonus == 0:
        if HAS_DRAFT_LOGITS:
            log_p = x - tl.load(target_lse_ptr + i)
            q = tl.load(draft_ptr + req * draft_stride_0 + step * draft_stride_1 + vocab_ids,
                        mask=in_row, other=float("-inf")).to(tl.float32)
            ratio = tl.exp(q - tl.load(draft_lse_ptr + i) - log_p)
            x = tl.where(ratio < 1.0, log_p + tl.log(1.0 - ratio), float("-inf"))
        else:
            rejected = tl.load(draft_sampled_ptr + row + 1)
            x = tl.where(vocab_ids == rejected, float("-inf"), x)
    value, index = gumbel_block_argmax(x, block_start, in_row, row, expanded_idx_mapping_ptr,
                                       temperature_ptr, seed_ptr, pos_ptr, None, 0, None,
                                       vocab_size, False, USE_FP64)
    tl.store(block_id_ptr + i * num_blocks + block, block_start + index)
    tl.store(block_value_ptr + i * num_blocks + block, value)


@triton.jit
def _insert_kernel(
    sampled_ptr,  # [B, K + 1] int64
    sampled_stride,
    num_sampled_ptr,  # [B] int32 from _resample_kernel: accepted drafts + 1
    block_id_ptr,  # [B, num_blocks] int64
    block_value_ptr,  # [B, num_blocks] fp32 or fp64
    cu_num_logits_ptr,  # [B + 1] int32
    idx_mapping_ptr,  # [B] int32
    temperature_ptr,  # [max_num_reqs] fp32
    num_blocks,
    PADDED_BLOCKS: tl.constexpr = 256,
):
    # Widened with the rest: i * num_blocks and i * sampled_stride are small.
    i = tl.program_id(0).to(tl.int64)  # overflow-lint: i * sampled_stride bounded by B * (K + 1)
    step = tl.load(num_sampled_ptr + i) - 1
    start = tl.load(cu_num_logits_ptr + i)
    bonus = start + step == tl.load(cu_num_logits_ptr + i + 1) - 1
    temperature = tl.load(temperature_ptr + tl.load(idx_mapping_ptr + i))
    # A greedy request's target argmax is already in place, except at the bonus row.
    if bonus | (temperature != 0.0):
        tl.store(sampled_ptr + i * sampled_stride + step,
                 best_block_id(block_value_ptr + i * num_blocks, block_id_ptr + i * num_blocks,
                               num_blocks, PADDED_BLOCKS))


def rejection_sample(
    target_logits: torch.Tensor,
    draft_logits: torch.Tensor | None,
    draft_sampled: torch.Tensor,
    cu_num_logits: torch.Tensor,
    pos: torch.Tensor,
    idx_mapping: torch.Tensor,
    expanded_idx_mapping: torch.Tensor,
    expanded_local_pos: torch.Tensor,
    temperature: torch.Tensor,
    seed: torch.Tensor,
    num_speculative_steps: int,
    synthetic_conditional_rates: torch.Tensor | None = None,
    use_fp64: bool = False,
    *,
    check_values: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Verify drafts and resample; return ``(sampled [B, K + 1] int64, num_sampled [B] int32)``."""
    check_logits(target_logits, "target_logits", LOGITS_DTYPES)
    n_rows, vocab_size = target_logits.shape
    device = target_logits.device
    check_int(num_speculative_steps, "num_speculative_steps", 1)
    steps = num_speculative_steps
    check_flag(use_fp64, "use_fp64")
    check_table(draft_sampled, "draft_sampled", n_rows, device, (torch.int32, torch.int64))
    check_table(pos, "pos", n_rows, device, (torch.int64, ))
    check_table(expanded_idx_mapping, "expanded_idx_mapping", n_rows, device, (torch.int32, ))
    check_table(expanded_local_pos, "expanded_local_pos", n_rows, device, (torch.int32, ))
    check_table(idx_mapping, "idx_mapping", None, device, (torch.int32, ))
    num_reqs = idx_mapping.numel()
    check_table(cu_num_logits, "cu_num_logits", num_reqs + 1, device, (torch.int32, ))
    check_table(temperature, "temperature", None, device, (torch.float32, ))
    slots = temperature.numel()
    check_table(seed, "seed", slots, device, (torch.int64, ))
    if draft_logits is not None:
        check_tensor(draft_logits, "draft_logits")
        if (draft_logits.dim() != 3 or draft_logits.dtype not in LOGITS_DTYPES
                or draft_logits.device != device or draft_logits.size(1) < steps
                or draft_logits.size(2) != vocab_size or draft_logits.stride(2) != 1):
            raise ValueError(f"draft_logits must be [max_num_reqs, >= {steps}, {vocab_size}] with a "
                             f"contiguous vocab dimension on {device}; got {draft_logits.dtype} "
                             f"{tuple(draft_logits.shape)} on {draft_logits.device}")
    if synthetic_conditional_rates is not None:
        check_table(synthetic_conditional_rates, "synthetic_conditional_rates", None, device,
                    (torch.float32, ))
        if synthetic_conditional_rates.numel() < steps:
            raise ValueError(f"synthetic_conditional_rates needs {steps} entries; got "
                             f"{synthetic_conditional_rates.numel()}")
        # Acceptance probabilities, one per draft step.
        check_value_range(synthetic_conditional_rates, "synthetic_conditional_rates", 0.0, 1.0,
                          check_values)
    if check_values:
        _check_rejection_values(cu_num_logits, n_rows, steps, idx_mapping, expanded_idx_mapping,
                                expanded_local_pos, slots, draft_logits, temperature,
                                draft_sampled, vocab_size)
    sampled = torch.empty((num_reqs, steps + 1), dtype=torch.int64, device=device)
    num_sampled = torch.empty(num_reqs, dtype=torch.int32, device=device)
    if num_reqs == 0:
        return sampled, num_sampled
    if vocab_size == 0:
        raise ValueError("target_logits must have at least one vocab entry")
    has_draft = draft_logits is not None
    draft = draft_logits if has_draft else torch.empty((1, 1, 1), dtype=torch.float32, device=device)
    rates = synthetic_conditional_rates if synthetic_conditional_rates is not None else temperature
    stats_blocks = triton.cdiv(vocab_size, _STATS_BLOCK)
    target_argmax = torch.empty((n_rows, stats_blocks), dtype=torch.int64, device=device)
    target_max, target_sumexp, draft_max, draft_sumexp = torch.empty(
        (4, n_rows, stats_blocks), dtype=torch.float32, device=device)
    if n_rows:
        _block_stats_kernel[(n_rows, stats_blocks)](
            target_argmax, target_max, target_sumexp, draft_max, draft_sumexp, target_logits,
            target_logits.stride(0), draft, draft.stride(0), draft.stride(1), expanded_idx_mapping,
            expanded_local_pos, temperature, vocab_size, stats_blocks, steps, BLOCK=_STATS_BLOCK,
            HAS_DRAFT_LOGITS=has_draft, num_warps=8)
    target_lse, draft_lse = torch.empty((2, num_reqs), dtype=torch.float32, device=device)
    _verify_kernel[(num_reqs, )](
        sampled, sampled.stride(0), num_sampled, target_lse, draft_lse, target_logits,
        target_logits.stride(0), target_argmax, target_max, target_sumexp, draft_sampled, draft,
        draft.stride(0), draft.stride(1), draft_max, draft_sumexp, cu_num_logits, idx_mapping,
        temperature, seed, pos, rates, steps, stats_blocks,
        PADDED_BLOCKS=triton.next_power_of_2(stats_blocks), HAS_DRAFT_LOGITS=has_draft,
        SYNTHETIC_MODE=synthetic_conditional_rates is not None, num_warps=1)
    resample_blocks = triton.cdiv(vocab_size, _RESAMPLE_BLOCK)
    block_ids = torch.empty((num_reqs, resample_blocks), dtype=torch.int64, device=device)
    block_values = torch.empty((num_reqs, resample_blocks),
                               dtype=torch.float64 if use_fp64 else torch.float32, device=device)
    _resample_kernel[(num_reqs, resample_blocks)](
        block_ids, block_values, num_sampled, target_lse, draft_lse, target_logits,
        target_logits.stride(0), draft, draft.stride(0), draft.stride(1), draft_sampled,
        cu_num_logits, expanded_idx_mapping, temperature, seed, pos, vocab_size, resample_blocks,
        BLOCK=_RESAMPLE_BLOCK, HAS_DRAFT_LOGITS=has_draft, USE_FP64=use_fp64,
        num_warps=_RESAMPLE_WARPS)
    _insert_kernel[(num_reqs, )](
        sampled, sampled.stride(0), num_sampled, block_ids, block_values, cu_num_logits,
        idx_mapping, temperature, resample_blocks,
        PADDED_BLOCKS=triton.next_power_of_2(resample_blocks), num_warps=4)
    return sampled, num_sampled


def _check_rejection_values(cu, n_rows, steps, idx_mapping, expanded_idx_mapping, local_pos,
                            slots, draft_logits, temperature, draft_sampled, vocab_size):
    if int(cu[0]) != 0 or int(cu[-1]) != n_rows:
        raise ValueError(f"cu_num_logits must run from 0 to {n_rows}; got {int(cu[0])} .. "
                         f"{int(cu[-1])}")
    counts = cu[1:] - cu[:-1]
    if bool(((counts < 1) | (counts > steps + 1)).any()):
        raise ValueError(f"cu_num_logits must give every request 1 to {steps + 1} logit rows "
                         f"(num_speculative_steps + 1); got {counts.min().item()} .. "
                         f"{counts.max().item()}")
    table_slots = slots if draft_logits is None else min(slots, draft_logits.size(0))
    check_index_range(idx_mapping, "idx_mapping", table_slots)
    check_index_range(expanded_idx_mapping, "expanded_idx_mapping", table_slots)
    check_value_range(temperature, "temperature", 0.0, float("inf"))
    rows = torch.arange(n_rows, device=cu.device)
    owner = torch.searchsorted(cu[1:].long(), rows, right=True)
    if bool((local_pos.long() != rows - cu.long()[owner]).any()):
        raise ValueError("expanded_local_pos must be each row's offset within its request")
    if bool((expanded_idx_mapping.long() != idx_mapping.long()[owner]).any()):
        raise ValueError("expanded_idx_mapping must give each row its request's slot")
    if bool((draft_sampled >= vocab_size).any()):
        raise ValueError(f"draft_sampled must lie below the vocab size {vocab_size}")
