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

Each program handles one (row, 4096-entry block; 1024 with ``use_fp64``) and writes the block's
best (value, id); the last program of a row to finish (a per-row counter says which) picks the
row's best block, the first on ties, and writes its id as the row's token.

Passes over the logits: temperature reads and writes each row once; sampling reads each row
once (writing it to the side output when asked) and writes one (value, id) per block, which the
row's last program reduces: a pass split over blocks so that a small batch still fills the
device, with no launch after it to reduce the blocks. NaN logits are not supported: the token
of a row that holds one is unspecified (the row's last program still reads only that row's
block results).
Within a block the fp32 path is bound by arithmetic, not by the read: Philox and the two
logarithms of the noise cost more per entry than loading it. So it ranks the entries by
``u * exp((max - x) / t)``, one ``exp2`` each, and evaluates the noise of the best-ranked entry
alone when a bound proves no other entry can beat it (``_gumbel_argmax_fp32``); near-ties fall
back to every entry's exact score, so the token is the one the exact scores give. ``log(1 - u)``
is evaluated compensated, accurate for small ``u`` where plain fp32 ``1 - u`` rounds.

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
_SAMPLE_BLOCK = 4096
_SAMPLE_BLOCK_FP64 = 1024
# Left free, the fp32 sampling kernel takes 156 registers per thread (three programs per
# multiprocessor); capped at 128 it fits four, without spilling.
_SAMPLE_REGISTERS = 128


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
def _word_magnitude(word):
    """``w`` or ``-w - 1`` of a Philox word read as int32: what ``tl.uint_to_uniform_float``
    scales."""
    signed = word.to(tl.int32, bitcast=True)
    return tl.where(signed < 0, -signed - 1, signed)


@triton.jit
def _uniform_of(magnitude):
    """``tl.uint_to_uniform_float`` of a Philox word whose magnitude (``w`` or ``-w - 1`` as
    int32) is given, clamped away from 0 as the noise needs."""
    return tl.maximum(magnitude * 4.6566127342e-10, 4.6566127342e-10)


@triton.jit
def _gumbel_score(x, uniform):
    """``x + g(u)``, ``g = -log(-log(1 - u))``, with ``log(1 - u)`` accurate in fp32 for small u."""
    one_minus_u = 1.0 - uniform
    # log(1 - u) = log(w) * (-u) / (w - 1) with w = fl(1 - u): undoes the rounding of 1 - u.
    log_one_minus_u = tl.where(one_minus_u == 1.0, -uniform,
                               tl.log(one_minus_u) * (-uniform / (one_minus_u - 1.0)))
    return x - tl.log(-log_one_minus_u)


