"""Every case under the overflow detectors, and each detector proven on the int32 twin.

* static: the TTIR lint finds nothing in the kernel module and a finding in every kernel of its
  int32 twin;
* interpreter huge: the highest-offset rows on lazily allocated CPU memory, only those programs
  run, i32 wrap checked; the twin is caught in both failure modes, and in the aliased mode also
  without the wrap check, by the row comparison alone;
* GPU dense huge: the whole batch on the device; the twin must fail (illegal memory access or a
  wrong row).

Every huge case runs in a child process (``harness.isolation``).
"""

import functools
import json
from pathlib import Path

import pytest

from harness.isolation import run_isolated
from tests.cases import all_cases
from tests.lint_cli import run_lint, run_python

ROOT = Path(__file__).resolve().parent.parent
CASES = all_cases()
MODES = ("negative", "aliased")
INTERPRETER_ENV = {"TRITON_INTERPRET": "1"}


def _case_params(*extra):
    """pytest params over cases (x extra), each filling its report cell."""
    params = []
    for name, case in CASES.items():
        for values in (extra or [()]):
            values = values if isinstance(values, tuple) else (values, )
            params.append((name, case, values))
    return params


def _cells(detector, role, *extra):
    return [pytest.param(name, *values, id="-".join([case.name, *map(str, values)]),
                         marks=pytest.mark.covers(kernel=case.name, detector=detector, role=role))
            for name, case, values in _case_params(*extra)]


@functools.cache
def _lint(module_file, twins):
    done = run_lint(module_file, *(["--twins"] if twins else []))
    return done.returncode, done.stdout + done.stderr


def _module_file(case_name):
    module = CASES[case_name].module
    return str(Path(*module.split(".")).with_suffix(".py"))


def _launched_kernels(module_file):
    code = ("import sys, json; from harness.lint import load_modules, launched_kernels; "
            f"print(json.dumps([k.__name__ for m in load_modules([{module_file!r}]) "
            "for k in launched_kernels(m)]))")
    done = run_python("-c", code)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.static
@pytest.mark.parametrize("case_name", _cells("static", "fixed"))
def test_lint_finds_nothing_in_the_kernel(case_name):
    """`python -m harness lint` exits 0 on the kernel's module."""
    code, output = _lint(_module_file(case_name), False)
    assert code == 0, output


@pytest.mark.static
@pytest.mark.parametrize("case_name", _cells("static", "twin"))
def test_lint_flags_every_kernel_of_the_twin(case_name):
    """`python -m harness lint --twins` exits 1 with a finding in every launched kernel."""
    module_file = _module_file(case_name)
    code, output = _lint(module_file, True)
    assert code == 1, output
    for kernel in _launched_kernels(module_file):
        assert f": {kernel}: i32 multiply feeds a pointer offset" in output, (kernel, output)


def _run(case_name, mode, backend, twin, wrap_check, env=None, unset=()):
    return run_isolated("harness.runner:run_case",
                        dict(case=case_name, mode=mode, backend=backend, twin=twin,
                             wrap_check=wrap_check), env=env, unset_env=unset, timeout=900)


def _require_ran(outcome):
    if outcome.status == "passed" and isinstance(outcome.value, dict) and "skipped" in outcome.value:
        pytest.skip(outcome.value["skipped"])


@pytest.mark.interp
@pytest.mark.huge
@pytest.mark.parametrize("case_name, mode", _cells("interpreter huge", "fixed", *MODES))
def test_interpreter_huge_case_passes(case_name, mode):
    """The highest-offset rows equal row 0 and the reference; no i32 operation wraps."""
    outcome = _run(case_name, mode, "lazy-host", twin=False, wrap_check=True, env=INTERPRETER_ENV)
    _require_ran(outcome)
    assert outcome.status == "passed", outcome.summary() + "\n" + outcome.output


@pytest.mark.interp
@pytest.mark.huge
@pytest.mark.parametrize("case_name, mode", _cells("interpreter huge", "twin", *MODES))
def test_interpreter_huge_case_catches_twin_wrap(case_name, mode):
    """On the int32 twin the wrap check stops at the wrapping product, naming the kernel line."""
    outcome = _run(case_name, mode, "lazy-host", twin=True, wrap_check=True, env=INTERPRETER_ENV)
    _require_ran(outcome)
    assert outcome.status == "failed" and outcome.error == "Int32WrapError", outcome.summary()
    kernel_file = _module_file(case_name)
    assert f"int32 twin of {ROOT / kernel_file}" in outcome.message, outcome.message


@pytest.mark.interp
@pytest.mark.huge
@pytest.mark.parametrize("case_name", _cells("interpreter huge", "twin"))
def test_interpreter_huge_case_catches_twin_silent_corruption(case_name):
    """Without the wrap check, the aliased twin reads a poisoned row: the comparison fails."""
    outcome = _run(case_name, "aliased", "lazy-host", twin=True, wrap_check=False,
                   env=INTERPRETER_ENV)
    _require_ran(outcome)
    assert outcome.status == "failed" and outcome.error in ("RowMismatch", "AssertionError"), \
        outcome.summary() + "\n" + outcome.output


@pytest.mark.gpu
@pytest.mark.huge
@pytest.mark.parametrize("case_name, mode", _cells("gpu dense huge", "fixed", *MODES))
def test_gpu_huge_case_passes(case_name, mode, record_property):
    """Dense on the device: the highest-offset rows equal row 0 and the reference."""
    outcome = _run(case_name, mode, "dense-device", twin=False, wrap_check=False,
                   unset=("TRITON_INTERPRET", ))
    _require_ran(outcome)
    record_property("case", json.dumps(outcome.value))
    assert outcome.status == "passed", outcome.summary() + "\n" + outcome.output


@pytest.mark.gpu
@pytest.mark.huge
@pytest.mark.parametrize("case_name, mode", _cells("gpu dense huge", "twin", *MODES))
def test_gpu_huge_case_catches_twin(case_name, mode, record_property):
    """Dense on the device, the int32 twin faults or produces a wrong row; either is caught."""
    outcome = _run(case_name, mode, "dense-device", twin=True, wrap_check=False,
                   unset=("TRITON_INTERPRET", ))
    _require_ran(outcome)
    record_property("twin_outcome", outcome.summary()[:300])
    caught = outcome.status == "crashed" or outcome.device_fault or (
        outcome.status == "failed" and outcome.error in ("RowMismatch", "AssertionError"))
    assert caught, outcome.summary() + "\n" + outcome.output
