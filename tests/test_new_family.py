"""A new family is four files and no edit elsewhere: one written into a temporary folder (kernel,
reference, cases, test) is found by the compile-spec and streaming checks, gives the benchmark
its rows, and fills its cells of the detector report."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tests.test_harness as harness
from ci import benchmark
from tests.cases import families, family_root
from tests.test_gpu_compile import launched_kernels, specified_kernels, streaming_kernels
from triton_overflow.engine import devices

pytestmark = pytest.mark.selftest

ROOT = Path(__file__).resolve().parent.parent
FAMILY = "tiny_scale"
KERNEL = f"kernels.{FAMILY}:_scale_rows_kernel"

KERNEL_FILE = '''"""Rows of logits scaled in place: a family small enough for a test to write.

``scale_rows(logits [T, V], scale [T])``: row r is multiplied by ``scale[r]``.

Products that can exceed 2**31: ``row * logits_stride``.
"""

import torch
import triton
import triton.language as tl

from kernels._launch import check_finite, check_logits, check_table


@triton.jit
def _scale_rows_kernel(logits_ptr, logits_stride, scale_ptr, vocab_size,
                       BLOCK: tl.constexpr = 1024):
    # Widened: row * logits_stride passes 2**31 once T * V does.
    row = tl.program_id(0).to(tl.int64)
    factor = tl.load(scale_ptr + row)
    row_ptr = logits_ptr + row * logits_stride
    for start in range(0, vocab_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + offs, mask=offs < vocab_size)
        tl.store(row_ptr + offs, x * factor, mask=offs < vocab_size)


def scale_rows(logits, scale, *, check_values=True):
    """Multiply each row of fp32 ``logits [T, V]`` by its fp32 ``scale [T]``, in place."""
    check_logits(logits, "logits", (torch.float32, ))
    check_table(scale, "scale", logits.size(0), logits.device, (torch.float32, ))
    if check_values:
        check_finite(scale, "scale")
    if logits.numel():
        _scale_rows_kernel[(logits.size(0), )](logits, logits.stride(0), scale, logits.size(1))
'''

REFERENCE_FILE = '''"""Reference for ``kernels.tiny_scale``, in float64."""


def scale_rows(logits, scale, *, check_values=True):
    """Same contract as ``kernels.tiny_scale.scale_rows``."""
    del check_values
    logits.copy_(logits.double() * scale.double()[:, None])
'''

CASES_FILE = '''"""Huge case for ``kernels.tiny_scale``, its compile spec, streaming kernel and benchmark."""

import torch

import reference.tiny_scale as reference
from tests.cases import Streaming
from triton_overflow import CompileSpec, RowsCase
from triton_overflow.bench import Benchmark


class ScaleRowsCase(RowsCase):
    name = "scale_rows"
    module = "kernels.tiny_scale"

    def inputs(self, run):
        return {"scale": torch.full((run.rows, ), 0.5, device=run.device)}

    def launch(self, kernels, logits, run, *, scale):
        kernels.scale_rows(logits, scale)
        return logits

    def expected_row(self, values, row, *, scale):
        expected = values[None].clone()
        reference.scale_rows(expected, scale[row:row + 1].cpu())
        return expected[0]


SCALE_ROWS = ScaleRowsCase()
CASES = [SCALE_ROWS]
COMPILE_SPECS = [CompileSpec("kernels.tiny_scale:_scale_rows_kernel", label="tiny scale")]
STREAMING = [Streaming(COMPILE_SPECS[0], ("logits_stride", "vocab_size"))]


def benchmark_inputs(data):
    return {"row_scale": torch.rand(data.batch, device=data.device, generator=data.generator)}


def benchmarks(batch, kernels, data):
    logits, scale = data.logits, data.row_scale
    return {"tiny scale": Benchmark(lambda **kw: kernels.scale_rows(logits, scale, **kw),
                                    lambda: logits.mul_(scale[:, None]), data.restore,
                                    2 * data.size)}
'''

TEST_FILE = '''"""``kernels.tiny_scale`` against its reference, and its input validation."""

import pytest
import torch

import reference.tiny_scale as reference
from kernels.tiny_scale import scale_rows
from tests.cases import tiny_scale as family
from tests.validation import arguments_covered, assert_rejected
from triton_overflow import OverflowTests

BAD_ARGUMENTS = {
    "int logits": ("logits", lambda l: l.int(), "must have dtype"),
    "scale length": ("scale", lambda s: s[:1], "must have shape"),
    "infinite scale": ("scale", lambda s: s / 0, "must be finite"),
}
VALIDATED = {"scale_rows": arguments_covered(BAD_ARGUMENTS)}


@pytest.mark.correctness
@pytest.mark.covers(kernel="scale_rows", detector="correctness")
def test_matches_reference(device):
    logits, scale = torch.randn(3, 2050, device=device), torch.rand(3, device=device)
    expected = logits.cpu().double()
    reference.scale_rows(expected, scale.cpu())
    scale_rows(logits, scale)
    torch.testing.assert_close(logits.cpu(), expected.float())


@pytest.mark.validation
@pytest.mark.covers(kernel="scale_rows", detector="validation")
@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_bad_argument_raises(case, device, no_launch):
    valid = {"logits": torch.zeros(2, 8, device=device), "scale": torch.ones(2, device=device)}
    assert_rejected(scale_rows, valid, *BAD_ARGUMENTS[case])


class TestOverflow(OverflowTests):
    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
'''

FILES = {f"kernels/{FAMILY}.py": KERNEL_FILE, f"reference/{FAMILY}.py": REFERENCE_FILE,
         f"tests/cases/{FAMILY}.py": CASES_FILE, f"tests/test_{FAMILY}.py": TEST_FILE}


@pytest.fixture
def family_folder(tmp_path):
    """A folder holding the family's four files, which import and are found while it is in use."""
    root = tmp_path / "family"
    for path, text in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    with family_root(root):
        yield root


