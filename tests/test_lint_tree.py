"""The gate in an engine's own tree: run from the repository root, the engine not installed,
with and without ``--no-exec``, every kernel is checked and no traceback reaches the user.

The engine here is written the way engines write themselves: Triton imported through the
engine's own wrapper (which hands out placeholders where it finds no GPU), a package
``__init__`` that imports a dependency missing here, a platform object that raises on any
attribute, module constants and parameter defaults computed from the platform, a jit helper in
another module, and kernels made by calling ``triton.jit`` rather than decorating.
"""

import json
import textwrap

import pytest

from tests.lint_cli import WITHOUT_INTERPRETER, run_lint, run_python

pytestmark = [pytest.mark.static, pytest.mark.selftest]

ENGINE = {
    "myengine/__init__.py": """
        import zmq_that_is_not_installed  # noqa: F401  the engine's deps are not here
    """,
    "myengine/platforms.py": """
        class _Platform:
            def __getattr__(self, name):
                raise RuntimeError("no platform detected")

        current_platform = _Platform()
    """,
    "myengine/triton_utils/__init__.py": """
        from myengine.triton_utils.importing import HAS_TRITON, TritonPlaceholder

        if HAS_TRITON:
            import triton
            import triton.language as tl
            import triton.language.extra.libdevice as tldevice
        else:
            triton = TritonPlaceholder()
            tl = TritonPlaceholder()
            tldevice = TritonPlaceholder()
    """,
    "myengine/triton_utils/importing.py": """
        from myengine.platforms import current_platform

        HAS_TRITON = current_platform.has_gpu()  # raises here: no GPU, no platform

        class TritonPlaceholder:
            def __getattr__(self, name):
                return lambda *args, **kwargs: (lambda fn: fn)
    """,
    "myengine/ops/__init__.py": "",
    "myengine/ops/helpers.py": """
        from myengine.triton_utils import tl, triton


        @triton.jit
        def row_start(table_ptr, row, stride):
            return table_ptr + row * stride
    """,
    "myengine/ops/sampling.py": """
        import torch

        from myengine.ops.helpers import row_start
        from myengine.platforms import current_platform
        from myengine.triton_utils import tl, tldevice, triton

        float8_info = torch.finfo(current_platform.fp8_dtype())


        @triton.jit
        def clamp_rows_kernel(logits_ptr, stride, n_cols,
                              FP8_MAX: tl.constexpr = float8_info.max,
                              BLOCK: tl.constexpr = 128):
            row = tl.program_id(0)
            cols = tl.arange(0, BLOCK)
            start = row_start(logits_ptr, row, stride)
            values = tl.load(start + cols, mask=cols < n_cols)
            tl.store(start + cols, tl.minimum(tldevice.abs(values), FP8_MAX), mask=cols < n_cols)


        def scale_rows(x_ptr, stride, scale):
            row = tl.program_id(0)
            cols = tl.arange(0, 128)
            tl.store(x_ptr + row * stride + cols, tl.load(x_ptr + row * stride + cols) * scale)


        scale_rows_kernel = triton.jit(scale_rows)
    """,
}


@pytest.fixture
def engine(tmp_path):
    for path, text in ENGINE.items():
        file = tmp_path / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(textwrap.dedent(text).lstrip())
    return tmp_path


def _report(done):
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("no_exec", [False, True], ids=["default", "no-exec"])
def test_every_kernel_of_an_engine_tree_is_checked_from_its_root(engine, no_exec):
    done = run_lint("myengine", "--format", "json", *(["--no-exec"] if no_exec else []),
                    cwd=engine)
    report = _report(done)
    kernels = {k["kernel"] for k in report["kernels"]}
    # The helper is analysed in its caller, not as a kernel of its own.
    assert kernels == {"clamp_rows_kernel", "scale_rows"}, report
    assert not [p for p in report["not_checked"] if p["kernel"]], report["not_checked"]
    findings = {(f["file"], f["product"]) for k in report["kernels"] for f in k["findings"]}
    # The helper's product, reported at the helper's line, under the kernel that calls it.
    assert ("myengine/ops/helpers.py", "row * stride") in findings, findings
    assert ("myengine/ops/sampling.py", "row * stride") in findings, findings
    assert done.returncode == report["exit_code"] == 1


