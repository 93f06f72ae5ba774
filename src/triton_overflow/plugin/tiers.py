"""The generated tests: subclass ``OverflowTests``, list your cases, and every tier runs.

    from triton_overflow import OverflowTests
    from mycases import TEMPERATURE

    class TestTemperature(OverflowTests):
        cases = [TEMPERATURE]

For every case this generates, each test filling one cell of the kernel x detector report:

* static: the static check finds no error in the kernels the case launches, compiled as its
  launcher launches them (``case_static``), and an error in every one of them in its twin;
* interpreter huge: the highest-offset rows on lazily allocated CPU memory (only the programs
  that touch them run, every i32 operation checked), in both wrap modes; the twin is caught by
  the wrap check in both, and with the aliased wrap also without it, by the row comparison;
* gpu aliased huge / gpu dense huge: the whole batch on a CUDA device, the huge tensor backed by
  virtual memory (a few MiB) or dense (9-18 GiB); the twin faults or gives a wrong row (in
  the interpreter too, a fault on the way to the checked rows is a detection);
* for every widening of a case's module, its mutant (that widening alone undone) caught by the
  module's huge cases in the interpreter and on the GPU, unless a bounded marker on the
  widening's line says its product cannot reach 2**31 (``widening_tests``);
* for a ``RowsCase``, correctness and row-0 copy on a small batch (``small_batch_tests``);
* for each ``CompileSpec`` in ``compile_specs``, the kernel compiles for sm_90 on the CPU.

A case with ``expect = OVERFLOWS`` gets the fixed-kernel tests only, each passing when the
detector catches the overflow ("overflows at file:line" in the report) and failing the day it
does not. Every huge case runs in a child process.
"""

import types
from typing import ClassVar

import pytest

from triton_overflow.cases import (OVERFLOWS, SAFE, CompileSpec, RowsCase, case_reference,
                                   expectation, validate_case)
from triton_overflow.engine.isolation import run_isolated
from triton_overflow.engine.memory import BACKENDS, DEVICE_BACKENDS, INTERPRETER_BACKEND
from triton_overflow.engine.runner import gpu_caught, how_caught, sanitizer_report, wrap_location
from triton_overflow.interp import execution_mode
from triton_overflow.locations import module_file
from triton_overflow.plugin.detector_report import COST, detail
from triton_overflow.plugin.outcomes import case_check, huge_run, kernel_run
from triton_overflow.plugin.widenings import mutant_tests

WRAPS = ("negative", "aliased")
# The generated tests that compile whole kernels or run a family's cases, in the order that
# xdist workers start them (every other test after them, in file order): the static checks
# first, whose cells complete one family at a time, then the sm_90 compiles, then the mutants.
START_EARLY = {"static": pytest.mark.start_early(0), "compile": pytest.mark.start_early(1),
               "mutants": pytest.mark.start_early(2)}
INTERPRETED = BACKENDS[INTERPRETER_BACKEND]
_REGISTERED = {}  # case name -> case reference, for this process


class DuplicateCase(ValueError):
    pass


def register(case):
    """Check ``case`` and claim its name for this test run; a duplicate name is an error."""
    validate_case(case)
    reference = case_reference(case)
    known = _REGISTERED.get(case.name)
    if known is not None and known != reference:
        raise DuplicateCase(f"two cases are named {case.name!r} ({known} and {reference}); "
                            "case names label the report and must be unique")
    _REGISTERED[case.name] = reference
    return reference


# The report's columns that no memory backend makes, in order, each with the tier mark of its
# tests (each memory backend adds its own column: ``engine.memory.MemoryBackend``).
SMALL_DETECTORS = {"correctness": "correctness", "row-0 copy": "correctness",
                   "validation": "validation", "static": "static"}


def tier_marks(detector=None, backend=None):
    """The marks of a test filling ``detector``'s column, or running on memory ``backend``."""
    if backend is None:
        return [getattr(pytest.mark, SMALL_DETECTORS[detector])]
    if BACKENDS[backend].execution == execution_mode.INTERPRETER:
        return [pytest.mark.interp, pytest.mark.huge]
    return [pytest.mark.gpu, pytest.mark.huge, pytest.mark.memory_backend(backend)]


def _param(case, *values, role, detector=None, backend=None):
    """One generated test of ``case``: its cell (``detector``'s, or ``backend``'s) and marks."""
    column = detector or BACKENDS[backend].detector
    marks = [pytest.mark.covers(kernel=case.name, detector=column, role=role),
             *tier_marks(detector, backend)]
    return pytest.param(case, *values, id="-".join([case.name, *map(str, values)]), marks=marks)


class OverflowTests:
    """Base class of a test class that runs every overflow tier on its ``cases``."""

    cases: ClassVar[list] = []
    compile_specs: ClassVar[list[CompileSpec]] = []
    small_batch_tests: ClassVar[bool] = True
    small_batch_rows: ClassVar[int] = 3
    widening_tests: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        for case in cls.cases:
            register(case)
        for spec in cls.compile_specs:
            if not isinstance(spec, CompileSpec):
                raise TypeError(f"compile_specs of {cls.__name__} must be CompileSpec objects; "
                                f"got {spec!r}")
        _generate(cls)


