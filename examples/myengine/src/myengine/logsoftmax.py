"""Row-wise log-softmax, written as engines write their persistent kernels: a grid of a few
programs per multiprocessor striding over the rows, autotuned block sizes, and the int64
widening behind a flag so that one kernel serves both launchers.

``log_softmax`` widens the row offset; ``log_softmax_unwidened`` is the same launch with the
flag off, an int32 ``row * logits_stride`` (its case is declared known to overflow).
"""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 1024}, num_warps=4),
                          triton.Config({"BLOCK": 2048}, num_warps=8)], key=["vocab_size"])
@triton.jit
def _log_softmax_kernel(logits, output, logits_stride, output_stride, num_rows, vocab_size,
                        WIDEN: tl.constexpr, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), num_rows, tl.num_programs(0)):
        if WIDEN:
            row = row.to(tl.int64)
        row_in = logits + row * logits_stride
        row_out = output + row * output_stride
        running_max = tl.full((BLOCK, ), float("-inf"), tl.float32)
        running_sum = tl.zeros((BLOCK, ), tl.float32)
        for start in range(0, vocab_size, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            values = tl.load(row_in + cols, mask=cols < vocab_size, other=float("-inf"))
            new_max = tl.maximum(running_max, values)
            scale = tl.where(new_max == float("-inf"), 0.0, tl.exp(running_max - new_max))
            running_sum = running_sum * scale + tl.where(values == float("-inf"), 0.0,
                                                         tl.exp(values - new_max))
            running_max = new_max
        row_max = tl.max(running_max, axis=0)
        total = tl.sum(running_sum * tl.exp(running_max - row_max), axis=0)
        log_total = row_max + tl.log(total)
        for start in range(0, vocab_size, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < vocab_size
            values = tl.load(row_in + cols, mask=mask)
            tl.store(row_out + cols, values - log_total, mask=mask)


def _launch(logits, widen):
    if logits.dim() != 2 or logits.stride(1) != 1 or logits.dtype != torch.float32:
        raise ValueError(f"logits must be fp32 [rows, vocab] with contiguous rows; got "
                         f"{logits.dtype} {tuple(logits.shape)} strides {tuple(logits.stride())}")
    rows, vocab = logits.shape
    output = torch.empty((rows, vocab), dtype=torch.float32, device=logits.device)
    if rows:
        programs = torch.cuda.get_device_properties(logits.device).multi_processor_count * 4
        _log_softmax_kernel[(min(rows, programs), )](
            logits, output, logits.stride(0), output.stride(0), rows, vocab, WIDEN=widen)
    return output


def log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """``log_softmax(logits, dim=-1)`` of fp32 ``logits [rows, vocab]``."""
    return _launch(logits, widen=True)


def log_softmax_unwidened(logits: torch.Tensor) -> torch.Tensor:
    """The same kernel with its int64 row offset switched off: wraps past 2**31 elements."""
    return _launch(logits, widen=False)