def test_a_file_that_cannot_load_is_one_line_and_the_run_goes_on(engine):
    (engine / "myengine/ops/broken.py").write_text(
        "from myengine.triton_utils import triton\n\n@triton.jit\ndef broken(x:\n")
    done = run_lint("myengine", cwd=engine)
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    assert "could not check myengine/ops/broken.py:4: SyntaxError" in done.stdout, done.stdout
    assert "2 kernels checked" in done.stdout
    assert done.returncode == 1  # the findings still decide


def test_parallel_and_cached_runs_report_what_one_process_does(engine, tmp_path):
    cache = tmp_path / "cache"
    env = {**WITHOUT_INTERPRETER, "TRITON_OVERFLOW_CACHE": str(cache)}
    alone = _report(run_lint("myengine", "--format", "json", "-j", "1", "--no-cache",
                             cwd=engine))
    parallel = _report(run_lint("myengine", "--format", "json", "-j", "2", cwd=engine,
                                env=env))
    cached = _report(run_lint("myengine", "--format", "json", "-j", "2", cwd=engine, env=env))
    assert any(cache.rglob("*")), "the first run left nothing in the cache"

    def findings(report):
        return sorted((f["file"], f["line"], f["product"], f["level"])
                      for k in report["kernels"] for f in k["findings"])

    assert findings(alone) == findings(parallel) == findings(cached)
    # A changed file is checked again, not read back.
    sampling = engine / "myengine/ops/sampling.py"
    sampling.write_text(sampling.read_text().replace("row * stride + cols",
                                                     "row.to(tl.int64) * stride + cols"))
    changed = _report(run_lint("myengine", "--format", "json", cwd=engine, env=env))
    assert ("myengine/ops/sampling.py", "row * stride") not in {
        (f["file"], f["product"]) for k in changed["kernels"] for f in k["findings"]}


def test_a_bad_jobs_value_is_a_usage_error(engine):
    done = run_lint("myengine", "-j", "-2", cwd=engine)
    assert done.returncode == 3 and "--jobs" in done.stderr


def test_a_src_layout_package_imports_itself_by_name(tmp_path):
    """``src/pkg/`` is not importable from the root by its name unless installed; its kernels
    import their helpers as ``from pkg.helpers import ...`` all the same."""
    for path in ("myengine/ops/helpers.py", "myengine/triton_utils/__init__.py",
                 "myengine/triton_utils/importing.py", "myengine/platforms.py"):
        file = tmp_path / "src" / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(textwrap.dedent(ENGINE[path]).lstrip())
    for package in ("myengine", "myengine/ops"):
        (tmp_path / "src" / package / "__init__.py").write_text("")
    (tmp_path / "src/myengine/ops/rows.py").write_text(textwrap.dedent("""
        from myengine.ops.helpers import row_start
        from myengine.triton_utils import tl, triton


        @triton.jit
        def rows_kernel(x_ptr, stride):
            tl.store(row_start(x_ptr, tl.program_id(0), stride) + tl.arange(0, 128), 1.0)
    """))
    report = _report(run_lint("src/myengine", "--format", "json", "--no-exec", cwd=tmp_path))
    findings = {(f["file"], f["product"]) for k in report["kernels"] for f in k["findings"]}
    assert ("src/myengine/ops/helpers.py", "row * stride") in findings, report


REDUCING_HELPER = """
import triton
import triton.language as tl

from not_installed_engine.sampling import block_argmax


@triton.jit
def resample_kernel(logits_ptr, out_ptr, stride, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    logits = tl.load(logits_ptr + row * stride + cols)
    value, index = block_argmax(logits, cols)
    tl.store(out_ptr + row, index)
"""


