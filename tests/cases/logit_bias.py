"""Huge cases for ``kernels.logit_bias``: allowed ids, bias and stop ids on the highest rows, and a
huge ``allowed_token_ids [max_num_reqs, 1024]`` table read at a high request slot."""

import torch

import reference.logit_bias as reference
from triton_overflow import CompileSpec, RowsCase, SlotTableCase
from triton_overflow.bench import Benchmark

ALLOWED = (3, 70000, 131071, 5, 9)
BIASED = (70000, 5, 17)
STOPPED = (9, 3)
ARGUMENTS = ("expanded_idx_mapping", "pos", "num_allowed_token_ids", "allowed_token_ids",
             "num_logit_bias", "logit_bias_token_ids", "logit_bias", "min_lens",
             "num_stop_token_ids", "stop_token_ids")
PER_ROW = ("expanded_idx_mapping", "pos")


class LogitBiasCase(RowsCase):
    name = "apply_logit_bias"
    module = "kernels.logit_bias"

    def inputs(self, run):
        device = run.device

        def table(ids):
            return torch.tensor([ids], dtype=torch.int32, device=device)

        def count(ids):
            return torch.tensor([len(ids)], dtype=torch.int32, device=device)

        return {"expanded_idx_mapping": torch.zeros(run.rows, dtype=torch.int32, device=device),
                "pos": torch.zeros(run.rows, dtype=torch.int64, device=device),
                "num_allowed_token_ids": count(ALLOWED), "allowed_token_ids": table(ALLOWED),
                "num_logit_bias": count(BIASED), "logit_bias_token_ids": table(BIASED),
                "logit_bias": torch.tensor([[0.5, -2.0, 4.0]], device=device),
                "min_lens": torch.tensor([10], dtype=torch.int32, device=device),
                "num_stop_token_ids": count(STOPPED), "stop_token_ids": table(STOPPED)}

    def launch(self, kernels, logits, run, **inputs):
        kernels.apply_logit_bias(logits, **inputs)
        return logits

    def expected_row(self, values, row, **inputs):
        expected = values[None].clone()
        tables = {k: (v[row:row + 1] if k in PER_ROW else v).cpu() for k, v in inputs.items()}
        reference.apply_logit_bias(expected, **tables)
        return expected[0]


class AllowedIdsTableCase(SlotTableCase):
    """The huge tensor is ``allowed_token_ids [max_num_reqs, 1024]``, one row per request slot:
    2**21 slots, as many as a 1024-wide per-request table needs to pass 2**31 entries."""

    name = "apply_logit_bias (allowed ids table)"
    module = "kernels.logit_bias"
    width = 1024
    vocab_size = 4096
    allowed = 16
    id_range = (0, vocab_size)
    run_poison_slots = False

    def inputs(self, table, run):
        device = run.device
        rows, slots = len(run.slots), run.rows

        def column(value, dtype=torch.int32):
            return torch.full((slots, 1), value, dtype=dtype, device=device)

        def count(value):
            return torch.full((slots, ), value, dtype=torch.int32, device=device)

        source = torch.randn(self.vocab_size, generator=torch.Generator().manual_seed(4))
        return {"source": source,
                "logits": source.expand(rows, -1).contiguous().to(device),
                "expanded_idx_mapping": torch.tensor(run.slots, dtype=torch.int32,
                                                     device=device),
                "pos": torch.zeros(rows, dtype=torch.int64, device=device),
                "num_allowed_token_ids": count(self.allowed), "allowed_token_ids": table,
                "num_logit_bias": count(0), "logit_bias_token_ids": column(0),
                "logit_bias": column(0.0, torch.float32), "min_lens": count(0),
                "num_stop_token_ids": count(0), "stop_token_ids": column(0)}

    def launch(self, kernels, table, run, *, source, logits, **arguments):
        # The launcher's value checks would read the whole huge table.
        kernels.apply_logit_bias(logits, **arguments, check_values=False)
        return logits

    def expected_row(self, table_row, slot, *, source, **inputs):
        expected = torch.full((self.vocab_size, ), float("-inf"))
        kept = table_row[:self.allowed].long()
        expected[kept] = source[kept]
        return expected


LOGIT_BIAS = LogitBiasCase()
ALLOWED_IDS_TABLE = AllowedIdsTableCase()
CASES = [LOGIT_BIAS, ALLOWED_IDS_TABLE]
COMPILE_SPECS = [
    CompileSpec("kernels.logit_bias:_logit_bias_kernel",
                {**{k: "*i32" for k in ("idx_mapping_ptr", "num_allowed_ptr", "allowed_ptr",
                                        "num_bias_ptr", "bias_ids_ptr", "min_lens_ptr",
                                        "num_stop_ptr", "stop_ids_ptr")}, "pos_ptr": "*i64"},
                label="logit bias"),
]


def benchmarks(batch, kernels, data):
    """Benchmark rows at ``batch`` rows for ``kernels`` (the module or its twin)."""
    logits, mapping, generator = data.logits, data.mapping, data.generator
    vocab = logits.size(1)
    # Eight distinct ids per row (the launcher refuses a repeated bias id).
    starts = torch.randint(0, vocab // 8, (batch, 1), device="cuda", generator=generator)
    table = (starts * 8 + torch.arange(8, device="cuda")).int()
    count8 = torch.full((batch, ), 8, dtype=torch.int32, device="cuda")
    bias = torch.randn(batch, 8, device="cuda")
    zeros = torch.zeros(batch, dtype=torch.int32, device="cuda")
    arguments = (mapping, torch.arange(batch, dtype=torch.int64, device="cuda"), zeros, table,
                 count8, table, bias, torch.full((batch, ), 2**30, dtype=torch.int32,
                                                 device="cuda"), count8, table)
    return {"logit bias": Benchmark(
        lambda **kw: kernels.apply_logit_bias(logits, *arguments, **kw),
        lambda: logits.scatter_add_(1, table[mapping.long()].long(), bias[mapping.long()]),
        data.restore, batch * 8 * 16, (10, 10, 10), (7.6, 8.0, 9.3))}
