"""``kernels.penalties`` (token counts and penalties) against the float64 reference, and their
input validation."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import reference.penalties as reference
from triton_overflow import OverflowTests, RowMismatch, assert_rows_close, assert_rows_equal
from kernels.penalties import apply_penalties, build_penalty_state
from tests.strategies import (EDGE_KINDS, LOGITS_DTYPES, LogitsSpec, build_logits,
                              lying_row_stride, padded)
from tests.cases import penalties as family
from tests.validation import arguments_covered, assert_rejected

KERNEL = "apply_penalties"


@st.composite
def penalty_cases(draw):
    """Vocab sizes around the 8192 block, fp32/fp16/bf16 logits, -inf entries and rows, padded
    logits rows and padded (non-contiguous) bitset and count tables."""
    vocab = draw(st.sampled_from((1, 31, 33, 100, 1000, 8193)))
    slots = draw(st.integers(1, 4))
    counts = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    kind = draw(st.sampled_from(EDGE_KINDS))
    return (vocab, slots, counts, kind, draw(st.integers(0, 2**31 - 1)),
            draw(st.sampled_from(LOGITS_DTYPES)), draw(st.sampled_from((0, 0, 1, 37))),
            draw(st.sampled_from((0, 0, 3))))


def build_inputs(case, device):
    vocab, slots, counts, kind, seed, dtype, row_padding, table_padding = (
        tuple(case) + (torch.float32, 0, 0))[:8]
    generator = torch.Generator().manual_seed(seed)
    rows = sum(counts)
    requests = torch.randint(0, slots, (len(counts), ), generator=generator)
    mapping = torch.repeat_interleave(requests, torch.tensor(counts)).int()
    local_pos = torch.cat([torch.arange(c) for c in counts]).int()
    token_ids = torch.randint(0, vocab, (rows, ), generator=generator).int()
    history = torch.randint(0, vocab, (slots, 16), generator=generator).int()
    prompt_len = torch.randint(0, 8, (slots, ), generator=generator).int()
    total_len = (prompt_len + torch.randint(0, 9, (slots, ), generator=generator)).int()
    choice = torch.rand(3, slots, generator=generator)
    repetition = torch.where(choice[0] < 0.3, 1.0, 0.5 + 2 * torch.rand(slots, generator=generator))
    frequency = torch.where(choice[1] < 0.3, 0.0, torch.randn(slots, generator=generator))
    presence = torch.where(choice[2] < 0.3, 0.0, torch.randn(slots, generator=generator))
    logits = build_logits(LogitsSpec(rows, vocab, row_padding, kind, seed, dtype), device)
    state = dict(prompt_bin_mask=padded(torch.full((slots, -(-vocab // 32)), 7, dtype=torch.int32,
                                                   device=device), table_padding, -1),
                 output_bin_counts=padded(torch.full((slots, vocab), 3, dtype=torch.int32,
                                                     device=device), table_padding, 9))
    tables = dict(expanded_idx_mapping=mapping, token_ids=token_ids, expanded_local_pos=local_pos,
                  repetition_penalty=repetition.float(), frequency_penalty=frequency.float(),
                  presence_penalty=presence.float())
    history_tables = dict(idx_mapping=requests.int().unique(), all_token_ids=history,
                          prompt_len=prompt_len, total_len=total_len)
    def to(tensors):
        return {k: v if v.device == device else v.to(device) for k, v in tensors.items()}

    return logits, to(tables), state, to(history_tables)


@pytest.mark.correctness
@pytest.mark.covers(kernel="build_penalty_state", detector="correctness")
@given(case=penalty_cases())
def test_state_matches_reference(case, device):
    """Prompt bitsets and output counts equal the reference for the rebuilt slots."""
    _, _, state, history = build_inputs(case, device)
    expected = {k: v.cpu().clone() for k, v in state.items()}
    reference.build_penalty_state(**{k: v.cpu() for k, v in history.items()}, **expected)
    build_penalty_state(**history, **state)
    for name in state:
        assert_rows_equal(state[name], expected[name], name)


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="correctness")
@given(case=penalty_cases())
def test_penalties_match_reference(case, device):
    """Penalised rows equal the reference, draft tokens of earlier rows counted."""
    logits, tables, state, history = build_inputs(case, device)
    build_penalty_state(**history, **state)
    expected = logits.cpu().clone()
    reference.apply_penalties(expected, **{k: v.cpu() for k, v in tables.items()},
                              **{k: v.cpu() for k, v in state.items()})
    apply_penalties(logits, **tables, **state)
    assert_rows_close(logits, expected, "penalised logits", logits.dtype)


@pytest.mark.correctness
def test_padded_rows_expose_a_launcher_that_ignores_the_row_stride(device):
    """With padded logits rows and tables, a launcher passing the width where the row stride
    belongs gives other rows' values: the comparison above fails on it."""
    case = (1000, 3, [2, 2], "normal", 5, torch.float32, 37, 3)
    logits, tables, state, history = build_inputs(case, device)
    build_penalty_state(**history, **state)
    expected = logits.cpu().clone()
    reference.apply_penalties(expected, **{k: v.cpu() for k, v in tables.items()},
                              **{k: v.cpu() for k, v in state.items()})
    apply_penalties(lying_row_stride(logits), **tables, **state)
    with pytest.raises(RowMismatch):
        assert_rows_close(logits, expected, "penalised logits", logits.dtype)


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="row-0 copy")
@given(case=penalty_cases())
def test_copied_row_matches_row_zero(case, device):
    """Row 0 (made a one-row request) copied into a last one-row request: the same output."""
    vocab, slots, counts, kind, seed, *layout = case
    logits, tables, state, history = build_inputs(
        (vocab, slots, [1] + counts + [1], kind, seed, *layout), device)
    build_penalty_state(**history, **state)
    logits[-1] = logits[0]
    tables["expanded_idx_mapping"][-1] = tables["expanded_idx_mapping"][0]
    apply_penalties(logits, **tables, **state)
    assert torch.equal(logits[-1], logits[0])


