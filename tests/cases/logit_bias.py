"""Huge case for ``kernels.logit_bias``: allowed ids, bias and stop ids on the highest rows."""

import torch

import reference.logit_bias as reference
from harness.compare import assert_rows_close
from tests.cases._rows import LogitsRowsCase, SlotTableCase

ALLOWED = (3, 70000, 131071, 5, 9)
BIASED = (70000, 5, 17)
STOPPED = (9, 3)


class LogitBiasCase(LogitsRowsCase):
    name = "apply_logit_bias"
    module = "kernels.logit_bias"

    def prepare(self, logits, layout):
        device = logits.device

        def table(ids):
            return torch.tensor([ids], dtype=torch.int32, device=device)

        def count(ids):
            return torch.tensor([len(ids)], dtype=torch.int32, device=device)

        return {"args": (self.slots(layout, device),
                         torch.zeros(layout.rows, dtype=torch.int64, device=device),
                         count(ALLOWED), table(ALLOWED), count(BIASED), table(BIASED),
                         torch.tensor([[0.5, -2.0, 4.0]], device=device),
                         torch.tensor([10], dtype=torch.int32, device=device), count(STOPPED),
                         table(STOPPED))}

    def launch(self, module, logits, inputs, layout, interpreted):
        module.apply_logit_bias(logits, *inputs["args"])
        return logits

    def check_row(self, produced, row, planted, inputs, what):
        expected = planted[None].clone()
        args = [a[:1].cpu() if a.dim() == 1 and a.numel() > 1 else a.cpu() for a in inputs["args"]]
        reference.apply_logit_bias(expected, *args)
        assert_rows_close(produced[row], expected[0], what, torch.float32)


LOGIT_BIAS = LogitBiasCase()


class AllowedIdsTableCase(SlotTableCase):
    """The huge tensor is ``allowed_token_ids [max_num_reqs, 1024]``, one row per request slot:
    2**21 slots, as many as a 1024-wide per-request table needs to pass 2**31 entries."""

    name = "apply_logit_bias (allowed ids table)"
    module = "kernels.logit_bias"
    vocab = 1024  # table width
    vocab_size = 4096
    allowed = 16
    ID_RANGE = (0, vocab_size)
    RUN_POISON_SLOTS = False

    def prepare(self, table, layout):
        device = table.device
        slots = self.slots(layout)
        rows, reqs = len(slots), layout.rows

        def column(value, dtype=torch.int32):
            return torch.full((reqs, 1), value, dtype=dtype, device=device)

        def count(value):
            return torch.full((reqs, ), value, dtype=torch.int32, device=device)

        logits = torch.randn(self.vocab_size, generator=torch.Generator().manual_seed(4))
        return {"source": logits,
                "logits": logits.expand(rows, -1).contiguous().to(device),
                "args": (torch.tensor(slots, dtype=torch.int32, device=device),
                         torch.zeros(rows, dtype=torch.int64, device=device),
                         count(self.allowed), table, count(0), column(0), column(0.0, torch.float32),
                         count(0), count(0), column(0))}

    def launch(self, module, table, inputs, layout, interpreted):
        module.apply_logit_bias(inputs["logits"], *inputs["args"], check_values=not interpreted)
        return inputs["logits"]

    def check(self, produced, table, inputs, layout, planted):
        expected = torch.full((self.vocab_size, ), float("-inf"))
        kept = planted[0][:self.allowed].long()
        expected[kept] = inputs["source"][kept]
        for index, slot in enumerate(self.slots(layout)):
            assert_rows_close(produced[index], expected,
                              f"row filtered by slot {slot} (allowed-ids row starts at slot * 1024)",
                              torch.float32, slot, layout.row_stride)


ALLOWED_IDS_TABLE = AllowedIdsTableCase()
