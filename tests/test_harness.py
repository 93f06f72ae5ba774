"""Self-tests of the machinery: the int32 twin, huge-case geometry, the memory gate, the
interpreter hooks, and fault isolation; and the guard that every launcher parameter has a
validation case (its ``no_launch`` fixture lives in the root conftest.py)."""

import importlib
import inspect
import signal
from pathlib import Path

import pytest
import torch

from tests.lint_cli import run_python
from triton_overflow.engine.huge import first_wrapping_row, huge_layout, landing_row, wrapped_offset
from triton_overflow.engine.isolation import Outcome, run_isolated
from triton_overflow.engine.memory import (GRANULE, SHARED_BLOCK, DenseDeviceMemory,
                                           _dedicated_chunks, _shared_pieces)
from triton_overflow.engine.runner import gpu_caught
from triton_overflow.interp import execution_mode
from triton_overflow.twin import twin_source

ROOT = Path(__file__).resolve().parent.parent
PLANTED = ROOT / "tests" / "planted"
INTERPRETER = execution_mode.INTERPRETER
FAMILIES = sorted(path.stem for path in (ROOT / "kernels").glob("*.py")
                  if not path.stem.startswith("_"))


def public_launchers(module):
    """The plain Python functions a kernel module defines without a leading underscore (Triton
    functions are ``JITFunction`` objects, not functions)."""
    return {name: value for name, value in vars(module).items()
            if inspect.isfunction(value) and value.__module__ == module.__name__
            and not name.startswith("_")}


@pytest.mark.validation
@pytest.mark.parametrize("family", FAMILIES)
def test_every_launcher_parameter_has_a_validation_case(family):
    """Each parameter (but check_values) of each public launcher of ``kernels/<family>.py`` is
    the argument named by a validation case in ``tests/test_<family>.py`` (its ``VALIDATED``)."""
    launchers = public_launchers(importlib.import_module(f"kernels.{family}"))
    validated = importlib.import_module(f"tests.test_{family}").VALIDATED
    assert launchers, f"kernels/{family}.py defines no public launcher"
    assert set(validated) <= set(launchers), f"VALIDATED names no launcher: {sorted(validated)}"
    for name, launcher in launchers.items():
        parameters = set(inspect.signature(launcher).parameters) - {"check_values"}
        named = validated.get(name, set())
        untested, unknown = sorted(parameters - named), sorted(named - parameters)
        assert not untested, f"{name}: no validation case names {untested}"
        assert not unknown, f"{name} has no parameter {unknown}"


@pytest.mark.selftest
def test_twin_undoes_each_widening_in_place():
    """Both spellings are undone; lines and everything else stay byte for byte."""
    source = (PLANTED / "safe.py").read_text()
    twin, widenings = twin_source(source)
    assert [w.text for w in widenings][:4] == ["tl.program_id(0).to(tl.int64)",
                                              "tl.load(slot_ptr + tl.program_id(0)).to(tl.int64)",
                                              "tl.cast(row, tl.int64)",
                                              "row.to(tl.int64)"]
    assert len(twin.splitlines()) == len(source.splitlines())
    assert "row = tl.program_id(0)\n" in twin
    assert "x_ptr + row * stride" in twin
    assert ".to(tl.int64)" not in twin and "tl.cast(" not in twin


@pytest.mark.selftest
def test_twin_with_only_undoes_one_widening():
    """A per-widening mutant: the chosen widening undone, every other one kept."""
    source = (PLANTED / "safe.py").read_text()
    _, every = twin_source(source)
    mutant, undone = twin_source(source, only=2)
    assert undone == [every[2]]
    assert mutant.count(".to(tl.int64)") + mutant.count("tl.cast(") == len(every) - 1
    with pytest.raises(ValueError, match="does not exist"):
        twin_source(source, only=len(every))


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
    """Layouts cross the boundary they claim, and never check a row whose wrap lands on the
    start of row 0."""
    assert first_wrapping_row(131072) == 16384 and first_wrapping_row(151936) == 14135
    negative = huge_layout("negative", 131072)
    assert negative.rows == 16448 and negative.check_rows == (16384, 16447)
    assert all(wrapped_offset(r, 131072) < 0 for r in negative.check_rows)
    aliased = huge_layout("aliased", 131072)
    assert aliased.check_rows == (32831, ) and aliased.poison_rows == (63, )
    assert landing_row(32768, 131072, aliased.rows) == 0
    with pytest.raises(ValueError, match="hide the bug"):
        huge_layout("negative", 16, row_stride=2**31)


