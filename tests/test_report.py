"""The run's own machinery: the detector report across pytest-xdist workers, with a line per
completed cell; ``-n auto`` sized to the machine; child processes forked from a server that
has imported torch and Triton in the child's mode; values a run's processes compute once."""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from tests.lint_cli import run_module
from triton_overflow.engine import devices
from triton_overflow.engine.isolation import Outcome, run_isolated

pytestmark = pytest.mark.selftest

CELLS = '''
import pytest

@pytest.mark.covers(kernel="k", detector="static")
@pytest.mark.covers(kernel="k", detector="static")
def test_fixed():
    pass

@pytest.mark.covers(kernel="k", detector="static", role="twin")
def test_twin():
    pass

@pytest.mark.covers(kernel="k", detector="correctness")
@pytest.mark.parametrize("x", [1, 2, 3])
def test_rows(x):
    assert x != 3, "row 3 differs"

@pytest.mark.covers(kernel="k", detector="validation")
def test_skipped():
    pytest.skip("needs a CUDA device")
'''


def test_the_report_gathers_every_workers_cells_and_says_when_each_completes(tmp_path):
    (tmp_path / "test_cells.py").write_text(CELLS)
    report = tmp_path / "report.json"
    outside = {k: v for k, v in os.environ.items()
               if k not in (devices.RUN_VARIABLE, devices.SESSION_VARIABLE, devices.GPUS_VARIABLE)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
                           "--overflow-progress", f"--detector-report={report}", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=outside)
    assert done.returncode == 1, done.stdout + done.stderr
    progress = sorted(line.split("] ", 1)[1] for line in done.stdout.splitlines()
                      if line.startswith("triton-overflow: ["))
    assert [line.split(" (")[0] for line in progress] == [
        "k, correctness: FAILED", "k, static: passed, twin caught",
        "k, validation: skipped: needs a CUDA device"], done.stdout
    assert all(line.endswith("cells to go)") for line in progress)
    cells = {c["detector"]: c["results"] for c in json.loads(report.read_text())["cells"]}
    assert sorted(r["outcome"] for r in cells["correctness"]) == ["failed", "passed", "passed"]
    assert [r["reason"] for r in cells["correctness"] if r["outcome"] == "failed"] == [
        "row 3 differs"]
    assert {r["role"] for r in cells["static"]} == {"fixed", "twin"}


def test_auto_workers_are_the_cpus_without_a_gpu_and_what_free_device_memory_holds(
        tmp_path, monkeypatch):
    cpus = len(os.sched_getaffinity(0))
    monkeypatch.delenv(devices.RUN_VARIABLE, raising=False)
    assert devices.auto_workers() == cpus
    monkeypatch.setenv(devices.RUN_VARIABLE, f"selftest-{os.getpid()}")
    budget = devices._budget_path()
    try:
        for free_gib, expected in ((4.5, 4), (0.5, 1), (100, devices.WORKERS_PER_GPU)):
            budget.write_text(json.dumps({"devices": {"0": {
                "name": "H200", "capacity": int(free_gib * 2**30), "total": 140 * 2**30}}}))
            assert devices.auto_workers() == min(cpus, expected)
    finally:
        budget.unlink(missing_ok=True)


