"""The pytest plugin of triton_overflow, loaded through the ``pytest11`` entry point.

It chooses where kernels run before any test module imports one (``triton_overflow.mode``:
Triton's CPU interpreter without a CUDA device, the device with one), registers the markers,
the hypothesis profiles (``dev``, ``ci``, ``nightly``: pick one with hypothesis's own
``--hypothesis-profile``), writes the report header, skips what this machine cannot run with
the reason, and collects the kernel x detector outcomes behind ``triton-overflow validate``.
Disable it with ``-p no:triton_overflow``.
"""

import json
import os
from collections import defaultdict

import pytest

from triton_overflow import devices, mode

MARKERS = {
    "correctness": "kernels against their float64 reference (interpreter on a CPU, native on a GPU)",
    "validation": "bad arguments raise ValueError before any launch",
    "static": "static checks on the CPU: TTIR lint, sm_90 compile (no GPU needed)",
    "interp": "huge cases in Triton's CPU interpreter on lazily allocated memory",
    "gpu": "needs a CUDA device",
    "huge": "a tensor past 2**31 elements (gated on free memory)",
    "selftest": "checks of the suite itself (fault isolation, detectors on planted bugs)",
    "covers(kernel, detector, role)": "the kernel x detector cell of the validation report "
                                      "this test fills",
    "memory_backend(name)": "the device memory backend a GPU huge case runs on",
    "widening(detector)": "the widening x detector cell of the validation report this test fills",
    "widening_site(where, kernel, text)": "the widening (file:line) a mutant test undoes",
}
CELL = "overflow-cell"
WIDENING_CELL = "overflow-widening"
DENSE = "dense-device"


def _register_profiles():
    from hypothesis import HealthCheck, settings
    slow_ok = [HealthCheck.too_slow, HealthCheck.data_too_large]
    settings.register_profile("dev", max_examples=15, deadline=None,
                              suppress_health_check=slow_ok)
    settings.register_profile("ci", max_examples=12, deadline=None, derandomize=True,
                              print_blob=True, suppress_health_check=slow_ok)
    settings.register_profile("nightly", max_examples=300, deadline=None, print_blob=True,
                              suppress_health_check=slow_ok)


_register_profiles()


def pytest_addoption(parser):
    group = parser.getgroup("triton-overflow", "int32 offset overflow checks (triton_overflow)")
    group.addoption("--overflow-mode", choices=("auto", "interpreter", "device"), default=None,
                    help="where kernels run: auto (the device when CUDA is visible, else "
                    "Triton's CPU interpreter), interpreter or device; ini: overflow_mode")
    group.addoption("--require-gpu", action="store_true", default=False,
                    help="fail, instead of skipping, every gpu test that cannot run here (no "
                    "device, too little memory)")
    group.addoption("--dense-huge", action="store_true", default=False,
                    help="also run the GPU huge cases on dense device memory (9-18 GiB each); "
                    "by default they run on virtual memory only")
    group.addoption("--sanitize", action="store_true", default=False,
                    help="when a GPU huge case fails, run it again with Triton's overflow "
                    "sanitizer (TRITON_DEBUG=1) and put the kernel, line and operation it "
                    "reports in the failure")
    group.addoption("--detector-report", metavar="PATH", default=None,
                    help="write the kernel x detector outcomes of this run as JSON to PATH")
    group.addoption("--overflow-expect", metavar="CASE_GLOB=safe|overflows", action="append",
                    default=[], help="override the `expect` of the cases whose name matches "
                    "CASE_GLOB for this run (repeatable; the first match wins), e.g. to run one "
                    "set of cases against a fixed and a buggy copy of an engine; ini: "
                    "overflow_expect")
    parser.addini("overflow_mode", "where kernels run (auto, interpreter, device)", default="auto")
    parser.addini("overflow_expect", "CASE_GLOB=safe|overflows lines overriding cases' expect",
                  type="linelist", default=[])


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # Before any conftest.py is imported: one that imports Triton would otherwise decorate
    # Triton's own library functions (tl.zeros, ...) before the interpreter flag is set, and
    # kernels then fail in the interpreter with "Cannot call @triton.jit'd outside of the
    # scope of a kernel" (pytest-xdist workers hid it: they inherit the flag).
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        devices.pin_worker(worker)  # before anything in this process starts CUDA
    else:
        devices.start_run()
    requested = (early_config.known_args_namespace.overflow_mode
                 or early_config.getini("overflow_mode") or "auto")
    early_config._overflow_mode = mode.configure(requested)


def pytest_configure(config):
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    from triton_overflow.cases import set_expectations
    try:
        set_expectations(config.getoption("overflow_expect") + config.getini("overflow_expect"))
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    config._overflow_cells = defaultdict(list)
    config._overflow_widenings = []
    config._overflow_collection_errors = []


def pytest_report_header(config):
    from hypothesis import settings

    from triton_overflow import compat
    from triton_overflow.environment import describe
    facts = describe()
    versions = ", ".join(f"{name} {facts[name]}" for name in ("torch", "triton", "hypothesis",
                                                               "python"))
    lines = [f"triton-overflow: GPU: {facts['GPU']}", f"triton-overflow: versions: {versions}",
             f"triton-overflow: kernels run {'in the interpreter' if mode.interpreted() else 'natively'}"
             f"; hypothesis profile: {_profile_name(settings)} "
             f"(choose with --hypothesis-profile)"]
    for tier, problem in _unavailable_tiers().items():
        lines.append(f"triton-overflow: {tier} cannot run here: {problem}")
    try:
        compat.check_supported()
    except compat.UnsupportedTriton as error:
        lines.append(f"triton-overflow: {error}")
    return lines


