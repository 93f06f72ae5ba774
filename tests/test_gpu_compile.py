"""Every launched kernel has a compile spec beside its family's cases, and the streaming kernels
those cases declare (``STREAMING``) keep their 16-byte global accesses in the sm_90 PTX (both
checked on the CPU).

The sm_90 compile of each spec runs in its family's ``OverflowTests`` class.
"""

import json

import pytest

from tests.cases import Streaming, families
from tests.lint_cli import run_python
from triton_overflow import CompileSpec
from triton_overflow.engine.isolation import run_isolated
from triton_overflow.interp import execution_mode

I32 = "*i32"


def launched_kernels(folder):
    """``module:kernel`` of every kernel the files of ``folder`` launch."""
    code = ("import json; from triton_overflow.lint.discover import find; "
            f"print(json.dumps(sorted(f'{{k.module.__name__}}:{{k.name}}' for k in find([{folder!r}]).kernels)))")
    done = run_python("-c", code)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def specified_kernels():
    """The kernels every family declares a compile spec for."""
    return {spec.kernel for family in families().values()
            for spec in getattr(family, "COMPILE_SPECS", [])}


def streaming_kernels():
    """Every family's ``STREAMING`` kernels, sorted by their compile spec's id."""
    return sorted((streaming for family in families().values()
                   for streaming in getattr(family, "STREAMING", [])),
                  key=lambda streaming: streaming.spec.id)


@pytest.mark.static
def test_every_launched_kernel_has_a_compile_spec():
    """A kernel in kernels/ that no family declares a compile spec for is never compiled."""
    missing = sorted(set(launched_kernels("kernels")) - specified_kernels())
    assert not missing, f"launched kernels without a CompileSpec in tests/cases: {missing}"


@pytest.mark.static
@pytest.mark.selftest
def test_compile_spec_guard_flags_a_kernel_without_one(tmp_path):
    """The guard above fails on a kernel folder holding a kernel with no spec."""
    folder = tmp_path / "extra_kernels"
    folder.mkdir()
    (folder / "unlisted.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def unlisted_kernel(x_ptr):\n    tl.store(x_ptr, 1.0)\n")
    found = launched_kernels(str(folder))
    assert found and not set(found) & specified_kernels(), found


def _accesses(streaming):
    spec = streaming.spec
    outcome = run_isolated("triton_overflow.engine.gpu_compile:global_accesses",
                           dict(kernel=spec.kernel, types=spec.types, constants=spec.constants,
                                num_warps=spec.num_warps, aligned=streaming.aligned),
                           mode=execution_mode.COMPILE, timeout=300)
    assert outcome.status == "passed", outcome.summary() + "\n" + outcome.output
    return outcome.value


# The two patterns the access check guards against (each family's STREAMING says where one was
# seen), planted in small kernels.
PLANTED_NARROW = [
    Streaming(CompileSpec("tests.planted.narrow_access:value_masked_store_kernel",
                          {"threshold": "fp32"}, num_warps=8, label="value-masked store"),
              ("stride", "vocab_size")),
    Streaming(CompileSpec("tests.planted.narrow_access:per_entry_word_gather_kernel",
                          {"words_ptr": I32}, num_warps=8, label="per-entry word gather"),
              ("stride", "vocab_size")),
]


def _narrow_accesses(streaming, accesses):
    """What breaks the 16-byte rule in ``accesses``: a list of messages, empty when none."""
    job = streaming.spec.id
    scalar_loads, scalar_stores = accesses.get("ld.global.b32", 0), accesses.get("st.global.b32", 0)
    problems = []
    if accesses.get("ld.global.v4.b32", 0) < 8:
        problems.append(f"{job}: too few 16-byte loads: {accesses}")
    if scalar_stores > 1:
        problems.append(f"{job}: {scalar_stores} scalar 4-byte stores: {accesses}")
    if scalar_loads > streaming.scalar_load_limit:
        problems.append(f"{job}: {scalar_loads} scalar 4-byte loads: {accesses}")
    return problems


def _streaming_id(streaming):
    return streaming.spec.id


@pytest.mark.static
@pytest.mark.parametrize("streaming", streaming_kernels(), ids=_streaming_id)
def test_streaming_kernels_move_logits_in_16_byte_accesses(streaming):
    """Each family's STREAMING kernel, as launched with vocab sizes and strides that are
    multiples of 16, moves the logits in 16-byte accesses on sm_90."""
    assert not _narrow_accesses(streaming, _accesses(streaming))


@pytest.mark.static
@pytest.mark.selftest
@pytest.mark.parametrize("streaming", PLANTED_NARROW, ids=_streaming_id)
def test_access_width_check_flags_planted_narrow_kernel(streaming):
    """The check above fails the two patterns it guards against, planted in small kernels."""
    accesses = _accesses(streaming)
    assert _narrow_accesses(streaming, accesses), f"{streaming.spec.id}: not flagged: {accesses}"
