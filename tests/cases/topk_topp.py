"""Huge cases for ``kernels.topk_topp`` (row 0 and its copies at the highest rows: k=50 and
p=0.9; p=0.9 alone, on normal rows and on rows of ties), its compile specs and its benchmark
entries."""

import torch

from kernels import topk_topp
from reference.topk_topp import assert_valid_mask
from triton_overflow import CompileSpec, RowsCase
from triton_overflow.bench import Benchmark

_TYPES = {"k_ptr": "*i32", "ids_ptr": "*i32", "counter_ptr": "*i32", "mask_value": "fp32"}
# The split kernels as the default launch makes them: no k table (p stands in for it).
_SPLIT_TYPES = {**_TYPES, "k_ptr": "*fp32", "p_ptr": "*fp32", "statistics_ptr": "*fp32",
                "window_ptr": "*fp32", "hist_ptr": "*i32", "scratch_ptr": "*fp32",
                "above_ptr": "*fp32", "plan_ptr": "*i32", "cutoff_ptr": "*i32",
                "kept_ptr": "*i32", "rest_p_ptr": "*fp32"}


class TopKTopPCase(RowsCase):
    name = "apply_top_k_top_p"
    module = "kernels.topk_topp"
    top_k = 50
    top_p = 0.9

    def extra_bytes(self, run):
        return run.rows * 8

    def inputs(self, run):
        k = None if self.top_k is None else torch.full((run.rows, ), self.top_k,
                                                       dtype=torch.int32, device=run.device)
        return {"k": k,
                "p": torch.full((run.rows, ), self.top_p, dtype=torch.float32, device=run.device)}

    split_rows = False  # the persistent kernel alone

    def launch(self, kernels, logits, run, *, k, p):
        # One persistent program per row in the interpreter, so program id == row.
        programs = run.rows if run.interpreted else None
        return kernels.apply_top_k_top_p(logits, k, p, num_programs=programs,
                                         split_rows=self.split_rows)

    def check_row(self, actual, values, row, what, **inputs):
        assert_valid_mask(values, actual, self.top_k, self.top_p, what=what)


class TopPCase(TopKTopPCase):
    """Top-p alone on normal rows: the softmax pass with its histogram of the window where
    the model puts the cutoff, the gather of the bracketing bins, the masking pass."""

    name = "apply_top_k_top_p (top-p alone)"
    top_k = None


class TopPSplitCase(TopPCase):
    """Top-p alone on normal rows by the split path: the statistics pass over parts of each
    row, the gather of the bracketing bins, the sort a row, the masking of each part."""

    name = "apply_top_k_top_p (top-p alone, split rows)"
    split_rows = True

    def extra_bytes(self, run):
        # Scratch rows of values and ids, the window histogram, and (within 4 KiB a row) the
        # per-part statistics and per-row results.
        return run.rows * (8 * topk_topp.TOP_P_SCRATCH + 4 * topk_topp._WINDOW_BINS + 4096)


class TopPTiesCase(TopPCase):
    """Top-p alone over rows of seven distinct values: no value window can split the ties at
    the cutoff, so after the value histograms the cutoff comes from the streamed descent over
    the whole row."""

    name = "apply_top_k_top_p (top-p alone, ties)"
    width = 2**15  # the streamed descent is slow in the interpreter: shorter rows, more of them

    def random_row(self, generator, width):
        return torch.randint(-3, 4, (width, ), generator=generator,
                             device=generator.device).float()


TOP_K_TOP_P = TopKTopPCase()
TOP_P = TopPCase()
TOP_P_SPLIT = TopPSplitCase()
TOP_P_TIES = TopPTiesCase()
# The split case second: the mutants of the split kernels pass the first case (no split).
CASES = [TOP_K_TOP_P, TOP_P_SPLIT, TOP_P, TOP_P_TIES]


def _split_spec(name, warps):
    """The compile spec of one kernel of the split top-p path."""
    kernel = f"_split_top_p_{name}_kernel"
    arguments = set(getattr(topk_topp, kernel).arg_names)
    return CompileSpec(f"kernels.topk_topp:{kernel}",
                       {a: t for a, t in _SPLIT_TYPES.items() if a in arguments},
                       num_warps=warps, label=f"topk_topp split {name}")


# The launch shapes: programs sharing multiprocessors (2048-entry steps, 8 warps), and one each
# (16 warps); the split path's kernels as launched.
COMPILE_SPECS = [
    CompileSpec("kernels.topk_topp:_top_k_top_p_kernel", _TYPES, {"BLOCK": 2048}, num_warps=8,
                label="topk_topp"),
    CompileSpec("kernels.topk_topp:_top_k_top_p_kernel", _TYPES, {"TOPP_ENABLED": False},
                num_warps=16, label="topk_topp top-k only"),
    CompileSpec("kernels.topk_topp:_top_k_top_p_kernel", _TYPES, {"TOPK_ENABLED": False},
                num_warps=16, label="topk_topp top-p only"),
] + [_split_spec(name, warps)
     for name, warps in (("statistics", topk_topp._SPLIT_NUM_WARPS),
                         ("gather", topk_topp._SPLIT_NUM_WARPS),
                         ("cutoff", topk_topp._SPLIT_SORT_NUM_WARPS),
                         ("mask", topk_topp._SPLIT_NUM_WARPS))]


