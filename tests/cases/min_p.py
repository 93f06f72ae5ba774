"""Huge case for ``kernels.min_p``."""

import torch

import reference.min_p as reference
from tests.cases._rows import LogitsRowsCase


class MinPCase(LogitsRowsCase):
    name = "apply_min_p"
    module = "kernels.min_p"
    min_p = 0.05

    def prepare(self, logits, layout):
        return {"mapping": self.slots(layout, logits.device),
                "min_p": torch.tensor([self.min_p], device=logits.device)}

    def launch(self, module, logits, inputs, layout, interpreted):
        module.apply_min_p(logits, inputs["mapping"], inputs["min_p"])
        return logits

    def check_row(self, produced, row, planted, inputs, what):
        reference.assert_valid_row(planted, produced[row], self.min_p, what=what)


MIN_P = MinPCase()
