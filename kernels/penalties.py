"""Repetition, frequency and presence penalties, and the per-request token counts they read.

``build_penalty_state(idx_mapping [B], all_token_ids [R, M], prompt_len [R], total_len [R],
prompt_bin_mask [R, ceil(V / 32)], output_bin_counts [R, V])`` rebuilds, for every request
slot in ``idx_mapping``, the bitset of its prompt tokens and the counts of its output tokens
(``all_token_ids[req, :prompt_len]`` and ``[prompt_len:total_len]``).

``apply_penalties(logits [T, V], expanded_idx_mapping [T], token_ids [T], expanded_local_pos [T],
repetition_penalty [R], frequency_penalty [R], presence_penalty [R], prompt_bin_mask,
output_bin_counts)``, in place, per row of request ``req`` (skipped when the penalties are
1, 0, 0): ``count[v]`` = output count plus the draft tokens of the earlier rows of the same
request (``token_ids[first + 1 .. row]``); with repetition penalty ``r != 1`` every token seen
in the prompt or counted is divided by ``r`` when positive and multiplied by ``r`` otherwise;
then ``x -= frequency * count + presence * (count > 0)``.

Passes over the logits: ``apply_penalties`` reads and writes each row once, with the row's
counts (a second ``[V]`` int32 read) and its prompt bitset (one word per 32 entries).
``build_penalty_state`` never touches the logits: each program writes its slot's count row and
bitset once (the clearing that a stale slot needs) and then adds its history with atomics.

Products that can exceed 2**31: ``row * logits_stride`` (row = program id), and ``req *
output_bin_counts_stride``, ``req * prompt_bin_mask_stride`` and ``req * all_token_ids_stride``
(req loaded from an int32 mapping; the counts table passes 2**31 beyond ~14k slots at V = 152k).
"""

import torch
import triton
import triton.language as tl

from kernels._launch import (check_distinct, check_finite, check_history_lengths,
                             check_index_range, check_local_positions, check_logits, check_table,
                             check_tensor, check_value_range, leading_entries)

LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_BLOCK = 8192
_COUNT_BLOCK = 1024


@triton.jit
def _bincount_kernel(
    all_token_ids_ptr,  # [max_num_reqs, max_model_len] int32
    all_token_ids_stride,
    idx_mapping_ptr,  # [num_reqs] int32 request slot of each batch request
    prompt_len_ptr,  # [max_num_reqs] int32
    total_len_ptr,  # [max_num_reqs] int32
    prompt_bin_mask_ptr,  # [max_num_reqs, ceil(V / 32)] int32 bitsets, cleared here
    prompt_bin_mask_stride,
    output_bin_counts_ptr,  # [max_num_reqs, V] int32, cleared here
    output_bin_counts_stride,
    vocab_size,
    max_model_len,
    BLOCK: tl.constexpr = 1024,
    CLEAR_BLOCK: tl.constexpr = 4096,
):
    # One program per request: it clears the slot's two rows, then counts the history into
    # them; the barrier puts every clearing store before the first atomic.
    # Widened: req * <table stride> passes 2**31 for large tables.
    req = tl.load(idx_mapping_ptr + tl.program_id(0)).to(tl.int64)
    counts_row = output_bin_counts_ptr + req * output_bin_counts_stride
    words_row = prompt_bin_mask_ptr + req * prompt_bin_mask_stride
    for start in range(0, vocab_size, CLEAR_BLOCK):
        offs = start + tl.arange(0, CLEAR_BLOCK)
        tl.store(counts_row + offs, tl.zeros((CLEAR_BLOCK, ), tl.int32), mask=offs < vocab_size)
    words = tl.cdiv(vocab_size, 32)
    for start in range(0, words, CLEAR_BLOCK):
        offs = start + tl.arange(0, CLEAR_BLOCK)
        tl.store(words_row + offs, tl.zeros((CLEAR_BLOCK, ), tl.int32), mask=offs < words)
    tl.debug_barrier()
    prompt_len = tl.load(prompt_len_ptr + req)
    total_len = tl.minimum(tl.load(total_len_ptr + req), max_model_len)
    for start in range(0, total_len, BLOCK):
        positions = start + tl.arange(0, BLOCK)
        tokens = tl.load(all_token_ids_ptr + req * all_token_ids_stride + positions,
                         mask=positions < total_len, other=0)
        # Out-of-range ids (left unchecked by check_values=False) are skipped, not written.
        valid = (positions < total_len) & (tokens >= 0) & (tokens < vocab_size)
        # Relaxed: nothing is read back here, so the atomics need no ordering among themselves.
        tl.atomic_or(words_row + tokens // 32, (1 << (tokens % 32)).to(tl.int32),
                     mask=valid & (positions < prompt_len), sem="relaxed")
        tl.atomic_add(counts_row + tokens, tl.full((BLOCK, ), 1, tl.int32),
                      mask=valid & (positions >= prompt_len), sem="relaxed")


