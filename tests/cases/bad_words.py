"""Huge cases for ``kernels.bad_words``: the highest logits rows, and a huge token history
``all_token_ids [max_num_reqs, max_model_len]`` read at a high request slot."""

import torch

import reference.bad_words as reference
from harness.compare import assert_rows_equal
from tests.cases._rows import LogitsRowsCase, SlotTableCase

HISTORY = (4, 8, 15)  # the last output tokens of every planted history
WORDS = ((8, 15, 42), (15, 77), (99, 100, 101), (123, ))
MASKED = (42, 77, 123)  # words whose other tokens end HISTORY (the last has none)


def _word_tables(device, slots):
    flat = [t for word in WORDS for t in word]
    offsets = [0]
    for word in WORDS:
        offsets.append(offsets[-1] + len(word))
    return (torch.tensor([flat] * slots, dtype=torch.int32, device=device),
            torch.tensor([offsets] * slots, dtype=torch.int32, device=device),
            torch.full((slots, ), len(WORDS), dtype=torch.int32, device=device))


class BadWordsLogitsCase(LogitsRowsCase):
    name = "apply_bad_words"
    module = "kernels.bad_words"

    def prepare(self, logits, layout):
        device = logits.device
        words, offsets, num = _word_tables(device, 1)
        return {"expanded_idx_mapping": self.slots(layout, device), "bad_word_token_ids": words,
                "bad_word_offsets": offsets, "num_bad_words": num,
                "all_token_ids": torch.tensor([HISTORY], dtype=torch.int32, device=device),
                "prompt_len": torch.zeros(1, dtype=torch.int32, device=device),
                "total_len": torch.tensor([len(HISTORY)], dtype=torch.int32, device=device),
                "input_ids": torch.zeros(layout.rows, dtype=torch.int32, device=device),
                "expanded_local_pos": torch.zeros(layout.rows, dtype=torch.int32, device=device)}

    def launch(self, module, logits, inputs, layout, interpreted):
        module.apply_bad_words(logits, **inputs, max_num_bad_words=len(WORDS))
        return logits

    def check_row(self, produced, row, planted, inputs, what):
        expected = planted[None].clone()
        tables = {k: (v[:1] if k in ("expanded_idx_mapping", "input_ids", "expanded_local_pos")
                      else v).cpu() for k, v in inputs.items()}
        reference.apply_bad_words(expected, **tables, max_num_bad_words=len(WORDS))
        assert_rows_equal(produced[row], expected[0], what)


class BadWordsHistoryCase(SlotTableCase):
    """The huge tensor is the token history, one row per request slot."""

    name = "apply_bad_words (token history)"
    module = "kernels.bad_words"
    vocab = 2**20  # max_model_len
    vocab_size = 1024
    ID_RANGE = (200, 1000)

    def random_row(self, generator, width):
        row = super().random_row(generator, width)
        row[-len(HISTORY):] = torch.tensor(HISTORY, dtype=torch.int32)
        return row

    def prepare(self, history, layout):
        device = history.device
        slots = self.slots(layout)
        words, offsets, num = _word_tables(device, layout.rows)
        rows = len(slots)
        return {"expanded_idx_mapping": torch.tensor(slots, dtype=torch.int32, device=device),
                "bad_word_token_ids": words, "bad_word_offsets": offsets, "num_bad_words": num,
                "all_token_ids": history,
                "prompt_len": torch.zeros(layout.rows, dtype=torch.int32, device=device),
                "total_len": torch.full((layout.rows, ), self.vocab, dtype=torch.int32, device=device),
                "input_ids": torch.zeros(rows, dtype=torch.int32, device=device),
                "expanded_local_pos": torch.zeros(rows, dtype=torch.int32, device=device),
                "logits": torch.zeros(rows, self.vocab_size, device=device)}

    def launch(self, module, history, inputs, layout, interpreted):
        tables = dict(inputs)
        logits = tables.pop("logits")
        module.apply_bad_words(logits, **tables, max_num_bad_words=len(WORDS))
        return logits

    def check(self, produced, history, inputs, layout, planted):
        expected = torch.zeros(self.vocab_size)
        expected[list(MASKED)] = float("-inf")
        slots = self.slots(layout)
        for index, slot in enumerate(slots):
            if slot in layout.poison_rows:
                continue
            assert_rows_equal(produced[index], expected,
                              f"logits of the row at slot {slot} (history row starts at slot * "
                              f"max_model_len)", slot, layout.row_stride)


BAD_WORDS = BadWordsLogitsCase()
BAD_WORDS_HISTORY = BadWordsHistoryCase()


class BadWordTokensTableCase(SlotTableCase):
    """The huge tensor is ``bad_word_token_ids [max_num_reqs, 1024]``, one row per slot: each row
    opens with one bad word (8, 15, X), which matches HISTORY's end and so masks X."""

    name = "apply_bad_words (bad-word tokens table)"
    module = "kernels.bad_words"
    vocab = 1024  # table width
    vocab_size = 4096
    ID_RANGE = (200, vocab_size - 1)

    def random_row(self, generator, width):
        row = super().random_row(generator, width)
        row[:2] = torch.tensor([8, 15], dtype=torch.int32, device=row.device)
        return row

    def prepare(self, table, layout):
        device = table.device
        slots = self.slots(layout)
        rows, reqs = len(slots), layout.rows
        return {"expanded_idx_mapping": torch.tensor(slots, dtype=torch.int32, device=device),
                "bad_word_token_ids": table,
                "bad_word_offsets": torch.tensor([[0, 3]], dtype=torch.int32, device=device).expand(reqs, -1).contiguous(),
                "num_bad_words": torch.ones(reqs, dtype=torch.int32, device=device),
                "all_token_ids": torch.tensor([HISTORY], dtype=torch.int32, device=device).expand(reqs, -1).contiguous(),
                "prompt_len": torch.zeros(reqs, dtype=torch.int32, device=device),
                "total_len": torch.full((reqs, ), len(HISTORY), dtype=torch.int32, device=device),
                "input_ids": torch.zeros(rows, dtype=torch.int32, device=device),
                "expanded_local_pos": torch.zeros(rows, dtype=torch.int32, device=device),
                "logits": torch.zeros(rows, self.vocab_size, device=device)}

    def launch(self, module, table, inputs, layout, interpreted):
        tables = dict(inputs)
        logits = tables.pop("logits")
        module.apply_bad_words(logits, **tables, max_num_bad_words=1, check_values=not interpreted)
        return logits

    def check(self, produced, table, inputs, layout, planted):
        for index, slot in enumerate(self.slots(layout)):
            expected = torch.zeros(self.vocab_size)
            word = planted[slot][:3].tolist()
            if word[:2] == list(HISTORY[1:]):
                expected[word[2]] = float("-inf")
            assert_rows_equal(produced[index], expected,
                              f"row masked by slot {slot} (bad-word row starts at slot * 1024)",
                              slot, layout.row_stride)
        assert bool(produced[0].isinf().any()), "slot 0's word must match (the case plants it)"


BAD_WORD_TOKENS_TABLE = BadWordTokensTableCase()
