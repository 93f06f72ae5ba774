"""``kernels.min_p`` against its float64 reference, and its input validation."""

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import reference.min_p as reference
from kernels.min_p import apply_min_p
from tests.strategies import LogitsSpec, build_logits, logits_specs, row_slots
from triton_overflow import OverflowTests
from tests.cases import min_p as family
from tests.validation import arguments_covered, assert_rejected

KERNEL = "apply_min_p"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@st.composite
def min_p_cases(draw):
    spec = draw(logits_specs(dtypes=DTYPES))
    slots = draw(st.integers(1, 4))
    values = draw(st.lists(st.sampled_from((0.0, 1.0, 1e-6)) | st.floats(0.0, 1.0),
                           min_size=slots, max_size=slots))
    return spec, values, draw(st.integers(0, 2**31 - 1))


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="correctness")
@given(case=min_p_cases())
@example(case=(LogitsSpec(2, 8193, 37, "some -inf", 1), [0.1, 0.0], 1))
@example(case=(LogitsSpec(2, 100, 0, "all -inf rows", 2), [0.5], 2))
@example(case=(LogitsSpec(1, 1000, 0, "wide", 0), [1.5e-81], 0))  # 0.0 in fp32
def test_matches_reference(case, device):
    """Rows equal the reference; entries within fp32 rounding of the cutoff may go either way."""
    spec, values, seed = case
    logits = build_logits(spec, device)
    before = logits.clone()
    mapping = row_slots(spec.rows, len(values), seed, device)
    min_p = torch.tensor(values, device=device)
    apply_min_p(logits, mapping, min_p)
    for row in range(spec.rows):
        # Judged at the fp32 min_p the kernel was given (a drawn 1e-81 is 0.0 there).
        reference.assert_valid_row(before[row], logits[row], float(min_p[int(mapping[row])]),
                                   what=f"row {row}")


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="row-0 copy")
@given(case=min_p_cases())
def test_copied_row_matches_row_zero(case, device):
    """Row 0 and its slot copied into the last row give the last row row 0's output."""
    spec, values, seed = case
    spec = LogitsSpec(max(spec.rows, 2), spec.vocab, spec.row_padding, spec.kind, spec.seed, spec.dtype)
    logits = build_logits(spec, device)
    mapping = row_slots(spec.rows, len(values), seed, device)
    logits[-1], mapping[-1] = logits[0], mapping[0]
    apply_min_p(logits, mapping, torch.tensor(values, device=device))
    assert torch.equal(logits[-1], logits[0])


def _valid(device):
    return dict(logits=torch.zeros(3, 8, device=device),
                expanded_idx_mapping=torch.zeros(3, dtype=torch.int32, device=device),
                min_p=torch.full((2, ), 0.1, device=device))


# case: (argument, bad value from the valid one, what the message says besides the name)
BAD_ARGUMENTS = {
    "int logits": ("logits", lambda l: l.int(), "must have dtype"),
    "logits not a tensor": ("logits", lambda l: l.tolist(), "torch.Tensor"),
    "1-D logits": ("logits", lambda l: l[0], "2-D"),
    "int64 mapping": ("expanded_idx_mapping", lambda m: m.long(), "must have dtype"),
    "slot out of range": ("expanded_idx_mapping", lambda m: m + 5, r"must lie in \[0, 2\)"),
    "negative slot": ("expanded_idx_mapping", lambda m: m - 1, r"must lie in \[0, 2\)"),
    "mapping length": ("expanded_idx_mapping", lambda m: m[:1], "must have shape"),
    "mapping on another device": ("expanded_idx_mapping", lambda m: m.to("meta"), "is on meta"),
    "min_p above 1": ("min_p", lambda p: p + 2, r"must lie in \[0.0, 1.0\]"),
    "min_p nan": ("min_p", lambda p: p * float("nan"), r"must lie in \[0.0, 1.0\]"),
    "fp64 min_p": ("min_p", lambda p: p.double(), "must have dtype"),
    "min_p 2-D": ("min_p", lambda p: p[:, None], "must have shape"),
    "min_p strided": ("min_p", lambda p: p.repeat_interleave(2)[::2], "contiguous"),
    "min_p not a tensor": ("min_p", lambda p: 0.1, "torch.Tensor"),
}
VALIDATED = {"apply_min_p": arguments_covered(BAD_ARGUMENTS)}


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_bad_argument_raises(case, device, no_launch):
    """Each bad argument raises ValueError naming it, before any launch."""
    assert_rejected(apply_min_p, _valid(device), *BAD_ARGUMENTS[case])


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
