"""``kernels.bad_words`` against its reference, and its input validation."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import reference.bad_words as reference
from kernels.bad_words import apply_bad_words
from tests.strategies import LogitsSpec, build_logits
from triton_overflow import OverflowTests
from tests.cases import bad_words as family

KERNEL = "apply_bad_words"


@st.composite
def bad_word_cases(draw):
    vocab = draw(st.sampled_from((5, 17, 100)))
    slots = draw(st.integers(1, 3))
    counts = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))  # rows per request
    return vocab, slots, counts, draw(st.integers(0, 2**31 - 1)), draw(st.integers(1, 4))


def build_inputs(case, device):
    """Histories drawn from a small alphabet, so that bad words really match."""
    vocab, slots, counts, seed, max_words = case
    generator = torch.Generator().manual_seed(seed)
    alphabet = min(vocab, 3)
    rows = sum(counts)
    slot_of_request = torch.randint(0, slots, (len(counts), ), generator=generator)
    mapping = torch.repeat_interleave(slot_of_request, torch.tensor(counts)).int()
    local_pos = torch.cat([torch.arange(c) for c in counts]).int()
    input_ids = torch.randint(0, alphabet, (rows, ), generator=generator).int()
    max_len = 12
    all_token_ids = torch.randint(0, alphabet, (slots, max_len), generator=generator).int()
    prompt_len = torch.randint(0, 4, (slots, ), generator=generator).int()
    total_len = (prompt_len + torch.randint(0, 6, (slots, ), generator=generator)).int()
    words, offsets, num = [], [], []
    for _ in range(slots):
        lengths = torch.randint(1, 4, (max_words, ), generator=generator)
        tokens = [torch.randint(0, alphabet, (int(n), ), generator=generator) for n in lengths]
        tokens = [torch.cat([t[:-1], torch.randint(0, vocab, (1, ), generator=generator)]) for t in tokens]
        flat = torch.cat(tokens)
        words.append(torch.nn.functional.pad(flat, (0, 3 * max_words - flat.numel())))
        offsets.append(torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]))
        num.append(int(torch.randint(0, max_words + 1, (1, ), generator=generator)))
    tensors = dict(
        expanded_idx_mapping=mapping, bad_word_token_ids=torch.stack(words).int(),
        bad_word_offsets=torch.stack(offsets).int(), num_bad_words=torch.tensor(num).int(),
        all_token_ids=all_token_ids, prompt_len=prompt_len, total_len=total_len,
        input_ids=input_ids, expanded_local_pos=local_pos)
    logits = build_logits(LogitsSpec(rows, vocab, 0, "normal", seed), device)
    return logits, {k: v.to(device) for k, v in tensors.items()}, max_words


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="correctness")
@given(case=bad_word_cases())
def test_matches_reference(case, device):
    """Exactly the reference's entries are masked."""
    logits, tables, max_words = build_inputs(case, device)
    expected = logits.cpu().clone()
    reference.apply_bad_words(expected, **{k: v.cpu() for k, v in tables.items()},
                              max_num_bad_words=max_words)
    apply_bad_words(logits, **tables, max_num_bad_words=max_words)
    assert torch.equal(logits.cpu(), expected)


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="row-0 copy")
@given(case=bad_word_cases())
def test_single_row_request_copied_to_the_end_matches_row_zero(case, device):
    """Row 0 (a one-row request) appended as a last one-row request with its slot: same mask."""
    vocab, slots, counts, seed, max_words = case
    logits, tables, _ = build_inputs((vocab, slots, [1] + counts + [1], seed, max_words), device)
    logits[-1] = logits[0]
    tables["expanded_idx_mapping"][-1] = tables["expanded_idx_mapping"][0]
    tables["input_ids"][-1] = tables["input_ids"][0]
    apply_bad_words(logits, **tables, max_num_bad_words=max_words)
    assert torch.equal(logits[-1], logits[0])


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("name, change, message", [
    ("expanded_local_pos", lambda t: t + 1, r"expanded_local_pos must lie in \[0, row\]"),
    ("total_len", lambda t: t + 100, "total_len <= all_token_ids"),
    ("bad_word_offsets", lambda t: t * 0, "must rise by >= 1"),
    ("expanded_idx_mapping", lambda t: t + 10, "expanded_idx_mapping must lie in"),
    ("input_ids", lambda t: t.long(), "input_ids must have dtype"),
], ids=["local pos before row 0", "history past table", "empty word", "slot out of range", "int64 ids"])
def test_bad_argument_raises(name, change, message, device):
    logits, tables, max_words = build_inputs((17, 2, [2, 1], 0, 2), device)
    tables["num_bad_words"].fill_(2)
    tables[name] = change(tables[name])
    with pytest.raises(ValueError, match=message):
        apply_bad_words(logits, **tables, max_num_bad_words=max_words)


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
