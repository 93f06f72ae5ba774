"""``kernels.penalties`` (token counts and penalties) against the float64 reference."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import reference.penalties as reference
from triton_overflow import OverflowTests, assert_rows_close, assert_rows_equal
from kernels.penalties import apply_penalties, build_penalty_state
from tests.strategies import LogitsSpec, build_logits
from tests.cases import penalties as family

KERNEL = "apply_penalties"


@st.composite
def penalty_cases(draw):
    vocab = draw(st.sampled_from((1, 31, 33, 100, 1000, 8193)))
    slots = draw(st.integers(1, 4))
    counts = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    kind = draw(st.sampled_from(("normal", "ties", "wide")))
    return vocab, slots, counts, kind, draw(st.integers(0, 2**31 - 1))


def build_inputs(case, device):
    vocab, slots, counts, kind, seed = case
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
    logits = build_logits(LogitsSpec(rows, vocab, 0, kind, seed), device)
    state = dict(prompt_bin_mask=torch.full((slots, -(-vocab // 32)), 7, dtype=torch.int32),
                 output_bin_counts=torch.full((slots, vocab), 3, dtype=torch.int32))
    tables = dict(expanded_idx_mapping=mapping, token_ids=token_ids, expanded_local_pos=local_pos,
                  repetition_penalty=repetition.float(), frequency_penalty=frequency.float(),
                  presence_penalty=presence.float())
    history_tables = dict(idx_mapping=requests.int().unique(), all_token_ids=history,
                          prompt_len=prompt_len, total_len=total_len)
    to = lambda d: {k: v.to(device) for k, v in d.items()}  # noqa: E731
    return logits, to(tables), to(state), to(history_tables)


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
    assert_rows_close(logits, expected, "penalised logits", torch.float32)


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="row-0 copy")
@given(case=penalty_cases())
def test_copied_row_matches_row_zero(case, device):
    """Row 0 (made a one-row request) copied into a last one-row request: the same output."""
    vocab, slots, counts, kind, seed = case
    logits, tables, state, history = build_inputs((vocab, slots, [1] + counts + [1], kind, seed), device)
    build_penalty_state(**history, **state)
    logits[-1] = logits[0]
    tables["expanded_idx_mapping"][-1] = tables["expanded_idx_mapping"][0]
    apply_penalties(logits, **tables, **state)
    assert torch.equal(logits[-1], logits[0])


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("name, change, message", [
    ("expanded_idx_mapping", lambda t: t + 10, "expanded_idx_mapping must lie in"),
    ("expanded_local_pos", lambda t: t + 1, r"expanded_local_pos must lie in \[0, row\]"),
    ("repetition_penalty", lambda t: t * 0, "repetition_penalty must lie in"),
    ("token_ids", lambda t: t.long(), "token_ids must have dtype"),
    ("output_bin_counts", lambda t: t[:, :-1], "output_bin_counts must have shape"),
], ids=["slot out of range", "local pos before row 0", "zero repetition", "int64 tokens", "counts width"])
def test_bad_argument_raises(name, change, message, device):
    logits, tables, state, _ = build_inputs((33, 2, [2, 1], "normal", 0), device)
    arguments = {**tables, **state}
    arguments[name] = change(arguments[name])
    with pytest.raises(ValueError, match=message):
        apply_penalties(logits, **arguments)


@pytest.mark.validation
@pytest.mark.covers(kernel="build_penalty_state", detector="validation")
def test_state_rejects_tokens_past_the_vocab(device):
    _, _, state, history = build_inputs((33, 2, [2, 1], "normal", 0), device)
    history["all_token_ids"] = history["all_token_ids"] + 33
    history["total_len"] = history["prompt_len"] + 1
    with pytest.raises(ValueError, match=r"all_token_ids must lie in \[0, 33\)"):
        build_penalty_state(**history, **state)


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
