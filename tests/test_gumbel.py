"""``kernels.gumbel`` against its float64 reference, which replays the kernel's Philox noise."""

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import reference.gumbel as reference
from triton_overflow import OverflowTests, assert_rows_close, assert_rows_equal
from kernels.gumbel import apply_temperature, gumbel_sample
from tests.strategies import LogitsSpec, build_logits, logits_specs, row_slots
from tests.cases import gumbel as family
from tests.validation import arguments_covered, assert_rejected

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
@pytest.mark.covers(kernel="gumbel_sample", detector="correctness")
@pytest.mark.parametrize("uniform_range, gap", [((0.3, 0.45), 0.05), ((0.85, 0.95), 0.1)],
                         ids=["contender", "large u"])
@pytest.mark.parametrize("temperature, apply_t", [(1.0, False), (0.5, True)])
def test_near_tie_the_cheap_bounds_misorder(uniform_range, gap, temperature, apply_t, device):
    """The kernel's cheap bound (-log(u) for the noise) overstates a lane with a large u. Plant
    such a lane at exact score 10 - gap and a small-u lane at exactly 10, in one block of
    otherwise hopeless lanes: the small-u lane is sampled."""
    vocab, seed, pos = 1024, 7, 11
    noise = reference.gumbel_scores(torch.zeros(vocab), 1.0, seed, pos, False)
    uniform = 1.0 - torch.exp(-torch.exp(-noise))
    overstated = int(torch.nonzero((uniform > uniform_range[0])
                                   & (uniform < uniform_range[1]))[0])
    exact = int(uniform.argmin())
    logits = torch.full((1, vocab), -1e4, dtype=torch.float64)
    logits[0, overstated] = 10.0 - gap - noise[overstated]
    logits[0, exact] = 10.0 - noise[exact]
    logits = (logits * temperature).float().to(device)
    tokens = gumbel_sample(logits, torch.zeros(1, dtype=torch.int32, device=device),
                           torch.tensor([temperature], device=device),
                           torch.tensor([seed], device=device),
                           torch.tensor([pos], device=device), apply_t)
    scores = reference.gumbel_scores(logits[0], temperature, seed, pos, apply_t)
    assert int(scores.argmax()) == exact
    reference.assert_valid_token(tokens[0], scores)


def _truncated_key(ratio):
    # The kernel's key of a ratio: its fp32 bits with the low 12 dropped.
    return int(np.float32(ratio).view(np.int32) & np.int32(-4096))


def _truncated_ratio_pair(seed, vocab):
    """(pos, b, j, low, high) for the first position where lane b's magnitude, as fp32 bits
    with the low 12 dropped, loses a share d of its value, and lane j has a smaller u such
    that j's ratio r times b's, for r in (low, high), lies past (1 - d) * (1 + u_b) times the
    slack's exp2 term (b's score placed near 0: |x_b| = g(u_b)) while j's exact score beats b's
    by three score tolerances (the score difference is about -log r + (u_b - u_j) / 2)."""
    for pos in range(1000):
        magnitudes = reference.fp32_magnitudes(seed, pos, vocab)
        uniform = reference.uniform_fp32(magnitudes).astype(np.float64)
        noise = reference.gumbel_scores(torch.zeros(vocab), 1.0, seed, pos, False)
        small = np.nonzero(uniform < 1e-3)[0]
        for b in small:
            ratio = np.float32(max(int(magnitudes[b]), 1))
            truncated = np.int32(_truncated_key(ratio)).view(np.float32)
            # The bound's reach without slack, relative to b's ratio: below 1, b itself would
            # not be a contender.
            reach = float(truncated) / float(ratio) * (1.0 + uniform[b])
            if reach < 1.0:
                continue
            exp2_term = abs(float(noise[b])) * 1.4426950408889634 * 2.0**-18
            low = reach * (1.0 + exp2_term)
            for j in small[uniform[small] < uniform[b]]:
                high = math.exp((uniform[b] - uniform[j]) / 2 - 3 * reference.SCORE_TOLERANCE)
                if high > low * (1.0 + 2e-5):
                    return pos, int(b), int(j), low, high
    raise AssertionError(f"no lane pair found for seed {seed}")


