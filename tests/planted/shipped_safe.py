"""The kernels of ``shipped_overflowing.py`` widened before they multiply: no error here, only
the bounded products (``# <- bounded``) at a lower level, so the file exits 0."""

import triton
import triton.language as tl
from not_installed_engine import platform
from not_installed_engine.math import dtype_min, fast_tanh, sort_pairs
from not_installed_engine.tuning import autotune_kwargs, engine_configs


@triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"], **autotune_kwargs)
@triton.jit
def decorator_kwargs_kernel(x_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)


@triton.autotune(configs=engine_configs(), key=["n"])
@triton.jit
def engine_configs_kernel(x_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)


if platform.has_fast_path():
    @triton.jit
    def kernel_under_if(x_ptr, stride):
        row = tl.program_id(0).to(tl.int64)
        tl.store(x_ptr + row * stride, 1.0)
else:
    @triton.jit
    def kernel_under_else(x_ptr, stride):
        row = tl.program_id(0).to(tl.int64)
        tl.store(x_ptr + row * stride, 2.0)


@triton.jit
def missing_value_helper_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < n)
    tl.store(x_ptr + offs, fast_tanh(x), mask=offs < n)


@triton.jit
def string_constexpr_kernel(a_ptr, b_ptr, c_ptr, stride_am, PRECISION: tl.constexpr,
                            BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + rows[:, None] * stride_am + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * BLOCK + offs[None, :])
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], tl.dot(a, b, input_precision=PRECISION))


@triton.jit
def constexpr_equality_kernel(x_ptr, stride, BS: tl.constexpr, BT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BS)
    if BS == BT:
        tl.store(x_ptr + row * stride + offs, 1.0)
    else:
        tl.store(x_ptr + offs, 2.0)



@triton.jit
def literal_inequality_kernel(x_ptr, stride, EXTRA: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if EXTRA != 0:
        tl.store(x_ptr + row * stride, 1.0)


@triton.jit
def runtime_branch_pointer_kernel(a_ptr, b_ptr, out_ptr, n_a, stride_a, stride_b):
    row = tl.program_id(0).to(tl.int64)
    src = a_ptr + row * stride_a if row < n_a else b_ptr + (row - n_a) * stride_b
    tl.store(out_ptr + row, tl.load(src))


@triton.jit
def tensor_annotated_kernel(x_ptr: tl.tensor, stride: int, scale: float):
    row = tl.program_id(0).to(tl.int64)
    tl.store(x_ptr + row * stride, scale)


@triton.jit
def raw_address_table_kernel(rows_ptr, stride):
    row = tl.program_id(0).to(tl.int64)
    base = tl.load(rows_ptr + row).to(tl.pointer_type(tl.float32))
    tl.store(base + row * stride, 1.0)


@triton.jit
def float_table_index_kernel(p_ptr, out_ptr, stride):
    row = tl.program_id(0).to(tl.int64)
    p = tl.load(p_ptr + row)
    bucket = (p * 200).to(tl.int32)  # a float times 200: no integer product here
    tl.store(out_ptr + row * stride + bucket, 1.0)


@triton.jit
def swizzled_tiles_kernel(x_ptr, stride, tiles_m, tiles_n, BLOCK: tl.constexpr = 64):
    pid = tl.program_id(0)
    tile_m, tile_n = tl.swizzle2d(pid // tiles_n, pid % tiles_n, tiles_m, tiles_n, 8)  # <- bounded
    rows = tile_m * BLOCK + tl.arange(0, BLOCK)  # <- bounded
    tl.store(x_ptr + rows.to(tl.int64) * stride + tile_n, 1.0)


@triton.jit
def packed_bytes_kernel(cache_ptr, out_ptr, stride, BLOCK: tl.constexpr = 64):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    packed = tl.load(cache_ptr + row * stride + offs)
    exponent = packed.to(tl.uint8, bitcast=True)
    tl.store(out_ptr + offs, (packed & 15).to(tl.float32) * exponent.to(tl.float32))


@triton.jit
def vendor_fp8_kernel(cache_ptr, out_ptr, stride, BLOCK: tl.constexpr = 64):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    raw = tl.load(cache_ptr + row * stride + offs)
    tl.store(out_ptr + offs, raw.to(tl.float8e4b8, bitcast=True).to(tl.float32))


@triton.jit
def two_caches_kernel(main_ptr, extra_ptr, scale_ptr, out_ptr, stride,
                      USE_EXTRA: tl.constexpr = True, BLOCK: tl.constexpr = 16):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    if USE_EXTRA:
        rows = extra_ptr + row * stride + offs
    else:
        rows = main_ptr + row * stride + offs
    raw = tl.load(rows[:, None] + offs[None, :])
    scale = tl.exp(tl.load(scale_ptr + offs))
    tl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :],
             raw.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale[None, :])