def test_the_compile_spec_and_streaming_checks_find_it(family_folder):
    assert FAMILY in families()
    assert KERNEL in specified_kernels()
    assert KERNEL in [streaming.spec.kernel for streaming in streaming_kernels()]
    launched = launched_kernels(str(family_folder / "kernels"))  # named by the lint's loader
    assert [kernel.rpartition(":")[2] for kernel in launched] == [KERNEL.rpartition(":")[2]]


def test_the_harness_checks_its_validated(family_folder):
    """Its ``VALIDATED`` names every launcher parameter, by the harness's own check."""
    harness.test_every_launcher_parameter_has_a_validation_case(FAMILY)


def test_the_benchmark_gathers_its_rows(family_folder, monkeypatch, device):
    """Its row and its twin's, on the device kernels run on here: the other families' rows need
    a GPU, so only this family is handed to the benchmark."""
    found = families()
    monkeypatch.setattr(benchmark, "families", lambda: {FAMILY: found[FAMILY]})
    gathered = benchmark.rows(1, {}, device=device)
    assert list(gathered) == ["tiny scale"]
    for row in gathered["tiny scale"]:  # ours and the int32 twin's, on the shared row_scale
        row.restore()
        row.run()


def test_the_report_has_its_cells(family_folder, tmp_path):
    """Its tests run (but the huge tiers: their child processes know only this checkout) and
    the report holds a cell of its kernel for each of their detectors."""
    report = tmp_path / "report.json"
    driver = ("import sys\nimport pytest\nfrom tests.cases import family_root\n"
              "with family_root(sys.argv[1]):\n    sys.exit(pytest.main(sys.argv[2:]))\n")
    own_run = {k: v for k, v in os.environ.items()
               if k not in (devices.RUN_VARIABLE, devices.SESSION_VARIABLE, devices.GPUS_VARIABLE)
               and not k.startswith("PYTEST_XDIST")}
    # pytest loads the checkout's conftest.py (device, no_launch, the hypothesis profile) only
    # for tests below it: -p loads it here, after the plugin that registers that profile.
    done = subprocess.run(
        [sys.executable, "-c", driver, str(family_folder), "-p", "no:cacheprovider",
         "-p", "triton_overflow", "-p", "conftest", "-m", "correctness or validation",
         f"--detector-report={report}", "-q", str(family_folder / "tests" / f"test_{FAMILY}.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=own_run)
    assert done.returncode == 0, done.stdout + done.stderr
    cells = {(cell["kernel"], cell["detector"]) for cell in json.loads(report.read_text())["cells"]}
    assert cells == {("scale_rows", detector)
                     for detector in ("correctness", "row-0 copy", "validation")}, cells
