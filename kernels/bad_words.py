"""Bad-words masking, in place.

``apply_bad_words(logits [T, V], expanded_idx_mapping [T], bad_word_token_ids [R, L],
bad_word_offsets [R, W + 1], num_bad_words [R], all_token_ids [R, M], prompt_len [R],
total_len [R], input_ids [T], expanded_local_pos [T], max_num_bad_words)``: request ``req``'s
bad word ``w`` is the token list ``bad_word_token_ids[req, a:b]`` with ``[a, b)`` =
``bad_word_offsets[req, w:w + 2]``. If the tokens before row ``row``'s position end with its
first ``b - a - 1`` tokens, its last token is masked to -inf in that row.

The tokens before a row are the request's output so far (``all_token_ids[req, prompt_len:
total_len]``) followed by the draft tokens of the rows before it in the same request
(``input_ids[first + 1 .. row]``, with ``first = row - expanded_local_pos[row]``).

Passes over the logits: none. Each row writes -inf to the last token of each bad word whose
prefix matches, reading only the token tables; the logits are never read.

Products that can exceed 2**31: ``row * logits_stride`` (row = program id), and ``req *
all_token_ids_stride`` (``max_num_reqs * max_model_len`` past 2**31, e.g. 2048 x 1M) and the
other ``req * stride`` of the per-request tables (req loaded from the int32 mapping).
"""

import torch
import triton
import triton.language as tl

from kernels._launch import (check_history_lengths, check_index_range, check_int,
                             check_local_positions, check_logits, check_table, leading_entries)

LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _bad_words_kernel(
    logits_ptr,  # [n_rows, vocab_size], masked in place
    logits_stride,
    idx_mapping_ptr,  # [n_rows] int32 request slot of each row
    bad_word_token_ids_ptr,  # [max_num_reqs, L] int32
    bad_word_token_ids_stride,
    bad_word_offsets_ptr,  # [max_num_reqs, W + 1] int32
    bad_word_offsets_stride,
    num_bad_words_ptr,  # [max_num_reqs] int32
    all_token_ids_ptr,  # [max_num_reqs, max_model_len] int32: prompt then output tokens
    all_token_ids_stride,
    prompt_len_ptr,  # [max_num_reqs] int32
    total_len_ptr,  # [max_num_reqs] int32
    input_ids_ptr,  # [n_rows] int32: entry r + 1 is the draft proposed after row r
    local_pos_ptr,  # [n_rows] int32 position of the row within its request's rows
    vocab_size,
):
    # Widened: row * logits_stride passes 2**31 once T * V does.
    row = tl.program_id(0).to(tl.int64)
    word = tl.program_id(1)
    # Widened: req * all_token_ids_stride passes 2**31 once max_num_reqs * max_model_len does.
    req = tl.load(idx_mapping_ptr + row).to(tl.int64)
    if word >= tl.load(num_bad_words_ptr + req):
        return
    local_pos = tl.load(local_pos_ptr + row)
    first_row = row - local_pos
    prompt_len = tl.load(prompt_len_ptr + req)
    output_len = tl.load(total_len_ptr + req) - prompt_len
    seen = output_len + local_pos
    offsets = bad_word_offsets_ptr + req * bad_word_offsets_stride + word
    start = tl.load(offsets)
    end = tl.load(offsets + 1)
    prefix_len = end - start - 1
    if prefix_len > seen:
        return
    words = bad_word_token_ids_ptr + req * bad_word_token_ids_stride
    history = all_token_ids_ptr + req * all_token_ids_stride + prompt_len
    matched = tl.full((), 1, tl.int32)
    for i in range(0, prefix_len):
        q = seen - prefix_len + i
        if q >= output_len:
            token = tl.load(input_ids_ptr + first_row + (q - output_len) + 1)
        else:
            token = tl.load(history + q)
        matched = matched & (token == tl.load(words + start + i)).to(tl.int32)
    last = tl.load(words + end - 1)
    if (matched != 0) & (last >= 0) & (last < vocab_size):
        tl.store(logits_ptr + row * logits_stride + last, float("-inf"))


def apply_bad_words(logits, expanded_idx_mapping, bad_word_token_ids, bad_word_offsets,
                    num_bad_words, all_token_ids, prompt_len, total_len, input_ids,
                    expanded_local_pos, max_num_bad_words: int, *, check_values=True) -> None:
    """Mask the last token of every bad word whose other tokens end the row's history."""
    check_logits(logits, "logits", LOGITS_DTYPES)
    n_rows, vocab_size = logits.shape
    device = logits.device
    for name, table in (("expanded_idx_mapping", expanded_idx_mapping), ("input_ids", input_ids),
                        ("expanded_local_pos", expanded_local_pos)):
        check_table(table, name, n_rows, device, (torch.int32, ))
    slots = num_bad_words.size(0) if isinstance(num_bad_words, torch.Tensor) else None
    for name, table in (("num_bad_words", num_bad_words), ("prompt_len", prompt_len),
                        ("total_len", total_len)):
        check_table(table, name, slots, device, (torch.int32, ))
    for name, table in (("bad_word_token_ids", bad_word_token_ids),
                        ("bad_word_offsets", bad_word_offsets), ("all_token_ids", all_token_ids)):
        check_table(table, name, slots, device, (torch.int32, ), width=-1)
    # One program per bad word along the grid's y axis, which CUDA limits to 65535.
    check_int(max_num_bad_words, "max_num_bad_words", 0, 65535)
    if max_num_bad_words >= bad_word_offsets.size(1):
        raise ValueError(f"max_num_bad_words {max_num_bad_words} needs bad_word_offsets with "
                         f"{max_num_bad_words + 1} columns; got {bad_word_offsets.size(1)}")
    if check_values:
        _check_bad_word_values(locals())
    if n_rows == 0 or max_num_bad_words == 0:
        return
    _bad_words_kernel[(n_rows, max_num_bad_words)](
        logits, logits.stride(0), expanded_idx_mapping, bad_word_token_ids,
        bad_word_token_ids.stride(0), bad_word_offsets, bad_word_offsets.stride(0), num_bad_words,
        all_token_ids, all_token_ids.stride(0), prompt_len, total_len, input_ids,
        expanded_local_pos, vocab_size, num_warps=1)


def _check_bad_word_values(args):
    """Every index the kernel will follow stays inside its table."""
    n_rows = args["logits"].size(0)
    mapping, local_pos = args["expanded_idx_mapping"], args["expanded_local_pos"]
    check_index_range(mapping, "expanded_idx_mapping", args["num_bad_words"].numel())
    if n_rows == 0:
        return
    check_local_positions(local_pos, n_rows)
    num, offsets = args["num_bad_words"], args["bad_word_offsets"]
    bad = (num < 0) | (num > args["max_num_bad_words"])
    if bool(bad.any()):
        raise ValueError(f"num_bad_words must lie in [0, {args['max_num_bad_words']}]; "
                         f"got {int(num[bad][0])}")
    width = args["bad_word_token_ids"].size(1)
    steps = offsets[:, 1:] - offsets[:, :-1]
    used = leading_entries(num, steps.size(1))
    if bool(((offsets[:, :1] < 0) | (offsets > width)).any()) or bool((steps[used] < 1).any()):
        raise ValueError(f"bad_word_offsets must rise by >= 1 within [0, {width}] for every word")
    check_history_lengths(args["prompt_len"], args["total_len"], args["all_token_ids"])
