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
  the wrap check in both, and in the aliased mode also without it, by the row comparison;
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

import functools
import re
import types
from pathlib import Path
from typing import ClassVar

import pytest

from triton_overflow import devices, mode, shared
from triton_overflow.cases import (OVERFLOWS, SAFE, CompileSpec, RowsCase, case_reference,
                                   expectation, validate_case)
from triton_overflow.isolation import run_isolated
from triton_overflow.report import COST

WRAP_MODES = ("negative", "aliased")
GPU_BACKENDS = ("aliased-device", "dense-device")
GPU_DETECTORS = {"aliased-device": "gpu aliased huge", "dense-device": "gpu dense huge"}
DETAIL = "overflow-detail"
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


def _param(case, *values, detector, role, extra_marks=()):
    marks = [pytest.mark.covers(kernel=case.name, detector=detector, role=role), *extra_marks]
    return pytest.param(case, *values, id="-".join([case.name, *map(str, values)]), marks=marks)


class OverflowTests:
    """Base class of a test class that runs every overflow tier on its ``cases``."""

    cases: ClassVar[list] = []
    compile_specs: ClassVar[list] = []
    small_batch_tests: ClassVar[bool] = True
    small_batch_rows: ClassVar[int] = 3
    widening_tests: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs):
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
    static, interp, huge, gpu = (pytest.mark.static, pytest.mark.interp, pytest.mark.huge,
                                 pytest.mark.gpu)
    tests = {}
    if every:
        tests["test_static_check"] = pytest.mark.parametrize("case", [
            _param(c, detector="static", role=_role(c), extra_marks=[static]) for c in every])(
            _fresh(_test_static_check))
        tests["test_interpreter_huge_case"] = pytest.mark.parametrize("case, wrap", [
            _param(c, w, detector="interpreter huge", role=_role(c), extra_marks=[interp, huge])
            for c in every for w in WRAP_MODES])(_fresh(_test_interpreter_huge_case))
        tests["test_gpu_huge_case"] = pytest.mark.parametrize("case, wrap, backend", [
            _param(c, w, b, detector=GPU_DETECTORS[b], role=_role(c),
                   extra_marks=[gpu, huge, pytest.mark.memory_backend(b)])
            for b in GPU_BACKENDS for c in every for w in WRAP_MODES])(_fresh(_test_gpu_huge_case))
    if safe:
        tests["test_static_check_flags_twin"] = pytest.mark.parametrize("case", [
            _param(c, detector="static", role="twin", extra_marks=[static]) for c in safe])(
            _fresh(_test_static_check_flags_twin))
        tests["test_interpreter_huge_case_catches_twin_wrap"] = pytest.mark.parametrize(
            "case, wrap", [_param(c, w, detector="interpreter huge", role="twin",
                                  extra_marks=[interp, huge]) for c in safe for w in WRAP_MODES])(
            _fresh(_test_interpreter_twin_wrap))
        tests["test_interpreter_huge_case_catches_twin_silent_corruption"] = \
            pytest.mark.parametrize("case", [
                _param(c, detector="interpreter huge", role="twin", extra_marks=[interp, huge])
                for c in safe])(_fresh(_test_interpreter_twin_silent))
        tests["test_gpu_huge_case_catches_twin"] = pytest.mark.parametrize(
            "case, wrap, backend", [
                _param(c, w, b, detector=GPU_DETECTORS[b], role="twin",
                       extra_marks=[gpu, huge, pytest.mark.memory_backend(b)])
                for b in GPU_BACKENDS for c in safe for w in WRAP_MODES])(_fresh(_test_gpu_twin))
    widenings = _widening_params(safe) if cls.widening_tests else []
    if widenings:
        tests["test_interpreter_huge_cases_catch_each_widening"] = pytest.mark.parametrize(
            "module, widening", [pytest.param(*p.values, id=p.id, marks=[
                *p.marks, pytest.mark.widening(detector="interpreter huge"), interp, huge])
                for p in widenings])(_fresh(_test_widening_interpreter))
        tests["test_gpu_huge_cases_catch_each_widening"] = pytest.mark.parametrize(
            "module, widening", [pytest.param(*p.values, id=p.id, marks=[
                *p.marks, pytest.mark.widening(detector="gpu aliased huge"), gpu, huge,
                pytest.mark.memory_backend("aliased-device")])
                for p in widenings])(_fresh(_test_widening_gpu))
    rows = [c for c in safe if isinstance(c, RowsCase)] if cls.small_batch_tests else []
    if rows:
        tests["test_small_batch_matches_reference"] = pytest.mark.parametrize("case", [
            _param(c, detector="correctness", role="fixed", extra_marks=[pytest.mark.correctness])
            for c in rows])(_fresh(_test_small_batch))
        tests["test_copied_row_matches_row_zero"] = pytest.mark.parametrize("case", [
            _param(c, detector="row-0 copy", role="fixed", extra_marks=[pytest.mark.correctness])
            for c in rows])(_fresh(_test_copied_row))
    if cls.compile_specs:
        tests["test_compiles_for_sm90"] = pytest.mark.parametrize(
            "spec", [pytest.param(s, id=s.id) for s in cls.compile_specs])(
            pytest.mark.static(_fresh(_test_compiles)))
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
    summary = case_summary(case, False)
    errors = [f for f in summary["findings"] if f["level"] == "error"]
    if expectation(case) == OVERFLOWS:
        if not errors:
            pytest.fail(f"{case.name} is declared expect=OVERFLOWS, but the static check finds no "
                        f"error in the kernels it launches ({', '.join(summary['kernels'])}): "
                        "if it is fixed, declare it SAFE\n" + summary["text"])
        _detail(request, f"overflows at {errors[0]['where']}: {errors[0]['kernel']}: "
                         f"`{errors[0]['product']}`")
        return
    assert summary["exit"] == 0, summary["text"]


