"""``triton-overflow repro``: a finding and a launch become tests that fail on the kernel as
shipped, naming the line, and pass with the fix; bad input is a usage error that says why."""

import os
import re
import sys
import textwrap
from pathlib import Path

import pytest

from tests.lint_cli import run_cli, run_module
from triton_overflow.repro.launch import LaunchError, parse

ENGINE = Path(__file__).resolve().parents[1] / "examples" / "myengine"
pytestmark = pytest.mark.static


def _cli(*args, cwd=ENGINE, env=None):
    environment = dict(os.environ, PYTHONPATH=str(ENGINE / "src"))
    environment.pop("TRITON_INTERPRET", None)
    environment.update(env or {})
    return run_cli(*args, env=environment, cwd=cwd)


def _tiers():
    """The tiers the generated tests run here: the GPU's too where CUDA is visible."""
    import torch
    return 2 if torch.cuda.is_available() else 1


def _run_tests(folder):
    environment = dict(os.environ, PYTHONPATH=str(ENGINE / "src"))
    selection = ["-k", "interpreter"] if _tiers() == 1 else []
    return run_module("pytest", "-q", "-p", "no:cacheprovider", "-rA", *selection, folder,
                      env=environment, cwd=folder, timeout=900)


def _assert_shipped_fails_and_widened_passes(folder, findings):
    """Run the tests written into ``folder`` for ``findings`` (file:line): each test of a
    kernel as shipped fails, in the interpreter at the wrap check naming the line, on a GPU
    (where CUDA is visible) by a fault or a wrong row, never by an error of the reproduction
    itself; each test of a kernel with the fix passes."""
    ran = _run_tests(folder)
    verdicts = _verdicts(ran.stdout)
    assert ran.returncode == 1 and len(verdicts) == 4 * _tiers() * len(findings), \
        ran.stdout[-6000:]
    for name, verdict in verdicts.items():
        assert verdict == ("FAILED" if "as-shipped" in name else "PASSED"), (name, ran.stdout)
    for where in findings:
        assert re.search(rf"as shipped, in the interpreter: an i32 product wraps at \S*{where}: "
                         r"int32 \* wraps", ran.stdout), (where, ran.stdout[-6000:])
    shipped = [name for name in verdicts if name.startswith("test_gpu") and "as-shipped" in name]
    reasons = re.findall(r"as shipped, on the GPU \([^)]*\): (.{0,60})", ran.stdout)
    assert len(reasons) >= len(shipped), ran.stdout[-6000:]
    for reason in reasons:
        assert reason.startswith(("the kernel faults", "a checked row differs")), reason


def _verdicts(output):
    """{test::param id: PASSED or FAILED} of a ``-rA`` summary."""
    return {line.split()[1].rsplit("::", 1)[1]: line.split()[0]
            for line in output.splitlines() if line.startswith(("PASSED", "FAILED"))}


@pytest.mark.start_early(3)  # among the longest tests: not left for the end
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
    _assert_shipped_fails_and_widened_passes(out, ["src/myengine/softcap.py:18",
                                                   "src/myengine/penalty.py:28"])


BLOCK_ROWS = """
import triton
import triton.language as tl


@triton.jit
def row_sums_kernel(x_ptr, out_ptr, stride_xm, M, N, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + offs_m, tl.sum(x, axis=1), mask=offs_m < M)


@triton.jit
def scale_rows_persistent(x_ptr, stride, n_rows, n_cols, scale, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        cols = tl.arange(0, BLOCK)
        row_ptr = x_ptr + row * stride
        tl.store(row_ptr + cols, tl.load(row_ptr + cols, mask=cols < n_cols) * scale,
                 mask=cols < n_cols)


@triton.jit
def double_tokens_kernel(x_ptr, stride_m, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    ptrs = x_ptr + (offs_m * stride_m)[:, None] + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(ptrs, tl.load(ptrs, mask=mask) * 2.0, mask=mask)
"""

