"""Allowed-token filtering, logit bias and min-tokens stop masking, in place.

``apply_logit_bias(logits [T, V], expanded_idx_mapping [T], pos [T], num_allowed_token_ids [R],
allowed_token_ids [R, A], num_logit_bias [R], logit_bias_token_ids [R, N], logit_bias [R, N],
min_lens [R], num_stop_token_ids [R], stop_token_ids [R, S])``, per row, request ``req``:

1. if ``n = num_allowed_token_ids[req] > 0``: every entry but ``allowed_token_ids[req, :n]``
   becomes -inf;
2. ``logits[row, logit_bias_token_ids[req, :nb]] += logit_bias[req, :nb]`` (ids unique);
3. if ``pos[row] + 1 < min_lens[req]``: ``logits[row, stop_token_ids[req, :ns]] = -inf``.

Passes over the logits: one write, and only for a request with allowed-token ids: the allowed
entries are read first, the whole row is written -inf, and they are written back. The bias and
stop-token steps read and write just the listed ids, so a row without an allow-list costs a few
entries, not a pass.

Products that can exceed 2**31: ``row * logits_stride`` (row = program id, up to T - 1) and
``req * <table stride>`` for each per-request table (req loaded from the int32 mapping).
"""

import torch
import triton
import triton.language as tl

from kernels._launch import (check_distinct, check_index_range, check_logits, check_table,
                             leading_entries)

LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_LOGITS_BLOCK = 8192


@triton.jit
def _logit_bias_kernel(
    logits_ptr,  # [n_rows, vocab_size], changed in place
    logits_stride,
    vocab_size,
    idx_mapping_ptr,  # [n_rows] int32 request slot of each row
    num_allowed_ptr,  # [max_num_reqs] int32
    allowed_ptr,  # [max_num_reqs, A] int32 token ids
    allowed_stride,
    num_bias_ptr,  # [max_num_reqs] int32
    bias_ids_ptr,  # [max_num_reqs, N] int32 token ids
    bias_ids_stride,
    bias_ptr,  # [max_num_reqs, N] fp32
    bias_stride,
    pos_ptr,  # [n_rows] int64 sequence position of each row
    min_lens_ptr,  # [max_num_reqs] int32
    num_stop_ptr,  # [max_num_reqs] int32
    stop_ids_ptr,  # [max_num_reqs, S] int32 token ids
    stop_ids_stride,
    BLOCK: tl.constexpr = 1024,
    LOGITS_BLOCK: tl.constexpr = 8192,
):
    # Widened: row * logits_stride passes 2**31 once T * V does.
    row = tl.program_id(0).to(tl.int64)
    # Widened: req * <table stride> passes 2**31 once the tables are that large.
    req = tl.load(idx_mapping_ptr + row).to(tl.int64)
    row_ptr = logits_ptr + row * logits_stride
    lanes = tl.arange(0, BLOCK)

    # 1. Allowed ids: save their logits, set the row to -inf, write them back.
    num_allowed = tl.load(num_allowed_ptr + req)
    if num_allowed > 0:
        in_list = lanes < num_allowed
        ids = tl.load(allowed_ptr + req * allowed_stride + lanes, mask=in_list, other=0)
        in_list &= (ids >= 0) & (ids < vocab_size)
        kept = tl.load(row_ptr + ids, mask=in_list)
        tl.debug_barrier()
        for start in range(0, vocab_size, LOGITS_BLOCK):
            offs = start + tl.arange(0, LOGITS_BLOCK)
            tl.store(row_ptr + offs, tl.full((LOGITS_BLOCK, ), float("-inf"), tl.float32),
                     mask=offs < vocab_size)
        tl.debug_barrier()
        tl.store(row_ptr + ids, kept, mask=in_list)
        tl.debug_barrier()

    # 2. Bias.
    num_bias = tl.load(num_bias_ptr + req)
    if num_bias > 0:
        in_list = lanes < num_bias
        ids = tl.load(bias_ids_ptr + req * bias_ids_stride + lanes, mask=in_list, other=0)
        in_list &= (ids >= 0) & (ids < vocab_size)
        bias = tl.load(bias_ptr + req * bias_stride + lanes, mask=in_list, other=0.0)
        x = tl.load(row_ptr + ids, mask=in_list).to(tl.float32)
        tl.store(row_ptr + ids, x + bias, mask=in_list)
        tl.debug_barrier()

    # 3. Min tokens: stop ids are banned until the sequence is long enough.
    num_stop = tl.load(num_stop_ptr + req)
    if (num_stop > 0) & (tl.load(pos_ptr + row) + 1 < tl.load(min_lens_ptr + req)):
        in_list = lanes < num_stop
        ids = tl.load(stop_ids_ptr + req * stop_ids_stride + lanes, mask=in_list, other=0)
        in_list &= (ids >= 0) & (ids < vocab_size)
        tl.store(row_ptr + ids, tl.full((BLOCK, ), float("-inf"), tl.float32), mask=in_list)


