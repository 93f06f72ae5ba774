"""Hooks into Triton's CPU interpreter (``TRITON_INTERPRET=1``) for huge cases without a GPU.

The interpreter runs program ids and int arguments as numpy int32, so an i32 product wraps
exactly as on a GPU. Two hooks make a huge case cheap and its failure precise:

* ``only_programs(ids)``: a launch runs only the listed axis-0 program ids (the rows a case
  checks), while ``tl.num_programs(0)`` still reports the real grid. A launch over 2**15 rows
  then costs a handful of rows.
* ``int32_wrap_checked()``: every signed i32 add, sub, mul and left shift is recomputed in
  i64; a result outside i32 raises ``Int32WrapError`` naming the kernel's file:line and the
  operands, instead of a silent wrong row or a segfault. Unsigned arithmetic (Philox counters)
  wraps as intended, and so does ``1 << 31``, the sign bit of a 32-bit mask.

Both patch interpreter internals through ``triton_overflow.interp.runtime``, which says which
Triton versions they are tested on.
"""

import contextlib
import sys
from pathlib import Path

import numpy as np

from triton_overflow import triton_versions
from triton_overflow.interp import runtime
from triton_overflow.twin import twin_origin

_TRITON_DIR = None
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1


class Int32WrapError(ArithmeticError):
    """A signed 32-bit integer operation in an interpreted kernel left the int32 range.

    ``fields`` (``file``, ``line``, ``function``, ``what``) travel from a child process with its
    outcome (``triton_overflow.engine.isolation``)."""

    def __init__(self, frame, what):
        file, line, function = frame
        origin = twin_origin(file)
        twin_note = f" (int32 twin of {origin})" if origin else ""
        super().__init__(f"{file}:{line} in {function}{twin_note}: {what}")
        self.fields = {"file": file, "line": line, "function": function, "what": what}


@contextlib.contextmanager
def only_programs(axis0_ids, axis=0):
    """Run only the programs that touch these rows in every interpreted launch inside the
    block, while ``tl.num_programs`` still reports the real grid; yields an object whose
    ``programs_run`` counts the programs run.

    ``axis0_ids`` is a list for every kernel, or a dict from kernel name to list (kernels not
    named run whole), of program ids on grid axis ``axis`` (0 unless a case says otherwise).
    Row ``r`` is program ``r``; on axis 0, when the grid is smaller than the rows (a
    persistent kernel), row ``r`` is program ``r % grid``, and inside it a grid-stride loop
    (``range(program_id(0), n, num_programs(0))``) visits only the listed rows it owns.
    """
    triton_versions.require_interpreter()
    per_kernel = axis0_ids if isinstance(axis0_ids, dict) else None
    listed = per_kernel if per_kernel is not None else {None: axis0_ids}
    selections = {name: sorted({int(i) for i in ids}) for name, ids in listed.items()}
    for name, ids in selections.items():
        if not ids or ids[0] < 0:
            raise ValueError(f"program ids of {name or 'every kernel'} must be non-negative and "
                             f"not empty; got {ids[:4]}")
    launch = _Selection(axis)
    executor_class = runtime.grid_executor()
    builder = runtime.interpreter_builder()
    original_call = executor_class.__call__
    original_pid = builder.create_get_program_id
    original_nprog = builder.create_get_num_programs

    def call(executor, *args, **kwargs):
        name = executor.fn.__name__
        if per_kernel is not None and name not in per_kernel:
            return original_call(executor, *args, **kwargs)
        grid = executor.grid
        executor.grid = lambda meta: launch.begin(
            name, selections[name if per_kernel is not None else None],
            grid(meta) if callable(grid) else grid)
        try:
            result = original_call(executor, *args, **kwargs)
            launch.finish()
            return result
        finally:
            executor.grid = grid
            launch.programs = None

    def program_id(self, asked):
        handle = original_pid(self, asked)
        if asked == axis and launch.programs is not None:
            handle.data = np.array([launch.programs[self.grid_idx[axis]]], dtype=np.int32)
        return handle

    def num_programs(self, asked):
        handle = original_nprog(self, asked)
        if asked == axis and launch.programs is not None:
            handle.data = np.array([launch.grid[axis]], dtype=np.int32)
        return handle

    with runtime.patched(executor_class, __call__=call), \
            runtime.patched(builder, create_get_program_id=program_id,
                            create_get_num_programs=num_programs), \
            runtime.loops_narrowed_by(launch.loop_values):
        yield launch