@triton.jit
def _gumbel_argmax_fp32(x, magnitude, divisor, stream, first_counter):
    """(best ``_gumbel_score(x / divisor, u)``, its lane), lowest lane on ties, computing exact
    scores only where cheap bounds cannot settle the block.

    With ``c = max(x) / divisor``, ``ratio = u * exp(c - x / divisor)`` orders the lanes as
    ``x / divisor - log(u)`` does, reversed, and ``-log(-log(1 - u))`` lies in
    ``[-log(u) - log(1 + u), -log(u)]`` for ``u <= 1/2``. So no lane can beat the lane of the
    smallest ratio unless its ratio is within ``(1 + u_best)`` of it, up to the rounding of
    both (``slack``). When that lane stands alone, only its score is computed; otherwise (a
    near-tie, NaN or inf) every lane's is."""
    lanes = tl.arange(0, x.shape[0])
    x_max = tl.max(x, 0)
    if x_max == float("-inf"):
        value = float("-inf")
        index = 0
    else:
        rate = 1.4426950408889634 / divisor
        ratio = tl.maximum(magnitude, 1).to(tl.float32) * tl.exp2(x_max * rate - x * rate)
        # The smallest ratio's lane rides in the low bits of its (non-negative) float bits;
        # dropping them costs 2**-11 of the ratio, which `slack` covers. Ties and NaN leave
        # two contenders below, so any lane of the smallest key will do.
        tl.static_assert(x.shape[0] <= 4096)
        best_key = tl.min((ratio.to(tl.int32, bitcast=True) & -4096) | lanes, 0)
        best = best_key & 4095
        best_ratio = (best_key & -4096).to(tl.float32, bitcast=True)
        at_best = lanes == best
        x_best = tl.max(tl.where(at_best, x, float("-inf")), 0)
        # The winner's word again, from Philox: cheaper than a third reduction over the block.
        word_0, word_1, word_2, word_3 = tl.randint4x(stream, first_counter + best // 4)
        word = tl.where(best % 4 == 0, word_0,
                        tl.where(best % 4 == 1, word_1, tl.where(best % 4 == 2, word_2, word_3)))
        u_best = _uniform_of(_word_magnitude(word))
        slack = 2.0**-9 + tl.abs(x_max * rate) * 2.0**-18
        reach = best_ratio * (1.0 + u_best) * (1.0 + slack)
        # NaN ratios count as contenders: `not beyond`, never `within`.
        contenders = tl.sum((~(ratio > reach)).to(tl.int32), 0)
        if (contenders == 1) & (u_best <= 0.5):
            value = _gumbel_score(x_best / divisor, u_best)
            index = best
        else:
            value, index = tl.max(_gumbel_score(x / divisor, _uniform_of(magnitude)), 0,
                                  return_indices=True, return_indices_tie_break_left=True)
    return value, index


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
    divisor = 1.0
    if APPLY_TEMPERATURE:
        if processed_ptr is not None:
            x = tl.where(temperature != 0.0, x / temperature, x)
        else:
            divisor = tl.where(temperature != 0.0, temperature, 1.0)
    if processed_ptr is not None:
        col = 0
        if processed_col_ptr is not None:
            if PER_ROW_COL:
                col = tl.load(processed_col_ptr + row).to(tl.int64)  # overflow-lint: col * vocab_size bounded by K * V
            else:
                col = tl.load(processed_col_ptr).to(tl.int64)  # overflow-lint: col * vocab_size bounded by K * V
        tl.store(processed_ptr + req * processed_stride + col * vocab_size + vocab_ids, x,
                 mask=mask)
    if temperature == 0.0:
        greedy = x / divisor
        if USE_FP64:
            greedy = greedy.to(tl.float64)
        value, index = tl.max(greedy, 0, return_indices=True, return_indices_tie_break_left=True)
    else:
        stream = tl.randint(tl.load(seed_ptr + req), tl.load(pos_ptr + row))
        if USE_FP64:
            word_hi, word_lo, _, _ = tl.randint4x(stream, vocab_ids)
            bits = (word_hi.to(tl.uint64) << 32) | word_lo.to(tl.uint64)
            uniform = tl.maximum(bits.to(tl.float64) * 5.421010862427522e-20, 2.2250738585072014e-308)
            score = tl.where(mask, (x / divisor).to(tl.float64) - tl.log(-tl.log(uniform)),
                             float("-inf"))
            value, index = tl.max(score, 0, return_indices=True,
                                  return_indices_tie_break_left=True)
        else:
            # One Philox call gives four words: word k of counter v // 4 serves vocab id v.
            counters = block_start // 4 + tl.arange(0, BLOCK // 4)
            word_0, word_1, word_2, word_3 = tl.randint4x(stream, counters)
            words = tl.interleave(tl.interleave(word_0, word_2), tl.interleave(word_1, word_3))
            value, index = _gumbel_argmax_fp32(x, _word_magnitude(words), divisor, stream,
                                               block_start // 4)
    return value, index


@triton.jit
def best_block_id(value_ptr, id_ptr, num_blocks, PADDED_BLOCKS: tl.constexpr):
    """The id stored beside the first largest of ``num_blocks`` block values, ``PADDED_BLOCKS``
    (a power of two) at least. NaN counts as the largest, as torch.argmax takes it: compared as
    NaN, a block's NaN can lose to a padding lane and the index point past the blocks. Reads go
    through L2 (".cg"), where the results that other programs of the same launch released are,
    not a stale L1 line."""
    blocks = tl.arange(0, PADDED_BLOCKS)
    values = tl.load(value_ptr + blocks, mask=blocks < num_blocks, other=float("-inf"),
                     cache_modifier=".cg")
    values = tl.where(values != values, float("inf"), values)
    _, best = tl.max(values, 0, return_indices=True, return_indices_tie_break_left=True)
    return tl.load(id_ptr + best, cache_modifier=".cg")


@triton.jit
def _gumbel_sample_kernel(
    tokens_ptr,  # [n_rows] int64 sampled token of each row
    finished_ptr,  # [n_rows] int32 blocks of each row done so far, zeroed before the launch
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
    BLOCK: tl.constexpr = 4096,
    PADDED_BLOCKS: tl.constexpr = 64,  # a power of two >= num_blocks
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
    row_blocks = row * num_blocks
    tl.store(block_id_ptr + row_blocks + block, block_start + index)
    tl.store(block_value_ptr + row_blocks + block, value)
    # Release this block's result, then see whether it was the row's last one to finish.
    tl.debug_barrier()
    if tl.atomic_add(finished_ptr + row, 1, sem="acq_rel") == num_blocks - 1:
        tl.store(tokens_ptr + row, best_block_id(block_value_ptr + row_blocks,
                                                 block_id_ptr + row_blocks, num_blocks,
                                                 PADDED_BLOCKS))


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
    block, launch = _SAMPLE_BLOCK, {}
    if use_fp64:
        block = _SAMPLE_BLOCK_FP64
    elif device.type == "cuda":
        launch = {"maxnreg": _SAMPLE_REGISTERS}
    num_blocks = triton.cdiv(vocab_size, block)
    tokens = torch.empty(n_rows, dtype=torch.int64, device=device)
    finished = torch.zeros(n_rows, dtype=torch.int32, device=device)
    block_ids = torch.empty((n_rows, num_blocks), dtype=torch.int64, device=device)
    block_values = torch.empty((n_rows, num_blocks),
                               dtype=torch.float64 if use_fp64 else torch.float32, device=device)
    _gumbel_sample_kernel[(n_rows, num_blocks)](
        tokens, finished, block_ids, block_values, processed, processed_stride, col, logits,
        logits.stride(0), expanded_idx_mapping, seed, pos, temperature, vocab_size, num_blocks,
        BLOCK=block, PADDED_BLOCKS=triton.next_power_of_2(num_blocks),
        APPLY_TEMPERATURE=apply_temperature, USE_FP64=use_fp64, PER_ROW_COL=per_row_col,
        num_warps=4, **launch)
    return tokens
