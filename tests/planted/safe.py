"""The same kernels as ``overflowing.py``, widened before the multiply: no finding expected."""

import triton
import triton.language as tl


@triton.jit
def program_id_times_stride_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)


@triton.jit
def loaded_index_times_stride_kernel(x_ptr, slot_ptr, stride, n, BLOCK: tl.constexpr = 128):
    slot = tl.load(slot_ptr + tl.program_id(0)).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + slot * stride + offs, 1.0, mask=offs < n)


@triton.jit
def loop_variable_times_stride_kernel(x_ptr, stride, rows, n, BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    for row in tl.range(tl.program_id(0), rows, tl.num_programs(0)):
        tl.store(x_ptr + tl.cast(row, tl.int64) * stride + offs, 1.0, mask=offs < n)


@triton.jit
def block_offsets_kernel(x_ptr, n, BLOCK: tl.constexpr = 128):
    # i32 column offsets added to a pointer are fine: no multiply of an index by a stride.
    offs = tl.arange(0, BLOCK)
    for start in range(0, n, BLOCK):
        tl.store(x_ptr + start + offs, 1.0, mask=start + offs < n)


@triton.jit
def bounded_block_product_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    # A vocab block index times the block size stays below n: accepted with its reason.
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # overflow-lint: bounded by n
    tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)
