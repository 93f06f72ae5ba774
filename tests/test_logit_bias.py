"""``kernels.logit_bias`` against its float64 reference, and its input validation."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import reference.logit_bias as reference
from triton_overflow import OverflowTests, assert_rows_close
from kernels.logit_bias import apply_logit_bias
from tests.strategies import (LOGITS_DTYPES, LogitsSpec, build_logits, logits_specs, padded,
                              row_slots)
from tests.cases import logit_bias as family
from tests.validation import arguments_covered, assert_rejected

KERNEL = "apply_logit_bias"


@st.composite
def bias_cases(draw):
    spec = draw(logits_specs(dtypes=LOGITS_DTYPES))
    slots = draw(st.integers(1, 4))
    widths = draw(st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 5)))
    return spec, slots, widths, draw(st.integers(0, 2**31 - 1)), draw(st.sampled_from((0, 0, 3)))


def build_tables(spec, slots, widths, seed, device, table_padding=0):
    """Per-request tables with unique ids per list and counts up to each width, as views of
    wider buffers with ``table_padding``."""
    generator = torch.Generator().manual_seed(seed)
    vocab = spec.vocab

    def id_table(width):
        rows = [torch.randperm(vocab, generator=generator)[:width] for _ in range(slots)]
        table = torch.stack([torch.nn.functional.pad(r, (0, width - r.numel())) for r in rows])
        counts = torch.randint(0, min(width, vocab) + 1, (slots, ), generator=generator)
        return padded(table.int().to(device), table_padding, 0), counts.int().to(device)

    allowed, num_allowed = id_table(widths[0])
    num_allowed[torch.rand(slots, generator=generator) < 0.5] = 0
    bias_ids, num_bias = id_table(widths[1])
    bias = padded(torch.randn(slots, widths[1], generator=generator).to(device), table_padding,
                  1e9)
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
    spec, slots, widths, seed, table_padding = case
    logits = build_logits(spec, device)
    tables = build_tables(spec, slots, widths, seed, device, table_padding)
    expected = logits.cpu().clone()
    reference.apply_logit_bias(expected, *[t.cpu() for t in tables])
    apply_logit_bias(logits, *tables)
    assert_rows_close(logits, expected, "biased logits", spec.dtype)


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="row-0 copy")
@given(case=bias_cases())
def test_copied_row_matches_row_zero(case, device):
    spec, slots, widths, seed, table_padding = case
    spec = LogitsSpec(max(spec.rows, 2), spec.vocab, spec.row_padding, spec.kind, spec.seed, spec.dtype)
    logits = build_logits(spec, device)
    tables = build_tables(spec, slots, widths, seed, device, table_padding)
    mapping, pos = tables[0], tables[1]
    logits[-1], mapping[-1], pos[-1] = logits[0], mapping[0], pos[0]
    apply_logit_bias(logits, *tables)
    assert torch.equal(logits[-1], logits[0])


ARGUMENTS = ("expanded_idx_mapping", "pos", "num_allowed_token_ids", "allowed_token_ids",
             "num_logit_bias", "logit_bias_token_ids", "logit_bias", "min_lens",
             "num_stop_token_ids", "stop_token_ids")


def _valid(device):
    """Valid arguments: 3 rows, vocab 8, 2 slots, every list 2 wide and full."""
    tables = build_tables(LogitsSpec(3, 8, 0, "normal", 0), 2, (2, 2, 2), 0, device)
    arguments = dict(zip(ARGUMENTS, tables), logits=torch.zeros(3, 8, device=device))
    for name in ("num_allowed_token_ids", "num_logit_bias", "num_stop_token_ids"):
        arguments[name] = torch.full((2, ), 2, dtype=torch.int32, device=device)
    return arguments


def _strided(t):
    """The same values with a last-dimension stride of 2."""
    return t.repeat_interleave(2, dim=-1)[..., ::2]


# case: (argument, bad value from the valid one, what the message says besides the name)
BAD_ARGUMENTS = {
    "int logits": ("logits", lambda l: l.int(), "must have dtype"),
    "logits not a tensor": ("logits", lambda l: l.tolist(), "torch.Tensor"),
    "slot out of range": ("expanded_idx_mapping", lambda m: m + 9, r"must lie in \[0, 2\)"),
    "int64 mapping": ("expanded_idx_mapping", lambda m: m.long(), "must have dtype"),
    "int32 pos": ("pos", lambda p: p.int(), "must have dtype"),
    "pos length": ("pos", lambda p: p[:2], "must have shape"),
    "allowed count past width": ("num_allowed_token_ids", lambda n: n + 5,
                                 r"must lie in \[0, 2\] \(the width of allowed_token_ids\)"),
    "negative allowed count": ("num_allowed_token_ids", lambda n: n - 3, r"must lie in \[0, 2\]"),
    "allowed counts not a tensor": ("num_allowed_token_ids", lambda n: n.tolist(), "torch.Tensor"),
    "allowed counts 2-D": ("num_allowed_token_ids", lambda n: n[:, None], "must have shape"),
    "allowed id past vocab": ("allowed_token_ids", lambda t: t + 100, r"must lie in \[0, 8\)"),
    "negative allowed id": ("allowed_token_ids", lambda t: t - 100, r"must lie in \[0, 8\)"),
    "allowed ids slots": ("allowed_token_ids", lambda t: t[:1], "must have shape"),
    "allowed ids strided": ("allowed_token_ids", _strided, "contiguous"),
    "bias count past width": ("num_logit_bias", lambda n: n + 1, r"must lie in \[0, 2\]"),
    "int64 bias counts": ("num_logit_bias", lambda n: n.long(), "must have dtype"),
    "bias id past vocab": ("logit_bias_token_ids", lambda t: t + 8, r"must lie in \[0, 8\)"),
    "bias ids int64": ("logit_bias_token_ids", lambda t: t.long(), "must have dtype"),
    "bias ids 1-D": ("logit_bias_token_ids", lambda t: t[:, 0], "must have shape"),
    "fp64 bias": ("logit_bias", lambda b: b.double(), "must have dtype"),
    "bias width": ("logit_bias", lambda b: b[:, :1], "must have shape"),
    "bias on another device": ("logit_bias", lambda b: b.to("meta"), "is on meta"),
    "int64 min_lens": ("min_lens", lambda m: m.long(), "must have dtype"),
    "min_lens slots": ("min_lens", lambda m: m[:1], "must have shape"),
    "negative stop count": ("num_stop_token_ids", lambda n: n - 3, r"must lie in \[0, 2\]"),
    "stop counts fp32": ("num_stop_token_ids", lambda n: n.float(), "must have dtype"),
    "stop id past vocab": ("stop_token_ids", lambda t: t + 8, r"must lie in \[0, 8\)"),
    "stop ids 1-D": ("stop_token_ids", lambda t: t[:, 0], "must have shape"),
}
VALIDATED = {"apply_logit_bias": arguments_covered(BAD_ARGUMENTS)}


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_bad_argument_raises(case, device, no_launch):
    """Each bad argument raises ValueError naming it, before any launch."""
    assert_rejected(apply_logit_bias, _valid(device), *BAD_ARGUMENTS[case])


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
def test_repeated_logit_bias_id_raises(device, no_launch):
    """An id twice among a slot's first num_logit_bias entries raises ValueError (both entries
    would race on one logit and one bias would be lost)."""
    arguments = _valid(device)
    arguments["logit_bias_token_ids"] = torch.tensor([[3, 5], [4, 4]], dtype=torch.int32,
                                                     device=device)
    with pytest.raises(ValueError, match=r"\blogit_bias_token_ids must not repeat an id in "
                                         r"row 1; got 4 twice"):
        apply_logit_bias(**arguments)


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
def test_repeated_id_past_the_count_is_accepted(device):
    """Entries past a slot's num_logit_bias are unused, so a repeat there is no error."""
    arguments = _valid(device)
    for name in ("num_allowed_token_ids", "num_stop_token_ids"):
        arguments[name] = arguments[name] * 0
    arguments["expanded_idx_mapping"] = torch.zeros(3, dtype=torch.int32, device=device)
    arguments["num_logit_bias"] = torch.tensor([1, 2], dtype=torch.int32, device=device)
    arguments["logit_bias_token_ids"] = torch.tensor([[3, 3], [4, 5]], dtype=torch.int32,
                                                     device=device)
    apply_logit_bias(**arguments)
    expected = torch.zeros(3, 8)
    expected[:, 3] = arguments["logit_bias"][0, 0].cpu()
    assert torch.equal(arguments["logits"].cpu(), expected)


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
