"""``kernels.rejection`` against its float64 reference, which replays the kernels' Philox
streams: accepted drafts, counts and resampled tokens compare exactly; and its input
validation."""

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import reference.rejection as reference
from reference.gumbel import assert_valid_token
from kernels.rejection import rejection_sample
from tests.strategies import LOGITS_DTYPES, lying_row_stride
from triton_overflow import OverflowTests
from tests.cases import rejection as family
from tests.validation import arguments_covered, assert_rejected

KERNEL = "rejection_sample"
# A random acceptance test this close to its threshold may go either way in fp32.
MARGIN_TOLERANCE = 1e-4


@st.composite
def rejection_cases(draw):
    """fp32/fp16/bf16 target and draft logits with -inf entries, padded target rows, draft
    tables with spare steps and padded rows."""
    steps = draw(st.integers(1, 4))
    counts = draw(st.lists(st.integers(1, steps + 1), min_size=1, max_size=4))
    vocab = draw(st.sampled_from((2, 17, 1000, 8193)))
    slots = draw(st.integers(1, 4))
    return (steps, counts, vocab, slots, draw(st.integers(0, 2**31 - 1)),
            draw(st.sampled_from(("draft logits", "no draft logits", "synthetic"))),
            draw(st.sampled_from(LOGITS_DTYPES)), draw(st.sampled_from(("normal", "some -inf"))),
            draw(st.sampled_from((0, 0, 1, 37))), draw(st.sampled_from((0, 0, 2))))


def build_inputs(case, device):
    steps, counts, vocab, slots, seed, mode, dtype, kind, row_padding, spare_steps = (
        tuple(case) + (torch.float32, "normal", 0, 0))[:10]
    generator = torch.Generator().manual_seed(seed)
    rows = sum(counts)
    cu = torch.tensor([0] + torch.tensor(counts).cumsum(0).tolist(), dtype=torch.int32)
    idx_mapping = torch.randint(0, slots, (len(counts), ), generator=generator).int()
    expanded = torch.repeat_interleave(idx_mapping, torch.tensor(counts)).int()
    local_pos = torch.cat([torch.arange(c) for c in counts]).int()
    target = 2 * torch.randn(rows, vocab + row_padding, generator=generator)
    draft = 2 * torch.randn(slots, steps + spare_steps, vocab + row_padding, generator=generator)
    if kind == "some -inf":
        for values in (target, draft):
            values[torch.rand(values.shape, generator=generator) < 0.2] = float("-inf")
        target[:, 0] = 0.0  # every row keeps a finite entry
        draft[..., 0] = 0.0
    proposals = torch.randint(0, vocab, (rows, ), generator=generator)
    agree = torch.rand(rows, generator=generator) < 0.6
    proposals[1:][agree[:-1]] = target[:-1, :vocab].argmax(1)[agree[:-1]]
    temperature = torch.where(torch.rand(slots, generator=generator) < 0.4, 0.0,
                              0.3 + torch.rand(slots, generator=generator))
    target = target.to(dtype).to(device)[:, :vocab]
    draft = draft.to(dtype).to(device)[..., :vocab]
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
def test_padded_rows_expose_a_launcher_that_ignores_the_row_stride(device):
    """With padded target rows, a launcher passing the vocab size where the row stride belongs
    reads other rows: accepted drafts or tokens differ from the reference."""
    case = (3, [4, 4, 4], 1000, 2, 9, "no draft logits", torch.float32, "normal", 37, 0)
    inputs = build_inputs(case, device)
    inputs["temperature"].fill_(0.0)  # greedy: the target argmax decides every draft
    expected, expected_num = reference.rejection_sample(**inputs)
    sampled, num_sampled = rejection_sample(**{**inputs, "target_logits":
                                               lying_row_stride(inputs["target_logits"])})
    assert (sampled.cpu().tolist(), num_sampled.cpu().tolist()) != \
        (expected.tolist(), expected_num.tolist())


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="row-0 copy")
@given(case=rejection_cases())
def test_copied_request_matches_request_zero(case, device):
    """Request 0's rows, slot and positions appended as a last request: the same outputs."""
    steps, counts, vocab, slots, seed, mode, *layout = case
    inputs = build_inputs((steps, counts + [counts[0]], vocab, slots, seed, mode, *layout), device)
    first, last = slice(0, counts[0]), slice(sum(counts), None)
    for name in ("target_logits", "draft_sampled", "pos"):
        inputs[name][last] = inputs[name][first]
    inputs["idx_mapping"][-1] = inputs["idx_mapping"][0]
    inputs["expanded_idx_mapping"][last] = inputs["idx_mapping"][0]
    sampled, num_sampled = rejection_sample(**inputs)
    assert sampled[-1].tolist() == sampled[0].tolist()
    assert int(num_sampled[-1]) == int(num_sampled[0])


def _valid(device, steps=2, counts=(3, 1)):
    """Valid arguments: requests of ``counts`` rows, vocab 17, 2 slots, draft logits."""
    return {**build_inputs((steps, list(counts), 17, 2, 0, "draft logits"), device),
            "use_fp64": False}


def _rates(steps, value):
    return lambda rates: torch.full((steps, ), value)


