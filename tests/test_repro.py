"""``triton-overflow repro``: a finding and a launch become tests that fail on the kernel as
shipped, naming the line, and pass with the fix; bad input is a usage error that says why."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from triton_overflow.repro.launch import LaunchError, parse

ENGINE = Path(__file__).resolve().parents[1] / "examples" / "myengine"
pytestmark = pytest.mark.static


def _cli(*args, cwd=ENGINE, env=None):
    environment = dict(os.environ, PYTHONPATH=str(ENGINE / "src"))
    environment.pop("TRITON_INTERPRET", None)
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "triton_overflow", *args], cwd=cwd,
                          env=environment, capture_output=True, text=True, timeout=600)


def _run_tests(folder):
    environment = dict(os.environ, PYTHONPATH=str(ENGINE / "src"))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                           "-k", "interpreter", str(folder)], cwd=folder, env=environment,
                          capture_output=True, text=True, timeout=600)


def _verdicts(output):
    return {line.split("[", 1)[1].split("]", 1)[0]: line.split()[0]
            for line in output.splitlines() if line.startswith(("PASSED", "FAILED"))}


def test_reproductions_fail_as_shipped_naming_the_line_and_pass_with_the_fix(tmp_path):
    """A program-id row (described launch) and a loaded slot (recorded launch)."""
    launches = tmp_path / "launches.json"
    recorded = _cli("record", "-o", str(launches), "--", sys.executable, "repro/small_launch.py",
                    env={"TRITON_INTERPRET": "1"})
    assert recorded.returncode == 0, recorded.stderr
    out = tmp_path / "repro"
    for finding, launch in (("src/myengine/softcap.py:18", ["--launch", "repro/softcap.toml"]),
                            ("src/myengine/penalty.py:28", ["--launches", str(launches)])):
        written = _cli("repro", finding, *launch, "-o", str(out))
        assert written.returncode == 0, written.stderr
    report = (out / "overflow_softcap_kernel_softcap_18.md").read_text()
    assert "tl.program_id(0).to(tl.int64)" in report and "```diff" in report
    ran = _run_tests(out)
    verdicts = _verdicts(ran.stdout)
    assert ran.returncode == 1 and len(verdicts) == 8, ran.stdout[-3000:]
    for name, verdict in verdicts.items():
        assert verdict == ("FAILED" if "as-shipped" in name else "PASSED"), (name, ran.stdout)
    for where in ("softcap.py:18", "penalty.py:28"):
        assert re.search(r"as shipped, in the interpreter: an i32 product wraps at "
                         rf"\S*src/myengine/{where}: int32 \* wraps", ran.stdout), ran.stdout


@pytest.mark.parametrize("arguments, said", [
    (["src/myengine/softcap.py:3", "--launch", "repro/softcap.toml"], "reports no finding at"),
    (["src/myengine/softcap.py:18"], "needs a launch of the kernel"),
    (["softcap.py"], "a finding is FILE:LINE"),
    (["src/myengine/nothing.py:3", "--launch", "repro/softcap.toml"], "no file"),
])
def test_bad_input_is_a_usage_error_that_says_why(arguments, said, tmp_path):
    result = _cli("repro", *arguments, "-o", str(tmp_path))
    assert result.returncode == 3 and said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_launch_without_the_tensor_the_product_addresses_is_refused(tmp_path):
    launch = tmp_path / "launch.toml"
    launch.write_text((ENGINE / "repro" / "softcap.toml").read_text().replace(
        "logits = {", "other = {").replace("logits_stride", "logits_stride"))
    result = _cli("repro", "src/myengine/softcap.py:18", "--launch", str(launch), "-o",
                  str(tmp_path))
    assert result.returncode == 3 and "has no tensor argument `logits`" in result.stderr


@pytest.mark.parametrize("description, said", [
    ({"kernel": "k.py", "rows": 1, "grid": [1], "arguments": {}}, "path/to/file.py:kernel_name"),
    ({"kernel": "k.py:k", "rows": 0, "grid": [1], "arguments": {}}, "`rows`"),
    ({"kernel": "k.py:k", "rows": 1, "grid": [0], "arguments": {}}, "`grid`"),
    ({"kernel": "k.py:k", "rows": 1, "grid": ["rows"], "arguments": {"x": 1}}, "no argument is a"),
    ({"kernel": "k.py:k", "rows": 1, "grid": ["rows"],
      "arguments": {"x": {"shape": ["rows", 3], "dtype": "float99"}}}, "unknown dtype"),
    ({"kernel": "k.py:k", "rows": 2, "grid": ["rows"],
      "arguments": {"x": {"shape": [3], "dtype": "int32", "values": [1, 2]}}}, "do not fill"),
])
def test_launch_descriptions_are_checked(description, said):
    with pytest.raises(LaunchError, match=said):
        parse(description)
