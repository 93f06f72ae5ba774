"""The action at the repository root (``action.yml``), as a runner calls it: its metadata passes
actionlint, and its one script, given the inputs as ``INPUT_*`` variables, prints annotations on
the right lines, writes a SARIF file that code scanning accepts, and fails the step per the
level chosen."""

import json
import os
import shutil
import subprocess
import sys

import jsonschema
import pytest

from tests.lint_cli import ROOT, WITHOUT_INTERPRETER
from tests.test_packaging import _actionlint

pytestmark = [pytest.mark.static, pytest.mark.selftest]
SCRIPT = ROOT / "action" / "lint.sh"

PLANTED = '''
import triton
import triton.language as tl


@triton.jit
def gather_rows_kernel(x_ptr, idx_ptr, out_ptr, stride, n, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    src = tl.load(idx_ptr + row)
    tl.store(out_ptr + row * stride + cols, tl.load(x_ptr + src * stride + cols))


@triton.jit
def two_arguments_kernel(x_ptr, B, T, BLOCK: tl.constexpr = 128):
    tl.store(x_ptr + tl.cast(B * T, tl.int64) + tl.arange(0, BLOCK), 1.0)
'''

# What GitHub code scanning requires of an uploaded SARIF file (its "SARIF support" page):
# version 2.1.0, a tool driver with a name and rules, and per result a rule id the driver
# declares, a level, a message and a location with a relative URI and a start line.
CODE_SCANNING_SARIF = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "runs": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["tool", "results"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {
                    "driver": {"type": "object", "required": ["name", "rules"]}}},
                "results": {"type": "array", "items": {
                    "type": "object",
                    "required": ["ruleId", "level", "message", "locations"],
                    "properties": {
                        "level": {"enum": ["none", "note", "warning", "error"]},
                        "message": {"type": "object", "required": ["text"]},
                        "locations": {"type": "array", "minItems": 1, "items": {
                            "type": "object", "required": ["physicalLocation"],
                            "properties": {"physicalLocation": {
                                "type": "object", "required": ["artifactLocation", "region"],
                                "properties": {
                                    "artifactLocation": {
                                        "type": "object", "required": ["uri"],
                                        "properties": {"uri": {"not": {"pattern": "^/"}}}},
                                    "region": {"type": "object", "required": ["startLine"],
                                               "properties": {"startLine": {"minimum": 1}}},
                                }}}}},
                    }}},
            }}},
    },
}