def test_n_auto_takes_the_suites_worker_count(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    run = f"selftest-auto-{os.getpid()}"
    budget = devices.run_path(".json", run)  # where that run's budget is read from
    budget.write_text(json.dumps({"devices": {"0": {"name": "small GPU", "capacity": 2**30,
                                                    "total": 16 * 2**30}},
                                  "reservations": {}, "ran": {"0": 0}}))
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n",
                               "auto"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={**os.environ, devices.RUN_VARIABLE: run})
    finally:
        budget.unlink(missing_ok=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "created: 1/1 worker" in done.stdout, done.stdout


def server_state():
    """Child side: what a forked child inherits. Triton decorates its own library functions
    as it is imported, interpreted or not: they show whether it was imported in this mode."""
    import triton.language as tl
    import triton
    return {"library": type(tl.standard.sum).__name__, "torch": "torch" in sys.modules,
            "debug": triton.knobs.runtime.debug if hasattr(triton, "knobs") else None,
            "pid": os.getpid(), "cwd": os.getcwd(), "marker": os.environ.get("SELFTEST_MARKER")}


def test_children_import_triton_in_their_own_mode_and_get_the_parents_environment():
    first = run_isolated("tests.test_report:server_state", mode="interpreter",
                         env={"SELFTEST_MARKER": "one", "TRITON_DEBUG": "1"})
    second = run_isolated("tests.test_report:server_state", mode="compile")
    assert first.status == second.status == "passed", first.output + second.output
    assert first.value["torch"]
    assert (first.value["library"], second.value["library"]) == ("InterpretedFunction",
                                                                 "JITFunction")
    assert first.value["pid"] != second.value["pid"] != os.getpid()
    assert first.value["cwd"] == os.getcwd()
    assert (first.value["debug"], second.value["debug"]) in ((True, False), (None, None))
    assert (first.value["marker"], second.value["marker"]) == ("one", None)


def sleeps():
    import time
    time.sleep(60)


def cannot_run():
    from triton_overflow.engine.isolation import Skipped
    raise Skipped("no room for the case here")


def skips_as_a_test_would():
    pytest.skip("a test's own skip")


def test_a_child_that_cannot_run_is_a_skipped_outcome_and_only_the_engines_skip_is_one():
    """The engine's ``Skipped`` comes back as a skipped outcome with its reason (not a value
    inside a passed one); any other exception, pytest's own skip included, is a failure."""
    skipped = run_isolated("tests.test_report:cannot_run", mode="compile", timeout=60)
    assert skipped.skipped and skipped.message == "no room for the case here", skipped.summary()
    assert skipped.summary() == "skipped: no room for the case here"
    other = run_isolated("tests.test_report:skips_as_a_test_would", mode="compile", timeout=60)
    assert other.status == "failed" and other.error == "Skipped", other.summary()


def test_quick_children_come_back_at_once():
    # Both reply lines of a child that ends at once arrive together; each must still be read.
    for _ in range(10):
        quick = run_isolated("tests.test_report:server_state", mode="compile", timeout=60)
        assert quick.status == "passed" and quick.seconds < 30, quick.summary()


def test_a_misspelt_detector_fails_collection_with_the_detectors_known(tmp_path):
    (tmp_path / "test_misspelt.py").write_text(
        "import pytest\n\n\n@pytest.mark.covers(kernel='k', detector='corectness')\n"
        "def test_cell():\n    pass\n")
    outside = {k: v for k, v in os.environ.items()
               if k not in (devices.RUN_VARIABLE, devices.SESSION_VARIABLE, devices.GPUS_VARIABLE)}
    done = run_module("pytest", "-p", "no:cacheprovider", "-q", cwd=tmp_path, env=outside)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "covers(detector='corectness') names no detector; known: correctness, row-0 copy" \
        in done.stderr, done.stderr


SESSION_PROBE = """
import os


def test_session():
    controller = os.getppid() if os.environ["PROBE_UNDER_XDIST"] == "1" else os.getpid()
    assert os.environ["TRITON_OVERFLOW_SESSION"] == str(controller)
"""


@pytest.mark.start_early(3)  # among the longest tests: not left for the end
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["alone", "under-xdist"])
def test_a_pytest_started_inside_a_worker_is_a_session_of_its_own(tmp_path, workers):
    """A test that starts pytest passes on its worker's variables: that pytest is a session of
    its own (its shared values are its own), while xdist's real workers join their
    controller's."""
    (tmp_path / "test_probe.py").write_text(SESSION_PROBE)
    inherited = {**os.environ, "PYTEST_XDIST_WORKER": "gw0",
                 devices.SESSION_VARIABLE: "1",  # as a test running in a worker has them
                 "PROBE_UNDER_XDIST": "1" if workers else "0"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           *workers], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=inherited)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_child_past_its_timeout_is_killed_and_the_next_one_runs():
    late = run_isolated("tests.test_report:sleeps", mode="interpreter", timeout=2)
    assert late.status == "timeout" and late.seconds < 30
    assert run_isolated("tests.test_report:server_state", mode="interpreter").status == "passed"


