"""Huge cases for ``kernels.logprob``: token log-probabilities and ranks at the highest rows."""

import torch

import reference.logprob as reference
from triton_overflow import CompileSpec, RowsCase
from triton_overflow.bench import Benchmark

TOKEN_IDS = (7, 0, 2**17 - 1)  # first, last and an interior vocab entry
I64 = "*i64"


class TokenLogprobsCase(RowsCase):
    name = "compute_token_logprobs"
    module = "kernels.logprob"

    def extra_bytes(self, run):
        return run.rows * len(TOKEN_IDS) * 12

    def inputs(self, run):
        ids = torch.tensor(TOKEN_IDS, dtype=torch.int64, device=run.device)
        return {"ids": ids.expand(run.rows, -1).contiguous()}

    def launch(self, kernels, logits, run, *, ids):
        return kernels.compute_token_logprobs(logits, ids)

    def expected_row(self, values, row, *, ids):
        return reference.compute_token_logprobs(values[None], ids[row:row + 1].cpu())[0]


class TokenRanksCase(RowsCase):
    name = "compute_token_ranks"
    module = "kernels.logprob"

    def extra_bytes(self, run):
        return run.rows * 16

    def inputs(self, run):
        return {"ids": torch.full((run.rows, ), TOKEN_IDS[0], dtype=torch.int64,
                                  device=run.device)}

    def launch(self, kernels, logits, run, *, ids):
        return kernels.compute_token_ranks(logits, ids)

    def expected_row(self, values, row, *, ids):
        return reference.compute_token_ranks(values[None], ids[row:row + 1].cpu())[0]


TOKEN_LOGPROBS = TokenLogprobsCase()
TOKEN_RANKS = TokenRanksCase()
CASES = [TOKEN_LOGPROBS, TOKEN_RANKS]
COMPILE_SPECS = [
    CompileSpec("kernels.logprob:_token_logprobs_kernel", {"ids_ptr": I64, "logits_ptr": "*bf16"},
                num_warps=8, label="logprobs bf16"),
    CompileSpec("kernels.logprob:_token_logprobs_kernel", {"ids_ptr": I64, "logits_ptr": "*fp16"},
                num_warps=8, label="logprobs fp16"),
    CompileSpec("kernels.logprob:_token_ranks_kernel", {"ids_ptr": I64, "out_ptr": I64},
                num_warps=8, label="ranks"),
]


def benchmark_inputs(data):
    """Tensors the benchmark rows and their twins' share: six token ids a row."""
    return {"ids": torch.randint(0, data.vocab, (data.batch, 6), device=data.device,
                                 generator=data.generator)}


def benchmarks(batch, kernels, data):
    """Benchmark rows at ``batch`` rows for ``kernels`` (the module or its twin)."""
    pristine, ids = data.pristine, data.ids
    rank_ids = ids[:, 0].contiguous()
    return {
        "token logprobs (6 ids)": Benchmark(
            lambda **kw: kernels.compute_token_logprobs(pristine, ids, **kw),
            lambda: torch.log_softmax(pristine, dim=-1).gather(1, ids), None, data.size,
            (73, 169, 317)),
        "ranks": Benchmark(
            lambda **kw: kernels.compute_token_ranks(pristine, rank_ids, **kw),
            lambda: (pristine >= pristine.gather(1, rank_ids[:, None])).sum(-1), None, data.size,
            (98, 104, 159)),
    }
