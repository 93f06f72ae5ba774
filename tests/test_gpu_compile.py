"""Every launched kernel has a compile spec beside its family's cases, and the streaming kernels
keep their 16-byte global accesses in the sm_90 PTX (both checked on the CPU).

The sm_90 compile of each spec runs in its family's ``OverflowTests`` class.
"""

import json

import pytest

from tests.cases import families
from tests.lint_cli import run_python
from triton_overflow import mode
from triton_overflow.isolation import run_isolated

I32 = "*i32"


def _launched_kernels(folder):
    code = ("import json; from triton_overflow.lint.discover import find; "
            f"print(json.dumps(sorted(f'{{k.module.__name__}}:{{k.name}}' for k in find([{folder!r}]).kernels)))")
    done = run_python("-c", code)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _specified_kernels():
    return {spec.kernel for family in families().values()
            for spec in getattr(family, "COMPILE_SPECS", [])}


@pytest.mark.static
def test_every_launched_kernel_has_a_compile_spec():
    """A kernel in kernels/ that no family declares a compile spec for is never compiled."""
    missing = sorted(set(_launched_kernels("kernels")) - _specified_kernels())
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
    found = _launched_kernels(str(folder))
    assert found and not set(found) & _specified_kernels(), found


def _accesses(kernel, types, aligned, warps=8):
    outcome = run_isolated("triton_overflow.gpu_compile:global_accesses",
                           dict(kernel=kernel, types=types, num_warps=warps, aligned=aligned),
                           mode=mode.COMPILE, timeout=300)
    assert outcome.status == "passed", outcome.summary() + "\n" + outcome.output
    return outcome.value


# Streaming kernels whose logits traffic must stay in 16-byte accesses on sm_90, as launched
# with vocab sizes and strides that are multiples of 16. Each limit is a regression once seen:
# a value-dependent store mask (min_p: 32 scalar stores per thread) and a per-entry bitset
# gather (penalties: 38 scalar loads).
WIDE_ACCESS_JOBS = {
    "temperature": ("kernels.gumbel:_temperature_kernel", {"idx_mapping_ptr": I32},
                    ("logits_stride", "vocab_size")),
    "min_p block max": ("kernels.min_p:_block_max_kernel", {"idx_mapping_ptr": I32},
                        ("logits_stride", "vocab_size")),
    "min_p mask": ("kernels.min_p:_min_p_kernel", {"idx_mapping_ptr": I32},
                   ("logits_stride", "vocab_size")),
    "penalties": ("kernels.penalties:_penalties_kernel",
                  {k: I32 for k in ("idx_mapping_ptr", "token_ids_ptr", "local_pos_ptr",
                                    "prompt_bin_mask_ptr", "output_bin_counts_ptr")},
                  ("logits_stride", "vocab_size", "prompt_bin_mask_stride",
                   "output_bin_counts_stride")),
}
SCALAR_LOAD_LIMIT = {"penalties": 8}
PLANTED_NARROW_JOBS = {
    "value-masked store": ("tests.planted.narrow_access:value_masked_store_kernel",
                           {"threshold": "fp32"}, ("stride", "vocab_size")),
    "per-entry word gather": ("tests.planted.narrow_access:per_entry_word_gather_kernel",
                              {"words_ptr": I32}, ("stride", "vocab_size")),
}


def _narrow_accesses(job, accesses):
    """What breaks the 16-byte rule in ``accesses``: a list of messages, empty when none."""
    scalar_loads, scalar_stores = accesses.get("ld.global.b32", 0), accesses.get("st.global.b32", 0)
    problems = []
    if accesses.get("ld.global.v4.b32", 0) < 8:
        problems.append(f"{job}: too few 16-byte loads: {accesses}")
    if scalar_stores > 1:
        problems.append(f"{job}: {scalar_stores} scalar 4-byte stores: {accesses}")
    if scalar_loads > SCALAR_LOAD_LIMIT.get(job, 3):
        problems.append(f"{job}: {scalar_loads} scalar 4-byte loads: {accesses}")
    return problems


@pytest.mark.static
@pytest.mark.parametrize("job", sorted(WIDE_ACCESS_JOBS))
def test_streaming_kernels_move_logits_in_16_byte_accesses(job):
    kernel, types, aligned = WIDE_ACCESS_JOBS[job]
    assert not _narrow_accesses(job, _accesses(kernel, types, aligned))


@pytest.mark.static
@pytest.mark.selftest
@pytest.mark.parametrize("job", sorted(PLANTED_NARROW_JOBS))
def test_access_width_check_flags_planted_narrow_kernel(job):
    """The check above fails the two patterns it guards against, planted in small kernels."""
    kernel, types, aligned = PLANTED_NARROW_JOBS[job]
    accesses = _accesses(kernel, types, aligned)
    assert _narrow_accesses(job, accesses), f"{job}: not flagged: {accesses}"
