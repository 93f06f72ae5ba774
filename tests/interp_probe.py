"""Tiny interpreted kernels that the harness self-tests run in child processes."""

import torch
import triton
import triton.language as tl

from triton_overflow.interp.hooks import int32_wrap_checked, only_programs, unwrap_interpreter_error


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


@triton.jit
def _xor_reductions_kernel(keys_ptr, values_ptr, out_ptr, ROWS: tl.constexpr,
                           COLUMNS: tl.constexpr):
    # Each result of a [ROWS, COLUMNS] block at its own offset of out: the xor over columns,
    # over rows (kept as [1, COLUMNS]), over all, each row's keys sorted up and down, flipped,
    # and the float values sorted down.
    size: tl.constexpr = ROWS * COLUMNS
    rows = tl.arange(0, ROWS)[:, None]
    columns = tl.arange(0, COLUMNS)[None, :]
    keys = tl.load(keys_ptr + rows * COLUMNS + columns)
    values = tl.load(values_ptr + rows * COLUMNS + columns)
    tl.store(out_ptr + tl.arange(0, ROWS), tl.xor_sum(keys, 1))
    tl.store(out_ptr + ROWS + columns, tl.xor_sum(keys, 0, keep_dims=True))
    tl.store(out_ptr + ROWS + COLUMNS, tl.xor_sum(keys))
    start: tl.constexpr = ROWS + COLUMNS + 1
    tl.store(out_ptr + start + rows * COLUMNS + columns, tl.sort(keys, 1))
    tl.store(out_ptr + start + size + rows * COLUMNS + columns, tl.sort(keys, 1, descending=True))
    tl.store(out_ptr + start + 2 * size + rows * COLUMNS + columns, tl.flip(keys, 1))
    sorted_values = tl.sort(values, 1, descending=True)
    tl.store(out_ptr + start + 3 * size + rows * COLUMNS + columns,
             sorted_values.to(tl.int32, bitcast=True))


def xor_reductions(rows=8, columns=16):
    """The interpreter's xor reductions, sorts and flips of a random block, and those numpy
    gives; and whether the vectorised xor reduction is installed in this process."""
    import numpy as np

    from triton_overflow.interp import runtime
    generator = torch.Generator().manual_seed(0)
    keys = torch.randint(-2**31, 2**31 - 1, (rows, columns), dtype=torch.int32,
                         generator=generator)
    values = torch.randn(rows, columns, generator=generator)
    size = rows * columns
    out = torch.zeros(rows + columns + 1 + 4 * size, dtype=torch.int32)
    _xor_reductions_kernel[(1, )](keys, values, out, ROWS=rows, COLUMNS=columns)
    k = keys.numpy()
    expected = np.concatenate([
        np.bitwise_xor.reduce(k, axis=1), np.bitwise_xor.reduce(k, axis=0),
        [np.bitwise_xor.reduce(k, axis=None)], np.sort(k, 1).ravel(), -np.sort(-k.astype(np.int64), 1).ravel(),
        k[:, ::-1].ravel(), (-np.sort(-values.numpy(), 1)).view(np.int32).ravel()])
    return {"kernel": out.tolist(), "numpy": expected.astype(np.int32).tolist(),
            "vectorised": runtime._xor_reductions_installed}


@triton.jit
def _grid_stride_kernel(out_ptr, visits_ptr, rows):
    for row in tl.range(tl.program_id(0), rows, tl.num_programs(0)):
        tl.store(out_ptr + row, row + 1)
        tl.atomic_add(visits_ptr, 1)


def grid_stride_rows(rows, grid, selected):
    """Which rows a grid-stride kernel writes, and how many loop iterations ran, when only
    the programs touching ``selected`` rows run."""
    out = torch.zeros(rows, dtype=torch.int32)
    visits = torch.zeros(1, dtype=torch.int32)
    with only_programs(selected):
        _grid_stride_kernel[(grid, )](out, visits, rows)
    return {"written": out.nonzero().flatten().tolist(), "visits": int(visits)}


def rows_outside_a_plain_grid(rows, grid, selected):
    out = torch.zeros(rows, dtype=torch.int32)
    count = torch.zeros(1, dtype=torch.int32)
    with only_programs(selected):
        _mark_rows_kernel[(grid, )](out, count)


@triton.autotune(configs=[triton.Config({"BLOCK": 8}), triton.Config({"BLOCK": 16})],
                 key=["n"])
@triton.jit
def _autotuned_fill_kernel(out_ptr, n, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + cols, BLOCK, mask=cols < n)


def autotuned_fill(which):
    from triton_overflow.interp.hooks import configs_without_benchmarks
    out = torch.zeros(32, dtype=torch.int32)
    with configs_without_benchmarks(which) as ran:
        _autotuned_fill_kernel[lambda meta: (triton.cdiv(32, meta["BLOCK"]), )](out, 32)
    return {"values": sorted(set(out.tolist())), "ran": ran}


def presented_device(model):
    from triton_overflow.interp.device_view import presented
    with presented(model):
        properties = torch.cuda.get_device_properties(torch.device("cpu"))
        driver = triton.runtime.driver.active
        return {"torch": properties.multi_processor_count,
                "triton": driver.utils.get_device_properties(0)["multiprocessor_count"],
                "capability": list(torch.cuda.get_device_capability())}


@triton.jit
def _persistent_columns_kernel(out_ptr, rows, cols, BLOCK: tl.constexpr):
    """A persistent row loop whose column loop's step equals the grid: not a grid-stride loop."""
    for row in tl.range(tl.program_id(0), rows, tl.num_programs(0)):
        for start in range(0, cols, BLOCK):
            offsets = start + tl.arange(0, BLOCK)
            tl.store(out_ptr + row * cols + offsets, row + 1, mask=offsets < cols)


def persistent_columns(rows, cols, grid, selected):
    out = torch.zeros(rows, cols, dtype=torch.int32)
    with only_programs(selected):
        _persistent_columns_kernel[(grid, )](out, rows, cols, BLOCK=grid)
    return {"rows": out.any(dim=1).nonzero().flatten().tolist(),
            "columns written": [int((out[row] != 0).sum()) for row in selected]}