@pytest.mark.parametrize("no_exec", [False, True], ids=["default", "no-exec"])
def test_a_helper_that_cannot_load_and_reduces_a_block_still_lets_its_kernel_be_checked(
        tmp_path, no_exec):
    """A file checked alone calls its engine's helper (``block_argmax``) and stores what it
    returns at one address: the stand-in that returns its first argument (a block) does not
    compile there, the one that returns 0 does."""
    (tmp_path / "resample.py").write_text(REDUCING_HELPER)
    done = run_lint("resample.py", "--format", "json", *(["--no-exec"] if no_exec else []),
                    cwd=tmp_path)
    report = _report(done)
    assert not report["not_checked"], report["not_checked"]
    [kernel] = report["kernels"]
    assert {f["product"] for f in kernel["findings"]} == {"row * stride"}, kernel
    assert "`block_argmax` could not be loaded: checked with a value-only stand-in that " \
        "returns the sum of its first argument" in done.stdout + done.stderr + json.dumps(report)


def test_a_kernel_file_named_triton_py_is_checked_not_imported_as_triton(tmp_path):
    """An engine's ``ops/embedding/triton.py``, checked from its own folder with ``python -m``
    (which makes the folder importable first): Triton still comes from where it is installed.
    A new interpreter, as the suite's forked ones have imported Triton already."""
    (tmp_path / "triton.py").write_text(textwrap.dedent("""
        from not_installed_engine._triton import tl, triton


        @triton.jit
        def rows_kernel(x_ptr, stride):
            tl.store(x_ptr + tl.program_id(0) * stride + tl.arange(0, 128), 1.0)
    """))
    report = _report(run_python("-m", "triton_overflow", "lint", "triton.py", "--format", "json",
                                "--envelope", "none", cwd=tmp_path))
    findings = {f["product"] for k in report["kernels"] for f in k["findings"]}
    assert findings == {"tl.program_id(0) * stride"}, report


BEHIND_A_FALSE_BRANCH = """
import os

from not_installed_engine.utils import engine_version_at_least

if engine_version_at_least("2.7") and os.environ.get("ENGINE_HAS_TRITON") == "1":
    import triton
    import triton.language as tl

    @triton.jit
    def rows_kernel(x_ptr, stride):
        tl.store(x_ptr + tl.program_id(0) * stride + tl.arange(0, 128), 1.0)
"""

THROUGH_AN_EXTENSION_MODULE = """
import triton
import triton.language as tl

from not_installed_engine.utils import triton_lang_extension as tle


@triton.jit
def rows_kernel(x_ptr, stride, n):
    row = tle.program_id(0)
    tl.store(x_ptr + row * stride + tl.arange(0, 128), 1.0)
    tl.store(x_ptr + n * stride + tl.arange(0, 128), 2.0)
"""


def test_an_engines_own_program_id_is_read_as_a_program_id(tmp_path):
    """``tle.program_id(0)`` from an engine not installed asks what ``tl.program_id(0)`` asks:
    the row it gives grows with the grid (not the axis number a value-only stand-in would
    return), and the report says how it was read."""
    (tmp_path / "kernels.py").write_text(THROUGH_AN_EXTENSION_MODULE)
    report = _report(run_lint("kernels.py", "--format", "json", "--no-envelope", cwd=tmp_path))
    [kernel] = report["kernels"]
    by_product = {f["product"]: f for f in kernel["findings"]}
    assert by_product["row * stride"]["level"] == "error", by_product
    assert "program_id(0)" in by_product["row * stride"]["why"]
    assert any("`tle.program_id` could not be loaded: checked as returning what Triton's "
               "function of its name returns" in note for note in report["notes"]), report


DEFINED_WHEN_CALLED = """
def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def rows_kernel(x_ptr, stride):
        tl.store(x_ptr + tl.program_id(0) * stride + tl.arange(0, 128), 1.0)

    return rows_kernel
"""


COMBINED_BY_AN_ENGINE_HELPER = """
def _kernels():
    import triton
    import triton.language as tl
    from not_installed_engine.scan import keyed_add

    @triton.jit
    def rows_kernel(x_ptr, stride):
        row = tl.program_id(0)
        x = tl.load(x_ptr + row * stride + tl.arange(0, 128))
        tl.store(x_ptr + row * stride + tl.arange(0, 128), tl.associative_scan(x, 0, keyed_add))

    return rows_kernel
"""