def test_a_wrap_into_another_column_of_row_0_is_still_checked():
    """With V = 151936 the first aliased row wraps 111488 columns into row 0: a wrong read there
    is shifted data, which shows, so the row is checked, and the row the read runs into is
    poisoned."""
    layout = huge_layout("aliased", 151936)
    assert wrapped_offset(28269, 151936) == 111488
    assert layout.check_rows == (28269, 28332)
    assert 1 in layout.poison_rows and 0 not in layout.poison_rows


@pytest.mark.parametrize("outcome, caught", [
    (Outcome("crashed", 1.0, returncode=-signal.SIGSEGV), True),
    (Outcome("crashed", 1.0, returncode=-signal.SIGKILL), False),
    (Outcome("crashed", 1.0, returncode=1), False),
    (Outcome("timeout", 900.0), False),
    (Outcome("failed", 1.0, error="RuntimeError", message="CUDA error: an illegal memory access "
             "was encountered"), True),
    (Outcome("failed", 1.0, error="OutOfMemoryError", message="CUDA out of memory"), False),
    (Outcome("failed", 1.0, error="RowMismatch", message="row 16447 ..."), True),
    (Outcome("passed", 1.0), False),
], ids=["segfault", "killed (out of memory)", "exit 1", "timeout", "illegal address",
        "out of memory", "wrong row", "passed"])
def test_a_gpu_twin_is_caught_only_by_a_fault_or_a_wrong_row(outcome, caught):
    """An out-of-memory kill or a timeout says nothing about the twin."""
    assert gpu_caught(outcome) is caught