LOADED_ROWS = """
import triton
import triton.language as tl


@triton.jit
def gather_draft_rows_kernel(out_ptr, cu_num_tokens_ptr, probs_ptr, vocab_size,
                             BLOCK: tl.constexpr):
    req = tl.program_id(0)
    start = 0 if req == 0 else tl.load(cu_num_tokens_ptr + req - 1)
    end = tl.load(cu_num_tokens_ptr + req)
    pos = tl.program_id(1)
    if pos < end - start:
        token = start + pos
        cols = tl.arange(0, BLOCK)
        probs = tl.load(probs_ptr + token * vocab_size + cols, mask=cols < vocab_size)
        tl.store(out_ptr + token, tl.max(probs, axis=0))


@triton.jit
def scatter_expert_rows_kernel(x_ptr, weight_ptrs, out_ptr, token_ids_ptr, stride_om, N,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    weight = tl.load(weight_ptrs + tl.program_id(1)).to(tl.pointer_type(tl.float32))
    tokens = tl.load(token_ids_ptr + tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + tokens)
    w = tl.load(weight + cols, mask=cols < N)
    tl.store(out_ptr + tokens[:, None] * stride_om + cols[None, :], x[:, None] * w[None, :],
             mask=cols[None, :] < N)


@triton.jit
def double_rows_kernel(x_ptr, out_ptr, stride_m, stride_om, M, N, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = tl.load(x_ptr + offs_m[:, None] * stride_m + offs_n[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], x * 2.0, mask=mask)
"""

TWO_PRODUCTS_LAUNCH = """
kernel = "kernels/loaded.py:double_rows_kernel"
rows = 64
grid = ["rows/16"]
[arguments]
x_ptr = {shape = ["rows", 4096], dtype = "float32"}
out_ptr = {shape = ["rows", 4096], dtype = "float32"}
stride_m = 4096
stride_om = 4096
M = "rows"
N = 4096
BLOCK_M = 16
BLOCK_N = 4096
"""

OFFSETS_LAUNCH = """
kernel = "kernels/loaded.py:gather_draft_rows_kernel"
rows = 2
slots = 4
grid = ["rows", 2]
[arguments]
out_ptr = {shape = ["slots"], dtype = "float32"}
cu_num_tokens_ptr = {shape = ["rows"], dtype = "int32", values = ["slot", "slot + 1"]}
probs_ptr = {shape = ["slots", 4096], dtype = "float32"}
vocab_size = 4096
BLOCK = 4096
"""

POINTER_TABLE_LAUNCH = """
kernel = "kernels/loaded.py:scatter_expert_rows_kernel"
rows = 1
slots = 4
grid = [1, 1]
[arguments]
x_ptr = {shape = ["slots"], dtype = "float32"}
weight_ptrs = {pointers = ["weight"]}
out_ptr = {shape = ["slots", 4096], dtype = "float32"}
token_ids_ptr = {shape = [16], dtype = "int32"}
stride_om = 4096
N = 4096
BLOCK_M = 16
BLOCK_N = 4096
[pointees]
weight = {shape = [4096], dtype = "float32"}
"""

AXIS_1_ROWS_LAUNCH = """
kernel = "kernels/blocks.py:double_tokens_kernel"
rows = 64
grid = [4, "rows/16"]
[arguments]
x_ptr = {shape = ["rows", 8192], dtype = "float32"}
stride_m = 8192
M = "rows"
N = 8192
BLOCK_M = 16
BLOCK_N = 2048
"""

LOOP_ROWS_LAUNCH = """
kernel = "kernels/blocks.py:scale_rows_persistent"
rows = 64
grid = [4]
[arguments]
x_ptr = {shape = ["rows", 4096], dtype = "float32"}
stride = 4096
n_rows = "rows"
n_cols = 4096
scale = 0.5
BLOCK = 4096
"""

BLOCK_ROWS_LAUNCH = """
kernel = "kernels/blocks.py:row_sums_kernel"
rows = 64
grid = ["rows/16"]
[arguments]
x_ptr = {shape = ["rows", 4096], dtype = "float32"}
out_ptr = {shape = ["rows"], dtype = "float32"}
stride_xm = 4096
M = "rows"
N = 4096
BLOCK_M = 16
BLOCK_N = 4096
"""

ENGINE_HELPER_LAUNCH = """
kernel = "myengine/ops/sampling.py:clamp_rows_kernel"
rows = 3
grid = ["rows"]
[arguments]
logits_ptr = {shape = ["rows", 128], dtype = "float32"}
stride = 2048
n_cols = 128
FP8_MAX = 448.0
BLOCK = 128
"""