def _test_static_check_flags_twin(self, case, request):
    """The static check flags every kernel the case launches from its int32 twin."""
    summary = case_summary(case, True)
    assert summary["exit"] == 1, summary["text"]
    flagged = {f["kernel"] for f in summary["findings"] if f["level"] == "error"}
    missed = [k for k in summary["kernels"] if k not in flagged]
    assert not missed, f"twin kernels without an error: {missed}\n{summary['text']}"


@functools.cache
def case_summary(case, twin):
    """``case_static.static_summary``, once per case and twin in this process."""
    from triton_overflow.case_static import static_summary
    try:
        return static_summary(case, twin)
    except RuntimeError as error:
        pytest.fail(str(error))


@functools.cache
def lint_summary(module, twins, widening=None):
    """The static check of ``module`` (dotted; its twin, or with ``widening`` the mutant that
    undoes only that widening), run in a child process without the interpreter, once a run."""
    arguments = {"module": module, "twins": twins, "widening": widening}

    def checked():
        outcome = run_isolated("triton_overflow.tiers:lint_module", arguments,
                               mode=mode.COMPILE, timeout=600)
        if outcome.status != "passed":
            pytest.fail(f"the static check of {module} did not run: {outcome.summary()}\n"
                        f"{outcome.output}")
        return outcome.value
    return shared.once(["lint_module", arguments], checked)


def lint_module(module, twins, widening=None):
    """Child side of ``lint_summary``: a JSON summary of the static check of one module."""
    import importlib.util

    from triton_overflow.lint import lint
    from triton_overflow.lint.report import as_text, shown
    from triton_overflow.twin import write_twin
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise LookupError(f"module {module} not found")
    path, only = spec.origin, None
    if widening is not None:
        from triton_overflow.twin import list_widenings
        path = str(write_twin(spec.origin, only=widening))
        only = _functions_reaching(spec.origin, list_widenings(spec.origin)[widening].line)
    report = lint([path], twins=twins, only=only)
    origin = {path: spec.origin}
    return {"exit": report.exit_code, "text": as_text(report, [path]),
            "kernels": [r.name for r in report.results],
            "variants": {r.name: [sorted([f"{shown(origin.get(file, file))}:{line}", product]
                                         for file, line, product in keys)
                                  for keys in r.per_variant] for r in report.results},
            "findings": [{"kernel": f.kernel,
                          "where": f"{shown(origin.get(f.file, f.file))}:{f.line}",
                          "product": f.product, "level": f.level} for f in report.findings]}


# --- huge cases ---------------------------------------------------------------------------

def run_huge(case, wrap, backend, twin=False, wrap_check=False, widening=None, env=None):
    """Run ``case`` in a child process; the ``Outcome``, or a skip with the reason. A device
    case first reserves its memory on a GPU of the run (``devices``)."""
    arguments = dict(case=case_reference(case), mode=wrap, backend=backend, twin=twin,
                     wrap_check=wrap_check, widening=widening)
    if backend == "lazy-host":
        outcome = run_isolated("triton_overflow.runner:run_case", arguments,
                               mode=mode.INTERPRETER, env=env, timeout=900)
    else:
        from triton_overflow.runner import bytes_needed, planned_run
        needed = bytes_needed(case, planned_run(case, wrap, "cpu", False), backend)
        try:
            with devices.reserve(needed, f"{case.name} {wrap} {backend}") as gpu:
                child_env = dict(env or {})
                if gpu is not None:
                    child_env["CUDA_VISIBLE_DEVICES"] = gpu
                outcome = run_isolated("triton_overflow.runner:run_case", arguments,
                                       mode=mode.DEVICE, env=child_env, timeout=900)
        except devices.NeverFits as reason:
            pytest.skip(str(reason))
    if outcome.status == "passed" and isinstance(outcome.value, dict) and \
            "skipped" in outcome.value:
        pytest.skip(outcome.value["skipped"])
    return outcome


