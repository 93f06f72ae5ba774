"""Triton's Philox streams for the references: ``triton_overflow.philox`` (the package's public
replay of ``tl.randint`` / ``tl.rand``), with the offset width said explicitly, as the kernels
state it, instead of read from the numpy dtype.

Lets the Gumbel references reproduce a kernel's noise exactly instead of comparing
distributions.
"""

import numpy as np

from triton_overflow import philox as replay


def _offsets(offsets, offset_bits):
    offsets = np.asarray(offsets, dtype=np.int64)
    return offsets if offset_bits > 32 else offsets.astype(np.uint32)


def randint4x(seed, offsets, offset_bits=32):
    """``tl.randint4x(seed, offsets)``: offsets of ``offset_bits`` wide integers; four uint64
    arrays of uint32 words."""
    return tuple(word.astype(np.uint64) for word in
                 replay.randint4x(int(seed), _offsets(offsets, offset_bits)))


def randint(seed, offsets, offset_bits=32):
    return randint4x(seed, offsets, offset_bits)[0]


def magnitudes(words):
    """``w`` or ``-w - 1`` of uint32 words read as int32: what ``tl.rand`` scales."""
    signed = words.astype(np.uint32).view(np.int32).astype(np.int64)
    return np.where(signed < 0, -signed - 1, signed)