@pytest.mark.parametrize("finding, launch, options", [
    ("kernels/blocks.py:11", BLOCK_ROWS_LAUNCH, []),
    ("kernels/blocks.py:19", LOOP_ROWS_LAUNCH, []),
    ("kernels/blocks.py:28", AXIS_1_ROWS_LAUNCH, []),
    ("myengine/ops/helpers.py:6", ENGINE_HELPER_LAUNCH, []),
    ("kernels/loaded.py:15", OFFSETS_LAUNCH, []),
    ("kernels/loaded.py:27", POINTER_TABLE_LAUNCH, ["--rows-from", "load:token_ids_ptr"]),
], ids=["block-of-rows", "persistent-loop", "block-on-grid-axis-1", "helper-in-an-engine-tree",
        "offset-plus-position", "block-of-loaded-rows-and-a-table-of-addresses"])
def test_rows_of_a_block_a_loop_an_offset_and_a_helper_of_an_engine_tree(finding, launch,
                                                                         options, tmp_path):
    """A program's block of rows (`pid * BLOCK_M + arange`, on grid axis 0 or 1), a persistent
    loop over the rows, a request's offset from a cumulative table plus a position, a block of
    loaded rows with a weight reached through a table of addresses, and a helper's product
    under the kernel that calls it, in an engine whose package init fails and whose Triton
    comes through its own wrapper."""
    from tests.test_lint_tree import ENGINE as ENGINE_TREE
    tree = tmp_path / "tree"
    for path, text in {**ENGINE_TREE, "kernels/blocks.py": BLOCK_ROWS,
                       "kernels/loaded.py": LOADED_ROWS}.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(textwrap.dedent(text).lstrip())
    (tmp_path / "launch.toml").write_text(launch)
    out = tmp_path / "repro"
    written = _cli("repro", finding, "--launch", str(tmp_path / "launch.toml"), "-o", str(out),
                   *options, cwd=tree)
    assert written.returncode == 0, written.stderr
    _assert_shipped_fails_and_widened_passes(out, [finding])


@pytest.mark.parametrize("arguments, said", [
    (["src/myengine/softcap.py:3", "--launch", "repro/softcap.toml"],
     "reports no finding at src/myengine/softcap.py:3; its errors are at lines 18, 20"),
    (["src/myengine/softcap.py:18"], "needs a launch of the kernel"),
    (["softcap.py"], "a finding is FILE:LINE"),
    (["src/myengine/nothing.py:3", "--launch", "repro/softcap.toml"], "no file"),
])
def test_bad_input_is_a_usage_error_that_says_why(arguments, said, tmp_path):
    result = _cli("repro", *arguments, "-o", str(tmp_path))
    assert result.returncode == 3 and said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("edit, said", [
    (("vocab_size = 4096", "vocab = 4096"), "names no argument of _softcap_kernel: vocab; and "
                                            "leaves out vocab_size"),
    (("cap = 30.0\n", ""), "leaves out cap"),
])
def test_a_launch_must_name_the_kernels_arguments(edit, said, tmp_path):
    launch = tmp_path / "launch.toml"
    launch.write_text((ENGINE / "repro" / "softcap.toml").read_text().replace(*edit))
    result = _cli("repro", "src/myengine/softcap.py:18", "--launch", str(launch), "-o",
                  str(tmp_path))
    assert result.returncode == 3 and said in result.stderr, result.stderr


def test_a_reproduction_that_cannot_find_the_kernel_fails_and_run_reports_the_verdict(tmp_path):
    out = tmp_path / "repro"
    written = _cli("repro", "src/myengine/softcap.py:18", "--launch", "repro/softcap.toml", "-o",
                   str(out), "--run")
    assert written.returncode == 0, written.stderr
    report = (out / "overflow_softcap_kernel_softcap_18.md").read_text()
    assert "as a reproduction should be: every test of the kernel as shipped fails" in report
    assert "an i32 product wraps at softcap.py:18: int32 * wraps" in report, report
    moved = tmp_path / "elsewhere" / "deeper"  # its relative root leads nowhere from here
    moved.mkdir(parents=True)
    test = next(out.glob("test_*.py"))
    (moved / test.name).write_text(test.read_text())
    ran = run_module("pytest", "-q", "-p", "no:cacheprovider", "-k", "interpreter", moved,
                     cwd=moved, env={k: v for k, v in os.environ.items()
                                     if k != "TRITON_OVERFLOW_ENGINE_ROOT"})
    assert ran.returncode == 1 and "4 failed" in ran.stdout, ran.stdout[-2000:]
    assert "cannot run: it needs the engine's source at" in ran.stdout


