"""Every finding names its fix, and the fix compiles and holds: written into the kernel, the
product is gone and the kernel still builds, including where the cast was written after the
multiply (``tl.cast(B * T, tl.int64)``, ``(row * stride).to(tl.int64)``)."""

import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest

from tests.lint_cli import ROOT, run_lint
from triton_overflow import triton_versions
from triton_overflow.lint.report import JSON_SCHEMA
from triton_overflow.lint.verify import locate

pytestmark = [pytest.mark.static, pytest.mark.selftest]
PLANTED = ROOT / "tests" / "planted"

CAST_AFTER = '''
import triton
import triton.language as tl


@triton.jit
def cast_after_product_kernel(x_ptr, out_ptr, B, T, stride, N: tl.constexpr = 128):
    row = tl.program_id(0)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + tl.cast(B * T, tl.int64) + cols)
    tl.store(out_ptr + (row * stride).to(tl.int64) + cols, x)


@triton.jit
def branch_joined_kernel(x_ptr, stride, flag, N: tl.constexpr = 128):
    row = tl.program_id(0)
    if flag > 0:
        off = row * stride
    else:
        off = row
    tl.store(x_ptr + off + tl.arange(0, N), 1.0)
'''


def _json(*args):
    done = run_lint(*args, "--format", "json")
    return done, json.loads(done.stdout)


def _findings(report):
    return [f for kernel in report["kernels"] for f in kernel["findings"]]


def apply_fixes(path, findings):
    """Write each finding's fix into ``path``, as a reviewer would, last in the file first;
    returns those whose source could not be found where they say."""
    text = path.read_text()
    spans, unplaced = [], []
    for fix in sorted({(f["fix"]["line"], f["fix"]["replace"], f["fix"]["with"])
                       for f in findings if f["fix"]["with"] is not None}):
        span = locate(text, fix[0], fix[1])
        if span is None:
            unplaced.append(fix)
        elif not any(span[0] < end and start < span[1] for start, end, _ in spans):
            spans.append((*span, fix[2]))
    for start, end, written in sorted(spans, reverse=True):
        text = text[:start] + written + text[end:]
    path.write_text(text)
    return unplaced


def test_a_cast_after_the_multiply_is_reported_with_the_cast_moved_before_it(tmp_path):
    path = tmp_path / "late.py"
    path.write_text(CAST_AFTER)
    done, report = _json(path)
    found = {(f["kernel"], f["product"]): f for f in _findings(report)}
    late_sum = found["cast_after_product_kernel", "B * T"]
    late_row = found["cast_after_product_kernel", "row * stride"]
    assert late_sum["cast_after"] and late_row["cast_after"]
    assert late_sum["fix"]["verified"] is None  # not compiled without --verify-fixes
    assert "only after the multiply" in late_sum["message"]
    assert (late_sum["fix"]["replace"], late_sum["fix"]["with"]) == (
        "tl.cast(B * T, tl.int64)", "tl.cast(B, tl.int64) * T")
    assert (late_row["fix"]["replace"], late_row["fix"]["with"]) == (
        "(row * stride).to(tl.int64)", "tl.cast(row, tl.int64) * stride")
    # ``row`` is made once, from a program id: widened there, both branches join i64 values.
    joined = found["branch_joined_kernel", "row * stride"]
    assert not joined["cast_after"]
    assert (joined["fix"]["line"], joined["fix"]["replace"], joined["fix"]["with"]) == (
        16, "row = tl.program_id(0)", "row = tl.program_id(0).to(tl.int64)")
    assert late_row["level"] == "error" and done.returncode == 1


def test_the_fixes_compile_and_leave_no_product(tmp_path):
    """Planted overflows, kernels as engines ship them, a branch that joins the product with
    another value (a product widened alone there does not compile): every fix written in, each
    kernel still compiles and the products are gone."""
    for name in ("overflowing.py", "shipped_overflowing.py"):
        shutil.copy(PLANTED / name, tmp_path / name)
    (tmp_path / "late.py").write_text(CAST_AFTER)
    _, before = _json(tmp_path, "--verify-fixes")
    found = _findings(before)
    assert len(found) > 30 and all(f["fix"] for f in found if f["level"] == "error")
    assert all(f["fix"]["verified"] for f in found if f["level"] == "error"), [
        (f["line"], f["fix"]) for f in found if f["level"] == "error" and not f["fix"]["verified"]]
    for path in sorted(tmp_path.glob("*.py")):
        assert not apply_fixes(path, [f for f in found if Path(f["file"]).name == path.name
                                      and f["fix"]])
    done, after = _json(tmp_path)
    assert after["not_checked"] == [] and len(after["kernels"]) == len(before["kernels"])
    left = [(f["file"], f["line"], f["product"]) for f in _findings(after)]
    # Only the product inside Triton's own tl.swizzle2d, which has no fix to write, is left.
    assert [product for _, _, product in left] == ["a product inside tl.swizzle2d()"], left
    assert done.returncode == 0


def test_tl_cast_compiles_where_an_argument_is_a_compile_time_constant(tmp_path):
    """Triton makes an int argument equal to 1 a constexpr at launch, and a constexpr has no
    ``.to``: that is why the fix casts with ``tl.cast`` (a declared constexpr stands in)."""
    kernel = '''
import triton
import triton.language as tl


@triton.jit
def widened_kernel(x_ptr, B: tl.constexpr, T, N: tl.constexpr = 128):
    tl.store(x_ptr + WIDENED + tl.arange(0, N), 1.0)
'''
    cast = tmp_path / "cast.py"
    cast.write_text(kernel.replace("WIDENED", "tl.cast(B, tl.int64) * T"))
    method = tmp_path / "method.py"
    method.write_text(kernel.replace("WIDENED", "B.to(tl.int64) * T"))
    assert run_lint(cast).returncode == 0
    refused = run_lint(method)
    assert refused.returncode == 2 and "could not check widened_kernel" in refused.stdout


