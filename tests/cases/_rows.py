"""The two shapes of case.

``LogitsRowsCase``: the huge tensor is the logits; each row maps to request slot 0, and the
planted rows are judged against the reference on their own data and against row 0.

``SlotTableCase``: the huge tensor is a per-request table, one row per slot; the launch has one
logits row per planted slot (slot 0, the checked slots and, with ``RUN_POISON_SLOTS``, the
poisoned ones), so only those programs run in the interpreter.
"""

import torch

from harness.compare import assert_rows_equal


class LogitsRowsCase:
    vocab = 2**17
    dtype = torch.float32

    def programs(self, layout):
        return [0, *layout.poison_rows, *layout.check_rows]

    def extra_bytes(self, layout):
        return layout.rows * 64

    def slots(self, layout, device):
        return torch.zeros(layout.rows, dtype=torch.int32, device=device)

    def check(self, produced, logits, inputs, layout, planted):
        for row in (0, ) + layout.poison_rows + layout.check_rows:
            self.check_row(produced, row, planted[row], inputs,
                           f"row {row} against the reference on its own input")
        for row in layout.check_rows:
            assert_rows_equal(produced[row], produced[0], f"row {row} against row 0", row,
                              layout.row_stride)


class SlotTableCase:
    dtype = torch.int32
    RUN_POISON_SLOTS = True
    ID_RANGE = (0, 2)  # planted table entries are ints drawn from this range

    def slots(self, layout):
        poison = layout.poison_rows if self.RUN_POISON_SLOTS else ()
        return (0, ) + poison + layout.check_rows

    def programs(self, layout):
        return list(range(len(self.slots(layout))))

    def extra_bytes(self, layout):
        return layout.rows * 64

    def random_row(self, generator, width):
        return torch.randint(*self.ID_RANGE, (width, ), generator=generator, dtype=torch.int32,
                             device=generator.device)