# Per-row (k, p) of the mixed batch, repeated down the rows: top-k only, top-p only, both,
# neither, k = 1, k beyond the vocabulary, and a larger top-k with p = 1.
def _mixed_settings(vocab):
    return ((50, 1.0), (vocab, 0.9), (50, 0.9), (vocab, 1.0), (1, 0.9), (2 * vocab, 0.9),
            (200, 1.0))


# vLLM's kernels after the fix, device µs at B = 64 / 256 / 1024 on an H200 (randn logits, and
# randn x 4 for the peaked top-p row), and the targets set for ours.
_PUBLISHED = {("top-k", "flat"): (238, 516, 2043), ("top-k", "peaked"): (238, 516, 2043),
              ("top-k + top-p", "flat"): (254, 543, 2147),
              ("top-k + top-p", "peaked"): (254, 543, 2147),
              ("top-p", "flat"): (1004, 2354, 9180), ("top-p", "peaked"): (521, 1060, 3960)}
_DTYPE_LABELS = {torch.float32: "fp32", torch.bfloat16: "bf16"}
_TARGETS = {"top-k": (80, 250, 800), "top-k + top-p": (80, 250, 800),
            "top-p": (120, 400, 1500)}


def _torch_top_k_top_p(logits, k, p):
    """The sort-based masking a PyTorch user writes: top-k by the k-th sorted value, then the
    smallest prefix of the sorted softmax that reaches p."""
    ordered, order = logits.sort(dim=-1, descending=True)
    if k is not None:
        kth = ordered.gather(1, (k.long().clamp(max=logits.size(1)) - 1)[:, None])
        ordered = ordered.masked_fill(ordered < kth, float("-inf"))
    if p is not None:
        cumulative = ordered.float().softmax(dim=-1).cumsum(dim=-1)
        drop = (cumulative - ordered.float().softmax(dim=-1)) >= p[:, None]
        ordered = ordered.masked_fill(drop, float("-inf"))
    return logits.scatter_(1, order, ordered)


def _torch_top_k(logits, k, largest_k):
    """Top-k alone as a PyTorch user writes it: the k-th value from ``torch.topk`` (which beats
    sorting); ``largest_k`` is ``max(k)``, read once outside the timed call."""
    kth = torch.topk(logits, largest_k, dim=-1).values.gather(1, (k.long() - 1)[:, None])
    return logits.masked_fill_(logits < kth, float("-inf"))


def benchmark_inputs(data):
    """Tensors the benchmark rows and their twins' share: k = 50 and p = 0.9 for every row."""
    return {"k": torch.full((data.batch, ), 50, dtype=torch.int32, device=data.device),
            "p": torch.full((data.batch, ), 0.9, device=data.device)}


def benchmarks(batch, kernels, data):
    """Benchmark rows at ``batch`` rows for ``kernels`` (the module or its twin): top-k, top-p,
    both, and a mixed batch, on flat (randn) and peaked (randn x 4) logits, fp32 and bf16."""
    vocab = data.vocab
    settings = _mixed_settings(vocab)
    mixed_k = torch.tensor([settings[r % len(settings)][0] for r in range(batch)],
                           dtype=torch.int32, device="cuda")
    mixed_p = torch.tensor([settings[r % len(settings)][1] for r in range(batch)],
                           dtype=torch.float32, device="cuda")
    largest_k = int(data.k.max())
    rows = {}
    for distribution in ("flat", "peaked"):
        for dtype in (torch.float32, torch.bfloat16):
            logits, _, restore = data.variant(distribution, dtype)
            size = logits.numel() * logits.element_size()
            suffix = f"{distribution} {_DTYPE_LABELS[dtype]}"
            fp32_suffix = f"{distribution} {_DTYPE_LABELS[torch.float32]}"
            configurations = {"top-k": (data.k, None), "top-p": (None, data.p),
                              "top-k + top-p": (data.k, data.p), "mixed": (mixed_k, mixed_p)}
            for label, (k, p) in configurations.items():
                name = f"{label} {suffix}"
                if dtype != torch.float32:
                    relation = (f"{label} {fp32_suffix}", )
                elif label == "mixed":
                    relation = tuple(f"{pure} {suffix}" for pure in _TARGETS)
                else:
                    relation = ()
                if label == "top-k":
                    baseline = (lambda logits=logits: _torch_top_k(logits, data.k, largest_k))
                else:
                    baseline = (lambda k=k, p=p, logits=logits: _torch_top_k_top_p(logits, k, p))
                rows[name] = Benchmark(
                    lambda k=k, p=p, logits=logits, **kw: kernels.apply_top_k_top_p(logits, k, p,
                                                                                    **kw),
                    baseline, restore, 2 * size, _TARGETS.get(label, ()),
                    _PUBLISHED.get((label, distribution), ()),
                    relation)
    return rows
