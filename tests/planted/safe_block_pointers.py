"""The block-pointer kernels of ``overflowing_block_pointers.py``, safe: the base widened, or the
row given as a block offset (Triton multiplies block offsets by the strides in int64)."""

import triton
import triton.language as tl


@triton.jit
def block_pointer_1d_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0).to(tl.int64)
    block = tl.make_block_ptr(x_ptr + row * stride, shape=(n, ), strides=(1, ), offsets=(0, ),
                              block_shape=(BLOCK, ), order=(0, ))
    tl.store(block, tl.full((BLOCK, ), 1.0, tl.float32), boundary_check=(0, ))


@triton.jit
def block_pointer_2d_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    block = tl.make_block_ptr(x_ptr, shape=(row + 1, n), strides=(stride, 1), offsets=(row, 0),
                              block_shape=(1, BLOCK), order=(1, 0))
    tl.store(block, tl.full((1, BLOCK), 1.0, tl.float32), boundary_check=(1, ))
