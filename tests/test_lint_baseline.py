"""Baselines that age well: every entry carries a reason (``--write-baseline`` leaves a
placeholder, ``--baseline`` warns while one is left), entries that no longer match a finding
are reported as stale, and ``--prune-baseline`` removes them, keeping the others' reasons."""

import json

import pytest

from tests.lint_cli import run_lint
from triton_overflow.lint.baseline import PLACEHOLDER

pytestmark = [pytest.mark.static, pytest.mark.selftest]

TWO_PRODUCTS = '''
import triton
import triton.language as tl


@triton.jit
def two_tables_kernel(a_ptr, b_ptr, stride_a, stride_b, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    tl.store(a_ptr + row * stride_a + cols, 1.0)
    tl.store(b_ptr + row * stride_b + cols, 1.0)
'''

OTHER_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def other_kernel(x_ptr, stride, BLOCK: tl.constexpr = 128):
    tl.store(x_ptr + tl.program_id(0) * stride + tl.arange(0, BLOCK), 1.0)
'''


def _entries(path):
    return {entry["product"]: entry for entry in json.loads(path.read_text())["findings"]}


def test_written_entries_wait_for_a_reason_and_keep_the_one_given(tmp_path):
    kernel = tmp_path / "tables.py"
    kernel.write_text(TWO_PRODUCTS)
    baseline = tmp_path / "baseline.json"
    written = run_lint(kernel, "--write-baseline", baseline)
    assert written.returncode == 0 and "2 need a reason" in written.stderr, written.stderr
    entries = _entries(baseline)
    assert {e["reason"] for e in entries.values()} == {PLACEHOLDER}
    checked = run_lint(kernel, "--baseline", baseline)
    assert checked.returncode == 0
    assert "2 entries of the baseline" in checked.stderr and "give no reason" in checked.stderr
    data = json.loads(baseline.read_text())
    data["findings"][0]["reason"] = "stride_a is at most 4096 and rows at most 1024"
    baseline.write_text(json.dumps(data))
    checked = run_lint(kernel, "--baseline", baseline)
    assert "1 entries of the baseline" in checked.stderr, checked.stderr
    # Written again over itself, the baseline keeps the reason given.
    run_lint(kernel, "--write-baseline", baseline)
    reasons = {e["reason"] for e in _entries(baseline).values()}
    assert reasons == {PLACEHOLDER, "stride_a is at most 4096 and rows at most 1024"}


def _two_files_baselined(folder):
    """(tables.py, the baseline) of two kernel files, the baseline written over both."""
    kernel = folder / "tables.py"
    kernel.write_text(TWO_PRODUCTS)
    (folder / "other.py").write_text(OTHER_KERNEL)
    baseline = folder / "baseline.json"
    assert run_lint(folder, "--write-baseline", baseline).returncode == 0
    assert set(_entries(baseline)) == {"row * stride_a", "row * stride_b",
                                       "tl.program_id(0) * stride"}
    return kernel, baseline


def test_stale_entries_are_reported_and_pruned_only_where_their_kernel_was_checked(tmp_path):
    kernel, baseline = _two_files_baselined(tmp_path)
    kernel.write_text(TWO_PRODUCTS.replace("row * stride_a", "tl.cast(row, tl.int64) * stride_a"))
    # Only tables.py is checked: other.py's entry is not stale, however long unmatched.
    checked = run_lint(kernel, "--baseline", baseline, "--format", "json")
    assert checked.returncode == 0
    report = json.loads(checked.stdout)["baseline"]
    assert [e["product"] for e in report["stale"]] == ["row * stride_a"]
    assert "1 entries of the baseline" in checked.stderr and "match no finding" in checked.stderr
    assert "tables.py: two_tables_kernel: `row * stride_a`" in checked.stderr
    pruned = run_lint(kernel, "--baseline", baseline, "--prune-baseline")
    assert pruned.returncode == 0 and "removed 1 stale entries" in pruned.stderr
    assert set(_entries(baseline)) == {"row * stride_b", "tl.program_id(0) * stride"}
    again = run_lint(kernel, "--baseline", baseline)
    assert "match no finding" not in again.stderr and again.returncode == 0


def test_findings_in_the_baseline_are_told_from_new_ones_in_every_format(tmp_path):
    kernel = tmp_path / "tables.py"
    kernel.write_text(TWO_PRODUCTS)
    baseline = tmp_path / "baseline.json"
    run_lint(kernel, "--write-baseline", baseline)
    data = json.loads(baseline.read_text())
    data["findings"] = [e for e in data["findings"] if e["product"] == "row * stride_a"]
    data["findings"][0]["reason"] = "rows x stride_a stays below 2**27"
    baseline.write_text(json.dumps(data))
    text = run_lint(kernel, "--baseline", baseline).stdout
    (known, ) = [line for line in text.splitlines() if "[in the baseline]" in line]
    assert "`row * stride_a`" in known
    report = json.loads(run_lint(kernel, "--baseline", baseline, "--format", "json").stdout)
    assert {f["product"]: f["baselined"] for f in report["kernels"][0]["findings"]} == {
        "row * stride_a": True, "row * stride_b": False}
    sarif = json.loads(run_lint(kernel, "--baseline", baseline, "--format", "sarif").stdout)
    states = {r["message"]["text"].split("`")[1]: (r["baselineState"], r.get("suppressions"))
              for r in sarif["runs"][0]["results"]}
    assert states["row * stride_b"] == ("new", None)
    assert states["row * stride_a"] == ("unchanged", [{
        "kind": "external", "status": "accepted",
        "justification": "rows x stride_a stays below 2**27"}])
    refused = run_lint(kernel, "--write-baseline", tmp_path / "missing" / "baseline.json")
    assert refused.returncode == 3 and "cannot write the baseline" in refused.stderr


def test_pruning_needs_a_baseline_and_an_old_baseline_still_reads(tmp_path):
    kernel = tmp_path / "tables.py"
    kernel.write_text(TWO_PRODUCTS)
    refused = run_lint(kernel, "--prune-baseline")
    assert refused.returncode == 3 and "--prune-baseline needs --baseline" in refused.stderr
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"version": 1, "findings": [
        {"file": str(kernel.name), "kernel": "two_tables_kernel", "product": "row * stride_a"}]}))
    checked = run_lint(kernel.name, "--baseline", old.name, cwd=tmp_path)
    assert checked.returncode == 1 and "1 not in the baseline" in checked.stdout, checked.stdout
    assert "give no reason" in checked.stderr


FLAGGED = '''
import triton
import triton.language as tl