def _valid(device):
    """Valid apply_penalties and build_penalty_state arguments: 3 rows (requests of 2 and 1),
    vocab 33, 2 slots whose whole 16-token history is counted."""
    logits, tables, state, history = build_inputs((33, 2, [2, 1], "normal", 0), device)
    history["idx_mapping"] = torch.arange(2, dtype=torch.int32, device=device)
    history["total_len"] = torch.full_like(history["total_len"], 16)
    return dict(logits=logits, **tables, **state), dict(**history, **state)


def _overlapping(t):
    """Row 0 seen as every row (row stride 0)."""
    return t[:1].expand(t.size(0), -1)


# case: (argument, bad value from the valid one, what the message says besides the name)
PENALTY_BAD_ARGUMENTS = {
    "int logits": ("logits", lambda l: l.int(), "must have dtype"),
    "logits not a tensor": ("logits", lambda l: l.tolist(), "torch.Tensor"),
    "slot out of range": ("expanded_idx_mapping", lambda m: m + 10, "must lie in"),
    "int64 mapping": ("expanded_idx_mapping", lambda m: m.long(), "must have dtype"),
    "int64 tokens": ("token_ids", lambda t: t.long(), "must have dtype"),
    "tokens length": ("token_ids", lambda t: t[:2], "must have shape"),
    "local pos before row 0": ("expanded_local_pos", lambda t: t + 1, r"must lie in \[0, row\]"),
    "local pos int64": ("expanded_local_pos", lambda t: t.long(), "must have dtype"),
    "zero repetition": ("repetition_penalty", lambda t: t * 0, "must lie in"),
    "nan repetition": ("repetition_penalty", lambda t: t * float("nan"), "must lie in"),
    "repetition slots": ("repetition_penalty", lambda t: t[:1], "must have shape"),
    "infinite frequency": ("frequency_penalty", lambda t: t + float("inf"), "must be finite"),
    "nan frequency": ("frequency_penalty", lambda t: t * float("nan"), "must be finite"),
    "fp64 frequency": ("frequency_penalty", lambda t: t.double(), "must have dtype"),
    "infinite presence": ("presence_penalty", lambda t: t - float("inf"), "must be finite"),
    "presence on another device": ("presence_penalty", lambda t: t.to("meta"), "is on meta"),
    "bitset width": ("prompt_bin_mask", lambda t: t[:, :-1], "must have shape"),
    "bitset int64": ("prompt_bin_mask", lambda t: t.long(), "must have dtype"),
    "counts width": ("output_bin_counts", lambda t: t[:, :-1], "must have shape"),
    "counts not a tensor": ("output_bin_counts", lambda t: t.tolist(), "torch.Tensor"),
}
STATE_BAD_ARGUMENTS = {
    "slot out of range": ("idx_mapping", lambda m: m + 2, r"must lie in \[0, 2\)"),
    "int64 mapping": ("idx_mapping", lambda m: m.long(), "must have dtype"),
    "token past vocab": ("all_token_ids", lambda t: t + 33, r"must lie in \[0, 33\)"),
    "negative token": ("all_token_ids", lambda t: t - 33, r"must lie in \[0, 33\)"),
    "history slots": ("all_token_ids", lambda t: t[:1], "must have shape"),
    "history strided": ("all_token_ids", lambda t: t.repeat_interleave(2, dim=-1)[:, ::2],
                        "contiguous"),
    "negative prompt_len": ("prompt_len", lambda n: n * 0 - 1, "0 <= prompt_len"),
    "prompt_len int64": ("prompt_len", lambda n: n.long(), "must have dtype"),
    "total_len past history": ("total_len", lambda n: n + 1, "total_len <= all_token_ids"),
    "total_len slots": ("total_len", lambda n: n[:1], "must have shape"),
    "bitset width": ("prompt_bin_mask", lambda t: t[:, :-1], "must have shape"),
    "bitset rows overlap": ("prompt_bin_mask", _overlapping, "rows overlap"),
    "counts not a tensor": ("output_bin_counts", lambda t: t.tolist(), "torch.Tensor"),
    "counts rows overlap": ("output_bin_counts", _overlapping, "rows overlap"),
    "counts fp32": ("output_bin_counts", lambda t: t.float(), "must have dtype"),
}
VALIDATED = {
    "apply_penalties": arguments_covered(PENALTY_BAD_ARGUMENTS),
    "build_penalty_state": arguments_covered(STATE_BAD_ARGUMENTS),
}


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("case", sorted(PENALTY_BAD_ARGUMENTS))
def test_bad_argument_raises(case, device, no_launch):
    """Each bad argument raises ValueError naming it, before any launch."""
    assert_rejected(apply_penalties, _valid(device)[0], *PENALTY_BAD_ARGUMENTS[case])


@pytest.mark.validation
@pytest.mark.covers(kernel="build_penalty_state", detector="validation")
@pytest.mark.parametrize("case", sorted(STATE_BAD_ARGUMENTS))
def test_state_bad_argument_raises(case, device, no_launch):
    """Each bad argument raises ValueError naming it, before any launch."""
    assert_rejected(build_penalty_state, _valid(device)[1], *STATE_BAD_ARGUMENTS[case])


@pytest.mark.validation
@pytest.mark.covers(kernel="build_penalty_state", detector="validation")
def test_state_rejects_a_slot_listed_twice(device, no_launch):
    """A slot twice in idx_mapping raises ValueError: its output tokens would be counted twice."""
    _, arguments = _valid(device)
    arguments["idx_mapping"] = torch.tensor([1, 0, 1], dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match=r"\bidx_mapping must not repeat an id; got 1 twice"):
        build_penalty_state(**arguments)


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
