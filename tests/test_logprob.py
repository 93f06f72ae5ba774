"""``kernels.logprob`` against its float64 reference, and its input validation."""

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import reference.logprob as reference
from triton_overflow import OverflowTests, RowMismatch, assert_rows_close, assert_rows_equal
from kernels.logprob import compute_token_logprobs, compute_token_ranks
from tests.strategies import NAN_KINDS, VALUE_KINDS, LogitsSpec, build_logits, logits_specs
from tests.cases import logprob as family
from tests.validation import arguments_covered, assert_rejected

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@st.composite
def logprob_cases(draw):
    spec = draw(logits_specs(dtypes=DTYPES, kinds=VALUE_KINDS + NAN_KINDS))
    num_ids = draw(st.integers(1, 8))
    id_seed = draw(st.integers(0, 2**31 - 1))
    return spec, num_ids, id_seed


def _ids(spec, num_ids, id_seed, device):
    generator = torch.Generator().manual_seed(id_seed)
    ids = torch.randint(0, spec.vocab, (spec.rows, num_ids), generator=generator)
    return ids.to(device)


@pytest.mark.correctness
@pytest.mark.covers(kernel="compute_token_logprobs", detector="correctness")
@given(case=logprob_cases())
@example(case=(LogitsSpec(1, 1, 0, "normal", 0), 1, 0))
@example(case=(LogitsSpec(3, 8193, 37, "some -inf", 1, torch.bfloat16), 8, 1))
@example(case=(LogitsSpec(2, 1000, 0, "all -inf rows", 2), 3, 2))
def test_logprobs_match_reference(case, device):
    """Log-softmax at the chosen ids matches float64 on the same (rounded) inputs within fp32's
    tolerance: the kernel computes and writes fp32, whatever the input dtype."""
    spec, num_ids, id_seed = case
    logits = build_logits(spec, device)
    ids = _ids(spec, num_ids, id_seed, device)
    expected = reference.compute_token_logprobs(logits.cpu(), ids.cpu())
    produced = compute_token_logprobs(logits, ids)
    assert produced.dtype == torch.float32
    assert_rows_close(produced, expected, "logprobs", torch.float32)


def test_logprob_tolerance_does_not_hide_a_bf16_sized_error():
    """0.06 nats off a logprob of -5 passed the old bf16 tolerance; fp32's does not."""
    expected = torch.tensor([[-5.0]], dtype=torch.float64)
    with pytest.raises(RowMismatch):
        assert_rows_close(expected.float() + 0.06, expected, "logprobs", torch.float32)


@pytest.mark.correctness
@pytest.mark.covers(kernel="compute_token_ranks", detector="correctness")
@given(case=logprob_cases())
@example(case=(LogitsSpec(2, 4097, 0, "ties", 3), 1, 3))
@example(case=(LogitsSpec(2, 100, 1, "some -inf", 4, torch.float16), 1, 4))
def test_ranks_match_reference(case, device):
    """Ranks (entries >= the token's logit) equal the reference exactly, ties included."""
    spec, _, id_seed = case
    logits = build_logits(spec, device)
    ids = _ids(spec, 1, id_seed, device)[:, 0]
    expected = reference.compute_token_ranks(logits.cpu(), ids.cpu())
    assert_rows_equal(compute_token_ranks(logits, ids), expected, "ranks")


@pytest.mark.correctness
@pytest.mark.covers(kernel="compute_token_logprobs", detector="row-0 copy")
@pytest.mark.covers(kernel="compute_token_ranks", detector="row-0 copy")
@given(case=logprob_cases())
def test_copied_row_matches_row_zero(case, device):
    """Row 0 and its ids copied into the last row give the last row row 0's outputs, exactly."""
    spec, num_ids, id_seed = case
    spec = LogitsSpec(max(spec.rows, 2), spec.vocab, spec.row_padding, spec.kind, spec.seed,
                      spec.dtype)
    logits = build_logits(spec, device)
    ids = _ids(spec, num_ids, id_seed, device)
    logits[-1], ids[-1] = logits[0], ids[0]
    logprobs = compute_token_logprobs(logits, ids)
    assert_rows_equal(logprobs[-1], logprobs[0], "logprobs, last row against row 0")
    ranks = compute_token_ranks(logits, ids[:, 0])
    assert_rows_equal(ranks[-1], ranks[0], "ranks, last row against row 0")


