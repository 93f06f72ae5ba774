"""Huge case for ``kernels.topk_topp`` (row 0 and its copies at the highest rows, k=50, p=0.9),
its compile specs and its benchmark entries."""

import torch

from reference.topk_topp import assert_valid_mask
from triton_overflow.bench import Benchmark
from triton_overflow import CompileSpec, RowsCase

_TYPES = {"k_ptr": "*i32", "mask_value": "fp32"}


class TopKTopPCase(RowsCase):
    name = "apply_top_k_top_p"
    module = "kernels.topk_topp"
    top_k = 50
    top_p = 0.9

    def extra_bytes(self, run):
        return run.rows * 8

    def inputs(self, run):
        return {"k": torch.full((run.rows, ), self.top_k, dtype=torch.int32, device=run.device),
                "p": torch.full((run.rows, ), self.top_p, dtype=torch.float32, device=run.device)}

    def launch(self, kernels, logits, run, *, k, p):
        # One persistent program per row in the interpreter, so program id == row.
        programs = run.rows if run.interpreted else None
        return kernels.apply_top_k_top_p(logits, k, p, num_programs=programs)

    def check_row(self, actual, values, row, what, **inputs):
        assert_valid_mask(values, actual, self.top_k, self.top_p, what=what)


TOP_K_TOP_P = TopKTopPCase()
CASES = [TOP_K_TOP_P]
COMPILE_SPECS = [
    CompileSpec("kernels.topk_topp:_top_k_top_p_kernel", _TYPES, num_warps=8, label="topk_topp"),
    CompileSpec("kernels.topk_topp:_top_k_top_p_kernel", _TYPES, {"TOPP_ENABLED": False},
                num_warps=8, label="topk_topp top-k only"),
    CompileSpec("kernels.topk_topp:_top_k_top_p_kernel", _TYPES, {"TOPK_ENABLED": False},
                num_warps=8, label="topk_topp top-p only"),
]


def benchmarks(batch, kernels, data):
    """Benchmark rows at ``batch`` rows for ``kernels`` (the module or its twin)."""
    logits, k, p = data.logits, data.k, data.p

    def torch_top_k(use_p):
        kth = torch.topk(logits, int(k.max()), dim=-1).values.gather(1, (k.long() - 1)[:, None])
        logits.masked_fill_(logits < kth, float("-inf"))
        if use_p:
            ordered, order = logits.sort(dim=-1, descending=False)
            cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
            drop = cumulative <= 1 - p[:, None]
            drop[:, -1] = False
            logits.scatter_(1, order, ordered.masked_fill(drop, float("-inf")))
        return logits

    return {
        "top-k (k=50)": Benchmark(lambda **kw: kernels.apply_top_k_top_p(logits, k, None, **kw),
                                  lambda: torch_top_k(False), data.restore, 2 * data.size,
                                  (236, 516, 2049)),
        "top-k + top-p 0.9": Benchmark(lambda **kw: kernels.apply_top_k_top_p(logits, k, p, **kw),
                                       lambda: torch_top_k(True), data.restore, 2 * data.size,
                                       (252, 542, 2149)),
    }
