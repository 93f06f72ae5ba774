"""The same kernels as ``overflowing.py``, widened before the multiply (or provably small, or
marked bounded with a reason): the static check must find nothing here."""

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
def _row_pointer(base_ptr, row, stride):
    return base_ptr + row.to(tl.int64) * stride


@triton.jit
def product_in_helper_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    tl.store(_row_pointer(x_ptr, tl.program_id(0), stride) + offs, 1.0, mask=offs < n)


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
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # overflow-lint: tl.program_id(1) * BLOCK bounded by n
    tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)


@triton.jit
def small_constant_product_kernel(x_ptr, BLOCK: tl.constexpr = 128):
    # Block offsets times a constant are provably far below 2**31: no marker needed.
    tl.store(x_ptr + tl.arange(0, BLOCK) * 4, 1.0)


@triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})],
                 key=["n"])
@triton.jit
def autotuned_kernel(x_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)


@triton.autotune(configs=[triton.Config({}, num_warps=4)], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % 128 == 0})
@triton.jit
def heuristics_kernel(x_ptr, stride, n, EVEN: tl.constexpr, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    if EVEN:
        tl.store(x_ptr + row * stride + offs, 1.0)
    else:
        tl.store(x_ptr + row * 64 + offs, 1.0, mask=offs < n)


@triton.jit
def loop_carried_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    off = tl.program_id(0).to(tl.int64) * stride
    for start in range(0, n, BLOCK):
        tl.store(x_ptr + off + tl.arange(0, BLOCK), 1.0)
        off += BLOCK


@triton.jit
def branch_carried_kernel(x_ptr, stride, flag, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0).to(tl.int64)
    if flag > 0:
        off = row * stride
    else:
        off = row
    tl.store(x_ptr + off + tl.arange(0, BLOCK), 1.0)


@triton.jit
def flag_off_by_default_kernel(x_ptr, stride, USE_ROWS: tl.constexpr = False,
                               BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    if USE_ROWS:
        tl.store(x_ptr + tl.program_id(0).to(tl.int64) * stride + offs, 1.0)
    else:
        tl.store(x_ptr + offs, 1.0)


@triton.jit
def unsuffixed_pointers_kernel(logits, out, stride, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    values = tl.load(logits + row * stride + offs)
    tl.store(out + row * BLOCK + offs, values)


@triton.jit
def inductor_style_kernel(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0).to(tl.int64) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tl.store(out_ptr0 + (x0), tmp0 * 2.0, xmask)


@triton.jit
def loaded_loop_bound_kernel(x_ptr, count_ptr, stride, BLOCK: tl.constexpr = 128):
    count = tl.load(count_ptr + tl.program_id(0))
    for i in range(count):
        tl.store(x_ptr + i.to(tl.int64) * stride + tl.arange(0, BLOCK), 1.0)


@triton.jit
def int64_annotated_stride_kernel(x_ptr, stride: tl.int64, BLOCK: tl.constexpr = 128):
    # A stride launched as int64 makes the product int64: nothing to widen.
    row = tl.program_id(0)
    tl.store(x_ptr + row * stride + tl.arange(0, BLOCK), 1.0)


@triton.jit
def atomic_slot_kernel(x_ptr, out_ptr, counter_ptr, stride, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    x = tl.exp(tl.load(x_ptr + tl.arange(0, BLOCK)))
    slot = tl.atomic_add(counter_ptr + row + 0 * tl.arange(0, BLOCK), 1, mask=x > 1.0)
    tl.store(out_ptr + row.to(tl.int64) * stride + slot, x, mask=x > 1.0)


@triton.jit
def _row_pointers(x_ptr, out_ptr, stride):
    row = tl.program_id(0).to(tl.int64)
    return row, x_ptr + row * stride, out_ptr + row * stride


@triton.jit
def tuple_returning_helper_kernel(x_ptr, out_ptr, stride, BLOCK: tl.constexpr = 128):
    row, row_x, row_out = _row_pointers(x_ptr, out_ptr, stride)
    offs = tl.arange(0, BLOCK)
    tl.store(row_out + offs, tl.load(row_x + offs) * 2.0, mask=offs < row + BLOCK)