def test_a_reproduction_follows_its_line_and_passes_once_the_engine_fixed_it(tmp_path):
    """The engine's file edited after the test was written: lines moved above the product (the
    shipped test still fails, naming the new line; the fix is written where its source moved);
    then the product widened upstream (every test passes: nothing wraps, and the kernel as
    found is the widened one)."""
    import shutil
    engine = tmp_path / "engine"
    shutil.copytree(ENGINE / "src", engine / "src")
    shutil.copytree(ENGINE / "repro", engine / "repro")
    out = tmp_path / "repro"
    written = _cli("repro", "src/myengine/softcap.py:18", "--launch", "repro/softcap.toml", "-o",
                   str(out), cwd=engine)
    assert written.returncode == 0, written.stderr
    source = engine / "src" / "myengine" / "softcap.py"
    source.write_text("# a licence header\n# added later\n" + source.read_text())
    _assert_shipped_fails_and_widened_passes(out, ["src/myengine/softcap.py:20"])
    fixed = source.read_text().replace("row = tl.program_id(0)\n",
                                       "row = tl.program_id(0).to(tl.int64)\n")
    assert fixed != source.read_text()
    source.write_text(fixed)
    ran = _run_tests(out)
    assert ran.returncode == 0 and set(_verdicts(ran.stdout).values()) == {"PASSED"}, \
        ran.stdout[-4000:]


def test_a_launch_without_the_tensor_the_product_addresses_is_refused(tmp_path):
    launch = tmp_path / "launch.toml"
    launch.write_text("""
kernel = "src/myengine/penalty.py:_count_penalty_kernel"
rows = 1
grid = ["rows"]
[arguments]
logits = {shape = ["rows", 2048], dtype = "float32"}
logits_stride = 2048
counts = 0
counts_stride = 2048
slots = {shape = ["rows"], dtype = "int32"}
penalties = {shape = ["rows"], dtype = "float32"}
num_rows = "rows"
vocab_size = 2048
WIDEN = false
BLOCK = 1024
""")
    result = _cli("repro", "src/myengine/penalty.py:28", "--launch", str(launch), "-o",
                  str(tmp_path))
    assert result.returncode == 3 and "has no tensor argument `counts`" in result.stderr, \
        result.stderr


@pytest.mark.parametrize("description, said", [
    ({"kernel": "k.py", "rows": 1, "grid": [1], "arguments": {}}, "path/to/file.py:kernel_name"),
    ({"kernel": "k.py:k", "rows": 0, "grid": [1], "arguments": {}}, "`rows`"),
    ({"kernel": "k.py:k", "rows": 1, "grid": [0], "arguments": {}}, "`grid`"),
    ({"kernel": "k.py:k", "rows": 1, "grid": ["rows"], "arguments": {"x": 1}}, "no argument is a"),
    ({"kernel": "k.py:k", "rows": 1, "grid": ["rows"],
      "arguments": {"x": {"shape": ["rows", 3], "dtype": "float99"}}}, "unknown dtype"),
    ({"kernel": "k.py:k", "rows": 2, "grid": ["rows"],
      "arguments": {"x": {"shape": [3], "dtype": "int32", "values": [1, 2]}}}, "do not fill"),
    ({"kernel": "k.py:k", "rows": 2, "grid": ["rows"],
      "arguments": {"x": {"shape": ["rows"], "dtype": "int32", "values": ["slot * 2", 1]}}},
     "\"slot\", \"slot \\+ N\" or \"slot - N\""),
    ({"kernel": "k.py:k", "rows": 1, "grid": ["rows"],
      "arguments": {"x": {"shape": ["rows"], "dtype": "int32"}, "w": {"pointers": ["a"]}}},
     "points at a, not described under `pointees`"),
    ({"kernel": "k.py:k", "rows": 1, "grid": ["rows"],
      "arguments": {"x": {"shape": ["rows"], "dtype": "int32"},
                    "w": {"pointers": ["a"], "dtype": "float32"}},
      "pointees": {"a": {"shape": [4], "dtype": "float32"}}}, "uint64 or int64"),
    ({"kernel": "k.py:k", "rows": 1, "grid": ["rows"],
      "arguments": {"x": {"shape": ["rows"], "dtype": "int32"}, "w": {"pointers": ["a"]}},
      "pointees": {"a": {"shape": ["slots"], "dtype": "float32"}}}, "a tensor of fixed shape"),
])
def test_launch_descriptions_are_checked(description, said):
    with pytest.raises(LaunchError, match=said):
        parse(description)


