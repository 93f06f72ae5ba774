"""Huge case for ``kernels.logit_bias``: allowed ids, bias and stop ids on the highest rows."""

import torch

import reference.logit_bias as reference
from harness.compare import assert_rows_close
from tests.cases._rows import LogitsRowsCase

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
