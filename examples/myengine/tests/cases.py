"""Huge cases for myengine's kernels: what the suite needs to know about each one."""

import torch

from triton_overflow import OVERFLOWS, RowsCase, SlotTableCase

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


class LogSoftmaxCase(RowsCase):
    """A persistent, autotuned kernel: no `programs()`, no hand-trimmed configs."""

    name = "log_softmax"
    module = "myengine.logsoftmax"

    def launch(self, kernels, logits, run):
        return kernels.log_softmax(logits)

    def expected_row(self, values, row):
        return torch.log_softmax(values.double(), dim=-1)


class LogSoftmaxUnwidenedCase(LogSoftmaxCase):
    name = "log_softmax_unwidened"
    expect = OVERFLOWS

    def launch(self, kernels, logits, run):
        return kernels.log_softmax_unwidened(logits)


PENALTY = 0.5


class CountPenaltyCase(SlotTableCase):
    """An int32 request-slot table into a huge per-request count table, under a grid sized
    from the device's multiprocessor count."""

    name = "count_penalty"
    module = "myengine.penalty"
    id_range = (0, 5)  # output token counts

    def inputs(self, counts, run):
        launch_rows = len(run.slots)
        return {"logits": torch.randn(launch_rows, run.width, device=run.device,
                                      generator=torch.Generator(run.device).manual_seed(3)),
                "slots": torch.tensor(run.slots, dtype=torch.int32, device=run.device),
                "penalties": torch.full((launch_rows, ), PENALTY, device=run.device)}

    def launch(self, kernels, counts, run, *, logits, slots, penalties):
        return kernels.apply_count_penalty(logits.clone(), counts, slots, penalties)

    def expected_row(self, table_row, slot, *, logits, slots, penalties):
        launch_row = slots.cpu().tolist().index(slot)
        return (logits[launch_row].cpu().double()
                - PENALTY * torch.log1p(table_row.double()))


class CountPenaltyUnwidenedCase(CountPenaltyCase):
    name = "count_penalty_unwidened"
    expect = OVERFLOWS

    def launch(self, kernels, counts, run, *, logits, slots, penalties):
        return kernels.apply_count_penalty_unwidened(logits.clone(), counts, slots, penalties)


class CountPenaltyRowsCase(RowsCase):
    """The same kernel with the logits huge: the row offset's widening, guarded."""

    name = "count_penalty_rows"
    module = "myengine.penalty"

    def inputs(self, run):
        counts = torch.randint(0, 5, (1, run.width), dtype=torch.int32,
                               generator=torch.Generator().manual_seed(5)).to(run.device)
        return {"counts": counts, "slots": torch.zeros(run.rows, dtype=torch.int32,
                                                         device=run.device),
                "penalties": torch.full((run.rows, ), PENALTY, device=run.device)}

    def launch(self, kernels, logits, run, *, counts, slots, penalties):
        return kernels.apply_count_penalty(logits, counts, slots, penalties)

    def expected_row(self, values, row, *, counts, slots, penalties):
        return values.double() - PENALTY * torch.log1p(counts[0].cpu().double())


LOG_SOFTMAX_CASE = LogSoftmaxCase()
LOG_SOFTMAX_UNWIDENED_CASE = LogSoftmaxUnwidenedCase()
COUNT_PENALTY_CASE = CountPenaltyCase()
COUNT_PENALTY_ROWS_CASE = CountPenaltyRowsCase()
COUNT_PENALTY_UNWIDENED_CASE = CountPenaltyUnwidenedCase()
