"""``kernels.logit_bias`` against its float64 reference, and its input validation."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import reference.logit_bias as reference
from triton_overflow import OverflowTests, assert_rows_close
from kernels.logit_bias import apply_logit_bias
from tests.strategies import LogitsSpec, build_logits, logits_specs, row_slots
from tests.cases import logit_bias as family

KERNEL = "apply_logit_bias"


@st.composite
def bias_cases(draw):
    spec = draw(logits_specs(dtypes=(torch.float32, torch.float16)))
    slots = draw(st.integers(1, 4))
    widths = draw(st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 5)))
    return spec, slots, widths, draw(st.integers(0, 2**31 - 1))


def build_tables(spec, slots, widths, seed, device):
    """Per-request tables with unique ids per list and counts up to each width."""
    generator = torch.Generator().manual_seed(seed)
    vocab = spec.vocab

    def id_table(width):
        rows = [torch.randperm(vocab, generator=generator)[:width] for _ in range(slots)]
        table = torch.stack([torch.nn.functional.pad(r, (0, width - r.numel())) for r in rows])
        counts = torch.randint(0, min(width, vocab) + 1, (slots, ), generator=generator)
        return table.int().to(device), counts.int().to(device)

    allowed, num_allowed = id_table(widths[0])
    num_allowed[torch.rand(slots, generator=generator) < 0.5] = 0
    bias_ids, num_bias = id_table(widths[1])
    bias = torch.randn(slots, widths[1], generator=generator).to(device)
    stop_ids, num_stop = id_table(widths[2])
    min_lens = torch.randint(0, 20, (slots, ), generator=generator).int().to(device)
    mapping = row_slots(spec.rows, slots, seed, device)
    pos = torch.randint(0, 20, (spec.rows, ), generator=generator).to(device)
    return (mapping, pos, num_allowed, allowed, num_bias, bias_ids, bias, min_lens, num_stop,
            stop_ids)


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="correctness")
@given(case=bias_cases())
def test_matches_reference(case, device):
    """Allowed ids, bias and stop ids give the reference's rows."""
    spec, slots, widths, seed = case
    logits = build_logits(spec, device)
    tables = build_tables(spec, slots, widths, seed, device)
    expected = logits.cpu().clone()
    reference.apply_logit_bias(expected, *[t.cpu() for t in tables])
    apply_logit_bias(logits, *tables)
    assert_rows_close(logits, expected, "biased logits", spec.dtype)


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="row-0 copy")
@given(case=bias_cases())
def test_copied_row_matches_row_zero(case, device):
    spec, slots, widths, seed = case
    spec = LogitsSpec(max(spec.rows, 2), spec.vocab, spec.row_padding, spec.kind, spec.seed, spec.dtype)
    logits = build_logits(spec, device)
    tables = build_tables(spec, slots, widths, seed, device)
    mapping, pos = tables[0], tables[1]
    logits[-1], mapping[-1], pos[-1] = logits[0], mapping[0], pos[0]
    apply_logit_bias(logits, *tables)
    assert torch.equal(logits[-1], logits[0])


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("index, change, message", [
    (3, lambda t: t + 100, r"allowed_token_ids must lie in \[0, 8\)"),
    (2, lambda t: t + 5, r"allowed_token_ids: counts must lie in \[0, 2\]"),
    (0, lambda t: t + 9, r"expanded_idx_mapping must lie in \[0, 2\)"),
    (6, lambda t: t.double(), "logit_bias must have dtype"),
    (1, lambda t: t.int(), "pos must have dtype"),
], ids=["allowed id past vocab", "count past width", "slot out of range", "fp64 bias", "int32 pos"])
def test_bad_argument_raises(index, change, message, device):
    spec = LogitsSpec(3, 8, 0, "normal", 0)
    tables = list(build_tables(spec, 2, (2, 2, 2), 0, device))
    tables[index] = change(tables[index])
    with pytest.raises(ValueError, match=message):
        apply_logit_bias(torch.zeros(3, 8, device=device), *tables)


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
