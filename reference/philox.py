"""Triton's Philox 4x32-10 generator (``tl.randint``, ``tl.rand``) in numpy, bit for bit.

Lets the Gumbel references reproduce a kernel's noise exactly instead of comparing
distributions.
"""

import numpy as np

_MASK = np.uint64(0xFFFFFFFF)
_KEY_A, _KEY_B = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_ROUND_A, _ROUND_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)


def philox(seed, c0, c1, c2, c3, rounds=10):
    """Four uint32 words (as uint64 arrays) for ``seed`` (a non-negative int) and counters."""
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) & _MASK for c in (c0, c1, c2, c3))
    for _ in range(rounds):
        prev0, prev2 = c0, c2
        c0 = ((_ROUND_B * prev2) >> np.uint64(32)) ^ c1 ^ k0
        c2 = ((_ROUND_A * prev0) >> np.uint64(32)) ^ c3 ^ k1
        c1 = (_ROUND_B * prev2) & _MASK
        c3 = (_ROUND_A * prev0) & _MASK
        k0, k1 = (k0 + _KEY_A) & _MASK, (k1 + _KEY_B) & _MASK
    return c0, c1, c2, c3


def randint4x(seed, offsets, offset_bits=32):
    """``tl.randint4x(seed, offsets)``: offsets of ``offset_bits`` wide integers."""
    offsets = np.asarray(offsets, dtype=np.int64).astype(np.uint64)
    high = (offsets >> np.uint64(32)) if offset_bits > 32 else np.zeros_like(offsets)
    zero = np.zeros_like(offsets)
    return philox(seed, offsets & _MASK, high, zero, zero)


def randint(seed, offsets, offset_bits=32):
    return randint4x(seed, offsets, offset_bits)[0]


def magnitudes(words):
    """``w`` or ``-w - 1`` of uint32 words read as int32: what ``tl.rand`` scales."""
    signed = words.astype(np.uint32).view(np.int32).astype(np.int64)
    return np.where(signed < 0, -signed - 1, signed)
