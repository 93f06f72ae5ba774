"""Self-tests of the harness: each detector on planted bugs, and fault isolation."""

from pathlib import Path

import pytest
import torch

from harness.huge import first_wrapping_row, huge_layout, landing_row, wrapped_offset
from harness.isolation import run_isolated
from harness.memory import DenseDeviceMemory
from harness.twin import twin_source
from tests.lint_cli import run_lint

ROOT = Path(__file__).resolve().parent.parent
PLANTED = ROOT / "tests" / "planted"


@pytest.mark.selftest
@pytest.mark.static
def test_lint_flags_each_planted_product():
    """Program id, loaded index, loop variable, helper and too-late widening: each is found."""
    done = run_lint(PLANTED / "overflowing.py")
    assert done.returncode == 1, done.stdout + done.stderr
    for kernel in ("program_id_times_stride_kernel", "loaded_index_times_stride_kernel",
                   "loop_variable_times_stride_kernel", "product_in_helper_kernel",
                   "widened_too_late_kernel", "bounded_without_reason_kernel"):
        assert f": {kernel}: i32 multiply feeds a pointer offset" in done.stdout, done.stdout
    assert "tests/planted/overflowing.py:14:" in done.stdout


@pytest.mark.selftest
@pytest.mark.static
def test_lint_passes_widened_kernels():
    """Widened kernels, and a product marked bounded with its reason, have no finding."""
    done = run_lint(PLANTED / "safe.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 kernels checked, 0 with findings" in done.stdout


@pytest.mark.selftest
@pytest.mark.static
def test_lint_exits_2_when_there_is_nothing_to_check(tmp_path):
    (tmp_path / "empty.py").write_text("x = 1\n")
    done = run_lint(tmp_path / "empty.py")
    assert done.returncode == 2 and "no @triton.jit kernel" in done.stdout


@pytest.mark.selftest
@pytest.mark.static
def test_lint_honours_a_bounded_marker_only_with_its_reason():
    """`# overflow-lint: bounded by <reason>` silences its line; the bare marker does not."""
    safe = run_lint(PLANTED / "safe.py")
    assert "bounded_block_product_kernel" not in safe.stdout, safe.stdout
    flagged = run_lint(PLANTED / "overflowing.py")
    assert ": bounded_without_reason_kernel: i32 multiply" in flagged.stdout, flagged.stdout


@pytest.mark.selftest
def test_twin_undoes_each_widening_in_place():
    """Both spellings are undone; lines and everything else stay byte for byte."""
    source = (PLANTED / "safe.py").read_text()
    twin, widenings = twin_source(source)
    assert [w.text for w in widenings] == ["tl.program_id(0).to(tl.int64)",
                                          "tl.load(slot_ptr + tl.program_id(0)).to(tl.int64)",
                                          "tl.cast(row, tl.int64)",
                                          "tl.program_id(0).to(tl.int64)"]
    assert len(twin.splitlines()) == len(source.splitlines())
    assert "row = tl.program_id(0)\n" in twin
    assert "x_ptr + row * stride" in twin
    assert "int64" not in twin


@pytest.mark.selftest
def test_twin_keeps_unsigned_conversions():
    """A uint64 conversion assembles random bits; undoing it would change the kernel itself."""
    source = ("@triton.jit\ndef k(hi, lo, r):\n"
              "    bits = (hi.to(tl.uint64) << 32) | lo.to(tl.uint64)\n"
              "    row = r.to(tl.int64)\n")
    twin, widenings = twin_source(source)
    assert [w.text for w in widenings] == ["r.to(tl.int64)"]
    assert "hi.to(tl.uint64) << 32" in twin


@pytest.mark.selftest
def test_twin_leaves_code_outside_jit_functions_alone():
    source = "import triton\nx = y.to(tl.int64)\n@triton.jit\ndef k(a):\n    b = a.to(tl.int64)\n"
    twin, widenings = twin_source(source)
    assert twin == "import triton\nx = y.to(tl.int64)\n@triton.jit\ndef k(a):\n    b = a\n"
    assert [w.line for w in widenings] == [5]


def test_huge_layout_geometry():
    """Layouts cross the boundary they claim, and never check a row whose wrap lands on row 0."""
    assert first_wrapping_row(131072) == 16384 and first_wrapping_row(151936) == 14135
    negative = huge_layout("negative", 131072)
    assert negative.rows == 16448 and negative.check_rows == (16384, 16447)
    assert all(wrapped_offset(r, 131072) < 0 for r in negative.check_rows)
    aliased = huge_layout("aliased", 131072)
    assert aliased.check_rows == (32831, ) and aliased.poison_rows == (63, )
    assert landing_row(32768, 131072, aliased.rows) == 0
    with pytest.raises(ValueError, match="hide the bug"):
        huge_layout("negative", 16, row_stride=2**31)


def test_memory_gate_says_what_was_needed():
    reason = DenseDeviceMemory().shortfall(2**50)
    if torch.cuda.is_available():
        assert reason.startswith("needs 1048576.0 GiB, ") and " GiB free" in reason
    else:
        assert reason == "needs a CUDA device (none visible)"


@pytest.mark.selftest
def test_interpreter_runs_only_the_selected_programs():
    outcome = run_isolated("tests.interp_probe:selected_rows", {"rows": 9, "selected": [2, 7]},
                           env={"TRITON_INTERPRET": "1"}, timeout=300)
    assert outcome.status == "passed", outcome.output
    assert outcome.value == {"written": [2, 7], "num_programs": 9}


@pytest.mark.selftest
def test_wrap_check_names_the_line_and_spares_unsigned_wraps():
    outcome = run_isolated("tests.interp_probe:wrapping_product", {},
                           env={"TRITON_INTERPRET": "1"}, timeout=300)
    assert outcome.status == "failed" and outcome.error == "Int32WrapError", outcome.output
    assert "interp_probe.py" in outcome.message and "65536 * 32768" in outcome.message
    outcome = run_isolated("tests.interp_probe:unsigned_wrap", {}, env={"TRITON_INTERPRET": "1"},
                           timeout=300)
    assert outcome.status == "passed" and outcome.value == 0, outcome.output


_planted_fault = {}


@pytest.mark.selftest
@pytest.mark.huge
def test_isolation_contains_a_planted_fault():
    """The int32 twin at a negative wrap, unchecked, kills its process (segfault in the
    interpreter, illegal memory access on a GPU); only the child dies."""
    on_gpu = torch.cuda.is_available()
    outcome = run_isolated(
        "harness.runner:run_case",
        dict(case="tests.cases.logprob:TOKEN_RANKS", mode="negative",
             backend="dense-device" if on_gpu else "lazy-host", twin=True, wrap_check=False),
        env=None if on_gpu else {"TRITON_INTERPRET": "1"},
        unset_env=("TRITON_INTERPRET", ) if on_gpu else (), timeout=600)
    _planted_fault["outcome"] = outcome
    assert outcome.status in ("crashed", "failed"), outcome.summary()
    if outcome.status == "failed":
        assert outcome.device_fault or outcome.error in ("RowMismatch", "AssertionError"), outcome.summary()


@pytest.mark.selftest
def test_suite_continues_after_the_planted_fault(device):
    """Runs after the planted fault in the same session: this process and its device still work."""
    if "outcome" not in _planted_fault:
        pytest.fail("test_isolation_contains_a_planted_fault did not run first in this session")
    from kernels.logprob import compute_token_ranks
    logits = torch.tensor([[1.0, 3.0, 2.0]], device=device)
    assert compute_token_ranks(logits, torch.tensor([2], device=device)).tolist() == [2]