@triton.jit
def _penalties_kernel(
    logits_ptr,  # [n_rows, vocab_size], changed in place
    logits_stride,
    idx_mapping_ptr,  # [n_rows] int32 request slot of each row
    token_ids_ptr,  # [n_rows] int32: entry r + 1 is the draft proposed after row r
    local_pos_ptr,  # [n_rows] int32 position of the row within its request's rows
    repetition_ptr,  # [max_num_reqs] fp32
    frequency_ptr,  # [max_num_reqs] fp32
    presence_ptr,  # [max_num_reqs] fp32
    prompt_bin_mask_ptr,  # [max_num_reqs, ceil(V / 32)] int32
    prompt_bin_mask_stride,
    output_bin_counts_ptr,  # [max_num_reqs, V] int32
    output_bin_counts_stride,
    vocab_size,
    BLOCK: tl.constexpr = 8192,
):
    # Widened: row * logits_stride passes 2**31 once T * V does.
    row = tl.program_id(0).to(tl.int64)
    # Widened: req * output_bin_counts_stride passes 2**31 beyond ~2**31 / V slots.
    req = tl.load(idx_mapping_ptr + row).to(tl.int64)
    repetition = tl.load(repetition_ptr + req)
    frequency = tl.load(frequency_ptr + req)
    presence = tl.load(presence_ptr + req)
    if (repetition == 1.0) & (frequency == 0.0) & (presence == 0.0):
        return
    # The block as [words, 32]: one prompt-bitset word per row, its 32 bits across the columns.
    WORDS: tl.constexpr = BLOCK // 32
    word_ids = tl.program_id(1) * WORDS + tl.arange(0, WORDS)  # overflow-lint: tl.program_id(1) * WORDS bounded by vocab_size / 32
    bits = tl.arange(0, 32)
    vocab_ids = word_ids[:, None] * 32 + bits[None, :]  # overflow-lint: word_ids[:, None] * 32 bounded by vocab_size
    in_row = vocab_ids < vocab_size
    words_needed = tl.where(repetition != 1.0, tl.cdiv(vocab_size, 32), 0)
    words = tl.load(prompt_bin_mask_ptr + req * prompt_bin_mask_stride + word_ids,
                    mask=word_ids < words_needed, other=0)
    counts = tl.load(output_bin_counts_ptr + req * output_bin_counts_stride + vocab_ids,
                     mask=in_row, other=0)
    row_ptr = logits_ptr + row * logits_stride
    x = tl.load(row_ptr + vocab_ids, mask=in_row, other=0.0).to(tl.float32)
    local_pos = tl.load(local_pos_ptr + row)
    first_row = row - local_pos
    for j in range(0, local_pos):
        counts += (vocab_ids == tl.load(token_ids_ptr + first_row + j + 1)).to(tl.int32)
    seen = counts > 0
    in_prompt = ((words[:, None] >> bits[None, :]) & 1) != 0
    # Without a repetition penalty the words are 0 and both factors are 1.
    shrink = tl.where(in_prompt | seen, 1.0 / repetition, 1.0)
    grow = tl.where(in_prompt | seen, repetition, 1.0)
    x = x * tl.where(x > 0, shrink, grow)
    x = x - frequency * counts.to(tl.float32) - presence * seen.to(tl.float32)
    tl.store(row_ptr + vocab_ids, x, mask=in_row)


