"""``kernels.topk_topp`` against its float64 reference, and its input validation."""

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import kernels._topk_topp_cutoffs as cutoffs
import kernels.topk_topp as kernel_module
import reference.topk_topp as reference
from kernels.topk_topp import LOGITS_DTYPES, SCRATCH, apply_top_k_top_p
from tests.strategies import LogitsSpec, build_logits, logits_specs, top_k_values, top_p_values
from triton_overflow import OverflowTests
from triton_overflow import triton_versions
from tests.cases import topk_topp as family
from tests.lint_cli import WITHOUT_INTERPRETER, run_python
from tests.validation import arguments_covered, assert_rejected

KERNEL = "apply_top_k_top_p"


@st.composite
def top_k_top_p_cases(draw):
    spec = draw(logits_specs(dtypes=LOGITS_DTYPES))
    k = draw(st.none() | st.lists(top_k_values(spec.vocab), min_size=spec.rows, max_size=spec.rows))
    p = draw(st.none() | st.lists(top_p_values(), min_size=spec.rows, max_size=spec.rows))
    programs = draw(st.sampled_from((None, 1, 2)))
    split_rows = draw(st.sampled_from((None, False, True)))
    return spec, k, p, programs, split_rows


def _inputs(spec, k, p, device):
    logits = build_logits(spec, device)
    k = None if k is None else torch.tensor(k, dtype=torch.int32, device=device)
    p = None if p is None else torch.tensor(p, dtype=torch.float32, device=device)
    return logits, k, p


def _check_rows(out, before, k, p, what):
    for row in range(out.size(0)):
        assert_kwargs = dict(k=None if k is None else int(k[row]), p=None if p is None else float(p[row]))
        reference.assert_valid_mask(before[row], out[row], what=f"{what} row {row}", **assert_kwargs)


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="correctness")
@given(case=top_k_top_p_cases())
@example(case=(LogitsSpec(1, 1, 0, "normal", 0), [1], [0.5], None, None))
@example(case=(LogitsSpec(3, 4097, 37, "ties", 1), [1, 4097, 5000], None, 2, None))
@example(case=(LogitsSpec(2, 5003, 0, "some -inf", 2), None, [0.9, 1e-6], None, True))
@example(case=(LogitsSpec(2, 1000, 1, "all -inf rows", 3), [5, 5], [0.3, 0.3], 1, None))
@example(case=(LogitsSpec(2, 2049, 0, "normal", 4), [SCRATCH + 1, 3], [0.95, 0.95], None, True))
@example(case=(LogitsSpec(2, 8193, 1, "wide", 5, torch.bfloat16), None, [0.9, 0.999], 1, False))
@example(case=(LogitsSpec(3, 8193, 0, "normal", 6), [8193, 8193, 7], [0.9, 1.0, 0.9], None, True))
@example(case=(LogitsSpec(2, 4097, 0, "all -inf rows", 7), None, [0.9, 0.9], None, True))
def test_matches_reference(case, device):
    """Every row equals the sort-based reference (top-p cutoffs within fp32 mass rounding)."""
    spec, k, p, programs, split_rows = case
    logits, k, p = _inputs(spec, k, p, device)
    before = logits.clone()
    returned = apply_top_k_top_p(logits, k, p, num_programs=programs, split_rows=split_rows)
    assert returned is logits
    _check_rows(logits, before, k, p, "kernel")


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="row-0 copy")
@given(case=top_k_top_p_cases())
def test_copied_row_matches_row_zero(case, device):
    """Row 0 copied into the last row (same k and p) gives the last row row 0's output."""
    spec, k, p, programs, split_rows = case
    spec = LogitsSpec(max(spec.rows, 2), spec.vocab, spec.row_padding, spec.kind, spec.seed,
                      spec.dtype)
    logits, _, _ = _inputs(spec, None, None, device)
    logits[-1] = logits[0]
    k = None if k is None else torch.full((spec.rows, ), k[0], dtype=torch.int32, device=device)
    p = None if p is None else torch.full((spec.rows, ), p[0], dtype=torch.float32, device=device)
    apply_top_k_top_p(logits, k, p, num_programs=programs, split_rows=split_rows)
    assert torch.equal(logits[-1], logits[0])


def test_mask_value_is_written(device):
    """Dropped entries hold mask_value, kept entries their logits."""
    logits = torch.tensor([[1.0, 4.0, 3.0, 2.0]], device=device)
    apply_top_k_top_p(logits, torch.tensor([2], dtype=torch.int32, device=device), None, -7.5)
    assert logits.cpu().tolist() == [[-7.5, 4.0, 3.0, -7.5]]


