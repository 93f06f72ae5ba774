"""Tiny interpreted kernels that the harness self-tests run in child processes."""

import torch
import triton
import triton.language as tl

from triton_overflow.interp import int32_wrap_checked, only_programs, unwrap_interpreter_error


@triton.jit
def _mark_rows_kernel(out_ptr, count_ptr):
    row = tl.program_id(0)
    tl.store(out_ptr + row, 1)
    tl.store(count_ptr, tl.num_programs(0))


@triton.jit
def _product_kernel(out_ptr, a, b):
    tl.store(out_ptr, a * b)


@triton.jit
def _unsigned_kernel(out_ptr):
    x = tl.full((), 0xFFFFFFFF, tl.uint32)
    tl.store(out_ptr, (x + 1).to(tl.int64))


def selected_rows(rows, selected):
    out = torch.zeros(rows, dtype=torch.int32)
    count = torch.zeros(1, dtype=torch.int32)
    with only_programs(selected):
        _mark_rows_kernel[(rows, )](out, count)
    return {"written": out.nonzero().flatten().tolist(), "num_programs": int(count)}


def wrapping_product():
    out = torch.zeros(1, dtype=torch.int32)
    try:
        with int32_wrap_checked():
            _product_kernel[(1, )](out, 65536, 32768)
    except Exception as error:
        raise unwrap_interpreter_error(error) from None


def unsigned_wrap():
    out = torch.zeros(1, dtype=torch.int64)
    with int32_wrap_checked():
        _unsigned_kernel[(1, )](out)
    return int(out)


@triton.jit
def _shift_kernel(out_ptr, a, b):
    tl.store(out_ptr, a << b)


@triton.jit
def _persistent_rows_kernel(out_ptr, stride, rows, WIDEN: tl.constexpr):
    for row in tl.range(tl.program_id(0), rows, tl.num_programs(0)):
        if WIDEN:
            offset = row.to(tl.int64) * stride
        else:
            offset = row * stride
        tl.store(out_ptr + row, (offset % 1000).to(tl.int32))


def wrapping_shift():
    out = torch.zeros(1, dtype=torch.int32)
    try:
        with int32_wrap_checked():
            _shift_kernel[(1, )](out, 65536, 16)
    except Exception as error:
        raise unwrap_interpreter_error(error) from None


def persistent_rows(widen, stride=7):
    out = torch.zeros(4, dtype=torch.int32)
    try:
        with int32_wrap_checked():
            _persistent_rows_kernel[(2, )](out, stride, 4, WIDEN=widen)
    except Exception as error:
        raise unwrap_interpreter_error(error) from None
    return out.tolist()