@pytest.mark.parametrize("wrap", ["negative", "aliased"])
def test_the_aliased_tensor_maps_every_unplanted_chunk_once_mostly_in_whole_blocks(wrap):
    """Each chunk under the tensor is either a planted row's own or shared, never both, never
    mapped twice; away from the planted rows one mapping covers a whole block."""
    layout = huge_layout(wrap, 151936)
    planted = (0, *layout.check_rows, *layout.poison_rows)
    dedicated = _dedicated_chunks(layout, 4, planted, GRANULE)
    chunks = -(-layout.elements * 4 // GRANULE)
    pieces = _shared_pieces(chunks, dedicated, SHARED_BLOCK)
    shared = [chunk for first, count in pieces for chunk in range(first, first + count)]
    assert len(shared) == len(set(shared)) and dedicated.isdisjoint(shared)
    assert set(shared) | dedicated == set(range(chunks))
    assert {count for _, count in pieces} == {1, SHARED_BLOCK}
    assert len(pieces) < chunks // SHARED_BLOCK + len(dedicated) * SHARED_BLOCK


def test_memory_gate_says_what_was_needed():
    reason = DenseDeviceMemory().shortfall(2**50)
    if torch.cuda.is_available():
        assert reason.startswith("needs 1048576.0 GiB, ") and " GiB free" in reason
    else:
        assert reason == "needs a CUDA device (none visible)"


@pytest.mark.selftest
def test_interpreter_runs_only_the_selected_programs():
    outcome = run_isolated("tests.interp_probe:selected_rows", {"rows": 9, "selected": [2, 7]},
                           mode=INTERPRETER, timeout=300)
    assert outcome.status == "passed", outcome.output
    assert outcome.value == {"written": [2, 7], "num_programs": 9}


@pytest.mark.selftest
def test_wrap_check_names_the_line_and_spares_unsigned_wraps():
    outcome = run_isolated("tests.interp_probe:wrapping_product", {}, mode=INTERPRETER,
                           timeout=300)
    assert outcome.wrapped, outcome.output
    assert "interp_probe.py" in outcome.message and "65536 * 32768" in outcome.message
    outcome = run_isolated("tests.interp_probe:unsigned_wrap", {}, mode=INTERPRETER, timeout=300)
    assert outcome.status == "passed" and outcome.value == 0, outcome.output


@pytest.mark.selftest
def test_wrap_check_covers_left_shifts():
    outcome = run_isolated("tests.interp_probe:wrapping_shift", {}, mode=INTERPRETER, timeout=300)
    assert outcome.wrapped, outcome.output
    assert "<<" in outcome.message and "interp_probe.py" in outcome.message


@pytest.mark.selftest
def test_interpreted_loop_variables_are_int32_like_the_gpus():
    """A persistent loop over ``tl.range`` widens its variable with ``.to(tl.int64)``, and an
    unwidened loop variable times a stride wraps (caught by the wrap check)."""
    outcome = run_isolated("tests.interp_probe:persistent_rows", {"widen": True},
                           mode=INTERPRETER, timeout=300)
    assert outcome.status == "passed" and outcome.value == [0, 7, 14, 21], outcome.output
    outcome = run_isolated("tests.interp_probe:persistent_rows", {"widen": False,
                                                                  "stride": 2**30},
                           mode=INTERPRETER, timeout=300)
    assert outcome.wrapped, outcome.output


@pytest.mark.selftest
def test_interpreted_sorts_and_xor_reductions_match_numpy():
    """The interpreter tier reduces with ``^`` in one numpy call (``tl.sort`` and ``tl.flip``
    are built on it); over rows, columns and the whole block, and in sorts and flips, it gives
    numpy's results."""
    outcome = run_isolated("tests.interp_probe:xor_reductions", {}, mode=INTERPRETER,
                           timeout=300)
    assert outcome.status == "passed", outcome.output
    assert outcome.value["vectorised"]
    assert outcome.value["kernel"] == outcome.value["numpy"]


@pytest.mark.selftest
@pytest.mark.huge
def test_isolation_contains_a_planted_fault():
    """The int32 twin at a negative wrap, unchecked, kills or fails its process (a segfault in
    the interpreter, an illegal memory access on a GPU); only the child dies, and this process
    and its device still work afterwards."""
    on_gpu = torch.cuda.is_available()
    outcome = run_isolated(
        "triton_overflow.engine.runner:run_case",
        dict(case="tests.cases.logprob:TOKEN_RANKS", wrap="negative",
             backend="dense-device" if on_gpu else "lazy-host", twin=True, wrap_check=False),
        mode=execution_mode.DEVICE if on_gpu else INTERPRETER, timeout=600)
    assert outcome.status in ("crashed", "failed"), outcome.summary()
    if outcome.status == "failed":
        assert outcome.faulted or outcome.wrong_row, \
            outcome.summary()
    from kernels.logprob import compute_token_ranks
    device = torch.device("cpu" if execution_mode.interpreted() else "cuda")
    logits = torch.tensor([[1.0, 3.0, 2.0]], device=device)
    assert compute_token_ranks(logits, torch.tensor([2], device=device)).tolist() == [2]


@pytest.mark.selftest
def test_a_serial_run_interprets_kernels_when_a_conftest_imports_triton(tmp_path):
    """The plugin sets the interpreter flag before any conftest.py loads, so a conftest that
    imports Triton first (as this repository's does) cannot leave Triton's own library
    functions compiled-only. pytest-xdist workers inherit the flag, so the run is serial."""
    from triton_overflow import triton_versions
    problem = triton_versions.interpreter_problem()
    if problem:
        pytest.skip(problem)
    (tmp_path / "conftest.py").write_text("import triton\n")
    (tmp_path / "test_fill.py").write_text(
        "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def fill(out_ptr):\n"
        "    tl.store(out_ptr + tl.arange(0, 4), tl.zeros((4, ), tl.float32) + 1.0)\n\n\n"
        "def test_fill():\n    out = torch.zeros(4)\n    fill[(1, )](out)\n"
        "    assert out.tolist() == [1.0] * 4\n")
    done = run_python("-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
                      "--overflow-mode=interpreter", cwd=tmp_path)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr


@pytest.mark.selftest
def test_a_grid_stride_kernel_runs_only_the_planted_rows():
    """Rows past a persistent grid map to program ``row % grid``, and its loop visits only
    the planted rows it owns: two iterations for two rows of 50000."""
    outcome = run_isolated("tests.interp_probe:grid_stride_rows",
                           {"rows": 50000, "grid": 132, "selected": [3, 40001]},
                           mode=INTERPRETER, timeout=300)
    assert outcome.status == "passed", outcome.output
    assert outcome.value == {"written": [3, 40001], "visits": 2}


@pytest.mark.selftest
def test_rows_outside_a_grid_without_a_grid_stride_loop_say_what_to_write():
    outcome = run_isolated("tests.interp_probe:rows_outside_a_plain_grid",
                           {"rows": 20, "grid": 4, "selected": [1, 17]}, mode=INTERPRETER,
                           timeout=300)
    assert outcome.status == "failed" and outcome.error == "ValueError", outcome.output
    assert "launch grid is (4, 1, 1)" in outcome.message
    assert "programs(run)" in outcome.message


@pytest.mark.selftest
@pytest.mark.parametrize("which, values", [("first", [8]), ("each", [16])])
def test_autotuned_kernels_run_in_the_interpreter_without_benchmarks(which, values):
    """No GPU driver is needed: the first config runs, or each in turn (the last one's
    values stay), and the run says which."""
    outcome = run_isolated("tests.interp_probe:autotuned_fill", {"which": which},
                           mode=INTERPRETER, timeout=300)
    assert outcome.status == "passed", outcome.output
    assert outcome.value["values"] == values
    [line] = outcome.value["ran"]
    assert line.startswith("_autotuned_fill_kernel: BLOCK: 8")
    assert ("the first of 2 configs" if which == "first" else "each of 2 configs") in line


@pytest.mark.selftest
@pytest.mark.parametrize("model, multiprocessors", [("H100", 132), ("A100", 108)])
def test_launchers_see_the_presented_gpu(model, multiprocessors):
    outcome = run_isolated("tests.interp_probe:presented_device", {"model": model},
                           mode=INTERPRETER, timeout=300)
    assert outcome.status == "passed", outcome.output
    assert outcome.value["torch"] == outcome.value["triton"] == multiprocessors


@pytest.mark.parametrize("outcome, caught", [
    (Outcome("failed", 1.0, error="Int32WrapError", message="k.py:3 in k: int32 * wraps"), True),
    (Outcome("crashed", 1.0, returncode=-signal.SIGSEGV), True),
    (Outcome("failed", 1.0, error="RowMismatch", message="row 16447 ..."), True),
    (Outcome("crashed", 1.0, returncode=-signal.SIGKILL), False),
    (Outcome("timeout", 900.0), False),
    (Outcome("failed", 1.0, error="ValueError", message="bad argument"), False),
], ids=["wrap check", "segfault before the checked rows", "wrong row", "killed", "timeout",
        "another error"])
def test_an_interpreted_twin_is_caught_by_a_wrap_a_wrong_row_or_a_fault(outcome, caught):
    from triton_overflow.engine.runner import interpreter_caught
    assert interpreter_caught(outcome) is caught


def test_run_level_expectations_override_a_cases_expect():
    from triton_overflow.cases import OVERFLOWS, SAFE, expectation, set_expectations
    from tests.cases.min_p import MIN_P
    try:
        set_expectations(["apply_min_*=overflows", "*=safe"])
        assert expectation(MIN_P) == OVERFLOWS
        set_expectations(["other=overflows"])
        assert expectation(MIN_P) == MIN_P.expect == SAFE
        with pytest.raises(ValueError, match="CASE_GLOB=safe or CASE_GLOB=overflows"):
            set_expectations(["min_p=broken"])
    finally:
        set_expectations([])


@pytest.mark.static
def test_the_static_tier_checks_what_the_case_launches_not_the_module():
    """The module holds a WIDEN=False path (the module's lint fails); the fixed launcher never
    takes it, so its case passes; the buggy launcher's case has the error at its line."""
    from tests.engine_shaped import SCALE_ROWS, SCALE_ROWS_UNWIDENED
    from triton_overflow.engine.case_static import lint_summary, static_summary
    assert lint_summary("tests.engine_shaped", False)["exit"] == 1
    fixed = static_summary(SCALE_ROWS, twin=False)
    assert fixed["exit"] == 0 and fixed["kernels"] == ["_scale_rows_kernel"], fixed["text"]
    buggy = static_summary(SCALE_ROWS_UNWIDENED, twin=False)
    errors = {f["where"] for f in buggy["findings"] if f["level"] == "error"}
    assert errors == {"tests/engine_shaped.py:24", "tests/engine_shaped.py:25"}, buggy["text"]
    twin = static_summary(SCALE_ROWS, twin=True)
    assert twin["exit"] == 1 and {f["kernel"] for f in twin["findings"]} == {"_scale_rows_kernel"}


@pytest.mark.selftest
@pytest.mark.huge
@pytest.mark.parametrize("case, twin, expected", [
    ("SCALE_ROWS", False, "passed"), ("SCALE_ROWS", True, "wrapped"),
    ("SCALE_ROWS_UNWIDENED", False, "wrapped"), ("SCALE_ROWS_PADDED", False, "passed"),
    ("SCALE_ROWS_PADDED", True, "wrapped")])
def test_an_engine_shaped_kernel_needs_no_override_in_the_interpreter(case, twin, expected):
    """Autotuned, persistent, device-sized: the huge case runs as written, in seconds."""
    outcome = run_isolated("triton_overflow.engine.runner:run_case",
                           dict(case=f"tests.engine_shaped:{case}", wrap="negative",
                                backend="lazy-host", twin=twin, wrap_check=True),
                           mode=INTERPRETER, timeout=600)
    if expected == "passed":
        assert outcome.status == "passed", outcome.output
        assert "the first of 2 configs" in outcome.value["configs"][0]
    else:
        assert outcome.wrapped and ".py:24 in _scale_rows_kernel" in outcome.message, outcome.output
        assert "engine_shaped" in outcome.message


@pytest.mark.selftest
def test_a_column_loop_whose_step_equals_the_grid_is_not_taken_for_the_row_loop():
    """Only a loop whose start comes from program_id(0) is narrowed to the planted rows."""
    outcome = run_isolated("tests.interp_probe:persistent_columns",
                           {"rows": 300, "cols": 40, "grid": 16, "selected": [0, 290]},
                           mode=INTERPRETER, timeout=300)
    assert outcome.status == "passed", outcome.output
    assert outcome.value == {"rows": [0, 290], "columns written": [40, 40]}
