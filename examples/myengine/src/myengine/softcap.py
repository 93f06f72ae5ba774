"""Logit soft-capping, in place: ``logits = cap * tanh(logits / cap)``.

Not fixed yet: ``row * logits_stride`` is an int32 product (see tests/cases.py, where its case
is declared known to overflow).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softcap_kernel(logits, logits_stride, vocab_size, cap, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, vocab_size, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < vocab_size
        values = tl.load(logits + row * logits_stride + cols, mask=mask)
        capped = cap * (2.0 * tl.sigmoid(2.0 * values / cap) - 1.0)
        tl.store(logits + row * logits_stride + cols, capped, mask=mask)


def apply_softcap(logits: torch.Tensor, cap: float) -> torch.Tensor:
    """Soft-cap ``logits [rows, vocab]`` (fp32) at ``cap`` > 0."""
    if logits.dim() != 2 or logits.stride(1) != 1:
        raise ValueError(f"logits must be [rows, vocab] with contiguous rows; got "
                         f"{tuple(logits.shape)} with strides {tuple(logits.stride())}")
    if not cap > 0:
        raise ValueError(f"cap must be > 0; got {cap}")
    rows, vocab = logits.shape
    if rows:
        _softcap_kernel[(rows, )](logits, logits.stride(0), vocab, float(cap), BLOCK=1024)
    return logits
