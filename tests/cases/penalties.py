"""Huge cases for ``kernels.penalties``: the highest logits rows; a huge ``output_bin_counts
[max_num_reqs, V]`` read at a high slot; a huge ``prompt_bin_mask [max_num_reqs, V / 32]`` read
at a high slot; a huge token history counted at a high slot."""

import torch

import reference.penalties as reference
from tests.cases import Streaming
from triton_overflow import Case, CompileSpec, RowsCase, SlotTableCase, assert_rows_equal
from triton_overflow.bench import Benchmark

VOCAB = 2**17
PENALTIES = (1.3, 0.4, 0.25)  # repetition, frequency, presence
PENALTY_NAMES = ("repetition_penalty", "frequency_penalty", "presence_penalty")
PER_ROW = ("expanded_idx_mapping", "token_ids", "expanded_local_pos")


def _penalty_tables(device, slots):
    return {name: torch.full((slots, ), value, device=device)
            for name, value in zip(PENALTY_NAMES, PENALTIES)}


class PenaltiesLogitsCase(RowsCase):
    name = "apply_penalties"
    module = "kernels.penalties"

    def inputs(self, run):
        device = run.device
        counts = torch.zeros(1, VOCAB, dtype=torch.int32, device=device)
        counts[0, ::97] = 2
        mask = torch.zeros(1, VOCAB // 32, dtype=torch.int32, device=device)
        mask[0, ::5] = 0x55555555
        zeros = torch.zeros(run.rows, dtype=torch.int32, device=device)
        return {"expanded_idx_mapping": zeros, "token_ids": zeros, "expanded_local_pos": zeros,
                **_penalty_tables(device, 1), "prompt_bin_mask": mask,
                "output_bin_counts": counts}

    def launch(self, kernels, logits, run, **inputs):
        kernels.apply_penalties(logits, **inputs)
        return logits

    def expected_row(self, values, row, **inputs):
        expected = values[None].clone()
        tables = {k: (v[row:row + 1] if k in PER_ROW else v).cpu() for k, v in inputs.items()}
        reference.apply_penalties(expected, **tables)
        return expected[0]


class _PenaltyStateCase(SlotTableCase):
    """The huge tensor is one of the two per-slot tables that the penalties kernel reads; the
    launch has one logits row per planted slot, each penalised from its own slot."""

    module = "kernels.penalties"
    seed = 0
    addressing = ""  # where a slot's table row starts, for failure messages

    def other_table(self, slots, device):
        """The table that is not the huge one, zeros for ``slots`` request slots."""
        raise NotImplementedError

    def state(self, huge, other):
        """``{"prompt_bin_mask": ..., "output_bin_counts": ...}`` from the two tables."""
        raise NotImplementedError

    def inputs(self, huge, run):
        device = run.device
        slots = run.slots
        source = torch.randn(VOCAB, generator=torch.Generator().manual_seed(self.seed))
        zeros = torch.zeros(len(slots), dtype=torch.int32, device=device)
        return {"source": source,
                "logits": source.expand(len(slots), -1).contiguous().to(device),
                "expanded_idx_mapping": torch.tensor(slots, dtype=torch.int32, device=device),
                "token_ids": zeros, "expanded_local_pos": zeros,
                **_penalty_tables(device, run.rows),
                **self.state(huge, self.other_table(run.rows, device))}

    def launch(self, kernels, huge, run, *, source, logits, **arguments):
        kernels.apply_penalties(logits, **arguments)
        return logits

    def expected_row(self, table_row, slot, *, source, **inputs):
        one_row = torch.zeros(1, dtype=torch.int32)
        expected = source[None].clone()
        reference.apply_penalties(expected, one_row, one_row, one_row,
                                  *(inputs[name][:1].cpu() for name in PENALTY_NAMES),
                                  **self.state(table_row[None], self.other_table(1, "cpu")))
        return expected[0]


class PenaltyCountsCase(_PenaltyStateCase):
    """The huge tensor is ``output_bin_counts``, one row of V counts per request slot."""

    name = "apply_penalties (output_bin_counts)"
    width = VOCAB
    id_range = (0, 3)
    seed = 3

    def extra_bytes(self, run):
        return run.rows * (VOCAB // 8 + 64)

    def other_table(self, slots, device):
        return torch.zeros(slots, VOCAB // 32, dtype=torch.int32, device=device)

    def state(self, huge, other):
        return {"prompt_bin_mask": other, "output_bin_counts": huge}


class PenaltyPromptMaskCase(_PenaltyStateCase):
    """The huge tensor is ``prompt_bin_mask``, one row of V / 32 bitset words per request slot.

    Past 2**31 words the slots outnumber what a real ``output_bin_counts`` (32 times larger)
    could hold, so the counts are one zero row broadcast to every slot (row stride 0).
    """

    name = "apply_penalties (prompt_bin_mask)"
    width = VOCAB // 32
    id_range = (-2**31, 2**31 - 1)
    seed = 4

    def other_table(self, slots, device):
        return torch.zeros(1, VOCAB, dtype=torch.int32, device=device).expand(slots, -1)

    def state(self, huge, other):
        return {"prompt_bin_mask": huge, "output_bin_counts": other}


class BincountHistoryCase(Case):
    """The huge tensor is the token history; counts and bitsets are rebuilt at a high slot."""

    name = "build_penalty_state (token history)"
    module = "kernels.penalties"
    width = 2**20  # max_model_len
    dtype = torch.int32
    vocab_size = 4096
    prompt = 1000
    tail = 3000  # tokens counted: the prompt, then the last `tail` positions minus the prompt

    def _slots(self, run):
        return (0, ) + run.check_rows

    def programs(self, run):
        return list(range(len(self._slots(run))))

    def random_row(self, generator, width):
        return torch.randint(0, self.vocab_size, (width, ), generator=generator,
                             dtype=torch.int32, device=generator.device)

    def extra_bytes(self, run):
        return run.rows * (self.vocab_size * 5 // 4 + 64)

    def prepare(self, history, run):
        device = run.device
        return {"idx_mapping": torch.tensor(self._slots(run), dtype=torch.int32, device=device),
                "all_token_ids": history,
                "prompt_len": torch.full((run.rows, ), self.prompt, dtype=torch.int32,
                                         device=device),
                "total_len": torch.full((run.rows, ), self.tail, dtype=torch.int32, device=device),
                "prompt_bin_mask": torch.zeros(run.rows, self.vocab_size // 32, dtype=torch.int32,
                                               device=device),
                "output_bin_counts": torch.zeros(run.rows, self.vocab_size, dtype=torch.int32,
                                                 device=device)}

    def launch(self, kernels, history, run, **inputs):
        kernels.build_penalty_state(**inputs)

    def check(self, produced, history, run, planted, **inputs):
        one = torch.zeros(1, dtype=torch.int32)
        expected = {"prompt_bin_mask": torch.zeros(1, self.vocab_size // 32, dtype=torch.int32),
                    "output_bin_counts": torch.zeros(1, self.vocab_size, dtype=torch.int32)}
        reference.build_penalty_state(one, planted[0][None], one + self.prompt, one + self.tail,
                                      **expected)
        for slot in self._slots(run):
            for name, table in expected.items():
                assert_rows_equal(inputs[name][slot], table[0],
                                  f"{name} of slot {slot} against the reference (history row "
                                  f"starts at slot * max_model_len)", slot, run.row_stride)


PENALTIES_CASE = PenaltiesLogitsCase()
PENALTY_COUNTS = PenaltyCountsCase()
PENALTY_PROMPT_MASK = PenaltyPromptMaskCase()
BINCOUNT_HISTORY = BincountHistoryCase()
CASES = [PENALTIES_CASE, PENALTY_COUNTS, PENALTY_PROMPT_MASK, BINCOUNT_HISTORY]
PENALTIES_SPEC = CompileSpec(
    "kernels.penalties:_penalties_kernel",
    {k: "*i32" for k in ("idx_mapping_ptr", "token_ids_ptr", "local_pos_ptr",
                         "prompt_bin_mask_ptr", "output_bin_counts_ptr")},
    num_warps=8, label="penalties")
COMPILE_SPECS = [
    CompileSpec("kernels.penalties:_bincount_kernel",
                {k: "*i32" for k in ("all_token_ids_ptr", "idx_mapping_ptr", "prompt_len_ptr",
                                     "total_len_ptr", "prompt_bin_mask_ptr",
                                     "output_bin_counts_ptr")}, label="bincount"),
    PENALTIES_SPEC,
]
# A per-entry gather from the prompt bitset once took 38 scalar loads.
STREAMING = [Streaming(PENALTIES_SPEC, ("logits_stride", "vocab_size", "prompt_bin_mask_stride",
                                        "output_bin_counts_stride"), scalar_load_limit=8)]


def benchmarks(batch, kernels, data):
    """Benchmark rows at ``batch`` rows for ``kernels`` (the module or its twin)."""
    logits, mapping, generator = data.logits, data.mapping, data.generator
    vocab = logits.size(1)
    counts = torch.randint(0, 3, (batch, vocab), dtype=torch.int32, device="cuda",
                           generator=generator)
    prompt_mask = torch.randint(-2**31, 2**31 - 1, (batch, vocab // 32), dtype=torch.int32,
                                device="cuda", generator=generator)
    penalty = [torch.full((batch, ), v, device="cuda") for v in (1.2, 0.3, 0.2)]
    zeros = torch.zeros(batch, dtype=torch.int32, device="cuda")
    return {"penalties": Benchmark(
        lambda **kw: kernels.apply_penalties(logits, mapping, zeros, zeros, *penalty, prompt_mask,
                                             counts, **kw),
        lambda: logits.sub_(0.3 * counts[mapping.long()] + 0.2 * (counts[mapping.long()] > 0)),
        data.restore, 3 * data.size, (46, 141, 569)),
        **{f"bincount, {length}-token history": _bincount_benchmark(batch, kernels, data, length)
           for length in (512, 8192)}}


def _bincount_benchmark(batch, kernels, data, length):
    """build_penalty_state over ``batch`` requests of ``length`` tokens (half prompt), against
    PyTorch's scatter into a zeroed count table and a zeroed bool prompt mask."""
    vocab = data.vocab
    history = torch.randint(0, vocab, (batch, length), dtype=torch.int32, device="cuda",
                            generator=data.generator)
    prompt_ids, output_ids = history[:, :length // 2].long(), history[:, length // 2:].long()
    ones = torch.ones_like(output_ids, dtype=torch.int32)
    lengths = {"prompt_len": torch.full((batch, ), length // 2, dtype=torch.int32, device="cuda"),
               "total_len": torch.full((batch, ), length, dtype=torch.int32, device="cuda")}
    tables = {"prompt_bin_mask": torch.zeros(batch, -(-vocab // 32), dtype=torch.int32,
                                             device="cuda"),
              "output_bin_counts": torch.zeros(batch, vocab, dtype=torch.int32, device="cuda")}
    prompt_seen = torch.zeros(batch, vocab, dtype=torch.bool, device="cuda")

    def torch_scatter():
        tables["output_bin_counts"].zero_().scatter_add_(1, output_ids, ones)
        prompt_seen.zero_().scatter_(1, prompt_ids, True)

    return Benchmark(
        lambda **kw: kernels.build_penalty_state(data.mapping, history, **lengths, **tables,
                                                 **kw),
        torch_scatter, None, batch * (vocab * 4 + vocab // 8 + length * 4))
