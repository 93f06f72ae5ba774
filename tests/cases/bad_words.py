"""Huge cases for ``kernels.bad_words``: the highest logits rows, a huge token history
``all_token_ids [max_num_reqs, max_model_len]`` read at a high request slot, and a huge
``bad_word_token_ids [max_num_reqs, 1024]`` table."""

import torch

import reference.bad_words as reference
from triton_overflow import CompileSpec, RowsCase, SlotTableCase
from triton_overflow.bench import Benchmark

HISTORY = (4, 8, 15)  # the last output tokens of every planted history
WORDS = ((8, 15, 42), (15, 77), (99, 100, 101), (123, ))
PER_ROW = ("expanded_idx_mapping", "input_ids", "expanded_local_pos")


def _word_tables(device, slots):
    flat = [t for word in WORDS for t in word]
    offsets = [0]
    for word in WORDS:
        offsets.append(offsets[-1] + len(word))
    return {"bad_word_token_ids": torch.tensor([flat] * slots, dtype=torch.int32, device=device),
            "bad_word_offsets": torch.tensor([offsets] * slots, dtype=torch.int32, device=device),
            "num_bad_words": torch.full((slots, ), len(WORDS), dtype=torch.int32, device=device)}


def _per_row(rows, device):
    zeros = torch.zeros(rows, dtype=torch.int32, device=device)
    return {"input_ids": zeros, "expanded_local_pos": zeros}


class BadWordsLogitsCase(RowsCase):
    name = "apply_bad_words"
    module = "kernels.bad_words"

    def inputs(self, run):
        device = run.device
        return {"expanded_idx_mapping": torch.zeros(run.rows, dtype=torch.int32, device=device),
                **_word_tables(device, 1),
                "all_token_ids": torch.tensor([HISTORY], dtype=torch.int32, device=device),
                "prompt_len": torch.zeros(1, dtype=torch.int32, device=device),
                "total_len": torch.tensor([len(HISTORY)], dtype=torch.int32, device=device),
                **_per_row(run.rows, device)}

    def launch(self, kernels, logits, run, **inputs):
        kernels.apply_bad_words(logits, **inputs, max_num_bad_words=len(WORDS))
        return logits

    def expected_row(self, values, row, **inputs):
        expected = values[None].clone()
        tables = {k: (v[row:row + 1] if k in PER_ROW else v).cpu() for k, v in inputs.items()}
        reference.apply_bad_words(expected, **tables, max_num_bad_words=len(WORDS))
        return expected[0]


class BadWordsHistoryCase(SlotTableCase):
    """The huge tensor is the token history, one row per request slot."""

    name = "apply_bad_words (token history)"
    module = "kernels.bad_words"
    width = 2**20  # max_model_len
    vocab_size = 1024
    id_range = (200, 1000)

    def random_row(self, generator, width):
        row = super().random_row(generator, width)
        row[-len(HISTORY):] = torch.tensor(HISTORY, dtype=torch.int32)
        return row

    def inputs(self, history, run):
        device = run.device
        rows = len(run.slots)
        return {"expanded_idx_mapping": torch.tensor(run.slots, dtype=torch.int32, device=device),
                **_word_tables(device, run.rows), "all_token_ids": history,
                "prompt_len": torch.zeros(run.rows, dtype=torch.int32, device=device),
                "total_len": torch.full((run.rows, ), self.width, dtype=torch.int32,
                                        device=device),
                **_per_row(rows, device),
                "logits": torch.zeros(rows, self.vocab_size, device=device)}

    def launch(self, kernels, history, run, *, logits, **tables):
        kernels.apply_bad_words(logits, **tables, max_num_bad_words=len(WORDS))
        return logits

    def expected_row(self, history_row, slot, **inputs):
        expected = torch.zeros(1, self.vocab_size)
        one = torch.zeros(1, dtype=torch.int32)
        reference.apply_bad_words(expected, one, **_word_tables("cpu", 1),
                                  all_token_ids=history_row[None], prompt_len=one,
                                  total_len=torch.tensor([self.width], dtype=torch.int32),
                                  input_ids=one, expanded_local_pos=one,
                                  max_num_bad_words=len(WORDS))
        return expected[0]


