"""The static tier of one case: the kernels its launcher really launches, linted as launched.

A module can hold kernels a case never runs, or run one kernel with a flag that selects its
widening (``WIDEN=True`` from the fixed launcher, ``False`` from a buggy one). Linting the
whole module would judge the case by code it does not run, so the case's launch is run once
on a small batch in the interpreter and recorded (``triton_overflow.lint.record``), and
exactly the kernels it launched are compiled with the constexpr values and pointer types of
that launch. Every int argument stays i32, whatever its small value was (a launch with one
request would otherwise specialise ``num_reqs = 1`` and hide its products), and the levels are
the lint's own, or the exact answer at the case's ``limits``. The twin's check compiles the twin's kernels
as the case's recorded launch launched them: its launcher is the same host code.
"""

import functools
import importlib.util
from pathlib import Path

from triton_overflow.engine import session_values
from triton_overflow.engine.isolation import run_isolated
from triton_overflow.interp import execution_mode

SMALL_ROWS = 4


class StaticCheckError(RuntimeError):
    """The static check of a case or a module did not run; the message says why."""


def static_summary(case, twin):
    """The static check of the kernels ``case`` launches (of its int32 twin with ``twin``), as a
    JSON summary: exit code, text, kernels and findings; raises ``StaticCheckError`` with the
    reason when the launch or the check did not run."""
    from triton_overflow import triton_versions
    where = execution_mode.INTERPRETER
    if triton_versions.interpreter_problem() is not None:
        if not execution_mode.cuda_available():
            raise StaticCheckError(f"the static tier records {case.name}'s launch in the "
                                   "interpreter or on a GPU: "
                                   f"{triton_versions.interpreter_problem()}, and "
                                   "no CUDA device is visible")
        where = execution_mode.DEVICE
    records = _small_launch_records(case, where)
    if twin:
        records = _as_twin(records, case)
    checked = run_isolated("triton_overflow.engine.case_static:lint_records",
                           {"records": records, "limits": dict(case.limits)},
                           mode=execution_mode.COMPILE, timeout=600)
    if not checked.passed:
        raise StaticCheckError(f"the static check of {case.name}'s kernels did not run: "
                               f"{checked.summary()}\n{checked.output}")
    return checked.value


@functools.cache
def _small_launch_records(case, where):
    """The kernels ``case``'s launcher launches on a small batch, recorded in a child process
    (once per case in a run: the static checks of the case and of its twin share it)."""
    from triton_overflow.cases import case_reference
    reference = case_reference(case)

    def recorded():
        outcome = run_isolated("triton_overflow.engine.case_static:record_small_launch",
                               {"case": reference}, mode=where, timeout=600)
        if not outcome.passed:
            raise StaticCheckError(f"the small launch of {case.name} that the static tier "
                                   f"records did not run: {outcome.summary()}\n"
                                   f"{outcome.output}")
        if not outcome.value:
            raise StaticCheckError(f"the small launch of {case.name} launched no Triton kernel")
        return outcome.value
    return session_values.once(["small_launch", reference, where], recorded)


def _as_twin(records, case):
    """The records of the case's int32 twin: the same launcher makes the same launches (the
    constexprs, types and grids are the host's), of the twin's kernels where the case's
    module defines them."""
    from triton_overflow.locations import module_file
    from triton_overflow.twin import write_twin
    origin = module_file(case.module)
    twin_file = None
    twins = []
    for record in records:
        if str(Path(record["file"]).resolve()) == origin:
            twin_file = twin_file or str(write_twin(origin))
            record = {**record, "file": twin_file}
        twins.append(record)
    return twins


def record_small_launch(case):
    """Child side: run ``case`` on a small batch (in the interpreter, or on the GPU where the
    interpreter cannot run); the launch records."""
    import importlib

    from triton_overflow.cases import resolve_case
    from triton_overflow.engine.runner import as_on_gpu, small_batch, small_run
    from triton_overflow.lint import record
    record.install()
    case = resolve_case(case)
    run = small_run(case, "cpu" if execution_mode.interpreted() else "cuda", SMALL_ROWS)
    huge = small_batch(case, run)
    kernels = importlib.import_module(case.module)
    with as_on_gpu(case, run.interpreted):
        inputs = case.prepare(huge, run)
        case.launch(kernels, huge, run, **inputs)
    triton_dir = str(Path(importlib.import_module("triton").__file__).parent)
    return [{k: v for k, v in r.items() if k != "pid"} for r in record.recorded()
            if not r["file"].startswith(triton_dir)]


def lint_records(records, limits):
    """Child side: the lint of each recorded kernel, compiled as it was launched, judged by
    the lint's levels or at ``limits``."""
    from triton_overflow.lint import Report
    from triton_overflow.lint.launches import check_records, from_dict, parse_limits
    from triton_overflow.lint.report import as_text
    from triton_overflow.locations import shown
    from triton_overflow.twin import twin_origin
    facts = [parse_limits(",".join(f"{k}={v}" for k, v in limits.items()))] if limits else []
    report = check_records([from_dict(record, facts) for record in records],
                           Report(label="launched kernels"), small_ints_are_i32=True)
    files = sorted({r["file"] for r in records})
    return {"exit": report.exit_code, "text": as_text(report, files),
            "kernels": [r.name for r in report.results],
            "findings": [{"kernel": f.kernel,
                          "where": f"{shown(twin_origin(f.file) or f.file)}:{f.line}",
                          "product": f.product, "level": f.level} for f in report.findings]}


@functools.cache
def case_summary(case, twin):
    """``static_summary``, once per case and twin in this process."""
    return static_summary(case, twin)


@functools.cache
def lint_summary(module, twins, widening=None):
    """The static check of ``module`` (dotted; its twin, or with ``widening`` the mutant that
    undoes only that widening), run in a child process without the interpreter, once a run;
    ``StaticCheckError`` when it did not run."""
    arguments = {"module": module, "twins": twins, "widening": widening}

    def checked():
        outcome = run_isolated("triton_overflow.engine.case_static:module_summary", arguments,
                               mode=execution_mode.COMPILE, timeout=600)
        if not outcome.passed:
            raise StaticCheckError(f"the static check of {module} did not run: "
                                   f"{outcome.summary()}\n{outcome.output}")
        return outcome.value
    return session_values.once(["module_summary", arguments], checked)


def module_summary(module, twins, widening=None):
    """A JSON summary of the static check of ``module`` (dotted; its twins with ``twins``, or with
    ``widening`` the mutant that undoes only that widening)."""
    from triton_overflow.lint import lint
    from triton_overflow.lint.report import as_text
    from triton_overflow.locations import functions_reaching, shown
    from triton_overflow.twin import write_twin
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise LookupError(f"module {module} not found")
    path, only = spec.origin, None
    if widening is not None:
        from triton_overflow.twin import list_widenings
        path = str(write_twin(spec.origin, only=widening))
        only = functions_reaching(spec.origin, list_widenings(spec.origin)[widening].line)
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
