"""The pytest plugin of triton_overflow, loaded through the ``pytest11`` entry point.

It chooses where kernels run before any test module imports one
(``triton_overflow.interp.execution_mode``: Triton's CPU interpreter without a CUDA device, the
device with one), registers the markers, the hypothesis profiles (``dev``, ``ci``, ``nightly``:
pick one with hypothesis's own ``--hypothesis-profile``), writes the report header, skips what
this machine cannot run with the reason, and collects the kernel x detector outcomes behind
``triton-overflow validate``. Disable it with ``-p no:triton_overflow``.
"""

import functools
import os
import sys

import pytest

from triton_overflow.engine import devices
from triton_overflow.interp import execution_mode

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
    "needs(text)": "what a test needs to run, added to the reason when it is skipped",
    "start_early(rank)": "a long test, started before the others under pytest-xdist (rank 0 "
                         "first; within a rank, the larger kernel files first)",
}
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
    group.addoption("--overflow-progress", action="store_true", default=False,
                    help="print a line as each kernel x detector cell of the report completes "
                    "(its verdict, seconds, and how many cells are left)")
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
    # A worker of this session is a child of its controller; a pytest that a test starts
    # inherits the variable from the worker it runs in, and is a session of its own.
    if worker and devices.session() == str(os.getppid()):
        devices.pin_worker(worker)  # before anything in this process starts CUDA
    else:
        devices.start_run()
    requested = (early_config.known_args_namespace.overflow_mode
                 or early_config.getini("overflow_mode") or "auto")
    early_config._overflow_mode = execution_mode.configure(requested)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: sized to the CPUs, and on a GPU runner to the devices' free memory (unless
    PYTEST_XDIST_AUTO_NUM_WORKERS says, as pytest-xdist documents)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return devices.auto_workers()


def pytest_configure(config):
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    from triton_overflow.cases import set_expectations
    try:
        set_expectations(config.getoption("overflow_expect") + config.getini("overflow_expect"))
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    from triton_overflow.plugin.detector_report import REPORT, DetectorReport
    report = DetectorReport(config, config.getoption("--detector-report"),
                            config.getoption("--overflow-progress"))
    config.stash[REPORT] = report
    config.pluginmanager.register(report, "triton-overflow-report")


def pytest_report_header(config):
    from hypothesis import settings

    from triton_overflow import triton_versions
    from triton_overflow.engine.machine import describe
    facts = describe()
    versions = ", ".join(f"{name} {facts[name]}" for name in ("torch", "triton", "hypothesis",
                                                               "python"))
    lines = [f"triton-overflow: GPU: {facts['GPU']}", f"triton-overflow: versions: {versions}",
             "triton-overflow: kernels run "
             f"{'in the interpreter' if execution_mode.interpreted() else 'natively'}"
             f"; hypothesis profile: {_profile_name(settings)} "
             f"(choose with --hypothesis-profile)"]
    for tier, problem in _unavailable_tiers().items():
        lines.append(f"triton-overflow: {tier} cannot run here: {problem}")
    try:
        triton_versions.check_supported()
    except triton_versions.UnsupportedTriton as error:
        lines.append(f"triton-overflow: {error}")
    return lines


def _profile_name(settings):
    getter = getattr(settings, "get_current_profile_name", None)
    return getter() if getter else getattr(settings, "_current_profile", "default")


def _unavailable_tiers():
    from triton_overflow import triton_versions
    problems = {}
    interpreter = triton_versions.interpreter_problem()
    if interpreter:
        problems["the interpreter tier"] = interpreter
    if not execution_mode.cuda_available():
        problems["the gpu tier"] = "needs a CUDA device; none visible here (run on a GPU runner)"
    return problems