class BadWordTokensTableCase(SlotTableCase):
    """The huge tensor is ``bad_word_token_ids [max_num_reqs, 1024]``, one row per slot: each row
    opens with one bad word (8, 15, X), which matches HISTORY's end and so masks X."""

    name = "apply_bad_words (bad-word tokens table)"
    module = "kernels.bad_words"
    width = 1024
    vocab_size = 4096
    id_range = (200, vocab_size - 1)

    def random_row(self, generator, width):
        row = super().random_row(generator, width)
        row[:2] = torch.tensor([8, 15], dtype=torch.int32, device=row.device)
        return row

    def inputs(self, table, run):
        device = run.device
        rows, slots = len(run.slots), run.rows
        return {"expanded_idx_mapping": torch.tensor(run.slots, dtype=torch.int32, device=device),
                "bad_word_token_ids": table,
                "bad_word_offsets": torch.tensor([[0, 3]], dtype=torch.int32,
                                                 device=device).expand(slots, -1).contiguous(),
                "num_bad_words": torch.ones(slots, dtype=torch.int32, device=device),
                "all_token_ids": torch.tensor([HISTORY], dtype=torch.int32,
                                              device=device).expand(slots, -1).contiguous(),
                "prompt_len": torch.zeros(slots, dtype=torch.int32, device=device),
                "total_len": torch.full((slots, ), len(HISTORY), dtype=torch.int32, device=device),
                **_per_row(rows, device),
                "logits": torch.zeros(rows, self.vocab_size, device=device)}

    def launch(self, kernels, table, run, *, logits, **tables):
        # The launcher's value checks would read the whole huge table.
        kernels.apply_bad_words(logits, **tables, max_num_bad_words=1,
                                check_values=False)
        return logits

    def expected_row(self, table_row, slot, **inputs):
        expected = torch.zeros(self.vocab_size)
        word = table_row[:3].tolist()
        if word[:2] == list(HISTORY[1:]):
            expected[word[2]] = float("-inf")
        return expected

    def check(self, produced, table, run, planted, **inputs):
        super().check(produced, table, run, planted, **inputs)
        assert bool(produced[0].isinf().any()), "slot 0's word must match (the case plants it)"


BAD_WORDS = BadWordsLogitsCase()
BAD_WORDS_HISTORY = BadWordsHistoryCase()
BAD_WORD_TOKENS_TABLE = BadWordTokensTableCase()
CASES = [BAD_WORDS, BAD_WORDS_HISTORY, BAD_WORD_TOKENS_TABLE]
COMPILE_SPECS = [
    CompileSpec("kernels.bad_words:_bad_words_kernel",
                {k: "*i32" for k in ("idx_mapping_ptr", "bad_word_token_ids_ptr",
                                     "bad_word_offsets_ptr", "num_bad_words_ptr",
                                     "all_token_ids_ptr", "prompt_len_ptr", "total_len_ptr",
                                     "input_ids_ptr", "local_pos_ptr")}, num_warps=1,
                label="bad words"),
]


def benchmarks(batch, kernels, data):
    """Benchmark rows at ``batch`` rows for ``kernels`` (the module or its twin)."""
    logits, mapping, generator = data.logits, data.mapping, data.generator
    zeros = torch.zeros(batch, dtype=torch.int32, device="cuda")
    arguments = dict(
        expanded_idx_mapping=mapping,
        bad_word_token_ids=torch.randint(0, 4, (batch, 12), dtype=torch.int32, device="cuda",
                                         generator=generator),
        bad_word_offsets=torch.arange(0, 13, 3, dtype=torch.int32,
                                      device="cuda").expand(batch, -1).contiguous(),
        num_bad_words=torch.full((batch, ), 4, dtype=torch.int32, device="cuda"),
        all_token_ids=torch.randint(0, 4, (batch, 64), dtype=torch.int32, device="cuda",
                                    generator=generator),
        prompt_len=torch.full((batch, ), 8, dtype=torch.int32, device="cuda"),
        total_len=torch.full((batch, ), 64, dtype=torch.int32, device="cuda"),
        input_ids=zeros, expanded_local_pos=zeros, max_num_bad_words=4)
    return {"bad words": Benchmark(lambda **kw: kernels.apply_bad_words(logits, **arguments, **kw),
                                   None, data.restore, batch * 64 * 4, (10, 10, 10),
                                   (6.3, 6.8, 8.7))}