def _generate(cls):
    safe = [c for c in cls.cases if expectation(c) == SAFE]
    every = list(cls.cases)
    interp = INTERPRETER_BACKEND
    tests = {}
    if every:
        tests["test_static_check"] = pytest.mark.parametrize("case", [
            _param(c, detector="static", role=_role(c)) for c in every])(
            START_EARLY["static"](_fresh(_test_static_check)))
        tests["test_interpreter_huge_case"] = pytest.mark.parametrize("case, wrap", [
            _param(c, w, backend=interp, role=_role(c))
            for c in every for w in WRAPS])(_fresh(_test_interpreter_huge_case))
        tests["test_gpu_huge_case"] = pytest.mark.parametrize("case, wrap, backend", [
            _param(c, w, b, backend=b, role=_role(c))
            for b in DEVICE_BACKENDS for c in every for w in WRAPS])(_fresh(_test_gpu_huge_case))
    if safe:
        tests["test_static_check_flags_twin"] = pytest.mark.parametrize("case", [
            _param(c, detector="static", role="twin") for c in safe])(
            START_EARLY["static"](_fresh(_test_static_check_flags_twin)))
        tests["test_interpreter_huge_case_catches_twin_wrap"] = pytest.mark.parametrize(
            "case, wrap", [_param(c, w, backend=interp, role="twin")
                           for c in safe for w in WRAPS])(_fresh(_test_interpreter_twin_wrap))
        tests["test_interpreter_huge_case_catches_twin_silent_corruption"] = \
            pytest.mark.parametrize("case", [
                _param(c, backend=interp, role="twin") for c in safe])(
                _fresh(_test_interpreter_twin_silent))
        tests["test_gpu_huge_case_catches_twin"] = pytest.mark.parametrize(
            "case, wrap, backend", [_param(c, w, b, backend=b, role="twin")
                                    for b in DEVICE_BACKENDS for c in safe for w in WRAPS])(
            _fresh(_test_gpu_twin))
    if cls.widening_tests:
        tests.update(mutant_tests(safe, _fresh))
    rows = [c for c in safe if isinstance(c, RowsCase)] if cls.small_batch_tests else []
    if rows:
        tests["test_small_batch_matches_reference"] = pytest.mark.parametrize("case", [
            _param(c, detector="correctness", role="fixed") for c in rows])(
            _fresh(_test_small_batch))
        tests["test_copied_row_matches_row_zero"] = pytest.mark.parametrize("case", [
            _param(c, detector="row-0 copy", role="fixed") for c in rows])(
            _fresh(_test_copied_row))
    if cls.compile_specs:
        tests["test_compiles_for_sm90"] = pytest.mark.parametrize(
            "spec", [pytest.param(s, id=s.id) for s in cls.compile_specs])(
            pytest.mark.static(START_EARLY["compile"](_fresh(_test_compiles))))
    for name, function in tests.items():
        if name not in vars(cls):
            setattr(cls, name, function)


def _fresh(function):
    """A copy of a test function, so that each class's marks stay its own."""
    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)
    copy.__doc__ = function.__doc__
    copy.__qualname__ = function.__name__
    return copy


def _role(case):
    return "overflow" if expectation(case) == OVERFLOWS else "fixed"


# --- static -------------------------------------------------------------------------------

def _test_static_check(self, case, request):
    """The static check finds no error in the kernels the case launches, compiled as its
    launcher launches them (a known overflow: an error, named)."""
    summary = case_check(case, False)
    errors = [f for f in summary["findings"] if f["level"] == "error"]
    if expectation(case) == OVERFLOWS:
        if not errors:
            pytest.fail(f"{case.name} is declared expect=OVERFLOWS, but the static check finds no "
                        f"error in the kernels it launches ({', '.join(summary['kernels'])}): "
                        "if it is fixed, declare it SAFE\n" + summary["text"])
        detail(request, f"overflows at {errors[0]['where']}: {errors[0]['kernel']}: "
                         f"`{errors[0]['product']}`")
        return
    assert summary["exit"] == 0, summary["text"]


def _test_static_check_flags_twin(self, case, request):
    """The static check flags every kernel the case launches from its int32 twin."""
    summary = case_check(case, True)
    assert summary["exit"] == 1, summary["text"]
    flagged = {f["kernel"] for f in summary["findings"] if f["level"] == "error"}
    missed = [k for k in summary["kernels"] if k not in flagged]
    assert not missed, f"twin kernels without an error: {missed}\n{summary['text']}"


# --- huge cases ---------------------------------------------------------------------------


def _interpreted_overflow(case, wrap, request):
    outcome = kernel_run(case, wrap, INTERPRETER_BACKEND, wrap_check=True)
    if outcome.wrapped:
        detail(request, "overflows at " + wrap_location(outcome))
        return
    pytest.fail(f"{case.name} is declared expect=OVERFLOWS, but its huge case did not overflow "
                f"({outcome.summary()}): if it is fixed, declare it SAFE\n{outcome.output}")


