"""Temperature scaling of logits, in place: ``logits[r, :] /= temperature[r]``."""

import torch
import triton
import triton.language as tl


@triton.jit
def _temperature_kernel(logits, temperature, logits_stride, vocab_size, BLOCK: tl.constexpr):
    # Widened: row * logits_stride passes 2**31 once rows x vocab does (14135 rows of 151936).
    row = tl.program_id(0).to(tl.int64)
    scale = tl.load(temperature + row)
    for start in range(0, vocab_size, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < vocab_size
        values = tl.load(logits + row * logits_stride + cols, mask=mask)
        tl.store(logits + row * logits_stride + cols, values / scale, mask=mask)


def apply_temperature(logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """Divide each row of ``logits [rows, vocab]`` (fp32) by its ``temperature [rows]``."""
    if logits.dim() != 2 or logits.stride(1) != 1:
        raise ValueError(f"logits must be [rows, vocab] with contiguous rows; got "
                         f"{tuple(logits.shape)} with strides {tuple(logits.stride())}")
    if temperature.shape != (logits.size(0), ):
        raise ValueError(f"temperature must have shape ({logits.size(0)},); got "
                         f"{tuple(temperature.shape)}")
    rows, vocab = logits.shape
    if rows:
        _temperature_kernel[(rows, )](logits, temperature, logits.stride(0), vocab, BLOCK=1024)
    return logits