def test_every_error_carries_its_fix_in_text_json_and_sarif():
    path = PLANTED / "overflowing.py"
    text = run_lint(path).stdout.splitlines()
    errors = [n for n, line in enumerate(text) if ": error: " in line]
    assert len(errors) >= 15
    assert all(re.match(r"^    fix: replace `.+` with `.+`", text[n + 1]) for n in errors), text
    _, report = _json(path)
    assert all(f["fix"] and f["fix"]["text"] for f in _findings(report) if f["level"] == "error")
    sarif = json.loads(run_lint(path, "--format", "sarif").stdout)
    results = [r for r in sarif["runs"][0]["results"] if r["level"] == "error"]
    assert len(results) == len(errors)
    assert all("\nFix: replace" in r["message"]["text"] and r["fixes"] for r in results)
    placed = [r["fixes"][0]["artifactChanges"][0]["replacements"][0] for r in results
              if "artifactChanges" in r["fixes"][0]]
    assert placed and all(p["insertedContent"]["text"] for p in placed)


def test_the_json_report_follows_its_published_schema(tmp_path):
    path = tmp_path / "late.py"
    path.write_text(CAST_AFTER)
    baseline = tmp_path / "baseline.json"
    assert run_lint(path, "--write-baseline", baseline).returncode == 0
    _, report = _json(path, "--baseline", baseline)
    schema = json.loads(JSON_SCHEMA.read_text())
    jsonschema.validate(report, schema)
    assert report["schema_version"] == schema["properties"]["schema_version"]["const"] == 1
    broken = dict(report, kernels=[{"kernel": "k"}])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


@pytest.mark.start_early(3)  # among the longest tests: not left for the end
def test_the_fixes_restore_the_int32_twins_of_our_kernels(tmp_path):
    """The twins are our kernels with every widening undone: their findings' fixes, written
    in, leave kernels that compile with no product left (the widenings, found again).
    Top-k/top-p is left out for time: its twin's fixes take a minute more to verify."""
    from triton_overflow.twin import write_twin
    twins = []
    for module in sorted((ROOT / "kernels").glob("[!_]*.py")):
        if "tl.int64" in module.read_text() and module.stem != "topk_topp":
            twins.append(shutil.copy(write_twin(module), tmp_path / module.name))
    assert len(twins) >= 7
    _, before = _json(tmp_path, "--verify-fixes")
    found = _findings(before)
    assert len(found) >= 40 and before["not_checked"] == []
    assert all(f["fix"]["verified"] for f in found if f["level"] == "error")
    for twin in twins:
        apply_fixes(Path(twin), [f for f in found if Path(f["file"]).name == Path(twin).name
                                 and f["fix"]])
    done, after = _json(tmp_path)
    assert after["not_checked"] == [] and len(after["kernels"]) == len(before["kernels"])
    assert _findings(after) == [] and done.returncode == 0


CARRIED = '''
import triton
import triton.language as tl


@triton.jit
def carried_slot_kernel(x_ptr, idx_ptr, n, stride, N: tl.constexpr = 128):
    acc = 0
    for k in range(n):
        slot = tl.load(idx_ptr + k)
        acc += slot * stride
    tl.store(x_ptr + acc + tl.arange(0, N), 1.0)


@triton.jit
def head_chain_kernel(x_ptr, n_heads, stride, N: tl.constexpr = 128):
    pid = tl.program_id(0)
    tl.store(x_ptr + pid * n_heads * stride + tl.arange(0, N), 1.0)


@triton.jit
def block_offsets_kernel(x_ptr, n, stride, BM: tl.constexpr = 16):
    pid = tl.program_id(0)
    block = tl.make_block_ptr(x_ptr, shape=(n, n), strides=(stride, 1), offsets=(pid * BM, 0),
                              block_shape=(BM, BM), order=(1, 0))
    tl.store(x_ptr + pid * stride + tl.arange(0, BM), 1.0)
    tl.store(block, tl.zeros((BM, BM), tl.float32))
'''


@pytest.mark.skipif(not triton_versions.block_pointers_supported(),
                    reason="this Triton removed tl.make_block_ptr")
def test_fixes_that_cannot_hold_alone_say_so_and_none_casts_a_product(tmp_path):
    """A value carried through a loop takes its widening from where it starts too: the edit
    alone is marked as not holding. A chain widens its first factor, never the product it
    made. A block pointer keeps its offsets 32-bit: the index named where it is used there is
    not widened where it is made, and the offset's own fix is advice."""
    path = tmp_path / "carried.py"
    path.write_text(CARRIED)
    _, report = _json(path, "--verify-fixes")
    found = {(f["kernel"], f["product"]): f for f in _findings(report)}
    carried = found["carried_slot_kernel", "slot * stride"]["fix"]
    assert carried["verified"] is False and "did not compile" in carried["text"]
    chain = found["head_chain_kernel", "pid * n_heads * stride"]["fix"]
    assert chain["verified"] is True and "tl.cast(pid * n_heads" not in chain["with"]
    row = found["block_offsets_kernel", "pid * stride"]["fix"]
    assert (row["replace"], row["with"], row["verified"]) == (
        "pid * stride", "tl.cast(pid, tl.int64) * stride", True)
    offset = found["block_offsets_kernel", "pid * BM"]
    assert not offset["cast_after"] and offset["fix"]["with"] is None
    assert "block pointers take 32-bit offsets only" in offset["fix"]["text"]
