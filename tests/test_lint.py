"""Self-tests of the static check: every planted overflow is flagged at its line, every safe
twin is clean, and the exit codes mean one thing each. Run as a user runs it, in a fresh process
(``python -m triton_overflow lint``)."""

import ast
import json
import re
from pathlib import Path

import pytest

from tests.lint_cli import ROOT, WITHOUT_INTERPRETER, run_lint
from triton_overflow import triton_versions
from triton_overflow.lint import arithmetic

PLANTED = ROOT / "tests" / "planted"
FINDING = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+): (?P<level>error|warning|note): "
                     r"(?P<kernel>\w+): [iu]32 multiply feeds a pointer offset", re.M)
pytestmark = [pytest.mark.static, pytest.mark.selftest]


def planted_lines(path, mark="# <- wraps"):
    """{kernel: {lines}} from the ``# <- wraps`` marks (or another mark); a helper's marks count
    for its callers. Kernels under module-level ``if`` / ``else`` count too."""
    source = Path(path).read_text()
    tree = ast.parse(source)
    marked = {n for n, text in enumerate(source.splitlines(), 1) if mark in text}
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    spans = {f.name: {n for n in marked if f.lineno <= n <= f.end_lineno} for f in functions}
    calls = {f.name: {c.func.id for c in ast.walk(f) if isinstance(c, ast.Call)
                      and isinstance(c.func, ast.Name) and c.func.id in spans} for f in functions}
    helpers = set().union(*calls.values())
    return {name: lines | set().union(*(spans[h] for h in calls[name]))
            for name, lines in spans.items() if name not in helpers}


def findings(output, levels=("error", )):
    """{kernel: {lines}} of the findings at ``levels``."""
    found = {}
    for match in FINDING.finditer(output):
        if match["level"] in levels:
            found.setdefault(match["kernel"], set()).add(int(match["line"]))
    return found


