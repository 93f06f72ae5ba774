"""``kernels.gumbel`` against its float64 reference, which replays the kernel's Philox noise."""

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import reference.gumbel as reference
from triton_overflow import OverflowTests, assert_rows_close, assert_rows_equal
from kernels.gumbel import apply_temperature, gumbel_sample
from tests.strategies import LogitsSpec, build_logits, logits_specs, row_slots
from tests.cases import gumbel as family

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@st.composite
def sampling_cases(draw):
    spec = draw(logits_specs(dtypes=DTYPES))
    slots = draw(st.integers(1, 4))
    temperatures = draw(st.lists(st.sampled_from((0.0, 1.0, 0.5)) | st.floats(0.05, 5.0),
                                 min_size=slots, max_size=slots))
    seeds = draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=slots, max_size=slots))
    side = draw(st.sampled_from(("none", "one column", "per row")))
    return spec, temperatures, seeds, draw(st.integers(0, 2**31 - 1)), draw(st.booleans()), \
        draw(st.booleans()), side


def _inputs(case, device):
    spec, temperatures, seeds, seed, apply_t, fp64, side = case
    logits = build_logits(spec, device)
    mapping = row_slots(spec.rows, len(temperatures), seed, device)
    generator = torch.Generator().manual_seed(seed)
    pos = torch.randint(0, 2**40, (spec.rows, ), generator=generator).to(device)
    temperature = torch.tensor(temperatures, device=device)
    seeds = torch.tensor(seeds, dtype=torch.int64, device=device)
    return logits, mapping, temperature, seeds, pos, apply_t, fp64, side


def _side_output(side, slots, rows, vocab, device):
    if side == "none":
        return None, None
    table = torch.full((slots, 3, vocab), float("nan"), device=device)
    col = (torch.tensor([2], dtype=torch.int32, device=device) if side == "one column"
           else torch.arange(rows, dtype=torch.int32, device=device) % 3)
    return table, col


@pytest.mark.correctness
@pytest.mark.covers(kernel="gumbel_sample", detector="correctness")
@given(case=sampling_cases())
@example(case=(LogitsSpec(3, 4097, 37, "ties", 1), [0.0, 1.0], [1, -5], 1, True, False, "per row"))
@example(case=(LogitsSpec(2, 1000, 0, "some -inf", 2, torch.bfloat16), [0.7], [2**62], 2, True, True, "none"))
def test_tokens_match_reference(case, device):
    """Each token has the best reference score (noise replayed bit for bit); the side output
    holds the scaled logits."""
    logits, mapping, temperature, seeds, pos, apply_t, fp64, side = _inputs(case, device)
    rows, vocab = logits.shape
    table, col = _side_output(side, temperature.numel(), rows, vocab, device)
    tokens = gumbel_sample(logits, mapping, temperature, seeds, pos, apply_t, table, col, fp64)
    expected_table, _ = _side_output(side, temperature.numel(), rows, vocab, "cpu")
    reference.gumbel_sample(logits.cpu(), mapping.cpu(), temperature.cpu(), seeds.cpu(), pos.cpu(),
                            apply_t, expected_table, None if col is None else col.cpu(), fp64)
    for row in range(rows):
        req = int(mapping[row])
        scores = reference.gumbel_scores(logits[row], float(temperature[req]), int(seeds[req]),
                                         int(pos[row]), apply_t, fp64)
        reference.assert_valid_token(tokens[row], scores, what=f"row {row}")
    if table is not None:
        # Rows sharing a (slot, column) race for it by contract: compare the unshared ones.
        columns = col.expand(rows) if col.numel() == 1 else col
        pairs = [(int(mapping[r]), int(columns[r])) for r in range(rows)]
        for pair in {p for p in pairs if pairs.count(p) == 1}:
            assert_rows_close(table[pair], expected_table[pair], f"side output {pair}", torch.float32)


