"""Huge cases for ``kernels.gumbel``: temperature and sampling over huge logits, and the
side output into a huge ``[max_num_reqs, K, V]`` table at a high request slot."""

import torch

import reference.gumbel as reference
from harness.compare import assert_rows_close, assert_rows_equal
from tests.cases._rows import LogitsRowsCase

TEMPERATURE = 0.7
SEED = 1234567
POSITION = 2**33 + 5


class TemperatureCase(LogitsRowsCase):
    name = "apply_temperature"
    module = "kernels.gumbel"

    def prepare(self, logits, layout):
        return {"mapping": self.slots(layout, logits.device),
                "temperature": torch.tensor([TEMPERATURE], device=logits.device)}

    def launch(self, module, logits, inputs, layout, interpreted):
        module.apply_temperature(logits, inputs["mapping"], inputs["temperature"])
        return logits

    def check_row(self, produced, row, planted, inputs, what):
        assert_rows_close(produced[row], planted.double() / TEMPERATURE, what, torch.float32)


class GumbelSampleCase(LogitsRowsCase):
    name = "gumbel_sample"
    module = "kernels.gumbel"

    def prepare(self, logits, layout):
        device = logits.device
        return {"mapping": self.slots(layout, device),
                "temperature": torch.tensor([TEMPERATURE], device=device),
                "seed": torch.tensor([SEED], device=device),
                "pos": torch.full((layout.rows, ), POSITION, dtype=torch.int64, device=device)}

    def launch(self, module, logits, inputs, layout, interpreted):
        return module.gumbel_sample(logits, inputs["mapping"], inputs["temperature"], inputs["seed"],
                                    inputs["pos"], True)

    def check_row(self, produced, row, planted, inputs, what):
        scores = reference.gumbel_scores(planted, TEMPERATURE, SEED, POSITION, True)
        reference.assert_valid_token(produced[row], scores, what=what)


class GumbelSideOutputCase:
    """The huge tensor is the side-output table, one row per request slot (K * V wide)."""

    name = "gumbel_sample (side output)"
    module = "kernels.gumbel"
    steps = 3
    vocab_size = 2**17
    vocab = steps * vocab_size
    dtype = torch.float32
    column = 1

    def programs(self, layout):
        return list(range(len(self._slots(layout))))

    def _slots(self, layout):
        return (0, ) + layout.check_rows

    def prepare(self, table, layout):
        device = table.device
        slots = torch.tensor(self._slots(layout), dtype=torch.int32, device=device)
        generator = torch.Generator().manual_seed(5)
        row = torch.randn(self.vocab_size, generator=generator)
        return {"table": table.view(layout.rows, self.steps, self.vocab_size),
                "logits": row.expand(slots.numel(), -1).contiguous().to(device),
                "mapping": slots,
                "temperature": torch.full((layout.rows, ), TEMPERATURE, device=device),
                "seed": torch.full((layout.rows, ), SEED, dtype=torch.int64, device=device),
                "pos": torch.full((slots.numel(), ), POSITION, dtype=torch.int64, device=device),
                "col": torch.tensor([self.column], dtype=torch.int32, device=device)}

    def extra_bytes(self, layout):
        return layout.rows * 16 + self.vocab_size * 64

    def launch(self, module, table, inputs, layout, interpreted):
        return module.gumbel_sample(inputs["logits"], inputs["mapping"], inputs["temperature"],
                                    inputs["seed"], inputs["pos"], True, inputs["table"],
                                    inputs["col"])

    def check(self, produced, table, inputs, layout, planted):
        side = inputs["table"]
        expected = inputs["logits"][0].double().cpu() / TEMPERATURE
        for slot in self._slots(layout):
            assert_rows_close(side[slot, self.column], expected,
                              f"side output of slot {slot} (row starts at slot * K * V)",
                              torch.float32, slot, layout.row_stride)
        for slot in layout.poison_rows:
            assert_rows_equal(table[slot], planted[slot], f"poison slot {slot} untouched", slot,
                              layout.row_stride)
        assert_rows_equal(produced[1:], produced[:1].expand(produced.numel() - 1),
                          "tokens of every copy")


TEMPERATURE_CASE = TemperatureCase()
GUMBEL_SAMPLE = GumbelSampleCase()
GUMBEL_SIDE_OUTPUT = GumbelSideOutputCase()