_SANITIZER_LINE = re.compile(r"(?P<file>\S+\.py):(?P<line>\d+): (?P<function>\S+): block: "
                             r"\[(?P<block>[^\]]*)\], thread: \[(?P<thread>[^\]]*)\] Assertion "
                             r"`(?P<message>[^`]*overflow[^`]*)` failed")


def sanitizer_report(case, wrap, backend, twin=False):
    """Run the case again under Triton's overflow sanitizer (``TRITON_DEBUG=1``); one line per
    kernel line it stopped at: file:line, kernel, operation, the first block and thread."""
    from triton_overflow.lint.report import shown
    from triton_overflow.twin import twin_origin
    outcome = run_huge(case, wrap, backend, twin=twin, env={"TRITON_DEBUG": "1"})
    reports = {}
    for match in _SANITIZER_LINE.finditer(outcome.output):
        file, line = match["file"], int(match["line"])
        origin = twin_origin(file)
        key = (origin or file, line, match["message"])
        if key in reports:
            reports[key][1] += 1
            continue
        kernel = match["function"] if match["function"] != "unknown" else \
            _function_at(file, line)
        reports[key] = [f"{shown(origin or file)}:{line}: {kernel}: {match['message']}",
                        1, f"first at block [{match['block']}], thread [{match['thread']}]",
                        " [int32 twin]" if origin else ""]
    lines = [f"{text} ({where}; {count} report{'s' if count > 1 else ''}){twin}"
             for text, count, where, twin in reports.values()]
    return "\n".join(lines) or f"the sanitizer reported nothing ({outcome.summary()})"


def _functions_reaching(file, line):
    """The names of the functions of ``file`` that are, or call (through the file's other
    functions), the function holding ``line``: the kernels a change on that line can change.
    None when the line is in no function."""
    import ast
    tree = ast.parse(Path(file).read_text())
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    target = _function_at(file, line)
    if target not in functions:
        return None
    calls = {name: {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
                    if isinstance(n, (ast.Name, ast.Attribute))}
             for name, node in functions.items()}
    reaching, grew = {target}, True
    while grew:
        more = {name for name, used in calls.items() if used & reaching} - reaching
        reaching |= more
        grew = bool(more)
    return reaching


def _function_at(file, line):
    """The function whose body holds ``file:line``."""
    import ast
    try:
        tree = ast.parse(Path(file).read_text())
    except (OSError, SyntaxError):
        return "unknown kernel"
    inside = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
              and node.lineno <= line <= node.end_lineno]
    return min(inside, key=lambda n: n.end_lineno - n.lineno).name if inside else "unknown kernel"


def gpu_caught(outcome):
    """A GPU twin is caught by an illegal address, a fault signal or a wrong row; never by an
    out-of-memory kill or a timeout."""
    return outcome.faulted or outcome.wrong_row


def interpreter_caught(outcome):
    """An interpreted twin or mutant is caught by the wrap check, a wrong row, or a fault (a
    wrapped offset that left the tensor before the checked rows were reached)."""
    return outcome.wrapped or outcome.wrong_row or outcome.faulted


def how_caught(outcome):
    if outcome.wrapped:
        return "wrap check at " + _wrap_line(outcome.message)[:160]
    if outcome.faulted:
        return "a memory fault, a detection: " + outcome.summary()[:160]
    return outcome.summary()[:160]


def _interpreted_overflow(case, wrap, request):
    outcome = run_huge(case, wrap, "lazy-host", wrap_check=True)
    if outcome.wrapped:
        _detail(request, "overflows at " + _location(outcome.message))
        return
    pytest.fail(f"{case.name} is declared expect=OVERFLOWS, but its huge case did not overflow "
                f"({outcome.summary()}): if it is fixed, declare it SAFE\n{outcome.output}")


