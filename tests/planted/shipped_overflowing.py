"""Kernels as engines ship them, each with an int32 product that wraps (``# <- wraps``, an
``error``): the engine they import is not installed where the check runs, kernels sit under
module-level branches, helpers and decorator arguments come from that engine, constexprs have
no defaults. ``shipped_safe.py`` holds the same kernels widened."""

import triton
import triton.language as tl
from not_installed_engine import platform
from not_installed_engine.math import fast_tanh
from not_installed_engine.tuning import autotune_kwargs, engine_configs


@triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"], **autotune_kwargs)
@triton.jit
def decorator_kwargs_kernel(x_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)  # <- wraps


@triton.autotune(configs=engine_configs(), key=["n"])
@triton.jit
def engine_configs_kernel(x_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)  # <- wraps


if platform.has_fast_path():
    @triton.jit
    def kernel_under_if(x_ptr, stride):
        row = tl.program_id(0)
        tl.store(x_ptr + row * stride, 1.0)  # <- wraps
else:
    @triton.jit
    def kernel_under_else(x_ptr, stride):
        row = tl.program_id(0)
        tl.store(x_ptr + row * stride, 2.0)  # <- wraps


@triton.jit
def missing_value_helper_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < n)  # <- wraps
    tl.store(x_ptr + offs, fast_tanh(x), mask=offs < n)


@triton.jit
def string_constexpr_kernel(a_ptr, b_ptr, c_ptr, stride_am, PRECISION: tl.constexpr,
                            BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # <- wraps: makes line 54's row
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + rows[:, None] * stride_am + offs[None, :])  # <- wraps
    b = tl.load(b_ptr + offs[:, None] * BLOCK + offs[None, :])
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], tl.dot(a, b, input_precision=PRECISION))


@triton.jit
def constexpr_equality_kernel(x_ptr, stride, BS: tl.constexpr, BT: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BS)
    if BS == BT:
        tl.store(x_ptr + row * stride + offs, 1.0)  # <- wraps
    else:
        tl.store(x_ptr + offs, 2.0)



@triton.jit
def literal_inequality_kernel(x_ptr, stride, EXTRA: tl.constexpr):
    row = tl.program_id(0)
    if EXTRA != 0:
        tl.store(x_ptr + row * stride, 1.0)  # <- wraps


@triton.jit
def runtime_branch_pointer_kernel(a_ptr, b_ptr, out_ptr, n_a, stride_a, stride_b):
    row = tl.program_id(0)
    src = a_ptr + row * stride_a if row < n_a else b_ptr + (row - n_a) * stride_b  # <- wraps
    tl.store(out_ptr + row, tl.load(src))


@triton.jit
def tensor_annotated_kernel(x_ptr: tl.tensor, stride: int, scale: float):
    row = tl.program_id(0)
    tl.store(x_ptr + row * stride, scale)  # <- wraps


@triton.jit
def raw_address_table_kernel(rows_ptr, stride):
    row = tl.program_id(0)
    base = tl.load(rows_ptr + row).to(tl.pointer_type(tl.float32))
    tl.store(base + row * stride, 1.0)  # <- wraps


@triton.jit
def float_table_index_kernel(p_ptr, out_ptr, stride):
    row = tl.program_id(0)
    p = tl.load(p_ptr + row)
    bucket = (p * 200).to(tl.int32)  # a float times 200: no integer product here
    tl.store(out_ptr + row * stride + bucket, 1.0)  # <- wraps


@triton.jit
def swizzled_tiles_kernel(x_ptr, stride, tiles_m, tiles_n, BLOCK: tl.constexpr = 64):
    pid = tl.program_id(0)
    tile_m, tile_n = tl.swizzle2d(pid // tiles_n, pid % tiles_n, tiles_m, tiles_n, 8)  # <- bounded
    rows = tile_m * BLOCK + tl.arange(0, BLOCK)  # <- wraps: makes line 110's row
    tl.store(x_ptr + rows * stride + tile_n, 1.0)  # <- wraps