def _test_interpreter_huge_case(self, case, wrap, request):
    """The highest-offset rows equal row 0 and the reference; no i32 operation wraps."""
    if expectation(case) == OVERFLOWS:
        return _interpreted_overflow(case, wrap, request)
    outcome = kernel_run(case, wrap, INTERPRETER_BACKEND, wrap_check=True)
    assert outcome.passed, outcome.summary() + "\n" + outcome.output
    request.node.user_properties.append((COST, {
        "case": f"{case.name} ({wrap})", "seconds": round(outcome.seconds, 1),
        **{key: outcome.value.get(key) for key in ("programs", "resident_gib", "phases")}}))


def _test_interpreter_twin_wrap(self, case, wrap):
    """On the int32 twin the wrap check stops at the wrapping product, naming the kernel line."""
    outcome = huge_run(case, wrap, INTERPRETER_BACKEND, twin=True, wrap_check=True)
    assert outcome.wrapped, outcome.summary() + "\n" + outcome.output
    kernel_file = module_file(case.module)
    assert f"int32 twin of {kernel_file}" in outcome.message, outcome.message


def _test_interpreter_twin_silent(self, case, request):
    """Without the wrap check, the aliased twin reads or writes a poisoned row (a wrong row),
    or faults on the way there."""
    outcome = huge_run(case, "aliased", INTERPRETER_BACKEND, twin=True, wrap_check=False)
    if outcome.passed:
        pytest.fail(f"the int32 twin of {case.module} gave right rows with the aliased wrap, "
                    "although it read or wrote a poisoned row: the case's output may not "
                    "depend on the data it reads (noise that decides a sampled token, a mask "
                    "that hides the row): make it depend on the logits (a lower temperature, "
                    "a greedy path)")
    assert outcome.wrong_row or outcome.faulted, outcome.summary() + "\n" + outcome.output
    detail(request, how_caught(outcome))


def _test_gpu_huge_case(self, case, wrap, backend, request):
    """On the device, the whole batch: the highest-offset rows equal row 0 and the reference."""
    outcome = kernel_run(case, wrap, backend)
    if expectation(case) == OVERFLOWS:
        if gpu_caught(outcome):
            detail(request, "overflows: " + outcome.summary()[:200])
            return
        pytest.fail(f"{case.name} is declared expect=OVERFLOWS, but its GPU huge case was not "
                    f"caught ({outcome.summary()}): if it is fixed, declare it SAFE")
    if isinstance(outcome.value, dict):
        request.node.user_properties.append(("case", outcome.value))
    if not outcome.passed and request.config.getoption("--sanitize"):
        pytest.fail(f"{outcome.summary()}\nTriton's overflow sanitizer (TRITON_DEBUG=1):\n"
                    f"{sanitizer_report(case, wrap, backend)}\n{outcome.output}")
    assert outcome.passed, outcome.summary() + "\n" + outcome.output


def _test_gpu_twin(self, case, wrap, backend, request):
    """On the device the int32 twin faults or produces a wrong row."""
    outcome = huge_run(case, wrap, backend, twin=True)
    request.node.user_properties.append(("twin_outcome", outcome.summary()[:300]))
    assert gpu_caught(outcome), outcome.summary() + "\n" + outcome.output


# --- small batches ------------------------------------------------------------------------

def _small_batch(case, device, rows, copy_row):
    import importlib

    from triton_overflow.engine.runner import as_on_gpu, small_batch, small_run
    run = small_run(case, device, rows)
    logits = small_batch(case, run, copy_row)
    planted = {row: logits[row].cpu().clone() for row in range(rows)}
    with as_on_gpu(case, run.interpreted):
        inputs = case.prepare(logits, run)
        produced = case.launch(importlib.import_module(case.module), logits, run, **inputs)
    return run, produced, planted, inputs


def _test_small_batch(self, case, kernel_device):
    """On a small batch every row equals the reference on its own input."""
    run, produced, planted, inputs = _small_batch(case, kernel_device, self.small_batch_rows, False)
    for row in range(run.rows):
        case.check_row(produced[row], planted[row], row, f"row {row} of a small batch", **inputs)


def _test_copied_row(self, case, kernel_device):
    """Row 0 copied into the last row gives the last row exactly row 0's output."""
    from triton_overflow.compare import assert_rows_equal
    run, produced, _, _ = _small_batch(case, kernel_device, self.small_batch_rows, True)
    assert_rows_equal(produced[run.rows - 1], produced[0], "the copied last row against row 0")


# --- compile ------------------------------------------------------------------------------

def _test_compiles(self, spec):
    """The kernel compiles for sm_90 through LLVM IR, on the CPU."""
    outcome = run_isolated("triton_overflow.engine.gpu_compile:compile_for_gpu",
                           dict(kernel=spec.kernel, types=spec.types, constants=spec.constants,
                                num_warps=spec.num_warps), mode=execution_mode.COMPILE, timeout=600)
    assert outcome.passed, outcome.summary() + "\n" + outcome.output


# --- helpers ------------------------------------------------------------------------------


