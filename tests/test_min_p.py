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
def test_matches_reference(case, device):
    """Rows equal the reference; entries within fp32 rounding of the cutoff may go either way."""
    spec, values, seed = case
    logits = build_logits(spec, device)
    before = logits.clone()
    mapping = row_slots(spec.rows, len(values), seed, device)
    apply_min_p(logits, mapping, torch.tensor(values, device=device))
    for row in range(spec.rows):
        reference.assert_valid_row(before[row], logits[row], values[int(mapping[row])],
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


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("change, message", [
    (lambda l, m, p: (l, m.long(), p), "expanded_idx_mapping must have dtype"),
    (lambda l, m, p: (l, m + 5, p), r"expanded_idx_mapping must lie in \[0, 2\)"),
    (lambda l, m, p: (l, m[:1], p), "shape"),
    (lambda l, m, p: (l, m, p + 2), r"min_p must lie in \[0.0, 1.0\]"),
    (lambda l, m, p: (l, m, p.double()), "min_p must have dtype"),
    (lambda l, m, p: (l.int(), m, p), "logits must have dtype"),
], ids=["int64 mapping", "slot out of range", "mapping length", "min_p above 1", "fp64 min_p", "int logits"])
def test_bad_argument_raises(change, message, device):
    logits = torch.zeros(3, 8, device=device)
    mapping = torch.zeros(3, dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match=message):
        apply_min_p(*change(logits, mapping, torch.full((2, ), 0.1, device=device)))


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