def test_rank_conventions(device):
    """Largest entry ranks 1, ties share the worse rank, -inf ranks V, NaN ranks 0."""
    logits = torch.tensor([[1.0, 5.0, 3.0, 3.0, float("-inf"), float("nan")]] * 5, device=device)
    ids = torch.tensor([1, 2, 3, 4, 5], device=device)
    assert compute_token_ranks(logits, ids).cpu().tolist() == [1, 3, 3, 5, 0]


def _valid(device, ndim):
    """Valid arguments of compute_token_logprobs (ndim 2) or compute_token_ranks (ndim 1)."""
    ids = torch.zeros((2, 3) if ndim == 2 else (2, ), dtype=torch.int64, device=device)
    return dict(logits=torch.zeros(2, 8, device=device), token_ids=ids)


# case: (argument, bad value from the valid one, what the message says besides the name)
LOGITS_CASES = {
    "logits not a tensor": ("logits", lambda l: l.tolist(), "torch.Tensor"),
    "int logits": ("logits", lambda l: l.int(), "dtype"),
    "fp64 logits": ("logits", lambda l: l.double(), "dtype"),
    "3-D logits": ("logits", lambda l: l[None], "2-D"),
    "strided vocab": ("logits", lambda l: torch.zeros(2, 16, device=l.device)[:, ::2],
                      "contiguous"),
}
ID_CASES = {
    "ids not a tensor": ("token_ids", lambda i: i.tolist(), "torch.Tensor"),
    "float ids": ("token_ids", lambda i: i.float(), "int32 or int64"),
    "ids wrong rows": ("token_ids", lambda i: i[:1], "shape"),
    "id negative": ("token_ids", lambda i: i - 1, r"\[0, 8\); got -1"),
    "id past vocab": ("token_ids", lambda i: i + 8, r"\[0, 8\); got 8"),
    "ids on another device": ("token_ids", lambda i: i.to("meta"), "is on meta"),
}
LOGPROB_BAD_ARGUMENTS = {**LOGITS_CASES, **ID_CASES,
                         "ids 1-D": ("token_ids", lambda i: i[:, 0], "shape")}
RANK_BAD_ARGUMENTS = {**LOGITS_CASES, **ID_CASES,
                      "ids 2-D": ("token_ids", lambda i: i[:, None], "shape")}
VALIDATED = {
    "compute_token_logprobs": arguments_covered(LOGPROB_BAD_ARGUMENTS),
    "compute_token_ranks": arguments_covered(RANK_BAD_ARGUMENTS),
}


def _raises_naming(launcher, case, device, table, ndim):
    assert_rejected(launcher, _valid(device, ndim), *table[case])


@pytest.mark.validation
@pytest.mark.covers(kernel="compute_token_logprobs", detector="validation")
@pytest.mark.parametrize("case", sorted(LOGPROB_BAD_ARGUMENTS))
def test_logprobs_bad_argument_raises(case, device, no_launch):
    """Each bad argument raises ValueError naming it, before any launch."""
    _raises_naming(compute_token_logprobs, case, device, LOGPROB_BAD_ARGUMENTS, 2)


@pytest.mark.validation
@pytest.mark.covers(kernel="compute_token_ranks", detector="validation")
@pytest.mark.parametrize("case", sorted(RANK_BAD_ARGUMENTS))
def test_ranks_bad_argument_raises(case, device, no_launch):
    """Each bad argument raises ValueError naming it, before any launch."""
    _raises_naming(compute_token_ranks, case, device, RANK_BAD_ARGUMENTS, 1)


def test_empty_inputs(device):
    logits = torch.zeros(0, 8, device=device)
    assert compute_token_logprobs(logits, torch.zeros(0, 2, dtype=torch.int64, device=device)).shape == (0, 2)
    assert compute_token_ranks(logits, torch.zeros(0, dtype=torch.int64, device=device)).shape == (0, )


def test_unchecked_out_of_range_ids_never_read_out_of_bounds(device):
    """With check_values=False a bad id gives NaN (logprob) or rank 0, not a stray access."""
    logits = torch.randn(2, 8, device=device)
    ids = torch.tensor([[8], [-5]], device=device)
    assert compute_token_logprobs(logits, ids, check_values=False).isnan().all()
    assert compute_token_ranks(logits, ids[:, 0], check_values=False).tolist() == [0, 0]


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