def test_ties_at_the_cutoff_are_kept(device):
    """k=2 over [5, 3, 3, 1] keeps both 3s, as a sort-based reference does."""
    logits = torch.tensor([[5.0, 3.0, 3.0, 1.0]], device=device)
    apply_top_k_top_p(logits, torch.tensor([2], dtype=torch.int32, device=device), None)
    assert logits.isfinite().cpu().tolist() == [[True, True, True, False]]


@pytest.mark.correctness
@pytest.mark.covers(kernel=KERNEL, detector="correctness")
def test_top_p_past_the_gathered_top_entries(device):
    """Top-p alone first gathers the entries above a floor a Gaussian model of a sample places
    just above the top-p set. Here the model misleads (70% of the row N(0, 1), 30% at -5), so
    those entries hold under 2/3 of the mass: the cutoff must come from the rest of the row."""
    generator = torch.Generator().manual_seed(0)
    values = torch.randn(2, 8193, generator=generator)
    values[torch.rand(2, 8193, generator=generator) < 0.3] = -5.0
    for split_rows in (False, True):
        logits = values.clone().to(device)
        apply_top_k_top_p(logits, None, torch.full((2, ), 0.9, device=device), num_programs=1,
                          split_rows=split_rows)
        _check_rows(logits, values, None, [0.9, 0.9], f"bimodal, split_rows={split_rows}")