@pytest.mark.correctness
@pytest.mark.covers(kernel="gumbel_sample", detector="correctness")
def test_winner_just_past_the_truncated_ratio(device):
    """The smallest ratio is found from its fp32 bits with the low 12 dropped, which
    understates it by up to 2**-11: the 2**-9 of the kernel's `slack` covers that. Plant the
    lane b of the smallest ratio and a lane j whose ratio lies just past (1 + u_b) times b's
    truncated one (and the slack's exp2 term), yet whose exact score beats b's: j is sampled
    (b, without the 2**-9). The exp2 term, for the rounding of large arguments, matters only
    where the scores are so large that the reference's score tolerance hides what it changes."""
    vocab, seed = 4096, 7
    pos, b, j, low, high = _truncated_ratio_pair(seed, vocab)
    magnitudes = reference.fp32_magnitudes(seed, pos, vocab)
    noise = reference.gumbel_scores(torch.zeros(vocab), 1.0, seed, pos, False)
    logits = torch.full((1, vocab), -1e4)
    # Scores near 0, so that the tolerance is absolute: b's ratio is its magnitude (x_b is
    # the block's max), j's is its magnitude times exp(x_b - x_j), placed mid-window.
    logits[0, b] = -float(noise[b])
    wanted = (low + high) / 2 * float(magnitudes[b]) / float(magnitudes[j])
    logits[0, j] = float(logits[0, b]) - math.log(wanted)
    rate = np.float32(1.4426950408889634)
    x_b, x_j = logits[0, b].numpy(), logits[0, j].numpy()
    ratio_j = np.float32(magnitudes[j]) * np.exp2(x_b * rate - x_j * rate)
    assert low < ratio_j / np.float32(magnitudes[b]) < high
    # b alone holds the smallest key, so the kernel's cheap bound starts from b.
    assert _truncated_key(ratio_j) > _truncated_key(np.float32(magnitudes[b]))
    scores = reference.gumbel_scores(logits[0], 1.0, seed, pos, False)
    assert int(scores.argmax()) == j
    assert float(scores[j] - scores[b]) > 2 * reference.SCORE_TOLERANCE
    tokens = gumbel_sample(logits.to(device), torch.zeros(1, dtype=torch.int32, device=device),
                           torch.ones(1, device=device), torch.tensor([seed], device=device),
                           torch.tensor([pos], device=device), False)
    reference.assert_valid_token(tokens[0], scores)


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
    """Valid gumbel_sample arguments: 2 rows, vocab 8, 3 temperature slots, and a side output of
    2 slots and K = 2 columns."""
    return dict(logits=torch.zeros(2, 8, device=device),
                expanded_idx_mapping=torch.zeros(2, dtype=torch.int32, device=device),
                temperature=torch.ones(3, device=device),
                seed=torch.zeros(3, dtype=torch.int64, device=device),
                pos=torch.zeros(2, dtype=torch.int64, device=device), apply_temperature=True,
                output_processed_logits=torch.zeros(2, 2, 8, device=device),
                output_processed_logits_col=torch.ones(1, dtype=torch.int32, device=device),
                use_fp64=False)


def _strided(t):
    """The same values with a last-dimension stride of 2."""
    return t.repeat_interleave(2, dim=-1)[..., ::2]