def test_every_planted_product_is_flagged_at_its_line():
    """Program ids, loaded indices, loop variables, helpers (one returning a tuple of pointers
    among them), late widening, autotune and heuristics stacks, loop- and branch-carried
    offsets, a flag whose default is False, pointers without a _ptr suffix, Inductor-style
    names, loaded loop bounds, int32 strides."""
    done = run_lint(PLANTED / "overflowing.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert findings(done.stdout) == planted_lines(PLANTED / "overflowing.py"), done.stdout
    assert "tests/planted/overflowing.py:14: error: program_id_times_stride_kernel:" in done.stdout


def test_widened_kernels_have_no_finding():
    """Each planted kernel widened, provably small, or marked bounded with a reason: clean."""
    done = run_lint(PLANTED / "safe.py")
    assert done.returncode == 0, done.stdout + done.stderr
    expected = len(planted_lines(PLANTED / "safe.py"))
    assert f"{expected} kernels checked, 0 with findings" in done.stdout, done.stdout


def test_kernels_as_engines_ship_them_are_all_analysed_and_flagged_at_error():
    """The engine is not installed: decorator arguments, a helper and a module-level branch
    come from it; a string constexpr, two constexprs compared, one compared with a literal
    only (``if EXTRA != 0``), a pointer picked at run time, a ``tl.tensor`` annotation, a table
    of raw addresses, a float table cast to an index and ``tl.swizzle2d``; data read as bytes
    (bitcasts, AMD's fp8), one local pointer set from two caches, loads a helper returns as a
    tuple, engine helpers given a dtype or unpacked in pairs, a ``tl.dot`` partner in half
    precision, a loaded float only compared, a block size sliced by a factor, a loop stepped
    by a block size, and a Triton function since removed. Every kernel is checked and every
    wrapping product is an error; the products the kernels bound themselves are warnings."""
    path = PLANTED / "shipped_overflowing.py"
    done = run_lint(path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "could not check" not in done.stdout, done.stdout
    assert findings(done.stdout) == planted_lines(path), done.stdout
    assert findings(done.stdout, ("warning", "note")) == \
        {k: v for k, v in planted_lines(path, "# <- bounded").items() if v}, done.stdout
    assert "p * 200" not in done.stdout, "a float product is not an integer product"
    # The swizzle's own product is Triton's; it is reported on the line that calls it.
    assert "triton/language" not in done.stdout, done.stdout


def test_the_same_kernels_widened_exit_0_with_only_their_bounded_products():
    path = PLANTED / "shipped_safe.py"
    done = run_lint(path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "could not check" not in done.stdout and "0 errors" in done.stdout, done.stdout
    assert findings(done.stdout, ("warning", "note")) == \
        {k: v for k, v in planted_lines(path, "# <- bounded").items() if v}, done.stdout
    assert set(planted_lines(path)) == set(planted_lines(PLANTED / "shipped_overflowing.py"))


def test_products_the_kernel_bounds_itself_are_below_error_with_their_bound():
    """Column tiles, a reduction over K, heads and splits on grid axes 1 and 2, an offset
    inside a page, a persistent program's scratch row: each a warning or a note saying what
    bounds it, and the file exits 0."""
    path = PLANTED / "bounded.py"
    done = run_lint(path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert findings(done.stdout) == {}, done.stdout
    assert findings(done.stdout, ("warning", "note")) == planted_lines(path, "# <- bounded")
    assert "program_id(1) (at most 65,535 programs on that axis)" in done.stdout
    assert "the program id of a persistent kernel" in done.stdout
    assert "a loop to int argument `K`" in done.stdout
    assert "a remainder by int argument `page_size`" in done.stdout
    strict = run_lint(path, "--fail-on", "warning")
    assert strict.returncode == 1, strict.stdout


def test_nothing_the_compiler_prints_reaches_stdout(tmp_path):
    """A kernel whose TTIR fails verification (MLIR dumps the whole module): one line with
    the compiler's own error, and --format json stays JSON."""
    text = SAFE_KERNEL + ("\n\n@triton.jit\ndef raw_address_kernel(ptrs_ptr: \"*i32\", stride):\n"
                          "    row = tl.program_id(0).to(tl.int64)\n"
                          "    base = tl.load(ptrs_ptr + row).to(tl.pointer_type(tl.float32))\n"
                          "    tl.store(base + row * stride, 1.0)\n")
    path = _write(tmp_path, "verify.py", text)
    done = run_lint(path)
    assert done.returncode == 2, done.stdout + done.stderr
    (line, ) = [text for text in done.stdout.splitlines() if "could not check" in text]
    assert "'tt.int_to_ptr' op operand #0 must be 64-bit" in line, done.stdout
    assert len(done.stdout) < 2000 and "builtin.module" not in done.stdout + done.stderr
    report = json.loads(run_lint(path, "--format", "json").stdout)
    assert report["exit_code"] == 2 and report["not_checked"][0]["kernel"] == "raw_address_kernel"


def test_no_exec_runs_nothing_of_the_file_and_finds_the_same(tmp_path):
    """--no-exec: the file's own statements never run (one would write a file), yet the kernels
    are built and give the same findings as the import does."""
    marker = tmp_path / "ran"
    text = (f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n"
            "from not_installed_engine import helper\n" + BUGGY_KERNEL.replace(
                "import triton\nimport triton.language as tl\n",
                "import triton\nimport triton.language as tl\nSTRIDE = 4\n"))
    path = _write(tmp_path, "untrusted.py", text)
    safe = run_lint("--no-exec", path)
    assert not marker.exists(), "the file's code ran"
    assert safe.returncode == 1, safe.stdout + safe.stderr
    for planted in ("shipped_overflowing.py", "shipped_safe.py", "bounded.py", "overflowing.py"):
        plain, isolated = run_lint(PLANTED / planted), run_lint("--no-exec", PLANTED / planted)
        assert findings(plain.stdout, ("error", "warning", "note")) == \
            findings(isolated.stdout, ("error", "warning", "note")), planted
        assert plain.returncode == isolated.returncode, planted
        assert "could not check" not in isolated.stdout, isolated.stdout
        assert plain.stdout.count(" kernels checked") == 1 and \
            plain.stdout.splitlines()[-1] == isolated.stdout.splitlines()[-1], planted


def test_safe_and_overflowing_plant_the_same_kernels():
    """Every overflowing pattern has its safe twin, and the other way round."""
    safe = set(planted_lines(PLANTED / "safe.py"))
    overflowing = set(planted_lines(PLANTED / "overflowing.py"))
    assert overflowing - safe == {"bounded_without_reason_kernel",
                                  "marker_names_another_product_kernel",
                                  "int32_annotated_stride_kernel", "widened_too_late_kernel"}
    assert safe - overflowing == {"block_offsets_kernel", "bounded_block_product_kernel",
                                  "small_constant_product_kernel",
                                  "int64_annotated_stride_kernel"}


@pytest.mark.skipif(not triton_versions.block_pointers_supported(),
                    reason="this Triton removed tl.make_block_ptr; see the test below")
def test_block_pointer_products_are_flagged_and_block_offsets_are_not():
    done = run_lint(PLANTED / "overflowing_block_pointers.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert findings(done.stdout) == planted_lines(PLANTED / "overflowing_block_pointers.py")
    done = run_lint(PLANTED / "safe_block_pointers.py")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(triton_versions.block_pointers_supported(),
                    reason="this Triton still has tl.make_block_ptr; see the test above")
def test_block_pointer_kernels_are_reported_not_checked_where_triton_removed_them():
    done = run_lint(PLANTED / "safe_block_pointers.py")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.count("could not check block_pointer_") == 2, done.stdout


def test_a_bare_marker_or_one_naming_another_product_silences_nothing():
    done = run_lint(PLANTED / "overflowing.py")
    flagged = findings(done.stdout)
    assert flagged["bounded_without_reason_kernel"] and flagged["marker_names_another_product_kernel"]


# --- exit codes and problems -----------------------------------------------------------------

SAFE_KERNEL = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
               "def copy_kernel(x_ptr, stride):\n"
               "    row = tl.program_id(0).to(tl.int64)\n"
               "    tl.store(x_ptr + row * stride, 1.0)\n")
BUGGY_KERNEL = SAFE_KERNEL.replace(".to(tl.int64)", "")


def _write(folder, name, text):
    path = folder / name
    path.write_text(text)
    return path


def test_exit_0_when_every_kernel_is_checked_and_clean(tmp_path):
    done = run_lint(_write(tmp_path, "ok.py", SAFE_KERNEL))
    assert done.returncode == 0 and "1 kernels checked, 0 with findings" in done.stdout


def test_exit_2_when_there_is_nothing_to_check(tmp_path):
    done = run_lint(_write(tmp_path, "empty.py", "x = 1\n"))
    assert done.returncode == 2 and "no @triton.jit kernel" in done.stdout
    done = run_lint(tmp_path / "missing.py")
    assert done.returncode == 2 and "could not check" in done.stdout, done.stdout


def test_a_combine_function_is_a_helper_not_a_kernel(tmp_path):
    """A jit function passed to tl.reduce is checked inside its caller, never on its own."""
    kernel = SAFE_KERNEL + ("\n\n@triton.jit\ndef _pick_larger(a, b):\n    return tl.maximum(a, b)\n"
                            "\n\n@triton.jit\ndef reduce_kernel(x_ptr, stride):\n"
                            "    row = tl.program_id(0)\n"
                            "    x = tl.load(x_ptr + tl.arange(0, 16))\n"
                            "    tl.store(x_ptr + row * stride, tl.reduce(x, 0, _pick_larger))\n")
    done = run_lint(_write(tmp_path, "reduce.py", kernel))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 kernels checked, 1 with findings" in done.stdout, done.stdout
    assert "_pick_larger" not in done.stdout, done.stdout


def test_a_helper_module_holds_no_kernels(tmp_path):
    """A jit function that a kernel of another module imports and calls is a helper there,
    checked inside that kernel: a family's helper module is not a kernel module."""
    package = tmp_path / "family"
    package.mkdir()
    _write(package, "__init__.py", "")
    _write(package, "_helpers.py", "import triton\nimport triton.language as tl\n\n\n"
           "@triton.jit\ndef _clip(x):\n    return tl.minimum(tl.maximum(x, -1.0), 1.0)\n")
    _write(package, "clip.py", "import triton\nimport triton.language as tl\n\n"
           "from family._helpers import _clip\n\n\n@triton.jit\n"
           "def clip_kernel(x_ptr, stride):\n    row = tl.program_id(0).to(tl.int64)\n"
           "    offs = row * stride + tl.arange(0, 16)\n"
           "    tl.store(x_ptr + offs, _clip(tl.load(x_ptr + offs)))\n")
    for without_running in ((), ("--no-exec", )):
        done = run_lint("family", *without_running, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 kernels checked" in done.stdout and "_clip" not in done.stdout, done.stdout


def test_a_syntax_error_is_one_line_and_the_rest_is_checked(tmp_path):
    _write(tmp_path, "broken.py", "import triton\n@triton.jit\ndef k(:\n")
    _write(tmp_path, "ok.py", SAFE_KERNEL)
    done = run_lint(tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert re.search(r"could not check broken\.py:3: SyntaxError", done.stdout.replace(
        str(tmp_path) + "/", "")), done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    _write(tmp_path, "bug.py", BUGGY_KERNEL)
    done = run_lint(tmp_path)
    assert done.returncode == 1, "findings win over problems: " + done.stdout


def test_a_kernel_that_cannot_compile_is_one_line_and_the_rest_is_checked(tmp_path):
    _write(tmp_path, "mixed.py", BUGGY_KERNEL + "\n\n@triton.jit\ndef broken_kernel(x_ptr):\n"
                                 "    tl.store(x_ptr, undefined_helper(1))\n")
    done = run_lint(tmp_path / "mixed.py")
    assert done.returncode == 1, done.stdout
    assert "could not check broken_kernel at" in done.stdout
    assert ": copy_kernel: i32 multiply" in done.stdout


def test_files_starting_with_underscore_are_searched(tmp_path):
    _write(tmp_path, "_private.py", BUGGY_KERNEL)
    done = run_lint(tmp_path)
    assert done.returncode == 1 and "_private.py:8: error: copy_kernel" in done.stdout, done.stdout


def test_a_module_whose_imports_fail_is_still_checked(tmp_path):
    """An engine's kernel file imports its package; without it installed, the kernels are
    still checked, with a note saying what was left out."""
    text = BUGGY_KERNEL.replace("import triton\nimport triton.language as tl\n",
                                "from someengine.triton_utils import tl, triton\n\n")
    _write(tmp_path, "engine.py", text)
    done = run_lint(tmp_path / "engine.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "note:" in done.stdout and "someengine" in done.stdout


def test_the_interpreter_flag_in_the_environment_changes_nothing(tmp_path):
    path = _write(tmp_path, "bug.py", BUGGY_KERNEL)
    plain = run_lint(path)
    interpreted = run_lint(path, env={**WITHOUT_INTERPRETER, "TRITON_INTERPRET": "1"})
    assert interpreted.returncode == plain.returncode == 1
    assert interpreted.stdout == plain.stdout


def test_json_and_sarif_name_every_finding(tmp_path):
    path = _write(tmp_path, "bug.py", BUGGY_KERNEL)
    done = run_lint(path, "--format", "json")
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["exit_code"] == 1
    (finding, ) = report["kernels"][0]["findings"]
    assert finding["line"] == 8 and finding["product"] == "row * stride"
    done = run_lint(path, "--format", "sarif")
    sarif = json.loads(done.stdout)
    (result, ) = sarif["runs"][0]["results"]
    assert sarif["version"] == "2.1.0" and result["ruleId"] == "i32-offset-product"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 8


def test_limits_say_whether_an_envelope_reaches_the_wrap(tmp_path):
    path = _write(tmp_path, "bug.py", BUGGY_KERNEL)
    below = run_lint(path, "--limits", "rows=16384,stride=131072")
    assert "stays below 2**31 within the limits" in below.stdout, below.stdout
    assert ": note: copy_kernel:" in below.stdout and below.returncode == 0, below.stdout
    above = run_lint(path, "--limits", "rows=16385,stride=131072")
    assert "it wraps there" in above.stdout, above.stdout
    assert ": error: copy_kernel:" in above.stdout and above.returncode == 1, above.stdout


VARIANT_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def packed_or_varlen_kernel(x_ptr, T, IS_VARLEN: tl.constexpr = True):
    i_v = tl.program_id(0)
    if IS_VARLEN:
        stride = T
    else:
        stride = 16 * T
    tl.store(x_ptr + i_v * stride, 1.0)
"""


def test_a_product_takes_its_largest_value_over_every_flag_variant(tmp_path):
    """Within the limits the product stays below 2**31 when IS_VARLEN (its default) and
    wraps when not: the finding is the one that wraps."""
    done = run_lint(_write(tmp_path, "variants.py", VARIANT_KERNEL),
                    "--limits", "T=50000000,grid0=4")
    assert done.returncode == 1, done.stdout
    assert ": error: packed_or_varlen_kernel: i32 multiply feeds a pointer offset: " \
        "`i_v * stride`" in done.stdout and "reaches 2.40e9" in done.stdout, done.stdout


CONSTEXPR_FACTOR_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def packed_kernel(x_ptr, T, B: tl.constexpr, N: tl.constexpr = 16):
    tl.store(x_ptr + B * T + tl.arange(0, N), 1.0)
"""


def test_the_headroom_names_the_side_that_is_not_the_constexpr(tmp_path):
    """``B`` is a constexpr, so the compiler holds it as a constant, on whichever side it
    likes: what wraps is ``T``."""
    done = run_lint(_write(tmp_path, "packed.py", CONSTEXPR_FACTOR_KERNEL))
    assert "wraps once T reaches 2**31 / " in done.stdout, done.stdout


def test_limits_with_a_name_no_kernel_has_are_refused_with_the_valid_ones(tmp_path):
    path = _write(tmp_path, "bug.py", BUGGY_KERNEL)
    done = run_lint(path, "--limits", "rows=16384,strid=131072")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "strid" in done.stderr and "stride, x_ptr" in done.stderr, done.stderr


def test_a_usage_error_exits_3_not_a_verdict(tmp_path):
    """0, 1 and 2 are the check's verdicts; a command it cannot run as asked exits 3."""
    path = _write(tmp_path, "bug.py", BUGGY_KERNEL)
    assert run_lint(path, "--fail-on", "errors").returncode == 3
    assert run_lint().returncode == 3
    unreadable = _write(tmp_path, "baseline.json", "{")
    done = run_lint(path, "--baseline", unreadable)
    assert done.returncode == 3 and "cannot read the baseline" in done.stderr


def test_a_baseline_fails_only_on_new_findings_and_survives_moved_lines(tmp_path):
    path = _write(tmp_path, "bug.py", BUGGY_KERNEL)
    baseline = tmp_path / "baseline.json"
    written = run_lint(path, "--write-baseline", baseline)
    assert written.returncode == 0 and json.loads(baseline.read_text())["findings"], written.stderr
    assert run_lint(path, "--baseline", baseline).returncode == 0
    path.write_text(BUGGY_KERNEL.replace("@triton.jit", "\n\n# moved down\n@triton.jit"))
    moved = run_lint(path, "--baseline", baseline)
    assert moved.returncode == 0 and "0 not in the baseline" in moved.stdout, moved.stdout
    path.write_text(path.read_text() + "    tl.store(x_ptr + row * (stride + 1), 2.0)\n")
    new = run_lint(path, "--baseline", baseline)
    assert new.returncode == 1 and "1 not in the baseline" in new.stdout, new.stdout
    sarif = json.loads(run_lint(path, "--format", "sarif").stdout)
    prints = [r["partialFingerprints"]["kernelProduct/v1"] for r in sarif["runs"][0]["results"]]
    assert len(set(prints)) == 2 and {r["level"] for r in sarif["runs"][0]["results"]} == {"error"}


TYPED_KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def fallback_index_kernel(idx_ptr, fallback_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr = 16):
    offs = tl.arange(0, BLOCK)
    live = tl.load(flag_ptr + offs) > 0.5
    idx = tl.load(idx_ptr + offs, mask=live, other=tl.load(fallback_ptr))
    tl.store(out_ptr + idx, 1.0)


@triton.jit
def reserved_slots_kernel(total_ptr, length_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr = 16):
    row = tl.program_id(0)
    live = tl.load(flag_ptr + row) > 0.5
    base = tl.atomic_add(total_ptr + row, tl.load(length_ptr + row) * BLOCK, mask=live)
    tl.store(out_ptr + base + tl.arange(0, BLOCK), 1.0)


@triton.jit
def lock_kernel(lock_ptr, out_ptr):
    won = tl.atomic_cas(lock_ptr, 0, 1) == 0
    if won:
        tl.store(out_ptr, 1.0)
'''


def test_pointer_types_follow_what_a_load_returns(tmp_path):
    """An index can come from a load's ``other`` or from an atomic (its old value, and what was
    added to it): those pointers are int32. What a mask loads flows into nothing, and an
    atomic's pointer is never typed i1 (atomics take none)."""
    import importlib.util

    from triton_overflow.lint.signature import plan
    spec = importlib.util.spec_from_file_location("typed_kernels",
                                                  _write(tmp_path, "typed_kernels.py", TYPED_KERNELS))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    types = plan(triton_versions.jit_function_of(module.fallback_index_kernel)).types
    assert [types[p] for p in ("idx_ptr", "fallback_ptr", "flag_ptr")] == ["*i32", "*i32", "*fp32"]
    types = plan(triton_versions.jit_function_of(module.reserved_slots_kernel)).types
    assert [types[p] for p in ("total_ptr", "length_ptr", "flag_ptr")] == ["*i32", "*i32", "*fp32"]
    assert plan(triton_versions.jit_function_of(module.lock_kernel)).types["lock_ptr"] != "*i1"


SLOT_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def slot_rows_kernel(counter_ptr, out_ptr, stride, BLOCK: tl.constexpr = 16):
    slot = tl.atomic_add(counter_ptr, 1)
    tl.store(out_ptr + slot * stride + tl.arange(0, BLOCK), 1.0)
"""


def test_a_slot_taken_from_an_atomic_is_named_as_such(tmp_path):
    done = run_lint(_write(tmp_path, "slots.py", SLOT_KERNEL))
    assert done.returncode == 1, done.stdout + done.stderr
    expected = ("`slot * stride` (old value an atomic returned from `counter_ptr` * int argument "
                "`stride`)")
    assert expected in done.stdout, done.stdout


BLOCK_KERNELS = """
import triton
import triton.language as tl


@triton.jit
def guessed_block_kernel(out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1.0)


@triton.jit
def given_block_kernel(out_ptr, BLOCK: tl.constexpr = 256):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1.0)
"""


def test_a_block_size_it_had_to_guess_is_said(tmp_path):
    done = run_lint(_write(tmp_path, "blocks.py", BLOCK_KERNELS))
    assert done.returncode == 0, done.stdout + done.stderr
    notes = [line for line in done.stdout.splitlines() if line.startswith("note:")]
    assert len(notes) == 1, done.stdout
    assert ("guessed_block_kernel: `BLOCK` has no default or autotune config: checked as "
            "BLOCK = 128") in notes[0]


GRID_AXIS_KERNELS = """
import triton
import triton.language as tl


@triton.jit
def vocab_block_kernel(out_ptr, BLOCK: tl.constexpr = 1024):
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1.0)


@triton.jit
def wide_block_kernel(out_ptr, BLOCK: tl.constexpr = 65536):
    offs = tl.program_id(2) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1.0)


@triton.jit
def row_axis_kernel(out_ptr, stride, BLOCK: tl.constexpr = 16):
    tl.store(out_ptr + tl.program_id(1) * stride + tl.arange(0, BLOCK), 1.0)
"""


def test_program_ids_past_the_first_axis_stay_below_65535(tmp_path):
    """CUDA grids hold at most 65535 programs along axes 1 and 2, so a block index there times
    a block size up to 32768 cannot wrap; times a larger block or an unknown stride it can:
    reported, below error, with the bound."""
    done = run_lint(_write(tmp_path, "axes.py", GRID_AXIS_KERNELS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "vocab_block_kernel" not in done.stdout, done.stdout
    assert "note: wide_block_kernel: i32 multiply" in done.stdout, done.stdout
    assert "warning: row_axis_kernel: i32 multiply" in done.stdout, done.stdout
    assert "program_id(1) (at most 65,535 programs on that axis)" in done.stdout


SUM_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def next_row_kernel(out_ptr, stride, BLOCK: tl.constexpr = 16):
    row = tl.program_id(0)
    tl.store(out_ptr + (
        row + 1) * stride + tl.arange(0, BLOCK), 1.0)
"""


def test_a_sum_times_a_stride_keeps_its_parentheses(tmp_path):
    done = run_lint(_write(tmp_path, "sums.py", SUM_KERNEL))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "`(row + 1) * stride`" in done.stdout, done.stdout
    assert "wraps once (row + 1) * stride reaches 2**31" in done.stdout, done.stdout


NESTED_KERNEL = """
import triton
import triton.language as tl

FIELDS = tl.constexpr(4)


@triton.jit
def part_fields_kernel(stats_ptr, parts, PARTS: tl.constexpr = 16):
    row = tl.program_id(0)
    lanes = tl.arange(0, PARTS)
    tl.store(stats_ptr + (row * parts + lanes) * FIELDS, 1.0)
"""


def test_a_product_around_another_is_told_from_it_on_every_triton(tmp_path):
    """Triton 3.8 moved an op's source column from the right operand to the expression's
    start, where the inner product starts one character later: both are still reported, each
    as written."""
    done = run_lint(_write(tmp_path, "nested.py", NESTED_KERNEL), "--format", "json")
    found = json.loads(done.stdout)["kernels"][0]["findings"]
    assert sorted(f["product"] for f in found) == ["(row * parts + lanes) * FIELDS",
                                                   "row * parts"], found


FOLDED_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def chunk_states_kernel(h, n_chunks, H: tl.constexpr = 4, K: tl.constexpr = 64,
                        V: tl.constexpr = 64, BV: tl.constexpr = 16):
    i_v = tl.program_id(0)
    for i_t in range(n_chunks):
        tl.store(h + i_t * H*K*V + i_v * BV + tl.arange(0, BV), 1.0)
"""


def test_a_product_whose_constants_fold_into_one_is_named_as_written(tmp_path):
    """``i_t * H*K*V`` compiles to one multiply, ``i_t * 16384``, that no product on the line
    has the shape of: it is still a product written there, not one inside ``tl.store``. Where
    Triton places the column on the right operand, that is the whole chain; where it places it
    at the expression's start (3.8 on), which the chain's products share, the first of them."""
    done = run_lint(_write(tmp_path, "folded.py", FOLDED_KERNEL), "--format", "json")
    found = json.loads(done.stdout)["kernels"][0]["findings"]
    folded = "i_t * H" if triton_versions.source_columns_are_starts() else "i_t * H*K*V"
    assert sorted(f["product"] for f in found) == [folded, "i_v * BV"], found


GUARDED_KERNEL = """
import triton
import triton.language as tl

INT32_SAFE = 2**31 - 1 - 1024


@triton.jit
def scale_kernel(x_ptr, y_ptr, z_ptr, n_elements, stride, BLOCK: tl.constexpr = 128,
                 LONG_INDEXING: tl.constexpr = False):
    block = tl.program_id(0)
    if LONG_INDEXING:
        offsets = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        rows = block.to(tl.int64) * 4
    else:
        offsets = block * BLOCK + tl.arange(0, BLOCK)
        rows = block * 4
    tl.store(z_ptr + rows * stride, 1.0)
    tl.store(x_ptr + offsets, 1.0, mask=offsets < n_elements)
    tl.store(y_ptr + block * stride, 1.0)


def scale(x, y):
    n = x.numel()
    needs_int64 = n > INT32_SAFE
    grid = (triton.cdiv(n, 128),)
    scale_kernel[grid](x, y, y, n, y.stride(0), LONG_INDEXING=LIMIT_TEST)
"""


@pytest.mark.parametrize("test, guards", [
    ("0 if n <= INT32_SAFE else 1", True),
    ("n > INT32_SAFE", True),
    ("n >= 2**31", True),
    ("needs_int64", True),                    # a name the launcher assigns once
    ("0 if n <= 2**32 else 1", False),        # a limit past 2**31 guards nothing
    ("0 if n <= x.numel() else 1", False),    # nor one that is not a number
    ("0 if n <= 4096 else 1", False),         # nor a tuning threshold
])
def test_a_flag_the_launcher_sets_from_a_size_guards_only_its_own_int32_branch(
        tmp_path, test, guards):
    """``LONG_INDEXING=0 if n <= INT32_SAFE else 1``: the int32 branch runs only below
    2**31, so its products are warnings that name the test, and a product that makes their
    row is not raised for them; ``block * stride``, in both branches, stays an error."""
    source = GUARDED_KERNEL.replace("LIMIT_TEST", test)
    done = run_lint(_write(tmp_path, "guarded.py", source), "--format", "json")
    found = {f["product"]: f for f in json.loads(done.stdout)["kernels"][0]["findings"]}
    assert found["block * stride"]["level"] == "error", found
    row = found["block * BLOCK"]
    assert row["level"] == ("warning" if guards else "error"), row
    said = f"only while `{test.split(' if ')[1].split(' else ')[0]}`" if " if " in test else \
        "unless `n > INT32_SAFE`" if test == "needs_int64" else f"unless `{test}`"
    assert (said in row["why"]) == guards, row["why"]
    # Where the row is made on another line, neither line is red in the guarded branch.
    made = found["block * 4"]
    assert made["level"] == ("warning" if guards else "error"), made
    assert ("it makes the int32 index" in made["why"]) != guards, made["why"]


DISPATCHED_FLAG = """
import triton
import triton.language as tl


@triton.jit
def window_kernel(x_ptr, stride, OVERLAP: tl.constexpr, RATIO: tl.constexpr):
    row = tl.program_id(0)
    tokens = tl.arange(0, (1 + OVERLAP) * RATIO)
    tl.store(x_ptr + row * stride + tokens, 1.0)
    tl.store(x_ptr + row * stride + tl.arange(0, RATIO // 2), 0.0)


@triton.jit
def wide_window_kernel(x_ptr, stride, OVERLAP: tl.constexpr, RATIO: tl.constexpr):
    row = tl.program_id(0)
    tokens = tl.arange(0, (1 + OVERLAP) * RATIO * 2)
    tl.store(x_ptr + row * stride + tokens, 2.0)


def compress(x, ratio: int, overlap: bool, wide: bool):
    if wide:
        kernel = wide_window_kernel
    else:
        kernel = window_kernel
    kernel[(x.shape[0],)](x, x.stride(0), OVERLAP=overlap, RATIO=ratio)
"""


@pytest.mark.parametrize("no_exec", [False, True], ids=["default", "no-exec"])
def test_a_constexpr_every_launch_sets_to_a_bool_is_a_flag(tmp_path, no_exec):
    """``OVERLAP=overlap`` with ``overlap: bool`` in the launcher, through a local the
    launcher sets to either kernel: ``OVERLAP`` is 0 or 1, so ``(1 + OVERLAP) * RATIO`` is a
    power of two both ways, where guessed sizes (16, or any one value for both) make
    ``(1 + v) * v``, which no ``tl.arange`` takes past ``v = 1``, and ``RATIO // 2`` needs
    ``RATIO >= 2``."""
    done = run_lint(_write(tmp_path, "window.py", DISPATCHED_FLAG), "--format", "json",
                    *(["--no-exec"] if no_exec else []))
    report = json.loads(done.stdout)
    assert not report["not_checked"], report["not_checked"]
    assert {k["kernel"]: {f["product"] for f in k["findings"]} for k in report["kernels"]} == {
        "window_kernel": {"row * stride"}, "wide_window_kernel": {"row * stride"}}


@pytest.mark.parametrize("text, kinds, expected", [
    ("2**31 - 1 - 1024", (int,), 2**31 - 1025),
    ("LIMIT // 2", (int,), 2**30),
    ("requests * (drafts + 1) * vocab / 32", (int, float), 1024 * 16 * 262144 / 32),
    ("-1", (int,), -1),
    ("1 << 100", (int,), None),     # a shift or a power past 64 is no size
    ("2 ** -1", (int,), None),
    ("n // 0", (int,), None),
    ("n / 2", (int,), None),        # an exact division, where only ints are read
    ("x.numel()", (int,), None),    # a call runs code: unread
    ("size", (int,), None),         # a name no number is bound to
    ("True + 1", (int,), None),
    ("2.5", (int,), None),
])
def test_arithmetic_is_read_as_written_without_running_it(text, kinds, expected):
    """One reader for an envelope's shapes and a launcher's limits: literals, named numbers,
    + - * / // ** <<, and nothing that runs code or takes long."""
    names = {"LIMIT": 2**31, "n": 10, "requests": 1024, "drafts": 15, "vocab": 262144}
    assert arithmetic.value(ast.parse(text, mode="eval").body, names, kinds) == expected


UNSIGNED_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def gather_kernel(x_ptr, idx_ptr, stride):
    token = tl.load(idx_ptr + tl.program_id(0)).to(tl.uint32)
    tl.store(x_ptr + token * stride, 1.0)
"""


def test_an_unsigned_product_names_its_own_limit(tmp_path):
    done = run_lint(_write(tmp_path, "unsigned.py", UNSIGNED_KERNEL))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "u32 multiply feeds a pointer offset: `token * stride`" in done.stdout, done.stdout
    assert "reaches 2**32" in done.stdout and "2**31" not in done.stdout, done.stdout


HEURISTICS_KERNEL = """
import triton
import triton.language as tl


@triton.heuristics({"HAS_BIAS": lambda args: args["bias_ptr"] is not None})
@triton.jit
def biased_rows_kernel(x_ptr, bias_ptr, stride, HAS_BIAS: tl.constexpr):
    row = tl.program_id(0)
    if HAS_BIAS:
        tl.store(x_ptr + row * stride, tl.load(bias_ptr))
"""


def test_no_exec_keeps_heuristics_and_checks_each_kernel_once(tmp_path):
    """A heuristics dict of lambdas is kept without running the file (a lambda runs nothing
    until called), and the kernel is checked once, never reported as undefined."""
    path = _write(tmp_path, "heuristics.py", HEURISTICS_KERNEL)
    for args in ((path, ), ("--no-exec", path)):
        done = run_lint(*args)
        assert done.returncode == 1 and "could not check" not in done.stdout, done.stdout
        assert "1 kernels checked, 1 with findings" in done.stdout, done.stdout


def test_no_exec_stands_in_for_the_standard_library_and_never_crashes(tmp_path):
    """Absolute imports of installed modules are stand-ins under --no-exec (loading socket.py
    without running it once crashed the report); only the project's own files are loaded."""
    text = "from socket import socketpair\nimport os.path as osp\n" + BUGGY_KERNEL
    path = _write(tmp_path, "stdlib.py", text)
    done = run_lint("--no-exec", "--format", "json", path)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["exit_code"] == 1, done.stdout + done.stderr
    assert report["kernels"][0]["findings"][0]["product"] == "row * stride"


FLAGS_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def flags_kernel(x_ptr, y_ptr, stride, scale, HAS_SCALE: tl.constexpr, SQUARE: tl.constexpr,
                 CLAMP: tl.constexpr, HAS_Y: tl.constexpr = False,
                 Y_BY_ROW: tl.constexpr = False):
    row = tl.program_id(0)
    cols = tl.arange(0, 128)
    x = tl.load(x_ptr + cols)
    if HAS_SCALE:
        x = x * scale
    if SQUARE:
        x = x * x
    if CLAMP:
        x = tl.minimum(x, 1.0)
    if HAS_Y:
        if Y_BY_ROW:
            tl.store(y_ptr + row * stride + cols, x)
    tl.store(x_ptr + cols, x)
"""


def test_flags_that_guard_no_product_are_compiled_once_and_nested_ones_together(tmp_path):
    """Five flags, each True and False: 32 combinations. Three guard float math only, so
    toggling each alone shows they change no product; the product sits behind two nested flags,
    neither of which changes anything alone, so that pair is compiled changed together."""
    done = run_lint(_write(tmp_path, "flags.py", FLAGS_KERNEL), "--format", "json")
    kernel = json.loads(done.stdout)["kernels"][0]
    assert [f["product"] for f in kernel["findings"]] == ["row * stride"], kernel
    assert kernel["variants_compiled"] <= 8, kernel["variants_compiled"]


HEURISTIC_TILES_KERNEL = """
import triton
import triton.language as tl


@triton.heuristics({
    "BLOCK_H": lambda args: triton.next_power_of_2(args["group"]),
    "BLOCK_QH": lambda args: args["BLOCK_Q"] * triton.next_power_of_2(args["group"]),
})
@triton.jit
def grouped_heads_kernel(q_ptr, out_ptr, stride, group, BLOCK_Q: tl.constexpr,
                         BLOCK_H: tl.constexpr, BLOCK_QH: tl.constexpr,
                         BLOCK_D: tl.constexpr = 64):
    row = tl.program_id(0)
    offs_q = tl.arange(0, BLOCK_Q)
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    tile = (offs_q[:, None, None] * BLOCK_H + offs_h[None, :, None]) * BLOCK_D + \\
        offs_d[None, None, :]
    q = tl.load(q_ptr + row * stride + tile)
    q = tl.reshape(q, (BLOCK_QH, BLOCK_D))
    tl.store(out_ptr + offs_d[:, None] * BLOCK_D + offs_d[None, :], tl.dot(tl.trans(q), q))
"""


def test_sizes_a_kernel_computes_in_its_heuristics_are_tried_where_the_guesses_fail(tmp_path):
    """``BLOCK_QH = BLOCK_Q * next_power_of_2(group)``: guessed alike, the sizes break the
    reshape or the ``tl.dot`` after it (no one value fits both); computed by the kernel's own
    heuristics from the other guesses, they compile and ``row * stride`` is found. (With
    ``--no-exec`` no heuristic runs: it is the file's code.)"""
    path = _write(tmp_path, "heuristic_tiles.py", HEURISTIC_TILES_KERNEL)
    done = run_lint(path, "--format", "json")
    report = json.loads(done.stdout)
    assert report["not_checked"] == [], report["not_checked"]
    (kernel, ) = report["kernels"]
    assert [(f["product"], f["level"]) for f in kernel["findings"]] == \
        [("row * stride", "error")], kernel["findings"]
    assert any("BLOCK_QH = " in note for note in report["notes"]), report["notes"]
    untrusted = json.loads(run_lint(path, "--format", "json", "--no-exec").stdout)
    assert [p["kernel"] for p in untrusted["not_checked"]] == ["grouped_heads_kernel"]
