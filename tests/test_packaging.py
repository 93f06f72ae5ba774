"""The suite as users install it: the wheel's contents, the plugin entry point, the console
script, the pre-commit hook's command, and the CI workflow files (checked with actionlint)."""

import importlib.metadata
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.lint_cli import ROOT, run_lint

BIN = Path(sys.executable).parent


def test_the_plugin_is_registered_through_pytest11():
    plugins = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    assert plugins.get("triton_overflow") == "triton_overflow.plugin", plugins


def test_the_console_script_runs():
    script = shutil.which("triton-overflow", path=str(BIN))
    assert script, f"no triton-overflow in {BIN}"
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "lint" in done.stdout and "record" in done.stdout


def test_the_wheel_holds_only_triton_overflow(tmp_path):
    """Nothing generic (harness, kernels, reference, tests) lands at the top of site-packages;
    the package's py.typed marker does, so that type checkers read its annotations, and the
    licence's text."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--quiet", "-w", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel, ) = tmp_path.glob("*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    packages = {top for top in tops if not top.endswith((".dist-info", ".data"))}
    assert packages == {"triton_overflow"}, tops
    assert "triton_overflow/py.typed" in zipfile.ZipFile(wheel).namelist()
    assert "triton_overflow/lint/schemas/lint-report-v1.json" in zipfile.ZipFile(wheel).namelist()
    licences = [name for name in zipfile.ZipFile(wheel).namelist()
                if name.endswith(".dist-info/licenses/LICENSE")]
    assert licences and "Apache License" in zipfile.ZipFile(wheel).read(licences[0]).decode()


def test_the_pre_commit_hook_passes_files_without_kernels(tmp_path):
    """pre-commit hands the hook every changed Python file; one with no kernel is fine."""
    hook = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "entry: triton-overflow lint --allow-empty" in hook
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    assert run_lint("--allow-empty", plain).returncode == 0
    assert run_lint(plain).returncode == 2


def _actionlint(*paths, cwd=ROOT):
    binary = shutil.which("actionlint", path=str(BIN)) or shutil.which("actionlint")
    if binary is None:
        pytest.fail("actionlint is not installed (ci/requirements-cpu.txt installs it)")
    return subprocess.run([binary, "-no-color", *map(str, paths)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_the_workflow_files_pass_actionlint():
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert {w.name for w in workflows} >= {"cpu.yml", "nightly.yml", "pre-release.yml",
                                           "compat.yml"}
    done = _actionlint(*workflows)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_fails_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  job:\n    runs-on: ubuntu-latest\n    steps:\n"
                      "      - run: echo ${{ github.event.issue.title }}\n"
                      "      - uses: actions/checkout@v4\n        with: {unknown_key: 1}\n"
                      "    timeout-minutes: sometimes\n")
    assert _actionlint(broken).returncode != 0


def test_the_ci_docs_name_the_triton_versions_ci_runs():
    """The version table's `.ci/run` rows are the pinned Triton and the versions .ci/run hands
    to ci/compat.sh, and nothing else."""
    import re
    pinned = re.search(r"^triton==(\S+)$", (ROOT / "ci" / "requirements-cpu.txt").read_text(),
                       re.M)[1]
    newest = re.findall(r"^bash ci/compat\.sh (.+)$", (ROOT / ".ci" / "run").read_text(), re.M)
    assert len(newest) == 1, "`.ci/run` calls ci/compat.sh once, with the versions it tests"
    ci_versions = {pinned, *newest[0].split()}
    table = [line for line in (ROOT / "docs" / "ci.md").read_text().splitlines()
             if line.startswith("| ") and "`.ci/run`" in line]
    readme_versions = {re.match(r"\| (\d+\.\d+\.\d+)", line)[1] for line in table}
    assert readme_versions == ci_versions, (readme_versions, ci_versions)
