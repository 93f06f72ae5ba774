"""Kernels with a planted i32 row-offset product, one per way an index reaches a pointer.

The static check must flag every kernel here (the self-tests assert each by name).
"""

import triton
import triton.language as tl


@triton.jit
def program_id_times_stride_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)


@triton.jit
def loaded_index_times_stride_kernel(x_ptr, slot_ptr, stride, n, BLOCK: tl.constexpr = 128):
    slot = tl.load(slot_ptr + tl.program_id(0))
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + slot * stride + offs, 1.0, mask=offs < n)


@triton.jit
def loop_variable_times_stride_kernel(x_ptr, stride, rows, n, BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    for row in tl.range(tl.program_id(0), rows, tl.num_programs(0)):
        tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)


@triton.jit
def _row_pointer(base_ptr, row, stride):
    return base_ptr + row * stride


@triton.jit
def product_in_helper_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    tl.store(_row_pointer(x_ptr, tl.program_id(0), stride) + offs, 1.0, mask=offs < n)


@triton.jit
def widened_too_late_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + (tl.program_id(0) * stride).to(tl.int64) + offs, 1.0, mask=offs < n)


@triton.jit
def bounded_without_reason_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    # The marker without a reason does not silence the check.
    row = tl.program_id(0)
    tl.store(x_ptr + row * stride + tl.arange(0, BLOCK), 1.0)  # overflow-lint: bounded
