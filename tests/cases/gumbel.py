"""Huge cases for ``kernels.gumbel``: temperature and sampling over huge logits, and the side
output into a huge ``[max_num_reqs, K, V]`` table at a high request slot."""

import torch

import reference.gumbel as reference
from tests.cases import Streaming
from triton_overflow import Case, CompileSpec, RowsCase, assert_rows_close, assert_rows_equal
from triton_overflow.bench import Benchmark

TEMPERATURE = 0.7
SEED = 1234567
POSITION = 2**33 + 5
I32, I64 = "*i32", "*i64"


def _slots(run):
    return torch.zeros(run.rows, dtype=torch.int32, device=run.device)


class TemperatureCase(RowsCase):
    name = "apply_temperature"
    module = "kernels.gumbel"

    def inputs(self, run):
        return {"mapping": _slots(run),
                "temperature": torch.tensor([TEMPERATURE], device=run.device)}

    def launch(self, kernels, logits, run, *, mapping, temperature):
        kernels.apply_temperature(logits, mapping, temperature)
        return logits

    def expected_row(self, values, row, **inputs):
        return values.double() / TEMPERATURE


class GumbelSampleCase(RowsCase):
    name = "gumbel_sample"
    module = "kernels.gumbel"

    def inputs(self, run):
        return {"mapping": _slots(run),
                "temperature": torch.tensor([TEMPERATURE], device=run.device),
                "seed": torch.tensor([SEED], device=run.device),
                "pos": torch.full((run.rows, ), POSITION, dtype=torch.int64, device=run.device)}

    def launch(self, kernels, logits, run, *, mapping, temperature, seed, pos):
        return kernels.gumbel_sample(logits, mapping, temperature, seed, pos, True)

    def check_row(self, actual, values, row, what, **inputs):
        scores = reference.gumbel_scores(values, TEMPERATURE, SEED, POSITION, True)
        reference.assert_valid_token(actual, scores, what=what)


class GumbelSideOutputCase(Case):
    """The huge tensor is the side-output table, one row per request slot (K * V wide)."""

    name = "gumbel_sample (side output)"
    module = "kernels.gumbel"
    steps = 3
    vocab_size = 2**17
    width = steps * vocab_size
    column = 1

    def _slots(self, run):
        return (0, ) + run.check_rows

    def programs(self, run):
        return list(range(len(self._slots(run))))

    def extra_bytes(self, run):
        return run.rows * 16 + self.vocab_size * 64

    def prepare(self, table, run):
        device = run.device
        slots = torch.tensor(self._slots(run), dtype=torch.int32, device=device)
        row = torch.randn(self.vocab_size, generator=torch.Generator().manual_seed(5))
        return {"side": table.view(run.rows, self.steps, self.vocab_size),
                "logits": row.expand(slots.numel(), -1).contiguous().to(device),
                "mapping": slots,
                "temperature": torch.full((run.rows, ), TEMPERATURE, device=device),
                "seed": torch.full((run.rows, ), SEED, dtype=torch.int64, device=device),
                "pos": torch.full((slots.numel(), ), POSITION, dtype=torch.int64, device=device),
                "col": torch.tensor([self.column], dtype=torch.int32, device=device)}

    def launch(self, kernels, table, run, *, side, logits, mapping, temperature, seed, pos, col):
        return kernels.gumbel_sample(logits, mapping, temperature, seed, pos, True, side, col)

    def check(self, produced, table, run, planted, *, side, logits, **inputs):
        expected = logits[0].double().cpu() / TEMPERATURE
        for slot in self._slots(run):
            assert_rows_close(side[slot, self.column], expected,
                              f"side output of slot {slot} (row starts at slot * K * V)",
                              torch.float32, slot, run.row_stride)
            untouched = planted[slot].view(self.steps, self.vocab_size)
            for step in range(self.steps):
                if step != self.column:
                    assert_rows_equal(side[slot, step], untouched[step],
                                      f"side output of slot {slot}, step {step}: never written",
                                      slot, run.row_stride)
        for slot in run.poison_rows:
            assert_rows_equal(table[slot], planted[slot], f"poison slot {slot} untouched", slot,
                              run.row_stride)
        assert_rows_equal(produced[1:], produced[:1].expand(produced.numel() - 1),
                          "tokens of every copy")


TEMPERATURE_CASE = TemperatureCase()
GUMBEL_SAMPLE = GumbelSampleCase()
GUMBEL_SIDE_OUTPUT = GumbelSideOutputCase()
CASES = [TEMPERATURE_CASE, GUMBEL_SAMPLE, GUMBEL_SIDE_OUTPUT]
_SAMPLE_TYPES = {"tokens_ptr": I64, "finished_ptr": I32, "block_id_ptr": I64,
                 "block_value_ptr": "*fp32", "temperature_ptr": "*fp32", "idx_mapping_ptr": I32,
                 "seed_ptr": I64, "pos_ptr": I64, "processed_col_ptr": I32}
TEMPERATURE_SPEC = CompileSpec("kernels.gumbel:_temperature_kernel", {"idx_mapping_ptr": I32},
                               num_warps=8, label="temperature")
COMPILE_SPECS = [
    TEMPERATURE_SPEC,
    CompileSpec("kernels.gumbel:_gumbel_sample_kernel", _SAMPLE_TYPES, label="gumbel fp32"),
    CompileSpec("kernels.gumbel:_gumbel_sample_kernel",
                {**_SAMPLE_TYPES, "block_value_ptr": "*fp64"},
                {"USE_FP64": True, "PER_ROW_COL": True, "BLOCK": 1024, "PADDED_BLOCKS": 256},
                label="gumbel fp64 per-row col"),
]
STREAMING = [Streaming(TEMPERATURE_SPEC, ("logits_stride", "vocab_size"))]


def benchmarks(batch, kernels, data):
    """Benchmark rows at ``batch`` rows for ``kernels`` (the module or its twin)."""
    logits, pristine, mapping = data.logits, data.pristine, data.mapping
    _, pristine_bf16, _ = data.variant("flat", torch.bfloat16)
    temperature = torch.full((batch, ), 0.7, device="cuda")
    seed = torch.arange(batch, dtype=torch.int64, device="cuda")
    pos = torch.arange(batch, dtype=torch.int64, device="cuda")

    def gumbel_noise():
        return -torch.log(-torch.log(torch.rand_like(pristine)))

    return {
        "temperature": Benchmark(
            lambda **kw: kernels.apply_temperature(logits, mapping, temperature, **kw),
            lambda: logits.div_(temperature[mapping.long()][:, None]), data.restore,
            2 * data.size, (25, 85, 324)),
        "gumbel sample fp32": Benchmark(
            lambda **kw: kernels.gumbel_sample(pristine, mapping, temperature, seed, pos, True,
                                               **kw),
            lambda: (pristine / temperature[mapping.long()][:, None] + gumbel_noise()).argmax(-1),
            None, data.size, (25, 90, 350), (73, 248, 949)),
        "gumbel sample bf16": Benchmark(
            lambda **kw: kernels.gumbel_sample(pristine_bf16, mapping, temperature, seed, pos,
                                               True, **kw),
            lambda: (pristine_bf16.float() / temperature[mapping.long()][:, None]
                     + gumbel_noise()).argmax(-1),
            None, data.size // 2, no_slower_than=("gumbel sample fp32", )),
    }