def _sampled_runs(vocab):
    """Which entries the kernel's sample of the row reads (8 runs of 1024, evenly spaced)."""
    sampled = torch.zeros(vocab, dtype=torch.bool)
    spacing = max(vocab // 8, 1024)
    for run in range(8):
        sampled[run * spacing:run * spacing + 1024] = True
    return sampled


_PLAIN_INTERPRETER_RUN = """
import torch
from kernels.topk_topp import apply_top_k_top_p
from reference.topk_topp import assert_valid_mask
torch.manual_seed(0)
for k, p, vocab in ((5, None, 600), (None, 0.9, 5000), (50, 0.9, 3000), (700, 0.95, 3000)):
    logits = torch.randn(1, vocab)
    before = logits.clone()
    apply_top_k_top_p(logits, None if k is None else torch.full((1, ), k, dtype=torch.int32),
                      None if p is None else torch.full((1, ), p))
    assert_valid_mask(before[0], logits[0], k=k, p=p, what=f"k={k} p={p}")
"""


@pytest.mark.start_early(3)  # among the longest tests: not left for the end
@pytest.mark.correctness
def test_runs_in_tritons_own_interpreter():
    """In TRITON_INTERPRET=1 without this suite's plugin, whose loop variables are int32
    scalars: a range loop's variable there is a Python int (the digit loops cast it)."""
    if triton_versions.interpreter_problem() is not None:
        pytest.skip(triton_versions.interpreter_problem())
    done = run_python("-c", _PLAIN_INTERPRETER_RUN, env={**WITHOUT_INTERPRETER,
                                                          "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.correctness
def test_flat_rows_settle_from_the_guessed_window(device, monkeypatch):
    """Top-p alone on flat rows histograms, within its softmax pass, the window where a
    Gaussian model of a sample puts the cutoff. Normal rows settle from that window: no
    histogram pass of their own, no streamed descent. Rows the model misjudges (the sampled
    runs 1.0 below the rest) take histograms of a window that surely holds the cutoff, and
    are exact all the same."""
    if device.type != "cpu":
        pytest.skip("counts the kernel's streamed passes, which only the interpreter runs as "
                    "Python calls")
    passes = {}
    for name in ("_window_histogram", "_top_p_cutoff_streamed"):
        def counted(*args, _helper=getattr(cutoffs, name), _name=name, **kwargs):
            passes[_name] = passes.get(_name, 0) + 1
            return _helper.fn(*args, **kwargs)
        monkeypatch.setattr(cutoffs, name, counted)
    generator = torch.Generator().manual_seed(0)
    vocab = 32768
    normal = torch.randn(1, vocab, generator=generator)
    misjudged = normal + 1.0 * ~_sampled_runs(vocab)
    for values, p, model_holds in ((normal, 0.9, True), (normal, 0.99, True),
                                   (misjudged, 0.9, False)):
        logits = values.clone()
        passes.clear()
        apply_top_k_top_p(logits, None, torch.tensor([p]), num_programs=1)
        _check_rows(logits, values, None, [p], f"p = {p}")
        assert ("_top_p_cutoff_streamed" not in passes
                and model_holds == ("_window_histogram" not in passes)), passes


@pytest.mark.correctness
def test_split_rows_settle_normal_rows_themselves(device, monkeypatch):
    """The split path settles normal rows, flat and peaked, without the persistent kernel's
    top-p passes; a row the Gaussian model misjudges (the sampled runs 1.0 below the rest)
    is left to them, and is exact all the same."""
    if device.type != "cpu":
        pytest.skip("counts the kernel's top-p passes, which only the interpreter runs as "
                    "Python calls")
    calls = []
    def counted(*args, _helper=kernel_module._top_p_cutoff_bracketed, **kwargs):
        calls.append(1)
        return _helper.fn(*args, **kwargs)
    monkeypatch.setattr(kernel_module, "_top_p_cutoff_bracketed", counted)
    generator = torch.Generator().manual_seed(1)
    vocab = 32768
    normal = torch.randn(1, vocab, generator=generator)
    misjudged = normal + 1.0 * ~_sampled_runs(vocab)
    for values, what, settled in ((normal, "flat", True), (normal * 4, "peaked", True),
                                  (misjudged, "misjudged", False)):
        logits = values.clone()
        calls.clear()
        apply_top_k_top_p(logits, None, torch.tensor([0.9]), split_rows=True)
        _check_rows(logits, values, None, [0.9], what)
        assert settled == (not calls), (what, len(calls))


def _valid(device):
    return dict(logits=torch.zeros(2, 8, device=device),
                k=torch.ones(2, dtype=torch.int32, device=device),
                p=torch.full((2, ), 0.5, device=device), mask_value=float("-inf"),
                num_programs=None, split_rows=None)


def _strided(t):
    """The same values with a last-dimension stride of 2."""
    return t.repeat_interleave(2, dim=-1)[..., ::2]


# case: (argument, bad value from the valid one, what the message says besides the name)
BAD_ARGUMENTS = {
    "logits not a tensor": ("logits", lambda l: l.tolist(), "torch.Tensor"),
    "fp64 logits": ("logits", lambda l: l.double(), "dtype"),
    "1-D logits": ("logits", lambda l: l[0], "2-D"),
    "strided vocab": ("logits", _strided, "contiguous"),
    "overlapping rows": ("logits", lambda l: l[:1].expand(2, -1), "rows overlap"),
    "k not a tensor": ("k", lambda k: k.tolist(), "torch.Tensor"),
    "k int64": ("k", lambda k: k.long(), "must have dtype"),
    "k wrong length": ("k", lambda k: k[:1], "must have shape"),
    "k strided": ("k", _strided, "contiguous"),
    "k zero": ("k", lambda k: k * 0, "must be >= 1"),
    "k on another device": ("k", lambda k: k.to("meta"), "is on meta"),
    "p fp64": ("p", lambda p: p.double(), "must have dtype"),
    "p 2-D": ("p", lambda p: p[:, None], "must have shape"),
    "p zero": ("p", lambda p: p * 0, "must lie in"),
    "p above one": ("p", lambda p: p * 3, "must lie in"),
    "p nan": ("p", lambda p: p * float("nan"), "must lie in"),
    "mask_value nan": ("mask_value", lambda v: float("nan"), "real number"),
    "mask_value string": ("mask_value", lambda v: "-inf", "real number"),
    "mask_value bool": ("mask_value", lambda v: False, "real number"),
    "num_programs zero": ("num_programs", lambda n: 0, ">= 1"),
    "num_programs float": ("num_programs", lambda n: 2.0, "must be an int"),
    "split_rows int": ("split_rows", lambda s: 1, "must be a bool"),
}
# Bools are ints to Python; a bool where an int is expected is refused all the same.
BOOLS_AS_INTS = ("num_programs", )
VALIDATED = {"apply_top_k_top_p": arguments_covered(BAD_ARGUMENTS, *BOOLS_AS_INTS)}


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_bad_argument_raises_value_error(case, device, no_launch):
    """Each bad argument raises ValueError naming it, before any launch."""
    assert_rejected(apply_top_k_top_p, _valid(device), *BAD_ARGUMENTS[case])


@pytest.mark.validation
@pytest.mark.covers(kernel=KERNEL, detector="validation")
@pytest.mark.parametrize("name", BOOLS_AS_INTS)
@pytest.mark.parametrize("value", (True, False))
def test_bool_is_not_an_int(name, value, device, no_launch):
    """A bool where an int is expected raises ValueError naming the argument."""
    assert_rejected(apply_top_k_top_p, _valid(device), name, lambda _: value,
                    rf"\b{name} must be an int; got {value}")


def test_empty_batch_and_no_filters_are_no_ops(device):
    empty = torch.zeros(0, 8, device=device)
    assert apply_top_k_top_p(empty, torch.zeros(0, dtype=torch.int32, device=device), None) is empty
    logits = torch.randn(2, 8, device=device)
    before = logits.clone()
    apply_top_k_top_p(logits, None, None)
    assert torch.equal(logits, before)


class TestOverflow(OverflowTests):
    """Every overflow tier on the family's huge cases; sm_90 compiles of its kernels."""

    cases = family.CASES
    compile_specs = family.COMPILE_SPECS
    small_batch_tests = False  # the hypothesis tests above cover small batches