def test_a_shared_value_is_computed_once_a_session(monkeypatch):
    """Once in a pytest session, its workers included; a pytest started inside a test (a
    session of its own in the same run) computes its own: its code may have changed."""
    from triton_overflow.engine import session_values
    monkeypatch.setenv(devices.RUN_VARIABLE, f"selftest-shared-{os.getpid()}")
    monkeypatch.setenv(devices.SESSION_VARIABLE, "1")  # a session this process does not control
    calls = []

    def compute():
        calls.append(1)
        return {"findings": len(calls)}
    try:
        assert session_values.once(["lint", "kernels.min_p"], compute) == {"findings": 1}
        assert session_values.once(["lint", "kernels.min_p"], compute) == {"findings": 1}
        assert session_values.once(["lint", "kernels.gumbel"], compute) == {"findings": 2}
        session_values.clear()  # not this process's session: kept
        assert session_values.once(["lint", "kernels.min_p"], compute) == {"findings": 1}
        monkeypatch.setenv(devices.SESSION_VARIABLE, "2")  # a pytest inside a test
        assert session_values.once(["lint", "kernels.min_p"], compute) == {"findings": 3}
        monkeypatch.setenv(devices.SESSION_VARIABLE, "1")
    finally:
        monkeypatch.setenv(devices.SESSION_VARIABLE, str(os.getpid()))
        session_values.clear()
    assert session_values.once(["lint", "kernels.min_p"], compute) == {"findings": 4}
    session_values.clear()
    for left in devices.run_path("").parent.glob(devices.run_path(".shared-*").name):
        shutil.rmtree(left)  # the sessions this process does not control


def test_the_kernels_own_huge_run_is_made_once_a_run_and_read_back_whole(monkeypatch):
    """The huge case's test and a widening test asking the same run share one child; what the
    second reads is the outcome the first saw, fault signal and all."""
    from tests.cases.min_p import MIN_P
    from triton_overflow.engine import runner, session_values
    monkeypatch.setenv(devices.RUN_VARIABLE, f"selftest-kernel-outcome-{os.getpid()}")
    monkeypatch.setenv(devices.SESSION_VARIABLE, str(os.getpid()))
    runs = []

    def run_huge(case, wrap, backend, wrap_check=False):
        runs.append((case.name, wrap, backend, wrap_check))
        return Outcome("crashed", 2.5, message="killed by SIGSEGV", returncode=-signal.SIGSEGV,
                       fields={"gpu": "0"})
    monkeypatch.setattr(runner, "run_huge", run_huge)
    try:
        first = runner.kernel_outcome(MIN_P, "aliased", "aliased-device")
        again = runner.kernel_outcome(MIN_P, "aliased", "aliased-device")
        checked = runner.kernel_outcome(MIN_P, "aliased", "aliased-device", wrap_check=True)
    finally:
        session_values.clear()
    assert runs == [(MIN_P.name, "aliased", "aliased-device", False),
                    (MIN_P.name, "aliased", "aliased-device", True)]
    assert again == first and again.faulted and again.fields == {"gpu": "0"}
    assert checked == first


@pytest.mark.parametrize("arguments, every_test, selection", [
    ([], False, ["-m", "covers or widening"]),
    (["-m", "static"], False, []),
    (["-mstatic", "-q"], False, []),
    (["--maxfail=1"], False, ["-m", "covers or widening"]),
    ([], True, []),
])
def test_validate_runs_the_tests_of_its_table_unless_told_otherwise(arguments, every_test,
                                                                    selection):
    """`triton-overflow validate` runs the tests that fill a cell; `--every-test` (what
    ci/test.sh passes) and a `-m` of the caller's own leave the selection alone."""
    from triton_overflow.plugin.validate import _selection
    assert _selection(arguments, every_test) == selection


class _Item:
    """What the scheduling reads of a collected test: its start_early mark and parameters."""

    def __init__(self, name, rank=None, module=None):
        self.name, self.rank = name, rank
        self.callspec = type("Callspec", (), {"params": {"module": module} if module else {}})

    def get_closest_marker(self, name):
        return pytest.mark.start_early(self.rank).mark if self.rank is not None else None


def test_long_tests_start_first_dealt_round_by_their_mark():
    """Under xdist each worker's share starts with its part of the tests marked start_early
    (lower rank first; within a rank the larger kernel file first), then the rest in order."""
    from triton_overflow.plugin import _dealt
    items = [_Item("small"), _Item("mutant", 2, "kernels.min_p"), _Item("plain"),
             _Item("static large", 0, "kernels.topk_topp"),
             _Item("static small", 0, "kernels.min_p"), _Item("last")]
    assert [item.name for item in _dealt(items, 2)] == [
        "static large", "mutant", "small", "plain", "static small", "last"]
    from tests.test_min_p import TestOverflow
    assert pytest.mark.start_early(0).mark in TestOverflow.test_static_check.pytestmark
