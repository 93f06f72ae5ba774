"""Kernels with a planted i32 offset product, one per way an index reaches an address and one
per way real engines write kernels. ``# <- wraps`` marks each line the static check must flag;
``safe.py`` holds the same kernels widened. The self-tests assert each by name and line.
"""

import triton
import triton.language as tl


@triton.jit
def program_id_times_stride_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)  # <- wraps


@triton.jit
def loaded_index_times_stride_kernel(x_ptr, slot_ptr, stride, n, BLOCK: tl.constexpr = 128):
    slot = tl.load(slot_ptr + tl.program_id(0))
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + slot * stride + offs, 1.0, mask=offs < n)  # <- wraps


@triton.jit
def loop_variable_times_stride_kernel(x_ptr, stride, rows, n, BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    for row in tl.range(tl.program_id(0), rows, tl.num_programs(0)):
        tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)  # <- wraps


@triton.jit
def _row_pointer(base_ptr, row, stride):
    return base_ptr + row * stride  # <- wraps


@triton.jit
def product_in_helper_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    tl.store(_row_pointer(x_ptr, tl.program_id(0), stride) + offs, 1.0, mask=offs < n)


@triton.jit
def widened_too_late_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + (tl.program_id(0) * stride).to(tl.int64) + offs, 1.0, mask=offs < n)  # <- wraps


@triton.jit
def bounded_without_reason_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    # The marker without a reason does not silence the check.
    row = tl.program_id(0)
    tl.store(x_ptr + row * stride + tl.arange(0, BLOCK), 1.0)  # <- wraps  # overflow-lint: row * stride bounded


@triton.jit
def marker_names_another_product_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    # The marker covers only the product it names: row * stride on the same line still counts.
    row = tl.program_id(0)
    tl.store(x_ptr + row * stride + tl.program_id(1) * BLOCK + tl.arange(0, BLOCK), 1.0)  # <- wraps  # overflow-lint: tl.program_id(1) * BLOCK bounded by n


@triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})],
                 key=["n"])
@triton.jit
def autotuned_kernel(x_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * stride + offs, 1.0, mask=offs < n)  # <- wraps


@triton.autotune(configs=[triton.Config({}, num_warps=4)], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % 128 == 0})
@triton.jit
def heuristics_kernel(x_ptr, stride, n, EVEN: tl.constexpr, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if EVEN:
        tl.store(x_ptr + row * stride + offs, 1.0)  # <- wraps
    else:
        tl.store(x_ptr + row * 64 + offs, 1.0, mask=offs < n)  # <- wraps


@triton.jit
def loop_carried_kernel(x_ptr, stride, n, BLOCK: tl.constexpr = 128):
    off = tl.program_id(0) * stride  # <- wraps
    for start in range(0, n, BLOCK):
        tl.store(x_ptr + off + tl.arange(0, BLOCK), 1.0)
        off += BLOCK


@triton.jit
def branch_carried_kernel(x_ptr, stride, flag, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    if flag > 0:
        off = row * stride  # <- wraps
    else:
        off = row
    tl.store(x_ptr + off + tl.arange(0, BLOCK), 1.0)


@triton.jit
def flag_off_by_default_kernel(x_ptr, stride, USE_ROWS: tl.constexpr = False,
                               BLOCK: tl.constexpr = 128):
    offs = tl.arange(0, BLOCK)
    if USE_ROWS:
        tl.store(x_ptr + tl.program_id(0) * stride + offs, 1.0)  # <- wraps
    else:
        tl.store(x_ptr + offs, 1.0)


@triton.jit
def unsuffixed_pointers_kernel(logits, out, stride, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    values = tl.load(logits + row * stride + offs)  # <- wraps
    tl.store(out + row * BLOCK + offs, values)  # <- wraps


@triton.jit
def inductor_style_kernel(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK  # <- wraps
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tl.store(out_ptr0 + (x0), tmp0 * 2.0, xmask)


@triton.jit
def loaded_loop_bound_kernel(x_ptr, count_ptr, stride, BLOCK: tl.constexpr = 128):
    count = tl.load(count_ptr + tl.program_id(0))
    for i in range(count):
        tl.store(x_ptr + i * stride + tl.arange(0, BLOCK), 1.0)  # <- wraps


@triton.jit
def int32_annotated_stride_kernel(x_ptr, stride: tl.int32, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    tl.store(x_ptr + row * stride + tl.arange(0, BLOCK), 1.0)  # <- wraps


@triton.jit
def atomic_slot_kernel(x_ptr, out_ptr, counter_ptr, stride, BLOCK: tl.constexpr = 128):
    # Positive entries compacted to the front of their row through a per-row counter: the slot
    # an atomic returns is an int32 index, as a loaded one is.
    row = tl.program_id(0)
    x = tl.exp(tl.load(x_ptr + tl.arange(0, BLOCK)))
    slot = tl.atomic_add(counter_ptr + row + 0 * tl.arange(0, BLOCK), 1, mask=x > 1.0)
    tl.store(out_ptr + row * stride + slot, x, mask=x > 1.0)  # <- wraps


@triton.jit
def _row_pointers(x_ptr, out_ptr, stride):
    row = tl.program_id(0)
    return row, x_ptr + row * stride, out_ptr + row * stride  # <- wraps


@triton.jit
def tuple_returning_helper_kernel(x_ptr, out_ptr, stride, BLOCK: tl.constexpr = 128):
    # A helper hands back the row and its pointers in one tuple, as split kernels do.
    row, row_x, row_out = _row_pointers(x_ptr, out_ptr, stride)
    offs = tl.arange(0, BLOCK)
    tl.store(row_out + offs, tl.load(row_x + offs) * 2.0, mask=offs < row + BLOCK)
