"""`record` then `lint --launches`: the launches of the suite's own huge cases, compiled exactly
as launched, give the same findings as the plain static check of the twins, with headroom."""

import json
import os
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
    assert "sitecustomize" not in done.stderr, done.stderr  # the shim alone, none of its own


_BOTH_INTERPRETER_PATHS = """
import torch, triton, triton.language as tl

@triton.jit
def plain(x, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offsets, offsets, mask=offsets < n)

tuned = triton.autotune(configs=[triton.Config({"BLOCK": 8})], key=["n"])(triton.jit(plain.fn))
x = torch.zeros(40, dtype=torch.int32)
plain[(3,)](x, 40, BLOCK=16)
tuned[lambda meta: (triton.cdiv(40, meta["BLOCK"]),)](x, 40)
"""


def test_record_sees_both_interpreter_launch_paths_and_keeps_the_environments_sitecustomize(
        tmp_path):
    """`kernel[grid](...)` and an autotuner's `run` reach the interpreter by different routes
    on Triton before 3.6; the user's own sitecustomize must still run, and nothing may print
    an error at start-up."""
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("print('the environment sitecustomize ran')\n")
    script = tmp_path / "launch.py"
    script.write_text(_BOTH_INTERPRETER_PATHS)
    env = dict(WITHOUT_INTERPRETER, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(own), env.get("PYTHONPATH")) if p)
    launches = tmp_path / "launches.json"
    done = run_python("-m", "triton_overflow", "record", "-o", launches, "--", sys.executable,
                      script, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the environment sitecustomize ran" in done.stdout
    assert "Error" not in done.stderr and "not recorded" not in done.stderr, done.stderr
    grids = sorted(launch["grid"] for record in json.loads(launches.read_text())["launches"]
                   for launch in record["launches"])
    assert grids == [[3, 1, 1], [5, 1, 1]], grids
