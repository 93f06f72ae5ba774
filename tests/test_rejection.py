"""``kernels.rejection`` against its float64 reference, which replays the kernels' Philox
streams: accepted drafts, counts and resampled tokens compare exactly."""

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import reference.rejection as reference
from reference.gumbel import assert_valid_token
from kernels.rejection import rejection_sample
from triton_overflow import OverflowTests
from tests.cases import rejection as family

KERNEL = "rejection_sample"
# A random acceptance test this close to its threshold may go either way in fp32.
MARGIN_TOLERANCE = 1e-4


@st.composite
def rejection_cases(draw):
    steps = draw(st.integers(1, 4))
    counts = draw(st.lists(st.integers(1, steps + 1), min_size=1, max_size=4))
    vocab = draw(st.sampled_from((2, 17, 1000, 8193)))
    slots = draw(st.integers(1, 4))
    return (steps, counts, vocab, slots, draw(st.integers(0, 2**31 - 1)),
            draw(st.sampled_from(("draft logits", "no draft logits", "synthetic"))))


def build_inputs(case, device):
    steps, counts, vocab, slots, seed, mode = case
    generator = torch.Generator().manual_seed(seed)
    rows = sum(counts)
    cu = torch.tensor([0] + torch.tensor(counts).cumsum(0).tolist(), dtype=torch.int32)
    idx_mapping = torch.randint(0, slots, (len(counts), ), generator=generator).int()
    expanded = torch.repeat_interleave(idx_mapping, torch.tensor(counts)).int()
    local_pos = torch.cat([torch.arange(c) for c in counts]).int()
    target = 2 * torch.randn(rows, vocab, generator=generator)
    draft = 2 * torch.randn(slots, steps, vocab, generator=generator)
    proposals = torch.randint(0, vocab, (rows, ), generator=generator)
    agree = torch.rand(rows, generator=generator) < 0.6
    proposals[1:][agree[:-1]] = target[:-1].argmax(1)[agree[:-1]]
    temperature = torch.where(torch.rand(slots, generator=generator) < 0.4, 0.0,
                              0.3 + torch.rand(slots, generator=generator))
    inputs = dict(target_logits=target, draft_logits=draft if mode == "draft logits" else None,
                  draft_sampled=proposals, cu_num_logits=cu,
                  pos=torch.randint(0, 2**40, (rows, ), generator=generator), idx_mapping=idx_mapping,
                  expanded_idx_mapping=expanded, expanded_local_pos=local_pos,
                  temperature=temperature.float(),
                  seed=torch.randint(-2**62, 2**62, (slots, ), generator=generator),
                  num_speculative_steps=steps,
                  synthetic_conditional_rates=torch.rand(steps, generator=generator)
                  if mode == "synthetic" else None)
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def _check(sampled, num_sampled, inputs):
    cpu = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    traces = reference.rejection_trace(
        cpu["target_logits"], cpu["draft_logits"], cpu["draft_sampled"], cpu["cu_num_logits"],
        cpu["pos"], cpu["idx_mapping"], cpu["temperature"], cpu["seed"],
        cpu["num_speculative_steps"], cpu["synthetic_conditional_rates"])
    assume(all(t.closest_margin > MARGIN_TOLERANCE for t in traces))
    for i, trace in enumerate(traces):
        assert int(num_sampled[i]) == trace.accepted + 1, (i, num_sampled.tolist(), trace)
        row = sampled[i].cpu()
        step = trace.resampled_step
        assert row[:step].tolist() == trace.sampled[:step], (i, row.tolist(), trace.sampled)
        if trace.scores is None:
            assert int(row[step]) == trace.sampled[step]
        else:
            assert_valid_token(row[step], trace.scores, what=f"request {i} resampled token")
        assert (row[step + 1:] == -1).all()


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="correctness")
@given(case=rejection_cases())
def test_matches_reference(case, device):
    """Accepted drafts, counts and resampled tokens equal the reference's."""
    inputs = build_inputs(case, device)
    _check(*rejection_sample(**inputs), inputs)


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="row-0 copy")
@given(case=rejection_cases())
def test_copied_request_matches_request_zero(case, device):
    """Request 0's rows, slot and positions appended as a last request: the same outputs."""
    steps, counts, vocab, slots, seed, mode = case
    inputs = build_inputs((steps, counts + [counts[0]], vocab, slots, seed, mode), device)
    first, last = slice(0, counts[0]), slice(sum(counts), None)
    for name in ("target_logits", "draft_sampled", "pos"):
        inputs[name][last] = inputs[name][first]
    inputs["idx_mapping"][-1] = inputs["idx_mapping"][0]
    inputs["expanded_idx_mapping"][last] = inputs["idx_mapping"][0]
    sampled, num_sampled = rejection_sample(**inputs)
    assert sampled[-1].tolist() == sampled[0].tolist()
    assert int(num_sampled[-1]) == int(num_sampled[0])


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("name, change, message", [
    ("cu_num_logits", lambda t: t * 2, "cu_num_logits must run from 0"),
    ("expanded_local_pos", lambda t: t * 0 + 1, "expanded_local_pos must be"),
    ("idx_mapping", lambda t: t + 9, "idx_mapping must lie in"),
    ("draft_sampled", lambda t: t + 10**6, "draft_sampled must lie below"),
    ("num_speculative_steps", lambda t: 0, "num_speculative_steps must be a positive int"),
    ("pos", lambda t: t.int(), "pos must have dtype"),
    ("draft_logits", lambda t: t[:, :, :-1], "draft_logits must be"),
], ids=["cu past rows", "local pos", "slot out of range", "draft past vocab", "zero steps",
        "int32 pos", "draft vocab"])
def test_bad_argument_raises(name, change, message, device):
    inputs = build_inputs((2, [3, 1], 17, 2, 0, "draft logits"), device)
    inputs[name] = change(inputs[name])
    with pytest.raises(ValueError, match=message):
        rejection_sample(**inputs)


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