@triton.jit
def _segment(pid, starts_ptr, experts_ptr):
    start = tl.load(starts_ptr + pid) + pid
    expert = tl.load(experts_ptr + pid)
    return start, expert


@triton.jit
def grouped_rows_kernel(a_ptr, w_ptr, starts_ptr, experts_ptr, out_ptr, stride_a, stride_w,
                        BLOCK: tl.constexpr = 16):
    pid = tl.program_id(0)
    start, expert = _segment(pid, starts_ptr, experts_ptr)
    start, expert = start.to(tl.int64), expert.to(tl.int64)
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + (start + offs[:, None]) * stride_a + offs[None, :])
    w = tl.load(w_ptr + expert * stride_w + offs)
    tl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], tl.exp(a + w[None, :]))


@triton.jit
def engine_helpers_kernel(x_ptr, idx_ptr, out_ptr, stride, BLOCK: tl.constexpr = 32):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    lowest = dtype_min(x_ptr.dtype.element_ty)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < stride, other=lowest)
    idx = tl.load(idx_ptr + offs)
    x, idx = sort_pairs(x, idx, BLOCK)
    tl.store(out_ptr + idx, x)


@triton.jit
def rotated_rows_kernel(x_ptr, h_ptr, out_ptr, stride, BLOCK: tl.constexpr = 32):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    tile = offs[:, None] * BLOCK + offs[None, :]
    x = tl.exp(tl.load(x_ptr + row * stride + tile))
    h = tl.load(h_ptr + tile)
    tl.store(out_ptr + tile, tl.dot(x.to(tl.float16), h))


@triton.jit
def dead_splits_kernel(m_ptr, slot_ptr, out_ptr, stride, BLOCK: tl.constexpr = 32):
    row = tl.load(slot_ptr + tl.program_id(0)).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = tl.load(m_ptr + row * stride + offs)
    dead = m == float("-inf")
    tl.store(out_ptr + offs, tl.where(dead, 0.0, tl.exp(m)))


@triton.jit
def sliced_tiles_kernel(a_ptr, b_ptr, out_ptr, stride, BLOCK_M: tl.constexpr,
                        SLICE: tl.constexpr):
    SUB: tl.constexpr = BLOCK_M // SLICE
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, SUB)
    tile = offs[:, None] * SUB + offs[None, :]
    a = tl.load(a_ptr + row * stride + tile)
    b = tl.load(b_ptr + tile)
    tl.store(out_ptr + tile, tl.dot(a, b))


@triton.jit
def stepped_loop_kernel(x_ptr, stride, n, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for start in tl.range(0, n, step=BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)


@triton.jit
def descriptor_tiles_kernel(a_desc, out_ptr, stride, ab_dtype: tl.constexpr,
                            BLOCK_M: tl.constexpr = 64, BLOCK_K: tl.constexpr = 64):
    pid = tl.program_id(0).to(tl.int64)
    tile = tl._experimental_descriptor_load(a_desc, [pid * BLOCK_M, 0], [BLOCK_M, BLOCK_K],
                                            ab_dtype)
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_K)
    tl.store(out_ptr + pid * stride + rows[:, None] * BLOCK_K + cols[None, :], tile)


@triton.jit
def _converted(x, compute_type: tl.constexpr):
    return x.to(compute_type)


@triton.jit
def helper_dtype_kernel(x_ptr, out_ptr, stride, compute_type: tl.constexpr,
                        BLOCK: tl.constexpr = 32):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs)
    tl.store(out_ptr + offs, _converted(x, compute_type))


@triton.jit
def _normed_row(x, out_row_ptr, offs, mask):
    tl.store(out_row_ptr + offs, x.to(out_row_ptr.dtype.element_ty), mask=mask)


@triton.jit
def helper_row_kernel(x_ptr, out_ptr, stride, HIDDEN: tl.constexpr, BLOCK: tl.constexpr = 32):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < HIDDEN
    x = tl.load(x_ptr + row * stride + offs, mask=mask)
    _normed_row(x, out_ptr + row * HIDDEN, offs, mask)