def test_a_table_of_offsets_places_the_slot_and_describes_itself_back():
    from triton_overflow.repro.launch import described
    description = {"kernel": "k.py:k", "rows": 2, "grid": ["rows"], "arguments": {
        "cu": {"shape": ["rows"], "dtype": "int32", "values": ["slot", "slot + 1"]},
        "starts": {"shape": ["rows"], "dtype": "int32", "values": [0, "slot - 3"]},
        "w": {"pointers": ["a", "b"], "dtype": "uint64"}},
        "pointees": {"a": {"shape": [4], "dtype": "float32"},
                     "b": {"shape": [2, 2], "dtype": "bfloat16"}}}
    launch = parse(description)
    assert launch.tensors["cu"].places_slot and launch.tensors["cu"].values_at(14135) == \
        [14135, 14136]
    assert launch.tensors["starts"].values_at(10) == [0, 7]
    assert described(launch) == description


def test_an_engine_object_whose_attributes_raise_is_not_taken_for_a_kernel():
    """vLLM's platform object imports the engine's networking (and fails) on an attribute it
    does not know; looking for kernels among a module's values must not ask it."""
    from triton_overflow.repro.case import _launchable

    class Platform:
        def __getattr__(self, name):
            raise ModuleNotFoundError("No module named 'zmq'")

    assert _launchable(Platform()) is None


def test_a_grid_past_what_cuda_launches_is_a_reason_to_skip_not_a_failure():
    """Grid axis 1 stops at 65,535 programs: a layout that needs more cannot be launched by the
    engine either, so its GPU test says so instead of failing."""
    from triton_overflow.cases import CannotRun
    from triton_overflow.repro.case import _check_device_grid
    _check_device_grid((2**31 - 1, 65_535, 65_535))
    with pytest.raises(CannotRun, match="grid axis 1 needs 65,540 programs and a CUDA launch "
                                        "allows 65,535"):
        _check_device_grid((2, 65_540))


def test_a_table_of_cumulative_counts_filled_with_the_slot_gets_a_note_and_does_not_pass(
        tmp_path):
    """Filled with the slot, a cumulative count reaches no row past 2**31: `--run` says the
    test is no reproduction, and exits 1."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "loaded.py").write_text(textwrap.dedent(LOADED_ROWS).lstrip())
    launch = OFFSETS_LAUNCH.replace('values = ["slot", "slot + 1"]', "values = [2, 4]")
    (tmp_path / "launch.toml").write_text(launch)
    written = _cli("repro", "kernels/loaded.py:15", "--launch", "launch.toml", "-o", "out",
                   "--run", cwd=tmp_path)
    assert 'note: `cu_num_tokens_ptr` holds [2, 4], a cumulative count ending at the 4 rows' \
        in written.stderr and 'values = ["slot", "slot + 1"]' in written.stderr, written.stderr
    assert written.returncode == 1 and "NOT as a reproduction should be" in written.stdout, \
        written.stdout + written.stderr


def test_the_fix_widens_every_product_of_the_row_and_run_works_from_a_relative_folder(tmp_path):
    """A block of rows read from one tensor and written to another: the finding's fix alone
    leaves the other product to wrap, so the test with the fix writes in both, the report's
    diff shows both, and `--run` (with `-o` relative, as the docs show it) says it
    reproduces."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "loaded.py").write_text(textwrap.dedent(LOADED_ROWS).lstrip())
    (tmp_path / "launch.toml").write_text(TWO_PRODUCTS_LAUNCH)
    written = _cli("repro", "kernels/loaded.py:37", "--launch", "launch.toml", "-o", "out",
                   "--run", cwd=tmp_path)
    assert written.returncode == 0, written.stdout + written.stderr
    assert "as a reproduction should be: every test of the kernel as shipped fails" in \
        written.stdout, written.stdout
    report = (tmp_path / "out" / "overflow_double_rows_kernel_loaded_37.md").read_text()
    assert "@@ -37 +37 @@" in report and "@@ -38 +38 @@" in report, report
    assert "seconds = {'interpreter': " in next((tmp_path / "out").glob("test_*.py")).read_text()