def apply_logit_bias(logits, expanded_idx_mapping, pos, num_allowed_token_ids, allowed_token_ids,
                     num_logit_bias, logit_bias_token_ids, logit_bias, min_lens,
                     num_stop_token_ids, stop_token_ids, *, check_values=True) -> None:
    """Apply allowed ids, bias and min-tokens stop ids to ``logits [T, V]`` in place."""
    check_logits(logits, "logits", LOGITS_DTYPES)
    n_rows, vocab_size = logits.shape
    device = logits.device
    check_table(expanded_idx_mapping, "expanded_idx_mapping", n_rows, device, (torch.int32, ))
    check_table(pos, "pos", n_rows, device, (torch.int64, ))
    slots = num_allowed_token_ids.size(0) if isinstance(num_allowed_token_ids, torch.Tensor) else None
    counts = {"num_allowed_token_ids": num_allowed_token_ids, "num_logit_bias": num_logit_bias,
              "min_lens": min_lens, "num_stop_token_ids": num_stop_token_ids}
    for name, table in counts.items():
        check_table(table, name, slots, device, (torch.int32, ))
    lists = {  # list name: (its count's name, the list, the counts)
        "allowed_token_ids": ("num_allowed_token_ids", allowed_token_ids, num_allowed_token_ids),
        "logit_bias_token_ids": ("num_logit_bias", logit_bias_token_ids, num_logit_bias),
        "stop_token_ids": ("num_stop_token_ids", stop_token_ids, num_stop_token_ids)}
    for name, (_, table, _) in lists.items():
        check_table(table, name, slots, device, (torch.int32, ), width=-1)
    check_table(logit_bias, "logit_bias", slots, device, (torch.float32, ),
                width=logit_bias_token_ids.size(1))
    if check_values:
        check_index_range(expanded_idx_mapping, "expanded_idx_mapping", slots)
        for name, (count_name, table, count) in lists.items():
            width = table.size(1)
            bad = (count < 0) | (count > width)
            if bool(bad.any()):
                raise ValueError(f"{count_name} must lie in [0, {width}] (the width of {name}); "
                                 f"got {int(count[bad][0])}")
            used = leading_entries(count, width)
            check_index_range(table[used], name, vocab_size)
        # Two entries for one id would race on the same logit (one bias lost).
        check_distinct(logit_bias_token_ids, "logit_bias_token_ids", num_logit_bias)
    if n_rows == 0 or vocab_size == 0:
        return
    widest = max(t.size(1) for _, t, _ in lists.values())
    _logit_bias_kernel[(n_rows, )](
        logits, logits.stride(0), vocab_size, expanded_idx_mapping,
        num_allowed_token_ids, allowed_token_ids, allowed_token_ids.stride(0),
        num_logit_bias, logit_bias_token_ids, logit_bias_token_ids.stride(0),
        logit_bias, logit_bias.stride(0), pos, min_lens, num_stop_token_ids, stop_token_ids,
        stop_token_ids.stride(0), BLOCK=triton.next_power_of_2(max(widest, 1)),
        LOGITS_BLOCK=_LOGITS_BLOCK, num_warps=4)