@triton.jit
def flagged_kernel(x_ptr, stride, WIDE: tl.constexpr = False, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    if WIDE:
        tl.store(x_ptr + row * stride + tl.arange(0, BLOCK), tl.zeros((BLOCK, BLOCK // 2),
                                                                      tl.float32))
    else:
        tl.store(x_ptr + row * (stride + 1) + tl.arange(0, BLOCK), 1.0)
'''


def test_entries_of_a_kernel_checked_only_in_part_are_never_stale(tmp_path):
    """A flag whose variant stops compiling leaves that variant's products unseen: their
    entries are not stale, not pruned, and kept when the baseline is written again."""
    kernel = tmp_path / "flagged.py"
    kernel.write_text(FLAGGED.replace("(BLOCK, BLOCK // 2)", "(BLOCK, )"))
    baseline = tmp_path / "baseline.json"
    assert run_lint(kernel, "--write-baseline", baseline).returncode == 0
    assert set(_entries(baseline)) == {"row * stride", "row * (stride + 1)"}
    kernel.write_text(FLAGGED)  # the WIDE variant no longer compiles
    pruned = run_lint(kernel, "--baseline", baseline, "--prune-baseline")
    assert "match no finding" not in pruned.stderr and "removed" not in pruned.stderr
    assert set(_entries(baseline)) == {"row * stride", "row * (stride + 1)"}
    run_lint(kernel, "--write-baseline", baseline)
    assert set(_entries(baseline)) == {"row * stride", "row * (stride + 1)"}


def test_writing_part_of_a_tree_keeps_the_rest_of_the_baseline(tmp_path):
    kernel, baseline = _two_files_baselined(tmp_path)
    data = json.loads(baseline.read_text())
    for entry in data["findings"]:
        entry["reason"] = f"reviewed: {entry['product']}"
    baseline.write_text(json.dumps(data))
    assert run_lint(kernel, "--write-baseline", baseline).returncode == 0
    entries = _entries(baseline)
    assert set(entries) == {"row * stride_a", "row * stride_b", "tl.program_id(0) * stride"}
    assert all(e["reason"] == f"reviewed: {p}" for p, e in entries.items())
