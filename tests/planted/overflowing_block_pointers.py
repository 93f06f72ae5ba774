"""Block-pointer kernels with a planted i32 offset product (Triton 3.4 to 3.8: 3.9 removed
``tl.make_block_ptr``). ``# <- wraps`` marks each line the static check must flag."""

import triton
import triton.language as tl


@triton.jit
def block_pointer_1d_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    block = tl.make_block_ptr(x_ptr, shape=(n, ), strides=(1, ), offsets=(row * stride, ),  # <- wraps
                              block_shape=(BLOCK, ), order=(0, ))
    tl.store(block, tl.full((BLOCK, ), 1.0, tl.float32), boundary_check=(0, ))


@triton.jit
def block_pointer_2d_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    block = tl.make_block_ptr(x_ptr + row * stride, shape=(1, n), strides=(stride, 1),  # <- wraps
                              offsets=(0, 0), block_shape=(1, BLOCK), order=(1, 0))
    tl.store(block, tl.full((1, BLOCK), 1.0, tl.float32), boundary_check=(1, ))
