"""A frequency penalty read from a per-request table of output token counts, as engines keep
them: ``logits[i] -= penalty * log1p(counts[slot[i]])``, where ``slot`` is an int32 table of
request slots and ``counts`` is ``[max_requests, vocab]`` int32. The launcher sizes a
persistent grid from the device's multiprocessor count.

``apply_count_penalty`` widens the slot offset; ``apply_count_penalty_unwidened`` is the same
launch with the widening off, an int32 ``slot * counts_stride``.
"""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _count_penalty_kernel(logits, logits_stride, counts, counts_stride, slots, penalties,
                          num_rows, vocab_size, WIDEN: tl.constexpr, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), num_rows, tl.num_programs(0)):
        slot = tl.load(slots + row)
        penalty = tl.load(penalties + row)
        if WIDEN:
            slot = slot.to(tl.int64)
            row = row.to(tl.int64)
        for start in range(0, vocab_size, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < vocab_size
            count = tl.load(counts + slot * counts_stride + cols, mask=mask, other=0)
            values = tl.load(logits + row * logits_stride + cols, mask=mask)
            damped = libdevice.log1p(count.to(tl.float32))
            tl.store(logits + row * logits_stride + cols, values - penalty * damped, mask=mask)


def _launch(logits, counts, slots, penalties, widen):
    rows, vocab = logits.shape
    if counts.dim() != 2 or counts.shape[1] != vocab or counts.dtype != torch.int32:
        raise ValueError(f"counts must be int32 [max_requests, {vocab}]; got {counts.dtype} "
                         f"{tuple(counts.shape)}")
    if slots.shape != (rows, ) or penalties.shape != (rows, ):
        raise ValueError(f"slots and penalties must have shape ({rows},); got "
                         f"{tuple(slots.shape)} and {tuple(penalties.shape)}")
    if rows:
        index = logits.device.index or 0
        device = triton.runtime.driver.active.utils.get_device_properties(index)
        grid = (min(rows, device["multiprocessor_count"] * 2), )
        _count_penalty_kernel[grid](logits, logits.stride(0), counts, counts.stride(0), slots,
                                    penalties, rows, vocab, WIDEN=widen, BLOCK=1024)
    return logits


def apply_count_penalty(logits, counts, slots, penalties):
    """Subtract ``penalties[i] * log1p(counts[slots[i]])`` from each row of fp32 ``logits``,
    in place."""
    return _launch(logits, counts, slots, penalties, widen=True)


def apply_count_penalty_unwidened(logits, counts, slots, penalties):
    """The same kernel with its int64 slot offset switched off."""
    return _launch(logits, counts, slots, penalties, widen=False)
