"""Huge cases for myengine's kernels: what the suite needs to know about each one."""

import torch

from triton_overflow import OVERFLOWS, RowsCase

TEMPERATURE = 0.7
CAP = 30.0


class TemperatureCase(RowsCase):
    name = "apply_temperature"
    module = "myengine.sampling"

    def inputs(self, run):
        return {"temperature": torch.full((run.rows, ), TEMPERATURE, device=run.device)}

    def launch(self, kernels, logits, run, *, temperature):
        return kernels.apply_temperature(logits, temperature)

    def expected_row(self, values, row, *, temperature):
        return values.double() / TEMPERATURE


class SoftcapCase(RowsCase):
    name = "apply_softcap"
    module = "myengine.softcap"
    expect = OVERFLOWS  # not widened yet: the report says where, and the run stays green

    def launch(self, kernels, logits, run):
        return kernels.apply_softcap(logits, CAP)

    def expected_row(self, values, row):
        return CAP * torch.tanh(values.double() / CAP)


TEMPERATURE_CASE = TemperatureCase()
SOFTCAP_CASE = SoftcapCase()