def run_action(workdir, **inputs):
    """The script as the runner runs it: inputs in INPUT_*, outputs to GITHUB_OUTPUT, in the
    checkout; the suite already installed (``install: false``) in this Python."""
    output = workdir / "github-output"
    output.write_text("")
    env = {**WITHOUT_INTERPRETER, "ACTION_PATH": str(ROOT), "GITHUB_OUTPUT": str(output),
           "INPUT_INSTALL": "false", "INPUT_PYTHON": sys.executable, "INPUT_PATHS": "kernels",
           "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    runner_temp = inputs.pop("runner_temp_dir", None)
    if runner_temp:
        env["RUNNER_TEMP"] = runner_temp
        env.pop("PYTHONPATH", None)  # the environment it makes, not the one running the tests
    inputs.setdefault("envelope", "none")  # the shape's levels, as the tests' kernels expect
    env.update({f"INPUT_{name.upper()}": value for name, value in inputs.items()})
    done = subprocess.run(["bash", str(SCRIPT)], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=300)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return done, outputs


@pytest.fixture
def checkout(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "gather.py").write_text(PLANTED)
    return tmp_path


def test_the_action_metadata_passes_actionlint_through_a_workflow_that_uses_it(tmp_path):
    """actionlint reads ``action.yml`` where a workflow uses ``./``; a misspelt input fails.
    The broken workflow is checked in a copy of the repository's actionlint set-up."""
    workflow = ROOT / ".github" / "workflows" / "overflow-lint.yml"
    assert "uses: ./" in workflow.read_text()
    done = _actionlint(workflow)
    assert done.returncode == 0, done.stdout + done.stderr
    copy = tmp_path / "repository"
    (copy / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(ROOT / "action.yml", copy / "action.yml")
    shutil.copy(ROOT / ".github" / "actionlint.yaml", copy / ".github" / "actionlint.yaml")
    broken = copy / ".github" / "workflows" / "broken.yml"
    broken.write_text(workflow.read_text().replace("fail-on: error", "fail-level: error"))
    subprocess.run(["git", "init", "-q", str(copy)], check=True, timeout=60)
    done = _actionlint(broken, cwd=copy)
    assert done.returncode != 0 and 'input "fail-level" is not defined' in done.stdout, \
        done.stdout + done.stderr


def test_annotations_name_each_line_and_its_fix_and_fail_at_the_chosen_level(checkout):
    done, outputs = run_action(checkout, output="annotations", fail_on="error")
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::")]
    errors = [line for line in annotations if line.startswith("::error file=")]
    assert [line.split(",")[1] for line in errors] == ["line=11", "line=11"], annotations
    assert all("file=kernels/gather.py" in line and "%0AFix: replace" in line for line in errors)
    (warning, ) = [line for line in annotations if line.startswith("::warning file=")]
    assert "line=16" in warning and "tl.cast(B, tl.int64) * T" in warning
    assert done.returncode == 1 and outputs["exit-code"] == "1", done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("::error title=triton-overflow::")

    never, outputs = run_action(checkout, output="annotations", fail_on="never")
    assert never.returncode == 0 and outputs["exit-code"] == "1"
    assert [line for line in never.stdout.splitlines() if line.startswith("::error file=")]


def test_a_warning_fails_the_step_only_when_the_level_says_so(checkout):
    (checkout / "kernels" / "gather.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n" + PLANTED[PLANTED.index(
            "@triton.jit\ndef two_arguments"):])
    passed, outputs = run_action(checkout, fail_on="error")
    assert passed.returncode == 0 and outputs["exit-code"] == "0", passed.stdout + passed.stderr
    failed, outputs = run_action(checkout, fail_on="warning")
    assert failed.returncode == 1 and outputs["exit-code"] == "1"


def test_sarif_output_is_a_file_code_scanning_accepts(checkout):
    done, outputs = run_action(checkout, output="sarif", sarif_file="out.sarif",
                               fail_on="never")
    assert done.returncode == 0 and outputs["sarif-file"] == "out.sarif", done.stderr
    sarif = json.loads((checkout / "out.sarif").read_text())
    jsonschema.validate(sarif, CODE_SCANNING_SARIF)
    rules = {rule["id"] for rule in sarif["runs"][0]["tool"]["driver"]["rules"]}
    results = sarif["runs"][0]["results"]
    assert {r["ruleId"] for r in results} <= rules
    assert sorted((r["level"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
                  for r in results) == [("error", 11), ("error", 11), ("warning", 16)]
    assert all(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
               == "kernels/gather.py" for r in results)
    failing, outputs = run_action(checkout, output="sarif", sarif_file="out.sarif")
    assert failing.returncode == 1 and outputs["exit-code"] == "1"


def test_a_baseline_silences_its_findings_and_bad_inputs_are_refused(checkout):
    baseline = checkout / "overflow-baseline.json"
    subprocess.run([sys.executable, "-m", "triton_overflow", "lint", "kernels",
                    "--write-baseline", baseline.name], cwd=checkout, env=WITHOUT_INTERPRETER,
                   capture_output=True, timeout=300, check=True)
    done, outputs = run_action(checkout, baseline=baseline.name)
    assert done.returncode == 0 and outputs["exit-code"] == "0", done.stdout + done.stderr
    assert not [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert "title=baseline entry without a reason" in done.stdout
    refused, _ = run_action(checkout, fail_on="errors")
    assert refused.returncode == 2 and "fail-on must be error, warning, note or never" in \
        refused.stdout
    missing, _ = run_action(checkout, paths="kernels/gathr.py")
    assert missing.returncode == 2 and "kernels/gathr.py, which does not exist" in missing.stdout
    misspelt, outputs = run_action(checkout, limits="strid=4096")
    assert misspelt.returncode == 2 and outputs["exit-code"] == "3", misspelt.stdout
    assert "::error title=triton-overflow action::the lint refused its arguments" in \
        misspelt.stdout and "strid" in misspelt.stderr
    no_envelope, outputs = run_action(checkout, envelope="deployment.toml")
    assert no_envelope.returncode == 2 and outputs["exit-code"] == "3", no_envelope.stdout
    assert "cannot read the envelope deployment.toml" in no_envelope.stderr


@pytest.mark.start_early(3)  # among the longest tests: not left for the end
def test_the_step_installs_what_the_lint_needs_and_nothing_more(checkout, tmp_path):
    """``install: true``: a fresh environment with the Triton asked for, numpy and the suite,
    no torch; the lint runs from it."""
    import triton
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    done, outputs = run_action(checkout, install="true", triton_version=triton.__version__,
                               runner_temp_dir=str(runner_temp))
    assert done.returncode == 1 and outputs["exit-code"] == "1", done.stdout + done.stderr
    assert [line.split(",")[1] for line in done.stdout.splitlines()
            if line.startswith("::error file=")] == ["line=11", "line=11"]
    venv_python = runner_temp / "triton-overflow-venv" / "bin" / "python"
    installed = subprocess.run([str(venv_python), "-c", "import importlib.util, triton; print("
                                "triton.__version__, importlib.util.find_spec('torch') is None)"],
                               capture_output=True, text=True, timeout=120)
    assert installed.stdout.split() == [triton.__version__, "True"], installed.stderr


def test_unchecked_kernels_fail_the_step_when_asked_whatever_the_findings(checkout):
    """With ``fail-on: never`` the lint's exit code says 1 for the findings; a kernel that
    could not be checked still fails the step with ``fail-on-unchecked``. Paths may come one
    per line, and a SARIF file may go into a folder not made yet."""
    (checkout / "kernels" / "broken.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def broken_kernel(x_ptr):\n    tl.store(x_ptr + tl.arange(0, 3), 1.0)\n")
    (checkout / "more").mkdir()
    (checkout / "more" / "plain.py").write_text("x = 1\n")
    done, outputs = run_action(checkout, paths="kernels\nmore\n", fail_on="never",
                               fail_on_unchecked="true")
    assert done.returncode == 2 and outputs["exit-code"] == "1", done.stdout + done.stderr
    assert "title=kernel not checked" in done.stdout
    lenient, _ = run_action(checkout, paths="kernels\nmore\n", fail_on="never")
    assert lenient.returncode == 0 and "::warning title=triton-overflow::" in lenient.stdout
    sarif, outputs = run_action(checkout, output="sarif", sarif_file="reports/out.sarif",
                                fail_on="never", fail_on_unchecked="true")
    assert sarif.returncode == 2 and outputs["sarif-file"] == "reports/out.sarif"
    assert (checkout / "reports" / "out.sarif").is_file()
