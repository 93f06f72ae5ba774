"""Triton's counter-based random numbers (``triton.language.random``) replayed in numpy.

``tl.randint``, ``tl.randint4x``, ``tl.rand`` and ``tl.randn`` are Philox4x32 (Salmon et al.,
"Parallel random numbers: as easy as 1, 2, 3", SC 2011) over a counter built from each offset
and a key built from the seed. This module gives the same values for the same seed and offsets,
bit for bit (read from Triton 3.6; checked against 3.4, 3.6 and 3.9):

* key: the seed as a uint64 (a negative seed wraps, as its sign-extension does on the device),
  split into its low and high 32-bit words;
* counter: ``(offset low word, offset high word, 0, 0)``. The high word is used only when the
  offsets are 64-bit; narrower offsets get 0. Here the numpy dtype of ``offsets`` plays the
  part of the Triton tensor's: pass int32 offsets to replay ``tl.arange``-based ones;
* ``n_rounds`` rounds, 10 by default (Triton's ``N_ROUNDS_DEFAULT``).

``rand`` and ``randint`` are integer arithmetic plus one rounding, so they match a GPU too.
``randn`` uses ``log``, ``sqrt`` and ``cos`` in float32: it matches Triton's CPU interpreter bit
for bit (both compute with numpy); a GPU's approximations differ from it by a few ulp.
"""

import operator

import numpy as np

N_ROUNDS_DEFAULT = 10
_WORD = 0xFFFFFFFF
_ROUND_A, _ROUND_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)  # counter multipliers
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85  # key increments (Weyl sequence)
_UNIFORM_SCALE = np.float32(4.6566127342e-10)  # the largest x with (2**31 - 1) * x < 1
_MIN_UNIFORM = np.float32(1.0e-7)
_TWO_PI = np.float32(6.283185307179586)


def _key(seed):
    seed = operator.index(seed)
    if not -2**63 <= seed < 2**64:
        raise ValueError(f"seed must fit in 64 bits (int64 or uint64); got {seed}")
    seed &= 2**64 - 1
    return seed & _WORD, seed >> 32


def _counter(offsets):
    offsets = np.asarray(offsets)
    if not np.issubdtype(offsets.dtype, np.integer):
        raise ValueError(f"offsets must be integers; got dtype {offsets.dtype}")
    low = offsets.astype(np.uint32)
    if offsets.dtype.itemsize > 4:
        high = (offsets >> 32).astype(np.uint32)
    else:
        high = np.zeros_like(low)
    zero = np.zeros_like(low)
    return low, high, zero, zero


def philox(seed, c0, c1, c2, c3, n_rounds=N_ROUNDS_DEFAULT):
    """``tl.philox(seed, c0, c1, c2, c3, n_rounds)`` for 32-bit counters: four uint32 arrays.

    The counters are arrays (or ints) of 32-bit words, broadcast together.
    """
    k0, k1 = _key(seed)
    words = np.broadcast_arrays(*(np.asarray(c).astype(np.uint32) for c in (c0, c1, c2, c3)))
    c0, c1, c2, c3 = (word.astype(np.uint64) for word in words)
    for _ in range(operator.index(n_rounds)):
        product_a, product_b = _ROUND_A * c0, _ROUND_B * c2  # exact: both factors < 2**32
        c0, c1, c2, c3 = ((product_b >> np.uint64(32)) ^ c1 ^ np.uint64(k0),
                          product_b & np.uint64(_WORD),
                          (product_a >> np.uint64(32)) ^ c3 ^ np.uint64(k1),
                          product_a & np.uint64(_WORD))
        k0, k1 = (k0 + _KEY_A) & _WORD, (k1 + _KEY_B) & _WORD
    return tuple(word.astype(np.uint32) for word in (c0, c1, c2, c3))


def randint4x(seed, offsets, n_rounds=N_ROUNDS_DEFAULT):
    """``tl.randint4x(seed, offsets, n_rounds)``: four uint32 arrays shaped like ``offsets``."""
    return philox(seed, *_counter(offsets), n_rounds=n_rounds)


def randint(seed, offsets, n_rounds=N_ROUNDS_DEFAULT):
    """``tl.randint(seed, offsets, n_rounds)``: the first word of ``randint4x``, uint32."""
    return randint4x(seed, offsets, n_rounds)[0]


def uint_to_uniform_float(words):
    """Triton's ``uint_to_uniform_float`` for 32-bit words: float32 in [0, 1).

    The word is read as int32 and folded onto [0, 2**31) (``x < 0`` becomes ``-x - 1``), then
    rounded to float32 and scaled.
    """
    signed = np.asarray(words).astype(np.uint32).view(np.int32)
    folded = np.where(signed < 0, -(signed + np.int32(1)), signed)
    return folded.astype(np.float32) * _UNIFORM_SCALE


def rand(seed, offsets, n_rounds=N_ROUNDS_DEFAULT):
    """``tl.rand(seed, offsets, n_rounds)``: float32 in [0, 1) from ``randint``."""
    return uint_to_uniform_float(randint(seed, offsets, n_rounds))


def randn(seed, offsets, n_rounds=N_ROUNDS_DEFAULT):
    """``tl.randn(seed, offsets, n_rounds)``: float32 normal samples.

    Box-Muller on the uniforms of the first two words of ``randint4x``: ``sqrt(-2 log u1) *
    cos(2 pi u2)``, with ``u1`` raised to at least 1e-7, every step in float32.
    """
    first, second, _, _ = randint4x(seed, offsets, n_rounds)
    u1 = np.maximum(_MIN_UNIFORM, uint_to_uniform_float(first))
    theta = _TWO_PI * uint_to_uniform_float(second)
    radius = np.sqrt(np.float32(-2.0) * np.log(u1))
    return radius * np.cos(theta)