# case: (argument, bad value from the valid one, what the message says besides the name)
COMMON_CASES = {
    "logits not a tensor": ("logits", lambda l: l.tolist(), "torch.Tensor"),
    "int logits": ("logits", lambda l: l.int(), "must have dtype"),
    "1-D logits": ("logits", lambda l: l[0], "2-D"),
    "strided vocab": ("logits", _strided, "contiguous"),
    "slot out of range": ("expanded_idx_mapping", lambda m: m + 3, r"must lie in \[0, 3\)"),
    "int64 mapping": ("expanded_idx_mapping", lambda m: m.long(), "must have dtype"),
    "mapping length": ("expanded_idx_mapping", lambda m: m[:1], "must have shape"),
    "negative temperature": ("temperature", lambda t: -t, "must lie in"),
    "nan temperature": ("temperature", lambda t: t * float("nan"), "must lie in"),
    "fp64 temperature": ("temperature", lambda t: t.double(), "must have dtype"),
    "temperature on another device": ("temperature", lambda t: t.to("meta"), "is on meta"),
    "temperature 2-D": ("temperature", lambda t: t[:, None], "must have shape"),
}
TEMPERATURE_BAD_ARGUMENTS = COMMON_CASES
SAMPLE_BAD_ARGUMENTS = {
    **COMMON_CASES,
    "seed length": ("seed", lambda s: s[:2], "must have shape"),
    "int32 seed": ("seed", lambda s: s.int(), "must have dtype"),
    "seed not a tensor": ("seed", lambda s: 0, "torch.Tensor"),
    "int32 pos": ("pos", lambda p: p.int(), "must have dtype"),
    "pos length": ("pos", lambda p: p[:1], "must have shape"),
    "pos strided": ("pos", _strided, "contiguous"),
    "apply_temperature int": ("apply_temperature", lambda f: 1, "must be a bool"),
    "apply_temperature tensor": ("apply_temperature", lambda f: torch.tensor(True),
                                 "must be a bool"),
    "use_fp64 int": ("use_fp64", lambda f: 0, "must be a bool"),
    "use_fp64 None": ("use_fp64", lambda f: None, "must be a bool"),
    "side output not a tensor": ("output_processed_logits", lambda t: t.tolist(), "torch.Tensor"),
    "side output vocab": ("output_processed_logits", lambda t: t[..., :7], "must be a contiguous"),
    "side output K = 0": ("output_processed_logits", lambda t: t[:, :0], "K >= 1"),
    "side output fp16": ("output_processed_logits", lambda t: t.half(), "fp32"),
    "side output 2-D": ("output_processed_logits", lambda t: t[:, 0], "must be a contiguous"),
    "side output not contiguous": ("output_processed_logits",
                                   lambda t: t.transpose(0, 1).contiguous().transpose(0, 1),
                                   "must be a contiguous"),
    "side output slot out of range": ("expanded_idx_mapping", lambda m: m + 2,
                                      r"must lie in \[0, 2\)"),
    "col without table": ("output_processed_logits", lambda t: None,
                          "output_processed_logits_col needs output_processed_logits"),
    "col not a tensor": ("output_processed_logits_col", lambda c: 1, "torch.Tensor"),
    "col int64": ("output_processed_logits_col", lambda c: c.long(), "must be int32"),
    "col past K": ("output_processed_logits_col", lambda c: c + 1, r"must lie in \[0, 2\)"),
    "negative col": ("output_processed_logits_col", lambda c: c - 2, r"must lie in \[0, 2\)"),
    "col per row count": ("output_processed_logits_col",
                          lambda c: torch.zeros(3, dtype=torch.int32, device=c.device),
                          "one entry or one per row"),
    "col 2-D": ("output_processed_logits_col", lambda c: c[None], "one entry or one per row"),
}
VALIDATED = {
    "apply_temperature": arguments_covered(TEMPERATURE_BAD_ARGUMENTS),
    "gumbel_sample": arguments_covered(SAMPLE_BAD_ARGUMENTS),
}


@pytest.mark.validation
@pytest.mark.covers(kernel="gumbel_sample", detector="validation")
@pytest.mark.parametrize("case", sorted(SAMPLE_BAD_ARGUMENTS))
def test_bad_argument_raises(case, device, no_launch):
    """Each bad argument raises ValueError naming it, before any launch."""
    assert_rejected(gumbel_sample, _valid(device), *SAMPLE_BAD_ARGUMENTS[case])


@pytest.mark.validation
@pytest.mark.covers(kernel="apply_temperature", detector="validation")
@pytest.mark.parametrize("case", sorted(TEMPERATURE_BAD_ARGUMENTS))
def test_temperature_bad_argument_raises(case, device, no_launch):
    """Each bad argument raises ValueError naming it, before any launch."""
    valid = _valid(device)
    arguments = {key: valid[key] for key in ("logits", "expanded_idx_mapping", "temperature")}
    assert_rejected(apply_temperature, arguments, *TEMPERATURE_BAD_ARGUMENTS[case])


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