class _Selection:
    """The programs one interpreted launch runs, and the rows its grid-stride loops visit."""

    def __init__(self, axis=0):
        self.axis = axis
        self.programs = None
        self.programs_run = 0  # over every launch of the block

    def begin(self, name, rows, full_grid):
        full = tuple(full_grid) + (1, ) * (3 - len(tuple(full_grid)))
        self.name, self.rows, self.grid, self.strided_loops = name, rows, full, 0
        self.persistent = rows[-1] >= full[self.axis]
        if self.persistent and self.axis != 0:
            raise ValueError(f"{name}: programs up to {rows[-1]} of grid axis {self.axis} are "
                             f"asked for, but the launch has {full[self.axis]}")
        self.programs = sorted({row % full[0] for row in rows}) if self.persistent else rows
        reduced = list(full)
        reduced[self.axis] = len(self.programs)
        self.programs_run += reduced[0] * reduced[1] * reduced[2]
        return tuple(reduced)

    def finish(self):
        if self.persistent and not self.strided_loops:
            raise ValueError(
                f"{self.name}: rows up to {self.rows[-1]} are planted but the launch grid is "
                f"{self.grid}, and no program looped over rows as "
                f"`range(tl.program_id(0), rows, tl.num_programs(0))`: say which programs "
                f"touch the planted rows with the case's `programs(run)`")

    def loop_values(self, start, end, step, values):
        """A grid-stride loop of a selected program visits only the planted rows it owns."""
        if self.programs is None or self.axis != 0 or step != self.grid[0] or step <= 1:
            return values
        program = self.programs[runtime.interpreter().interpreter_builder.grid_idx[0]]
        if start != program:
            return values
        self.strided_loops += 1
        return [row for row in self.rows if row % step == program % step and start <= row < end]


@contextlib.contextmanager
def int32_wrap_checked():
    """Raise ``Int32WrapError`` at the first signed i32 add/sub/mul/shl that wraps in the block."""
    triton_versions.require_interpreter()
    builder = runtime.interpreter_builder()
    symbols = {"create_add": ("+", np.add), "create_sub": ("-", np.subtract),
               "create_mul": ("*", np.multiply), "create_shl": ("<<", _exact_shift)}
    originals = {name: getattr(builder, name) for name in symbols}

    def checked(name):
        symbol, op = symbols[name]
        original = originals[name]

        def run(self, lhs, rhs):
            if lhs.data.dtype == np.int32 and rhs.data.dtype == np.int32:
                exact = op(lhs.data.astype(np.int64), rhs.data.astype(np.int64))
                outside = (exact > INT32_MAX) | (exact < INT32_MIN)
                if name == "create_shl":
                    # 1 << 31 sets the sign bit of a bit mask on purpose; it multiplies nothing.
                    outside &= ~((lhs.data == 1) & (rhs.data == 31))
                if np.any(outside):
                    at = np.flatnonzero(np.broadcast_to(outside, exact.shape))[0]
                    a = np.broadcast_to(lhs.data, exact.shape).flat[at]
                    b = np.broadcast_to(rhs.data, exact.shape).flat[at]
                    raise Int32WrapError(
                        kernel_frame(), f"int32 {symbol} wraps: {a} {symbol} {b} = "
                        f"{exact.flat[at]} (int32 range ends at 2**31 - 1 = 2147483647)")
            return original(self, lhs, rhs)

        return run

    with runtime.patched(builder, **{name: checked(name) for name in symbols}):
        yield


def _exact_shift(lhs, rhs):
    """``lhs << rhs`` without wrapping, for shift counts below 32 (larger ones are UB)."""
    return lhs * np.left_shift(np.int64(1), np.clip(rhs, 0, 32))


def kernel_frame():
    """``(file, line, function)`` of the innermost frame outside Triton and this module."""
    global _TRITON_DIR
    if _TRITON_DIR is None:
        import triton
        _TRITON_DIR = str(Path(triton.__file__).parent)
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_TRITON_DIR) and filename != __file__:
            return filename, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return "<unknown kernel>", 0, "<unknown kernel>"


def unwrap_interpreter_error(error):
    """The exception a kernel raised inside the interpreter, through InterpreterError."""
    while error.__cause__ is not None and type(error).__name__ == "InterpreterError":
        error = error.__cause__
    return error


@contextlib.contextmanager
def configs_without_benchmarks(which="first"):
    """Autotuned kernels run without the autotuner's benchmark, which needs a GPU driver:
    with their first config (``which="first"``) or each config in turn (``"each"``).

    Yields a list that collects one line per launch: the kernel and the configs it ran.
    """
    if which not in ("first", "each"):
        raise ValueError(f"configs must be 'first' or 'each'; got {which!r}")
    from triton.runtime.autotuner import Autotuner
    original_run = Autotuner.run
    ran = []

    def run(tuner, *args, **kwargs):
        configs = list(tuner.configs)
        chosen = configs if which == "each" else configs[:1]
        result = None
        for config in chosen:
            tuner.configs = [config]
            try:
                result = original_run(tuner, *args, **kwargs)
            finally:
                tuner.configs = configs
        line = (f"{tuner.base_fn.__name__}: {'; '.join(map(str, chosen))} "
                f"({'each' if which == 'each' else 'the first'} of {len(configs)} configs)")
        if line not in ran:
            ran.append(line)
        return result

    with runtime.patched(Autotuner, run=run):
        yield ran
