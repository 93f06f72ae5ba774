"""Huge case for ``kernels.min_p``, its compile specs and its benchmark entry."""

import torch

import reference.min_p as reference
from tests.cases import Streaming
from triton_overflow import CompileSpec, RowsCase
from triton_overflow.bench import Benchmark

I32 = "*i32"


class MinPCase(RowsCase):
    name = "apply_min_p"
    module = "kernels.min_p"
    min_p = 0.05

    def inputs(self, run):
        return {"mapping": torch.zeros(run.rows, dtype=torch.int32, device=run.device),
                "min_p": torch.tensor([self.min_p], device=run.device)}

    def launch(self, kernels, logits, run, *, mapping, min_p):
        kernels.apply_min_p(logits, mapping, min_p)
        return logits

    def check_row(self, actual, values, row, what, **inputs):
        reference.assert_valid_row(values, actual, self.min_p, what=what)


MIN_P = MinPCase()
CASES = [MIN_P]
COMPILE_SPECS = [
    CompileSpec("kernels.min_p:_block_max_kernel", {"idx_mapping_ptr": I32}, num_warps=8,
                label="min_p block max"),
    CompileSpec("kernels.min_p:_min_p_kernel", {"idx_mapping_ptr": I32}, num_warps=8,
                label="min_p mask"),
]
# Both read the whole logits. A store mask that depended on the values once split the mask's
# stores into 32 scalar stores per thread.
STREAMING = [Streaming(spec, ("logits_stride", "vocab_size")) for spec in COMPILE_SPECS]


def benchmarks(batch, kernels, data):
    """Benchmark rows at ``batch`` rows for ``kernels`` (the module or its twin)."""
    logits, mapping = data.logits, data.mapping
    min_p = torch.full((batch, ), 0.05, device="cuda")
    return {"min_p": Benchmark(
        lambda **kw: kernels.apply_min_p(logits, mapping, min_p, **kw),
        lambda: logits.masked_fill_(
            logits < logits.amax(-1, keepdim=True) + min_p[mapping.long()].log()[:, None],
            float("-inf")), data.restore, 3 * data.size, (74, 226, 481))}