def _test_interpreter_huge_case(self, case, wrap, request):
    """The highest-offset rows equal row 0 and the reference; no i32 operation wraps."""
    if expectation(case) == OVERFLOWS:
        return _interpreted_overflow(case, wrap, request)
    outcome = run_huge(case, wrap, "lazy-host", wrap_check=True)
    assert outcome.status == "passed", outcome.summary() + "\n" + outcome.output
    request.node.user_properties.append((COST, {
        "case": f"{case.name} ({wrap})", "seconds": round(outcome.seconds, 1),
        **{key: outcome.value.get(key) for key in ("programs", "resident_gib", "phases")}}))


def _test_interpreter_twin_wrap(self, case, wrap):
    """On the int32 twin the wrap check stops at the wrapping product, naming the kernel line."""
    outcome = run_huge(case, wrap, "lazy-host", twin=True, wrap_check=True)
    assert outcome.wrapped, outcome.summary() + "\n" + outcome.output
    kernel_file = _module_file(case.module)
    assert f"int32 twin of {kernel_file}" in outcome.message, outcome.message


def _test_interpreter_twin_silent(self, case, request):
    """Without the wrap check, the aliased twin reads or writes a poisoned row (a wrong row),
    or faults on the way there."""
    outcome = run_huge(case, "aliased", "lazy-host", twin=True, wrap_check=False)
    if outcome.status == "passed":
        pytest.fail(f"the int32 twin of {case.module} gave right rows in the aliased mode, "
                    "although it read or wrote a poisoned row: the case's output may not "
                    "depend on the data it reads (noise that decides a sampled token, a mask "
                    "that hides the row): make it depend on the logits (a lower temperature, "
                    "a greedy path)")
    assert outcome.wrong_row or outcome.faulted, outcome.summary() + "\n" + outcome.output
    _detail(request, how_caught(outcome))


def _test_gpu_huge_case(self, case, wrap, backend, request):
    """On the device, the whole batch: the highest-offset rows equal row 0 and the reference."""
    outcome = run_huge(case, wrap, backend)
    if expectation(case) == OVERFLOWS:
        if gpu_caught(outcome):
            _detail(request, "overflows: " + outcome.summary()[:200])
            return
        pytest.fail(f"{case.name} is declared expect=OVERFLOWS, but its GPU huge case was not "
                    f"caught ({outcome.summary()}): if it is fixed, declare it SAFE")
    if isinstance(outcome.value, dict):
        request.node.user_properties.append(("case", outcome.value))
    if outcome.status != "passed" and request.config.getoption("--sanitize"):
        pytest.fail(f"{outcome.summary()}\nTriton's overflow sanitizer (TRITON_DEBUG=1):\n"
                    f"{sanitizer_report(case, wrap, backend)}\n{outcome.output}")
    assert outcome.status == "passed", outcome.summary() + "\n" + outcome.output


def _test_gpu_twin(self, case, wrap, backend, request):
    """On the device the int32 twin faults or produces a wrong row."""
    outcome = run_huge(case, wrap, backend, twin=True)
    request.node.user_properties.append(("twin_outcome", outcome.summary()[:300]))
    assert gpu_caught(outcome), outcome.summary() + "\n" + outcome.output


# --- per-widening mutants -----------------------------------------------------------------

INTERPRETER_ORACLES = (("negative", True), ("aliased", True), ("aliased", False))
GPU_ORACLES = (("negative", False), ("aliased", False))


def _widening_params(cases):
    from triton_overflow.twin import list_widenings
    params = []
    for module in dict.fromkeys(case.module for case in cases):
        file = _module_file(module)
        for index, widening in enumerate(list_widenings(file)):
            where = f"{_shown(file)}:{widening.line}"
            params.append(pytest.param(module, index, id=where, marks=[pytest.mark.widening_site(
                where=where, kernel=_function_at(file, widening.line), text=widening.text)]))
    return params


def _test_widening_interpreter(self, module, widening, request):
    """The mutant undoing only this widening is caught by a huge case in the interpreter."""
    _catch_widening(self, module, widening, request, "lazy-host", INTERPRETER_ORACLES,
                    interpreter_caught)


def _test_widening_gpu(self, module, widening, request):
    """The mutant undoing only this widening is caught by a huge case on the GPU: an illegal
    address or a wrong row, with no wrap check."""
    _catch_widening(self, module, widening, request, "aliased-device", GPU_ORACLES, gpu_caught)


