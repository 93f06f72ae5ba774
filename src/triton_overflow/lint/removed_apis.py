"""Triton functions that kernels still call but the installed Triton no longer has.

``tl._experimental_descriptor_load`` and ``tl._experimental_descriptor_store`` read and write a
tile through a TMA descriptor made on the host (Triton removed them for
``tl.make_tensor_descriptor``). A descriptor is addressed by tile coordinates, so no int32
address product is formed there: while a kernel is compiled for the check, the load gives a
tile of zeros of its shape and dtype and the store writes nothing, and the rest of the kernel
is checked as written.
"""

import contextlib

import triton
import triton.language as tl


@triton.jit
def _experimental_descriptor_load(desc_pointer, offsets, shape: tl.constexpr,
                                  dtype: tl.constexpr, transposed: tl.constexpr = False):
    return tl.zeros(shape, dtype)


@triton.jit
def _experimental_descriptor_store(desc_pointer, value, offsets):
    pass


_REMOVED = {"_experimental_descriptor_load": _experimental_descriptor_load,
            "_experimental_descriptor_store": _experimental_descriptor_store}


@contextlib.contextmanager
def restored():
    """Within the block, ``triton.language`` has each removed function it lacks."""
    added = [name for name in _REMOVED if not hasattr(tl, name)]
    for name in added:
        setattr(tl, name, _REMOVED[name])
    try:
        yield
    finally:
        for name in added:
            delattr(tl, name)