def build_penalty_state(idx_mapping, all_token_ids, prompt_len, total_len, prompt_bin_mask,
                        output_bin_counts, *, check_values=True) -> None:
    """Rebuild the prompt bitsets and output counts of the request slots in ``idx_mapping``."""
    check_tensor(output_bin_counts, "output_bin_counts")
    device = output_bin_counts.device
    check_table(output_bin_counts, "output_bin_counts", None, device, (torch.int32, ), width=-1,
                written=True)
    slots, vocab_size = output_bin_counts.shape
    check_table(idx_mapping, "idx_mapping", None, device, (torch.int32, ))
    check_table(all_token_ids, "all_token_ids", slots, device, (torch.int32, ), width=-1)
    check_table(prompt_len, "prompt_len", slots, device, (torch.int32, ))
    check_table(total_len, "total_len", slots, device, (torch.int32, ))
    check_table(prompt_bin_mask, "prompt_bin_mask", slots, device, (torch.int32, ),
                width=triton.cdiv(vocab_size, 32), written=True)
    if check_values:
        check_index_range(idx_mapping, "idx_mapping", slots)
        # A slot listed twice would have its output tokens counted twice.
        check_distinct(idx_mapping, "idx_mapping")
        check_history_lengths(prompt_len, total_len, all_token_ids)
        reqs = idx_mapping.long()
        used = leading_entries(total_len[reqs], all_token_ids.size(1))
        check_index_range(all_token_ids[reqs][used], "all_token_ids", vocab_size)
    if idx_mapping.numel() == 0:
        return
    _bincount_kernel[(idx_mapping.numel(), )](
        all_token_ids, all_token_ids.stride(0), idx_mapping, prompt_len, total_len,
        prompt_bin_mask, prompt_bin_mask.stride(0), output_bin_counts, output_bin_counts.stride(0),
        vocab_size, all_token_ids.size(1), BLOCK=_COUNT_BLOCK, num_warps=4)


def apply_penalties(logits, expanded_idx_mapping, token_ids, expanded_local_pos,
                    repetition_penalty, frequency_penalty, presence_penalty, prompt_bin_mask,
                    output_bin_counts, *, check_values=True) -> None:
    """Apply the three penalties to ``logits [T, V]`` in place (see module doc)."""
    check_logits(logits, "logits", LOGITS_DTYPES)
    n_rows, vocab_size = logits.shape
    device = logits.device
    for name, table in (("expanded_idx_mapping", expanded_idx_mapping), ("token_ids", token_ids),
                        ("expanded_local_pos", expanded_local_pos)):
        check_table(table, name, n_rows, device, (torch.int32, ))
    check_table(output_bin_counts, "output_bin_counts", None, device, (torch.int32, ),
                width=vocab_size)
    slots = output_bin_counts.size(0)
    for name, table in (("repetition_penalty", repetition_penalty),
                        ("frequency_penalty", frequency_penalty),
                        ("presence_penalty", presence_penalty)):
        check_table(table, name, slots, device, (torch.float32, ))
    check_table(prompt_bin_mask, "prompt_bin_mask", slots, device, (torch.int32, ),
                width=triton.cdiv(vocab_size, 32))
    if check_values:
        check_index_range(expanded_idx_mapping, "expanded_idx_mapping", slots)
        check_value_range(repetition_penalty, "repetition_penalty", 1e-30, float("inf"))
        # inf times a count of 0 is NaN: an infinite penalty would turn the whole row into NaN.
        check_finite(frequency_penalty, "frequency_penalty")
        check_finite(presence_penalty, "presence_penalty")
        check_local_positions(expanded_local_pos, n_rows)
    if n_rows == 0 or vocab_size == 0:
        return
    _penalties_kernel[(n_rows, triton.cdiv(vocab_size, _BLOCK))](
        logits, logits.stride(0), expanded_idx_mapping, token_ids, expanded_local_pos,
        repetition_penalty, frequency_penalty, presence_penalty, prompt_bin_mask,
        prompt_bin_mask.stride(0), output_bin_counts, output_bin_counts.stride(0), vocab_size,
        BLOCK=_BLOCK, num_warps=8)