# case: (argument, bad value from the valid one, what the message says besides the name)
BAD_ARGUMENTS = {
    "int target": ("target_logits", lambda t: t.int(), "must have dtype"),
    "1-D target": ("target_logits", lambda t: t[0], "2-D"),
    "target not a tensor": ("target_logits", lambda t: t.tolist(), "torch.Tensor"),
    "draft vocab": ("draft_logits", lambda t: t[:, :, :-1], "must be"),
    "draft steps": ("draft_logits", lambda t: t[:, :1], r">= 2"),
    "int draft": ("draft_logits", lambda t: t.int(), "must be"),
    "draft strided vocab": ("draft_logits", lambda t: t.repeat_interleave(2, dim=-1)[..., ::2],
                            "contiguous vocab"),
    "draft not a tensor": ("draft_logits", lambda t: t.tolist(), "torch.Tensor"),
    "draft past vocab": ("draft_sampled", lambda t: t + 10**6, "must lie below"),
    "fp32 drafts": ("draft_sampled", lambda t: t.float(), "must have dtype"),
    "drafts length": ("draft_sampled", lambda t: t[:2], "must have shape"),
    "cu past rows": ("cu_num_logits", lambda t: t * 2, "must run from 0"),
    "request too long": ("cu_num_logits", lambda t: torch.tensor([0, 0, 4], dtype=torch.int32,
                                                                 device=t.device),
                         "must give every request 1 to 3 logit rows"),
    "cu int64": ("cu_num_logits", lambda t: t.long(), "must have dtype"),
    "cu length": ("cu_num_logits", lambda t: t[:2], "must have shape"),
    "int32 pos": ("pos", lambda t: t.int(), "must have dtype"),
    "pos length": ("pos", lambda t: t[:3], "must have shape"),
    "slot out of range": ("idx_mapping", lambda t: t + 9, "must lie in"),
    "int64 slots": ("idx_mapping", lambda t: t.long(), "must have dtype"),
    "row slot out of range": ("expanded_idx_mapping", lambda t: t + 9, "must lie in"),
    "row slot not its request's": ("expanded_idx_mapping", lambda t: 1 - t,
                                   "must give each row its request's slot"),
    "local pos": ("expanded_local_pos", lambda t: t * 0 + 1, "must be each row's offset"),
    "local pos int64": ("expanded_local_pos", lambda t: t.long(), "must have dtype"),
    "negative temperature": ("temperature", lambda t: t - 5, "must lie in"),
    "fp64 temperature": ("temperature", lambda t: t.double(), "must have dtype"),
    "int32 seed": ("seed", lambda t: t.int(), "must have dtype"),
    "seed slots": ("seed", lambda t: t[:1], "must have shape"),
    "zero steps": ("num_speculative_steps", lambda n: 0, "must be an int >= 1"),
    "float steps": ("num_speculative_steps", lambda n: 2.0, "must be an int"),
    "too few steps for the rows": ("num_speculative_steps", lambda n: 1,
                                   "every request 1 to 2 logit rows"),
    "rate above 1": ("synthetic_conditional_rates", _rates(2, 1.5), r"must lie in \[0.0, 1.0\]"),
    "nan rate": ("synthetic_conditional_rates", _rates(2, float("nan")), "must lie in"),
    "too few rates": ("synthetic_conditional_rates", _rates(1, 0.5), "needs 2 entries"),
    "fp64 rates": ("synthetic_conditional_rates", lambda r: torch.full((2, ), 0.5).double(),
                   "must have dtype"),
    "use_fp64 int": ("use_fp64", lambda f: 1, "must be a bool"),
    "use_fp64 None": ("use_fp64", lambda f: None, "must be a bool"),
}
# Bools are ints to Python; a bool where an int is expected is refused all the same.
BOOLS_AS_INTS = ("num_speculative_steps", )
VALIDATED = {"rejection_sample": arguments_covered(BAD_ARGUMENTS, *BOOLS_AS_INTS)}


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_bad_argument_raises(case, device, no_launch):
    """Each bad argument raises ValueError naming it, before any launch."""
    assert_rejected(rejection_sample, _valid(device), *BAD_ARGUMENTS[case], device=device)


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("name", BOOLS_AS_INTS)
def test_bool_is_not_an_int(name, device, no_launch):
    """A bool where an int is expected raises ValueError naming the argument (True would
    otherwise pass as 1 speculative step, which these requests of 2 rows fit)."""
    assert_rejected(rejection_sample, _valid(device, steps=1, counts=(2, 1)), name,
                    lambda _: True, rf"\b{name} must be an int; got True")


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches


def _widening(kernel, undone):
    """The index of the widening ``undone`` in ``kernel`` of kernels/rejection.py."""
    from triton_overflow.locations import function_at
    from triton_overflow.twin import list_widenings
    file = "kernels/rejection.py"
    found = [index for index, w in enumerate(list_widenings(file))
             if w.text == undone and function_at(file, w.line) == kernel]
    assert len(found) == 1, (kernel, undone, found)
    return found[0]


@pytest.mark.interp
@pytest.mark.huge
@pytest.mark.parametrize("case, kernel, undone", [
    (family.REJECTION_TARGET_ROWS, "_block_stats_kernel", "tl.program_id(0).to(tl.int64)"),
    (family.REJECTION_DRAFT_SLOTS, "_block_stats_kernel",
     "tl.load(idx_mapping_ptr + row).to(tl.int64)"),
    (family.REJECTION_DRAFT_SLOTS, "_resample_kernel",
     "tl.load(expanded_idx_mapping_ptr + row).to(tl.int64)"),
], ids=["target block statistics", "draft block statistics", "resampled draft row"])
def test_rows_alone_catch_the_mutants_that_once_survived(case, kernel, undone):
    """Aliased, without the wrap check (the oracle the GPU tier has): wrong target block
    statistics, a wrong draft log-sum-exp and a wrong draft row in the resample each change the
    tokens. Each of these mutants passed the cases as they were before."""
    from triton_overflow.engine.runner import run_huge
    outcome = run_huge(case, "aliased", "lazy-host", twin=True, wrap_check=False,
                       widening=_widening(kernel, undone))
    assert outcome.wrong_row, \
        outcome.summary() + "\n" + outcome.output
