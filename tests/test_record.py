"""`record` then `lint --launches`: the launches of the suite's own huge cases, compiled exactly
as launched, give the same findings as the plain static check of the twins, with headroom."""

import json
import sys

import pytest

from tests.lint_cli import WITHOUT_INTERPRETER, run_lint, run_python

pytestmark = [pytest.mark.static, pytest.mark.selftest]


def _findings(output):
    report = json.loads(output)
    return {(f["file"], f["line"], f["kernel"], f["product"]): f
            for kernel in report["kernels"] for f in kernel["findings"]}


def test_recorded_launches_give_the_twins_findings_with_headroom(tmp_path):
    launches = tmp_path / "launches.json"
    done = run_python("-m", "triton_overflow", "record", "-o", launches, "--", sys.executable,
                      "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                      "tests/test_min_p.py", "-k", "interpreter_huge_case_catches_twin",
                      env=WITHOUT_INTERPRETER)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    recorded = run_lint("--launches", launches, "--format", "json")
    plain = run_lint("--twins", "kernels/min_p.py", "--format", "json")
    assert recorded.returncode == plain.returncode == 1, recorded.stdout + plain.stdout
    from_launches, from_twins = _findings(recorded.stdout), _findings(plain.stdout)
    assert set(from_launches) == set(from_twins)
    wrapping = [f for f in from_launches.values() if f["product"] == "row * logits_stride"]
    assert wrapping and all("it wraps there" in f["headroom"] and f["largest"] >= 2**31
                            for f in wrapping), wrapping
    small = [f for f in from_launches.values() if f["product"] == "row * num_blocks"]
    assert small and all("stays below 2**31" in f["headroom"] for f in small), small


def test_record_says_when_nothing_was_launched(tmp_path):
    done = run_python("-m", "triton_overflow", "record", "-o", tmp_path / "none.json", "--",
                      sys.executable, "-c", "print('no kernels here')")
    assert done.returncode == 2 and "no Triton kernel launch was recorded" in done.stderr