@pytest.mark.parametrize("source", [BEHIND_A_FALSE_BRANCH, THROUGH_AN_EXTENSION_MODULE,
                                    DEFINED_WHEN_CALLED, COMBINED_BY_AN_ENGINE_HELPER],
                         ids=["triton-imported-in-a-branch-not-taken", "extension-module",
                              "defined-when-called", "combined-by-an-engine-helper"])
def test_kernels_an_engine_hides_from_a_plain_import_are_checked(tmp_path, source):
    """A library that imports Triton only where it finds a GPU (``if has_triton():``), one
    whose kernels call a module of its own Triton extensions (``tle.program_id``), one that
    defines its kernels in a function on first use, importing there what they use (a combine
    function for ``tl.associative_scan``): each kernel file, checked alone, has its kernel
    checked."""
    (tmp_path / "kernels.py").write_text(source)
    report = _report(run_lint("kernels.py", "--format", "json", cwd=tmp_path))
    assert not report["not_checked"], report["not_checked"]
    assert [k["kernel"] for k in report["kernels"]] == ["rows_kernel"], report
    assert report["kernels"][0]["findings"], report


TRITON_NAMES_IN_A_TRY = '''
import triton
import triton.language as tl
from triton.language import core

try:
    from triton.language.extra import libdevice
except ImportError:
    libdevice = None

try:
    # Triton 3.6 needs its helper wrapped to call it in a kernel; older ones did not
    int_dtype_of = triton.runtime.jit.constexpr_function(core.get_int_dtype)
except Exception:
    int_dtype_of = None


@triton.jit
def flip_kernel(x_ptr, stride, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    x = libdevice.exp(tl.load(x_ptr + row * stride + tl.arange(0, BLOCK)))
    idtype = int_dtype_of(bitwidth=x.dtype.primitive_bitwidth, signed=True)
    tl.store(x_ptr + row * stride + tl.arange(0, BLOCK), (x.to(idtype, bitcast=True) ^ 1).to(
        x.dtype, bitcast=True))
'''


@pytest.mark.parametrize("no_exec", [False, True], ids=["default", "no-exec"])
def test_names_a_try_binds_from_triton_are_bound_without_running_the_file(tmp_path, no_exec):
    """Triton's own modules and API are not the file's code: ``--no-exec`` binds what a
    module-level ``try`` imports from Triton or makes with a call of Triton's, and the
    handler, which runs only when that fails, does not bind it again (to ``None``)."""
    (tmp_path / "flip.py").write_text(TRITON_NAMES_IN_A_TRY)
    report = _report(run_lint("flip.py", "--format", "json",
                              *(["--no-exec"] if no_exec else []), cwd=tmp_path))
    assert not report["not_checked"], report["not_checked"]
    [kernel] = report["kernels"]
    assert {f["product"] for f in kernel["findings"]} == {"row * stride"}, kernel


BUILTIN_STAND_IN = '''
import triton
import triton.language as tl

if not hasattr(tl, "gather"):
    @triton.jit
    def gather(src, index, axis, _builder=None):
        return None
else:
    gather = tl.gather


@triton.jit
def rows_kernel(x_ptr, stride, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    tl.store(x_ptr + row * stride + tl.arange(0, BLOCK), 1.0)
'''


def test_a_jit_function_taking_a_builtins_builder_is_a_helper_not_a_kernel(tmp_path):
    """An engine's stand-in for a Triton builtin its Triton may lack (``def gather(src, index,
    axis, _builder=None)``, defined in the branch not taken) is called by kernels, never
    launched: it is not a kernel that could not be checked."""
    (tmp_path / "op.py").write_text(BUILTIN_STAND_IN)
    report = _report(run_lint("op.py", "--format", "json", cwd=tmp_path))
    assert not report["not_checked"], report["not_checked"]
    assert [k["kernel"] for k in report["kernels"]] == ["rows_kernel"], report["kernels"]