def _profile_name(settings):
    getter = getattr(settings, "get_current_profile_name", None)
    return getter() if getter else getattr(settings, "_current_profile", "default")


def _unavailable_tiers():
    from triton_overflow import compat
    problems = {}
    interpreter = compat.interpreter_problem()
    if interpreter:
        problems["the interpreter tier"] = interpreter
    if not mode.cuda_available():
        problems["the gpu tier"] = "needs a CUDA device; none visible here (run on a GPU runner)"
    return problems


def pytest_collection_modifyitems(config, items):
    unavailable = _unavailable_tiers()
    require_gpu = config.getoption("--require-gpu")
    if require_gpu and "the gpu tier" in unavailable:
        raise pytest.UsageError("--require-gpu: the gpu tier was asked for, but "
                                + unavailable["the gpu tier"])
    keep, dropped = [], []
    for item in items:
        backend = item.get_closest_marker("memory_backend")
        if backend and backend.args[0] == DENSE and not config.getoption("--dense-huge"):
            dropped.append(item)
            continue
        keep.append(item)
        if "gpu" in item.keywords and "the gpu tier" in unavailable:
            item.add_marker(pytest.mark.skip(reason=unavailable["the gpu tier"]))
        elif "interp" in item.keywords and "the interpreter tier" in unavailable:
            item.add_marker(pytest.mark.skip(reason=unavailable["the interpreter tier"]))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and "gpu" in item.keywords and item.config.getoption("--require-gpu")
            and report.when in ("setup", "call")):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"--require-gpu: this gpu test was skipped: {reason}"
    cells = []
    detail = next((value for name, value in item.user_properties if name == "overflow-detail"),
                  "")
    for mark in item.iter_markers("covers"):
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            reason = _reason(report)
            cells.append((CELL, {"kernel": mark.kwargs["kernel"],
                                 "detector": mark.kwargs["detector"],
                                 "role": mark.kwargs.get("role", "fixed"),
                                 "outcome": report.outcome, "reason": reason, "detail": detail,
                                 "test": item.nodeid,
                                 "peak_gib": _peak(item)}))
    site, widening = item.get_closest_marker("widening_site"), item.get_closest_marker("widening")
    if site and widening and (report.when == "call" or (report.when == "setup" and
                                                        report.outcome != "passed")):
        cells.append((WIDENING_CELL, {**site.kwargs, "detector": widening.kwargs["detector"],
                                      "outcome": report.outcome, "reason": _reason(report),
                                      "detail": detail, "test": item.nodeid}))
    if cells:
        # Carried on the report, so that with pytest-xdist the outcomes reach the controller.
        report.user_properties = [*report.user_properties, *cells]


def _reason(report):
    """One line saying why a test was skipped or failed: the skip reason, or the first line of
    the failure's message (the wrap, the row, the fault), not the line that raised it."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return report.longrepr[2].removeprefix("Skipped: ")
    if not report.failed:
        return ""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None and crash.message else str(report.longrepr)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for prefix in ("Failed: ", "AssertionError: "):
        lines = [line.removeprefix(prefix) for line in lines]
    return (lines[0] if lines else "failed")[:300]


def pytest_collectreport(report):
    config = _config_of(report)
    if report.failed and config is not None:
        text = str(report.longrepr).strip().splitlines()
        error = next((line.lstrip("E ").strip() for line in reversed(text)
                      if line.startswith("E ")), text[-1] if text else "collection failed")
        config._overflow_collection_errors.append({"test": report.nodeid, "reason": error[:300]})


def pytest_terminal_summary(terminalreporter, config):
    known = sorted((kernel, detector, result["detail"])
                   for (kernel, detector), results in getattr(config, "_overflow_cells", {}).items()
                   for result in results
                   if result["role"] == "overflow" and result["outcome"] == "passed"
                   and result.get("detail"))
    if known:
        terminalreporter.write_line("triton-overflow: known overflows (expect=OVERFLOWS, caught):")
        for kernel, detector, detail in dict.fromkeys(known):
            terminalreporter.write_line(f"  {kernel}: {detector}: {detail}")
    ran = devices.ran_per_device()
    if any(ran.values()):
        terminalreporter.write_line("triton-overflow: huge cases per GPU: " + ", ".join(
            f"{device}: {count}" for device, count in ran.items()))


def _peak(item):
    for name, value in item.user_properties:
        if name == "case" and isinstance(value, dict):
            return value.get("peak_gib")
    return None


def pytest_runtest_logreport(report):
    cells = getattr(_config_of(report), "_overflow_cells", None)
    if cells is None:
        return
    for name, cell in report.user_properties:
        if name == CELL:
            cell = dict(cell)
            cells[(cell.pop("kernel"), cell.pop("detector"))].append(cell)
        elif name == WIDENING_CELL:
            _config_of(report)._overflow_widenings.append(dict(cell))


_CONFIG = []


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG[:] = [session.config]


def _config_of(report):
    return _CONFIG[0] if _CONFIG else None


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--detector-report")
    if path and not hasattr(session.config, "workerinput"):
        rows = [{"kernel": kernel, "detector": detector, "results": results}
                for (kernel, detector), results in sorted(session.config._overflow_cells.items())]
        with open(path, "w") as handle:
            json.dump({"exitstatus": int(exitstatus), "cells": rows,
                       "widenings": session.config._overflow_widenings,
                       "collection_errors": session.config._overflow_collection_errors},
                      handle, indent=1)


@pytest.fixture(scope="session")
def kernel_device():
    """Where kernels run in this process: the GPU natively, else the CPU interpreter."""
    import torch
    return torch.device("cpu" if mode.interpreted() or not torch.cuda.is_available() else "cuda")
