"""Huge cases for ``kernels.penalties``: the highest logits rows; a huge ``output_bin_counts
[max_num_reqs, V]`` read at a high slot; a huge ``prompt_bin_mask [max_num_reqs, V / 32]``
read at a high slot; a huge token history counted at a high slot."""

import torch

import reference.penalties as reference
from harness.compare import assert_rows_close, assert_rows_equal
from tests.cases._rows import LogitsRowsCase, SlotTableCase

VOCAB = 2**17
PENALTIES = (1.3, 0.4, 0.25)  # repetition, frequency, presence


def _penalty_tables(device, slots):
    return [torch.full((slots, ), value, device=device) for value in PENALTIES]


class PenaltiesLogitsCase(LogitsRowsCase):
    name = "apply_penalties"
    module = "kernels.penalties"

    def prepare(self, logits, layout):
        device = logits.device
        counts = torch.zeros(1, VOCAB, dtype=torch.int32, device=device)
        counts[0, ::97] = 2
        mask = torch.zeros(1, VOCAB // 32, dtype=torch.int32, device=device)
        mask[0, ::5] = 0x55555555
        zeros = torch.zeros(layout.rows, dtype=torch.int32, device=device)
        return {"args": [self.slots(layout, device), zeros, zeros, *_penalty_tables(device, 1),
                         mask, counts]}

    def launch(self, module, logits, inputs, layout, interpreted):
        module.apply_penalties(logits, *inputs["args"])
        return logits

    def check_row(self, produced, row, planted, inputs, what):
        expected = planted[None].clone()
        args = [a[:1].cpu() if i < 3 else a.cpu() for i, a in enumerate(inputs["args"])]
        reference.apply_penalties(expected, *args)
        assert_rows_close(produced[row], expected[0], what, torch.float32)


class _PenaltyStateCase(SlotTableCase):
    """The huge tensor is one of the two per-slot tables that the penalties kernel reads; the
    launch has one logits row per planted slot, each penalised from its own slot."""

    module = "kernels.penalties"
    SEED = 0
    ADDRESSING = ""  # where a slot's table row starts, for failure messages

    def other_table(self, slots, device):
        """The table that is not the huge one, zeros for ``slots`` request slots."""
        raise NotImplementedError

    def state(self, huge, other):
        """``(prompt_bin_mask, output_bin_counts)`` from the huge table and the other one."""
        raise NotImplementedError

    def prepare(self, huge, layout):
        device = huge.device
        slots = self.slots(layout)
        logits = torch.randn(VOCAB, generator=torch.Generator().manual_seed(self.SEED))
        zeros = torch.zeros(len(slots), dtype=torch.int32, device=device)
        return {"logits": logits.expand(len(slots), -1).contiguous().to(device), "source": logits,
                "args": [torch.tensor(slots, dtype=torch.int32, device=device), zeros, zeros,
                         *_penalty_tables(device, layout.rows),
                         *self.state(huge, self.other_table(layout.rows, device))]}

    def launch(self, module, huge, inputs, layout, interpreted):
        module.apply_penalties(inputs["logits"], *inputs["args"])
        return inputs["logits"]

    def check(self, produced, huge, inputs, layout, planted):
        one_row = torch.zeros(1, dtype=torch.int32)
        penalties = [t[:1].cpu() for t in inputs["args"][3:6]]
        for index, slot in enumerate(self.slots(layout)):
            expected = inputs["source"][None].clone()
            reference.apply_penalties(expected, one_row, one_row, one_row, *penalties,
                                      *self.state(planted[slot][None], self.other_table(1, "cpu")))
            assert_rows_close(produced[index], expected[0],
                              f"row penalised from slot {slot} ({self.ADDRESSING})",
                              torch.float32, slot, layout.row_stride)


class PenaltyCountsCase(_PenaltyStateCase):
    """The huge tensor is ``output_bin_counts``, one row of V counts per request slot."""

    name = "apply_penalties (output_bin_counts)"
    vocab = VOCAB
    ID_RANGE = (0, 3)
    SEED = 3
    ADDRESSING = "counts row starts at slot * V"

    def extra_bytes(self, layout):
        return layout.rows * (VOCAB // 8 + 64)

    def other_table(self, slots, device):
        return torch.zeros(slots, VOCAB // 32, dtype=torch.int32, device=device)

    def state(self, huge, other):
        return other, huge


class PenaltyPromptMaskCase(_PenaltyStateCase):
    """The huge tensor is ``prompt_bin_mask``, one row of V / 32 bitset words per request slot.

    Past 2**31 words the slots outnumber what a real ``output_bin_counts`` (32 times larger)
    could hold, so the counts are one zero row broadcast to every slot (row stride 0).
    """

    name = "apply_penalties (prompt_bin_mask)"
    vocab = VOCAB // 32
    ID_RANGE = (-2**31, 2**31 - 1)
    SEED = 4
    ADDRESSING = "bitset row starts at slot * V / 32"

    def other_table(self, slots, device):
        return torch.zeros(1, VOCAB, dtype=torch.int32, device=device).expand(slots, -1)

    def state(self, huge, other):
        return huge, other


class BincountHistoryCase(SlotTableCase):
    """The huge tensor is the token history; counts and bitsets are rebuilt at a high slot."""

    name = "build_penalty_state (token history)"
    module = "kernels.penalties"
    vocab = 2**20  # max_model_len
    vocab_size = 4096
    prompt = 1000
    tail = 3000  # tokens counted: the prompt, then the last `tail` positions minus the prompt
    ID_RANGE = (0, vocab_size)
    RUN_POISON_SLOTS = False

    def extra_bytes(self, layout):
        return layout.rows * (self.vocab_size * 5 // 4 + 64)

    def prepare(self, history, layout):
        device = history.device
        return {"idx_mapping": torch.tensor(self.slots(layout), dtype=torch.int32, device=device),
                "all_token_ids": history,
                "prompt_len": torch.full((layout.rows, ), self.prompt, dtype=torch.int32, device=device),
                "total_len": torch.full((layout.rows, ), self.tail, dtype=torch.int32, device=device),
                "prompt_bin_mask": torch.zeros(layout.rows, self.vocab_size // 32, dtype=torch.int32,
                                               device=device),
                "output_bin_counts": torch.zeros(layout.rows, self.vocab_size, dtype=torch.int32,
                                                 device=device)}

    def launch(self, module, history, inputs, layout, interpreted):
        module.build_penalty_state(**inputs)

    def check(self, produced, history, inputs, layout, planted):
        tokens = planted[0][:self.tail].long()
        counts = torch.bincount(tokens[self.prompt:], minlength=self.vocab_size).int()
        for slot in self.slots(layout):
            assert_rows_equal(inputs["output_bin_counts"][slot], counts,
                              f"counts of slot {slot} (history row starts at slot * max_model_len)",
                              slot, layout.row_stride)
            assert_rows_equal(inputs["prompt_bin_mask"][slot], inputs["prompt_bin_mask"][0],
                              f"prompt bitset of slot {slot}", slot, layout.row_stride)


PENALTIES_CASE = PenaltiesLogitsCase()
PENALTY_COUNTS = PenaltyCountsCase()
PENALTY_PROMPT_MASK = PenaltyPromptMaskCase()
BINCOUNT_HISTORY = BincountHistoryCase()