def _catch_widening(test, module, widening, request, backend, oracles, caught):
    """A mutant must be caught when undoing the widening exposes an i32 product the module did
    not have (a product behind a flag the module already leaves i32 is not this widening's),
    and no bounded marker on the widening's line says it stays small. A catch counts when the
    wrap is at an exposed product, or when the case passes without the mutation."""
    from triton_overflow.lint.analysis import markers
    from triton_overflow.twin import list_widenings
    file = _module_file(module)
    site = list_widenings(file)[widening]
    bounded = markers(file, site.line)
    if bounded:
        product, reason = bounded[0]
        _detail(request, f"bounded: {product} by {reason}")
        return
    exposed = _exposed_products(module, widening)
    if not exposed:
        _detail(request, "redundant: without it no new i32 product reaches an address")
        return
    cases = [c for c in test.cases if c.module == module and expectation(c) == SAFE]
    tried = []
    # Each oracle over every case before the next oracle: a mutant that only some cases'
    # launches reach costs one run, not one per oracle, in each case that misses it.
    for wrap, wrap_check in oracles:
        for case in cases:
            outcome = run_huge(case, wrap, backend, twin=True, wrap_check=wrap_check,
                               widening=widening)
            if caught(outcome) and _attributable(outcome, exposed, case, wrap, backend,
                                                 wrap_check):
                _detail(request, f"caught by {case.name} ({wrap}): {how_caught(outcome)}")
                return
            tried.append(f"{case.name} ({wrap}{', wrap check' if wrap_check else ''}): "
                         f"{outcome.summary()[:160]}")
    pytest.fail(f"the mutant undoing {site.text} at {_shown(file)}:{site.line} survived every "
                f"huge case of {module}; it exposes {', '.join(sorted(exposed))}, which no case "
                f"drives past 2**31{_unlaunched_hint(cases, file, site.line)}:\n  "
                + "\n  ".join(tried))


def _exposed_products(module, widening):
    """``file:line`` of each i32 product the mutant has in a flag combination where the
    module has not (a product the module leaves i32 behind another flag value is not this
    widening's)."""
    before = lint_summary(module, False)["variants"]
    exposed = set()
    for kernel, variants in lint_summary(module, False, widening)["variants"].items():
        known = before.get(kernel, [])
        for index, pairs in enumerate(variants):
            had = {tuple(pair) for pair in known[index]} if index < len(known) else set()
            exposed |= {where for where, product in pairs if (where, product) not in had}
    return exposed


def _attributable(outcome, exposed, case, wrap, backend, wrap_check):
    """Whether a caught mutant was caught by its own widening: the wrap is at an exposed
    product, or the unmutated kernel passes the same run."""
    if outcome.wrapped and _location(outcome.message) in exposed:
        return True
    return run_huge(case, wrap, backend, wrap_check=wrap_check).status == "passed"


def _unlaunched_hint(cases, file, line):
    kernel = _function_at(file, line)
    launched = {name for c in cases for name in case_summary(c, False)["kernels"]}
    if kernel not in launched:
        names = ", ".join(c.name for c in cases) or "none"
        return (f" (no SAFE case launches {kernel}; the SAFE cases of this module: {names}: "
                "add a case that calls its launcher)")
    return (f" (a case launches {kernel}, but none plants a huge tensor that the exposed "
            "product indexes: add a case whose huge tensor is that one)")


def _shown(file):
    from triton_overflow.lint.report import shown
    return shown(file)


# --- small batches ------------------------------------------------------------------------

def _small_batch(case, device, rows, copy_row):
    import importlib

    from triton_overflow.runner import as_on_gpu, small_batch, small_run
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
    outcome = run_isolated("triton_overflow.gpu_compile:compile_for_gpu",
                           dict(kernel=spec.kernel, types=spec.types, constants=spec.constants,
                                num_warps=spec.num_warps), mode=mode.COMPILE, timeout=600)
    assert outcome.status == "passed", outcome.summary() + "\n" + outcome.output


# --- helpers ------------------------------------------------------------------------------

def _module_file(module):
    import importlib.util
    return str(Path(importlib.util.find_spec(module).origin).resolve())


def _location(message):
    """``file:line`` from an ``Int32WrapError`` message; a twin's line is given in the file
    it was derived from."""
    from triton_overflow.lint.report import shown
    from triton_overflow.twin import twin_origin
    head = message.split(" in ", 1)[0]
    try:
        file, line = head.rsplit(":", 1)
        return f"{shown(twin_origin(file) or file)}:{int(line)}"
    except ValueError:
        return head[:200]


def _wrap_line(message):
    """An ``Int32WrapError`` message with its location shortened: ``file:line: what wrapped``."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    what = first.split("): ", 1)[-1] if "): " in first else first.split(": ", 1)[-1]
    return f"{_location(first)}: {what}"


def _detail(request, text):
    request.node.user_properties.append((DETAIL, text))