@pytest.mark.correctness
@pytest.mark.covers(kernel="gumbel_sample", detector="row-0 copy")
@given(case=sampling_cases())
def test_copied_row_samples_row_zero_token(case, device):
    """The noise depends on (seed, pos, v) only: a copy of row 0 with its slot and position
    samples row 0's token."""
    logits, mapping, temperature, seeds, pos, apply_t, fp64, _ = _inputs(case, device)
    if logits.size(0) < 2:
        logits = torch.cat([logits, logits])
        mapping, pos = torch.cat([mapping, mapping]), torch.cat([pos, pos])
    logits[-1], mapping[-1], pos[-1] = logits[0], mapping[0], pos[0]
    tokens = gumbel_sample(logits, mapping, temperature, seeds, pos, apply_t, use_fp64=fp64)
    assert int(tokens[-1]) == int(tokens[0])


@pytest.mark.correctness
@pytest.mark.covers(kernel="apply_temperature", detector="correctness")
@given(case=sampling_cases())
def test_temperature_matches_reference(case, device):
    logits, mapping, temperature, *_ = _inputs(case, device)
    expected = logits.cpu().clone()
    reference.apply_temperature(expected, mapping.cpu(), temperature.cpu())
    apply_temperature(logits, mapping, temperature)
    assert_rows_close(logits, expected, "scaled logits", logits.dtype)


@pytest.mark.correctness
@pytest.mark.covers(kernel="apply_temperature", detector="row-0 copy")
@given(case=sampling_cases())
def test_temperature_copied_row_matches_row_zero(case, device):
    logits, mapping, temperature, *_ = _inputs(case, device)
    if logits.size(0) < 2:
        logits, mapping = torch.cat([logits, logits]), torch.cat([mapping, mapping])
    logits[-1], mapping[-1] = logits[0], mapping[0]
    apply_temperature(logits, mapping, temperature)
    assert_rows_equal(logits[-1], logits[0], "last row against row 0")


def _valid(device):
    return (torch.zeros(2, 8, device=device), torch.zeros(2, dtype=torch.int32, device=device),
            torch.ones(3, device=device), torch.zeros(3, dtype=torch.int64, device=device),
            torch.zeros(2, dtype=torch.int64, device=device))


@pytest.mark.validation
@pytest.mark.covers(kernel="gumbel_sample", detector="validation")
@pytest.mark.parametrize("change, message", [
    (lambda a: {**a, "expanded_idx_mapping": a["expanded_idx_mapping"] + 3}, r"must lie in \[0, 3\)"),
    (lambda a: {**a, "seed": a["seed"][:2]}, "seed must have shape"),
    (lambda a: {**a, "pos": a["pos"].int()}, "pos must have dtype"),
    (lambda a: {**a, "temperature": -a["temperature"]}, "temperature must lie in"),
    (lambda a: {**a, "output_processed_logits": torch.zeros(3, 2, 7, device=a["logits"].device)},
     "output_processed_logits must be"),
    (lambda a: {**a, "expanded_idx_mapping": a["expanded_idx_mapping"] + 2,
                "output_processed_logits": torch.zeros(2, 2, 8, device=a["logits"].device)},
     r"expanded_idx_mapping must lie in \[0, 2\)"),
    (lambda a: {**a, "output_processed_logits_col": torch.zeros(1, dtype=torch.int32, device=a["logits"].device)},
     "needs output_processed_logits"),
], ids=["slot out of range", "seed length", "int32 pos", "negative temperature", "side output vocab",
        "side output slot out of range", "col without table"])
def test_bad_argument_raises(change, message, device):
    logits, mapping, temperature, seed, pos = _valid(device)
    args = dict(logits=logits, expanded_idx_mapping=mapping, temperature=temperature, seed=seed,
                pos=pos, apply_temperature=True)
    with pytest.raises(ValueError, match=message):
        gumbel_sample(**change(args))


@pytest.mark.validation
@pytest.mark.covers(kernel="apply_temperature", detector="validation")
def test_temperature_bad_argument_raises(device):
    logits, mapping, temperature, _, _ = _valid(device)
    with pytest.raises(ValueError, match=r"expanded_idx_mapping must lie in \[0, 3\)"):
        apply_temperature(logits, mapping + 7, temperature)
    with pytest.raises(ValueError, match="temperature must have dtype"):
        apply_temperature(logits, mapping, temperature.double())


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