def pytest_collection_modifyitems(config, items):
    unavailable = _unavailable_tiers()
    require_gpu = config.getoption("--require-gpu")
    if require_gpu and "the gpu tier" in unavailable:
        raise pytest.UsageError("--require-gpu: the gpu tier was asked for, but "
                                + unavailable["the gpu tier"])
    from triton_overflow.engine.memory import BACKENDS
    from triton_overflow.plugin.detector_report import detectors
    known = detectors()
    keep, dropped = [], []
    for item in items:
        for covers in item.iter_markers("covers"):
            if covers.kwargs.get("detector") not in known:
                raise pytest.UsageError(
                    f"{item.nodeid}: covers(detector={covers.kwargs.get('detector')!r}) names "
                    f"no detector; known: {', '.join(known)}")
        backend = item.get_closest_marker("memory_backend")
        if backend and backend.args[0] not in BACKENDS:
            raise pytest.UsageError(f"{item.nodeid}: memory_backend({backend.args[0]!r}) names "
                                    f"no memory backend; known: {', '.join(BACKENDS)}")
        opt_in = backend and BACKENDS[backend.args[0]].opt_in
        if opt_in and not config.getoption(opt_in):
            dropped.append(item)
            continue
        keep.append(item)
        needs = item.get_closest_marker("needs")
        needs = f" (this test needs {needs.args[0]})" if needs else ""
        if "gpu" in item.keywords and "the gpu tier" in unavailable:
            item.add_marker(pytest.mark.skip(reason=unavailable["the gpu tier"] + needs))
        elif "interp" in item.keywords and "the interpreter tier" in unavailable:
            item.add_marker(pytest.mark.skip(reason=unavailable["the interpreter tier"] + needs))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    workers = getattr(config, "workerinput", {}).get("workercount", 0)
    if workers:
        items[:] = _dealt(items, workers)


def _dealt(items, workers):
    """The order for pytest-xdist's worksteal, which gives each worker a contiguous share of
    the list and lets idle workers steal from the end of others': each share starts with its
    part of the long tests, longest first, dealt round, and goes on with a run of the others
    in file order (a family's tests together, so that its kernels compile once into Triton's
    cache)."""
    rank = {item: _longest_first(item) for item in items}
    long = sorted((item for item in items if rank[item] is not None), key=rank.get)
    rest = [item for item in items if rank[item] is None]
    share = -(-len(rest) // workers)
    return [item for worker in range(workers)
            for item in long[worker::workers] + rest[worker * share:(worker + 1) * share]]


def _longest_first(item):
    """(rank, larger files first) of a test marked ``start_early``, else None."""
    early = item.get_closest_marker("start_early")
    if early is None:
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    module = (getattr(params.get("case"), "module", None) or params.get("module")
              or getattr(params.get("spec"), "kernel", "").partition(":")[0])
    return (early.args[0], -_file_size(module) if isinstance(module, str) and module else 0)


@functools.cache
def _file_size(module):
    import importlib.util
    try:
        return os.path.getsize(importlib.util.find_spec(module).origin)
    except (ImportError, AttributeError, OSError, ValueError):
        return 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and "gpu" in item.keywords and item.config.getoption("--require-gpu")
            and report.when in ("setup", "call")):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"--require-gpu: this gpu test was skipped: {reason}"


def pytest_unconfigure(config):
    from triton_overflow.engine import session_values
    session_values.clear()  # only where the run started
    isolation = sys.modules.get("triton_overflow.engine.isolation")
    if isolation is not None:  # before xdist ends this process, which would orphan them
        isolation.shut_down_servers()


def pytest_terminal_summary(terminalreporter, config):
    ran = devices.ran_per_device()
    if any(ran.values()):
        terminalreporter.write_line("triton-overflow: huge cases per GPU: " + ", ".join(
            f"{device}: {count}" for device, count in ran.items()))


@pytest.fixture(scope="session")
def kernel_device():
    """Where kernels run in this process: the GPU natively, else the CPU interpreter."""
    import torch
    native = torch.cuda.is_available() and not execution_mode.interpreted()
    return torch.device("cuda" if native else "cpu")
