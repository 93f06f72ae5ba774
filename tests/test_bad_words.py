"""``kernels.bad_words`` against its reference, and its input validation."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import reference.bad_words as reference
from kernels.bad_words import apply_bad_words
from tests.strategies import (EDGE_KINDS, LOGITS_DTYPES, LogitsSpec, build_logits,
                              lying_row_stride, padded)
from triton_overflow import OverflowTests
from tests.cases import bad_words as family
from tests.validation import arguments_covered, assert_rejected

KERNEL = "apply_bad_words"


@st.composite
def bad_word_cases(draw):
    """Small and large vocabularies, short and long histories, fp32/fp16/bf16 logits with -inf
    entries and rows, padded logits rows and padded per-request tables."""
    vocab = draw(st.sampled_from((5, 17, 100, 1000, 5003)))
    slots = draw(st.integers(1, 3))
    counts = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))  # rows per request
    return (vocab, slots, counts, draw(st.integers(0, 2**31 - 1)), draw(st.integers(1, 4)),
            draw(st.sampled_from((12, 300, 2100))), draw(st.sampled_from(LOGITS_DTYPES)),
            draw(st.sampled_from(EDGE_KINDS)), draw(st.sampled_from((0, 0, 1, 37))),
            draw(st.sampled_from((0, 0, 5))))


def build_inputs(case, device):
    """Histories drawn from a small alphabet, so that bad words really match."""
    vocab, slots, counts, seed, max_words, max_len, dtype, kind, row_padding, table_padding = (
        tuple(case) + (12, torch.float32, "normal", 0, 0))[:10]
    generator = torch.Generator().manual_seed(seed)
    alphabet = min(vocab, 3)
    rows = sum(counts)
    slot_of_request = torch.randint(0, slots, (len(counts), ), generator=generator)
    mapping = torch.repeat_interleave(slot_of_request, torch.tensor(counts)).int()
    local_pos = torch.cat([torch.arange(c) for c in counts]).int()
    input_ids = torch.randint(0, alphabet, (rows, ), generator=generator).int()
    all_token_ids = torch.randint(0, alphabet, (slots, max_len), generator=generator).int()
    prompt_len = torch.randint(0, 4, (slots, ), generator=generator).int()
    total_len = torch.minimum(prompt_len + torch.randint(0, max_len - 3, (slots, ),
                                                         generator=generator),
                              torch.tensor(max_len)).int()
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
    tensors = {k: v.to(device) for k, v in tensors.items()}
    for name in ("bad_word_token_ids", "bad_word_offsets", "all_token_ids"):
        tensors[name] = padded(tensors[name], table_padding, alphabet - 1)
    logits = build_logits(LogitsSpec(rows, vocab, row_padding, kind, seed, dtype), device)
    return logits, tensors, max_words


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
def test_padded_rows_expose_a_launcher_that_ignores_the_row_stride(device):
    """With padded logits rows and tables, a launcher passing the width where the row stride
    belongs masks other entries: the comparison above fails on it."""
    case = (100, 2, [3, 2], 3, 4, 12, torch.float32, "normal", 37, 5)
    logits, tables, max_words = build_inputs(case, device)
    tables["num_bad_words"].fill_(max_words)
    expected = logits.cpu().clone()
    reference.apply_bad_words(expected, **{k: v.cpu() for k, v in tables.items()},
                              max_num_bad_words=max_words)
    assert bool(expected.isinf().any()), "the planted words must mask something"
    apply_bad_words(lying_row_stride(logits), **tables, max_num_bad_words=max_words)
    assert not torch.equal(logits.cpu(), expected)


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="row-0 copy")
@given(case=bad_word_cases())
def test_single_row_request_copied_to_the_end_matches_row_zero(case, device):
    """Row 0 (a one-row request) appended as a last one-row request with its slot: same mask."""
    vocab, slots, counts, seed, max_words, *layout = case
    logits, tables, _ = build_inputs((vocab, slots, [1] + counts + [1], seed, max_words, *layout),
                                     device)
    logits[-1] = logits[0]
    tables["expanded_idx_mapping"][-1] = tables["expanded_idx_mapping"][0]
    tables["input_ids"][-1] = tables["input_ids"][0]
    apply_bad_words(logits, **tables, max_num_bad_words=max_words)
    assert torch.equal(logits[-1], logits[0])


def _valid(device):
    """Valid arguments: 3 rows (requests of 2 and 1), vocab 17, 2 slots of 2 bad words each."""
    logits, tables, max_words = build_inputs((17, 2, [2, 1], 0, 2), device)
    tables["num_bad_words"].fill_(2)
    return dict(logits=logits, **tables, max_num_bad_words=max_words)


# case: (argument, bad value from the valid one, what the message says besides the name)
BAD_ARGUMENTS = {
    "int logits": ("logits", lambda l: l.int(), "must have dtype"),
    "logits not a tensor": ("logits", lambda l: l.tolist(), "torch.Tensor"),
    "slot out of range": ("expanded_idx_mapping", lambda m: m + 10, "must lie in"),
    "int64 mapping": ("expanded_idx_mapping", lambda m: m.long(), "must have dtype"),
    "word tokens int64": ("bad_word_token_ids", lambda t: t.long(), "must have dtype"),
    "word tokens 1-D": ("bad_word_token_ids", lambda t: t[:, 0], "must have shape"),
    "word tokens not a tensor": ("bad_word_token_ids", lambda t: t.tolist(), "torch.Tensor"),
    "empty word": ("bad_word_offsets", lambda t: t * 0, "must rise by >= 1"),
    "offsets past tokens": ("bad_word_offsets", lambda t: t + 100, "must rise by >= 1 within"),
    "negative offsets": ("bad_word_offsets", lambda t: t - 1, "must rise by >= 1 within"),
    "offsets slots": ("bad_word_offsets", lambda t: t[:1], "must have shape"),
    "too many words": ("num_bad_words", lambda n: n + 1, r"must lie in \[0, 2\]"),
    "negative word count": ("num_bad_words", lambda n: n - 3, r"must lie in \[0, 2\]"),
    "word counts 2-D": ("num_bad_words", lambda n: n[:, None], "must have shape"),
    "history int64": ("all_token_ids", lambda t: t.long(), "must have dtype"),
    "history slots": ("all_token_ids", lambda t: t[:1], "must have shape"),
    "negative prompt_len": ("prompt_len", lambda n: n * 0 - 1, "0 <= prompt_len"),
    "prompt_len past total_len": ("prompt_len", lambda n: n + 100, "prompt_len <= total_len"),
    "prompt_len int64": ("prompt_len", lambda n: n.long(), "must have dtype"),
    "history past table": ("total_len", lambda n: n + 100, "total_len <= all_token_ids"),
    "total_len slots": ("total_len", lambda n: n[:1], "must have shape"),
    "int64 ids": ("input_ids", lambda t: t.long(), "must have dtype"),
    "ids length": ("input_ids", lambda t: t[:2], "must have shape"),
    "local pos before row 0": ("expanded_local_pos", lambda t: t + 1, r"must lie in \[0, row\]"),
    "negative local pos": ("expanded_local_pos", lambda t: t - 1, r"must lie in \[0, row\]"),
    "local pos int64": ("expanded_local_pos", lambda t: t.long(), "must have dtype"),
    "negative max words": ("max_num_bad_words", lambda n: -1, "must be an int >= 0"),
    "float max words": ("max_num_bad_words", lambda n: 2.0, "must be an int"),
    "max words past offsets": ("max_num_bad_words", lambda n: 3, "needs bad_word_offsets with 4"),
    "max words past the grid": ("max_num_bad_words", lambda n: 65536, "<= 65535"),
}
# Bools are ints to Python; a bool where an int is expected is refused all the same.
BOOLS_AS_INTS = ("max_num_bad_words", )
VALIDATED = {"apply_bad_words": arguments_covered(BAD_ARGUMENTS, *BOOLS_AS_INTS)}


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_bad_argument_raises(case, device, no_launch):
    """Each bad argument raises ValueError naming it, before any launch."""
    assert_rejected(apply_bad_words, _valid(device), *BAD_ARGUMENTS[case])


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("name", BOOLS_AS_INTS)
@pytest.mark.parametrize("value", (True, False))
def test_bool_is_not_an_int(name, value, device, no_launch):
    """A bool where an int is expected raises ValueError naming the argument."""
    arguments = _valid(device)
    arguments["num_bad_words"].fill_(int(value))
    assert_rejected(apply_bad_words, arguments, name, lambda _: value,
                    rf"\b{name} must be an int; got {value}")


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
