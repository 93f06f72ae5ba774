"""Huge cases for vLLM's own Triton sampling kernels, before and after vLLM PR #46560.

The copies are written by ``fetch.py`` (see README.md): ``vllm_sampler_before.<file>`` (the
parent of the fix) and ``vllm_sampler_after.<file>`` (the fix). Every case class below is one
vLLM launcher, called as vLLM calls it, with its reference computed here in float64 / PyTorch;
``_pair`` makes two case objects of each class, one per copy:

* before the fix, every case is ``OVERFLOWS`` (its kernels multiply an int32 row index by a
  stride);
* after the fix, a case is ``SAFE`` where the fix widened every product its launch reaches, and
  stays ``OVERFLOWS`` where the fix left one in int32 (``after=OVERFLOWS`` below: per-request
  tables reached through a slot index loaded as int32, and the bincount kernel, which the fix
  did not touch).

Only the public case API is used: ``RowsCase`` (the huge tensor is the logits, launch row r is
logits row r) and ``SlotTableCase`` (the huge tensor is a per-request table read at the slots of
``run.slots``, one launch row each), with ``inputs``, ``launch`` and ``expected_row`` /
``check_row``.
"""

import math

import numpy as np
import torch

from triton_overflow import OVERFLOWS, SAFE, RowsCase, SlotTableCase, philox

BEFORE, AFTER = "vllm_sampler_before", "vllm_sampler_after"
TEMPERATURE = 0.7
SEED = 1234567
POSITION = 2**33 + 5  # a position past 2**32, so both Philox counter words are used
I32, I64 = torch.int32, torch.int64


def _full(rows, value, dtype=torch.float32, device="cpu"):
    return torch.full((rows, ), value, dtype=dtype, device=device)


def _zeros(rows, device, dtype=I32):
    return torch.zeros(rows, dtype=dtype, device=device)


# --- the Gumbel noise of gumbel.py, from the suite's Philox replay -------------------------

def gumbel_noise(seed, pos, vocab):
    """gumbel_block_argmax's fp32 noise for a row with request seed ``seed`` at position
    ``pos``, in float64: ``-log(-log1p(-u))`` with ``u = rand(randint(seed, pos), token)``."""
    gumbel_seed = int(philox.randint(seed, np.array([pos], dtype=np.int64))[0])
    u = np.maximum(philox.rand(gumbel_seed, np.arange(vocab, dtype=np.int32)),
                   np.float32(4.6566127342e-10))
    return torch.from_numpy(-np.log(-np.log1p(-u.astype(np.float64))))


def assert_best_score(token, scores, what, tolerance=1e-4):
    """``token`` has the best ``scores`` entry, within fp32 rounding of the kernel's sum."""
    token = int(token)
    best = float(scores.max())
    if not 0 <= token < scores.numel() or float(scores[token]) < best - tolerance:
        got = float(scores[token]) if 0 <= token < scores.numel() else float("nan")
        raise AssertionError(f"{what}: token {token} scores {got}, the best is "
                             f"{int(scores.argmax())} with {best}")


# --- gumbel.py ------------------------------------------------------------------------------

class TemperatureCase(RowsCase):
    name = "apply_temperature"
    module = "gumbel"

    def inputs(self, run):
        return {"mapping": _zeros(run.rows, run.device),
                "temperature": torch.tensor([TEMPERATURE], device=run.device)}

    def launch(self, kernels, logits, run, *, mapping, temperature):
        kernels.apply_temperature(logits, mapping, temperature)
        return logits

    def expected_row(self, values, row, **inputs):
        return values.double() / TEMPERATURE


class GumbelSampleCase(RowsCase):
    """Temperature 0.7: the token is the best of logits / T plus the replayed Gumbel noise."""

    name = "gumbel_sample"
    module = "gumbel"

    def inputs(self, run):
        return {"mapping": _zeros(run.rows, run.device),
                "temperature": torch.tensor([TEMPERATURE], device=run.device),
                "seed": torch.tensor([SEED], dtype=I64, device=run.device),
                "pos": _full(run.rows, POSITION, I64, run.device)}

    def launch(self, kernels, logits, run, *, mapping, temperature, seed, pos):
        return kernels.gumbel_sample(logits, mapping, temperature, seed, pos, True)

    def check_row(self, actual, values, row, what, **inputs):
        scores = values.double() / TEMPERATURE + gumbel_noise(SEED, POSITION, values.numel())
        assert_best_score(actual, scores, what)


class GumbelSideOutputCase(SlotTableCase):
    """The huge tensor is the processed-logits side output ``[max_num_reqs, K, V]`` (K * V wide
    a slot); each launch row samples one small logits row and writes column 1 of its slot."""

    name = "gumbel_sample (processed logits side output)"
    module = "gumbel"
    steps, vocab_size, column = 3, 2**17, 1
    # The deployment envelope the static tier judges `col * vocab_size` at: a column of the
    # side output is a draft step (K <= 15), the vocab at most 2**18.
    limits = {"processed_logits_col_ptr": 15, "vocab_size": 2**18}
    width = steps * vocab_size
    dtype = torch.float32

    def inputs(self, table, run):
        device, rows = run.device, len(run.slots)
        source = torch.randn(self.vocab_size, generator=torch.Generator().manual_seed(5))
        return {"source": source,
                "logits": source.expand(rows, -1).contiguous().to(device),
                "mapping": torch.tensor(run.slots, dtype=I32, device=device),
                "temperature": _full(run.rows, TEMPERATURE, device=device),
                "seed": _full(run.rows, SEED, I64, device),
                "pos": _full(rows, POSITION, I64, device),
                "col": torch.tensor(self.column, dtype=I32, device=device)}

    def launch(self, kernels, table, run, *, source, logits, mapping, temperature, seed, pos,
               col):
        side = table.view(run.rows, self.steps, self.vocab_size)
        kernels.gumbel_sample(logits, mapping, temperature, seed, pos, True, side, col)
        return table[mapping.long()]

    def expected_row(self, table_row, slot, *, source, **inputs):
        expected = table_row.double().clone()
        start = self.column * self.vocab_size
        expected[start:start + self.vocab_size] = source.double() / TEMPERATURE
        return expected


# --- min_p.py -------------------------------------------------------------------------------

class MinPCase(RowsCase):
    name = "apply_min_p"
    module = "min_p"
    min_p = 0.05

    def inputs(self, run):
        return {"mapping": _zeros(run.rows, run.device),
                "min_p": torch.tensor([self.min_p], device=run.device)}

    def launch(self, kernels, logits, run, *, mapping, min_p):
        kernels.apply_min_p(logits, mapping, min_p)
        return logits

    def check_row(self, actual, values, row, what, **inputs):
        values, actual = values.double(), actual.cpu().double()
        threshold = values.max() + math.log(self.min_p)
        expected = torch.where(values < threshold, float("-inf"), values)
        # A logit within fp32 rounding of the threshold may go either way.
        either = (values - threshold).abs() <= 1e-5 * (1 + threshold.abs())
        either &= (actual == values) | (actual == float("-inf"))
        self.compare(torch.where(either, expected, actual), expected, what, row)


# --- penalties.py ---------------------------------------------------------------------------

VOCAB = 2**17
PENALTIES = (1.3, 0.4, 0.25)  # repetition, frequency, presence


def penalised(values, counts, prompt_words, penalties=PENALTIES):
    """One logits row after _penalties_kernel with no draft tokens, in float64."""
    repetition, frequency, presence = penalties
    values = values.double().clone()
    counts = counts.long()
    words = prompt_words.to(torch.int64) & 0xFFFFFFFF
    bits = ((words[:, None] >> torch.arange(32)) & 1).reshape(-1)[:values.numel()].bool()
    seen = counts > 0
    if repetition != 1.0:
        scale = torch.where(bits | seen, repetition, 1.0).double()
        values *= torch.where(values > 0, 1.0 / scale, scale)
    return values - frequency * counts - presence * seen


def _penalty_tables(slots, device):
    return [_full(slots, value, device=device) for value in PENALTIES]


class PenaltiesCase(RowsCase):
    name = "apply_penalties"
    module = "penalties"

    def inputs(self, run):
        device = run.device
        counts = torch.zeros(1, VOCAB, dtype=I32)
        counts[0, ::97] = 2
        words = torch.zeros(1, VOCAB // 32, dtype=I32)
        words[0, ::5] = 0x55555555
        zeros = _zeros(run.rows, device)
        return {"mapping": zeros, "token_ids": zeros, "local_pos": zeros,
                "penalties": _penalty_tables(1, device), "prompt_bin_mask": words.to(device),
                "output_bin_counts": counts.to(device)}

    def launch(self, kernels, logits, run, *, mapping, token_ids, local_pos, penalties,
               prompt_bin_mask, output_bin_counts):
        kernels.apply_penalties(logits, mapping, token_ids, local_pos, *penalties,
                                prompt_bin_mask, output_bin_counts)
        return logits

    def expected_row(self, values, row, *, prompt_bin_mask, output_bin_counts, **inputs):
        return penalised(values, output_bin_counts[0].cpu(), prompt_bin_mask[0].cpu())


class _PenaltyTableCase(SlotTableCase):
    """One of the two per-request tables _penalties_kernel reads at ``req_state_idx`` is huge;
    each launch row is a copy of one logits row, penalised from its own slot."""

    module = "penalties"
    seed = 0

    def tables(self, huge, run):
        """``(prompt_bin_mask, output_bin_counts)`` with ``huge`` as one of them."""
        raise NotImplementedError

    def inputs(self, table, run):
        device, rows = run.device, len(run.slots)
        source = torch.randn(VOCAB, generator=torch.Generator().manual_seed(self.seed))
        zeros = _zeros(rows, device)
        prompt_bin_mask, output_bin_counts = self.tables(table, run)
        return {"source": source, "logits": source.expand(rows, -1).contiguous().to(device),
                "mapping": torch.tensor(run.slots, dtype=I32, device=device),
                "token_ids": zeros, "local_pos": zeros,
                "penalties": _penalty_tables(run.rows, device),
                "prompt_bin_mask": prompt_bin_mask, "output_bin_counts": output_bin_counts}

    def launch(self, kernels, table, run, *, source, logits, mapping, token_ids, local_pos,
               penalties, prompt_bin_mask, output_bin_counts):
        kernels.apply_penalties(logits, mapping, token_ids, local_pos, *penalties,
                                prompt_bin_mask, output_bin_counts)
        return logits


class PenaltyCountsCase(_PenaltyTableCase):
    """The huge tensor is ``output_bin_counts [max_num_reqs, V]``; the prompt bitset is one zero
    row for every slot (stride 0)."""

    name = "apply_penalties (output_bin_counts)"
    width = VOCAB
    id_range = (0, 3)
    seed = 3

    def tables(self, huge, run):
        words = torch.zeros(1, VOCAB // 32, dtype=I32, device=run.device)
        return words.expand(run.rows, -1), huge

    def expected_row(self, table_row, slot, *, source, **inputs):
        return penalised(source, table_row, torch.zeros(VOCAB // 32, dtype=I32))


class PenaltyPromptMaskCase(_PenaltyTableCase):
    """The huge tensor is ``prompt_bin_mask [max_num_reqs, V / 32]``; the counts are one zero
    row for every slot (stride 0)."""

    name = "apply_penalties (prompt_bin_mask)"
    width = VOCAB // 32
    id_range = (-2**31, 2**31 - 1)
    seed = 4

    def tables(self, huge, run):
        counts = torch.zeros(1, VOCAB, dtype=I32, device=run.device)
        return huge, counts.expand(run.rows, -1)

    def expected_row(self, table_row, slot, *, source, **inputs):
        return penalised(source, torch.zeros(VOCAB, dtype=I32), table_row)


class BincountCase(SlotTableCase):
    """The huge tensor is the token history ``all_token_ids [max_num_reqs, max_model_len]``;
    bincount rebuilds ``prompt_bin_mask`` and ``output_bin_counts`` of the launch's slots."""

    name = "bincount (token history)"
    module = "penalties"
    width = 2**20  # max_model_len
    vocab_size = 1024
    id_range = (0, vocab_size - 1)  # poison rows are planted + 1: still token ids
    prompt, prefill = 1000, 3000

    def inputs(self, table, run):
        device = run.device
        return {"mapping": torch.tensor(run.slots, dtype=I32, device=device),
                "prompt_len": _full(run.rows, self.prompt, I32, device),
                "prefill_len": _full(run.rows, self.prefill, I32, device),
                "prompt_bin_mask": torch.zeros(run.rows, self.vocab_size // 32, dtype=I32,
                                               device=device),
                "output_bin_counts": torch.zeros(run.rows, self.vocab_size, dtype=I32,
                                                 device=device)}

    def launch(self, kernels, table, run, *, mapping, prompt_len, prefill_len, prompt_bin_mask,
               output_bin_counts):
        kernels.bincount(mapping, table, prompt_len, prefill_len, prompt_bin_mask,
                         output_bin_counts, self.prefill)
        slots = mapping.long()
        return torch.cat([output_bin_counts[slots], prompt_bin_mask[slots]], dim=1)

    def expected_row(self, table_row, slot, **inputs):
        tokens = table_row.long()
        counts = torch.bincount(tokens[self.prompt:self.prefill], minlength=self.vocab_size)
        seen = torch.zeros(self.vocab_size, dtype=torch.int64)
        seen[tokens[:self.prompt]] = 1
        words = (seen.view(-1, 32) << torch.arange(32)).sum(dim=1)
        words = torch.where(words >= 2**31, words - 2**32, words)
        return torch.cat([counts, words]).to(I32)


# --- bad_words.py ---------------------------------------------------------------------------

HISTORY = (4, 8, 15)  # the output tokens of the logits-rows case
WORDS = ((8, 15, 42), (15, 77), (99, 100, 101), (123, ))


def banned(words, history):
    """The tokens _bad_words_kernel sets to -inf, for output tokens ``history`` and no draft."""
    history = list(history)
    out = []
    for word in words:
        prefix = list(word[:-1])
        if len(prefix) <= len(history) and history[len(history) - len(prefix):] == prefix:
            out.append(word[-1])
    return out


def _word_tables(words, slots, device):
    flat = [t for word in words for t in word]
    offsets = [0]
    for word in words:
        offsets.append(offsets[-1] + len(word))
    return (torch.tensor([flat], dtype=I32, device=device).expand(slots, -1).contiguous(),
            torch.tensor([offsets], dtype=I32, device=device).expand(slots, -1).contiguous(),
            _full(slots, len(words), I32, device))


class BadWordsCase(RowsCase):
    name = "apply_bad_words"
    module = "bad_words"

    def inputs(self, run):
        device = run.device
        token_ids, offsets, count = _word_tables(WORDS, 1, device)
        zeros = _zeros(run.rows, device)
        return {"mapping": zeros, "token_ids": token_ids, "offsets": offsets, "count": count,
                "history": torch.tensor([HISTORY], dtype=I32, device=device),
                "prompt_len": _zeros(1, device),
                "total_len": torch.tensor([len(HISTORY)], dtype=I32, device=device),
                "input_ids": zeros, "local_pos": zeros}

    def launch(self, kernels, logits, run, *, mapping, token_ids, offsets, count, history,
               prompt_len, total_len, input_ids, local_pos):
        kernels.apply_bad_words(logits, mapping, token_ids, offsets, count, history, prompt_len,
                                total_len, input_ids, local_pos, len(WORDS))
        return logits

    def expected_row(self, values, row, **inputs):
        expected = values.double().clone()
        expected[banned(WORDS, HISTORY)] = float("-inf")
        return expected


# Every 5-token prefix of 0s and 1s, each ending in its own token: exactly one matches the last
# five tokens of a binary history, so the banned token spells them.
PREFIX_WORDS = tuple(tuple((code >> (4 - i)) & 1 for i in range(5)) + (100 + code, )
                     for code in range(32))


class BadWordsHistoryCase(SlotTableCase):
    """The huge tensor is the token history ``all_token_ids [max_num_reqs, max_model_len]``
    (binary tokens); 32 bad words, one of which matches each history's end."""

    name = "apply_bad_words (token history)"
    module = "bad_words"
    width = 2**20  # max_model_len
    vocab_size = 1024
    id_range = (0, 2)

    def inputs(self, table, run):
        device, rows = run.device, len(run.slots)
        token_ids, offsets, count = _word_tables(PREFIX_WORDS, run.rows, device)
        zeros = _zeros(rows, device)
        return {"logits": torch.zeros(rows, self.vocab_size, device=device),
                "mapping": torch.tensor(run.slots, dtype=I32, device=device),
                "token_ids": token_ids, "offsets": offsets, "count": count,
                "prompt_len": _zeros(run.rows, device),
                "total_len": _full(run.rows, self.width, I32, device),
                "input_ids": zeros, "local_pos": zeros}

    def launch(self, kernels, table, run, *, logits, mapping, token_ids, offsets, count,
               prompt_len, total_len, input_ids, local_pos):
        kernels.apply_bad_words(logits, mapping, token_ids, offsets, count, table, prompt_len,
                                total_len, input_ids, local_pos, len(PREFIX_WORDS))
        return logits

    def expected_row(self, table_row, slot, **inputs):
        expected = torch.zeros(self.vocab_size, dtype=torch.float64)
        expected[banned(PREFIX_WORDS, table_row[-5:].tolist())] = float("-inf")
        return expected


class BadWordTokensCase(SlotTableCase):
    """The huge tensor is ``bad_word_token_ids [max_num_reqs, 1024]``: each slot bans 128
    single-token words, the first 128 entries of its row."""

    name = "apply_bad_words (bad-word tokens table)"
    module = "bad_words"
    width = 1024
    vocab_size = 4096
    words = 128
    id_range = (0, vocab_size - 1)  # poison rows are planted + 1: still token ids

    def inputs(self, table, run):
        device, rows = run.device, len(run.slots)
        zeros = _zeros(rows, device)
        offsets = torch.arange(self.words + 1, dtype=I32, device=device)
        return {"logits": torch.zeros(rows, self.vocab_size, device=device),
                "mapping": torch.tensor(run.slots, dtype=I32, device=device),
                "offsets": offsets.expand(run.rows, -1).contiguous(),
                "count": _full(run.rows, self.words, I32, device),
                "history": torch.tensor([HISTORY], dtype=I32,
                                        device=device).expand(run.rows, -1).contiguous(),
                "prompt_len": _zeros(run.rows, device),
                "total_len": _full(run.rows, len(HISTORY), I32, device),
                "input_ids": zeros, "local_pos": zeros}

    def launch(self, kernels, table, run, *, logits, mapping, offsets, count, history,
               prompt_len, total_len, input_ids, local_pos):
        kernels.apply_bad_words(logits, mapping, table, offsets, count, history, prompt_len,
                                total_len, input_ids, local_pos, self.words)
        return logits

    def expected_row(self, table_row, slot, **inputs):
        expected = torch.zeros(self.vocab_size, dtype=torch.float64)
        expected[table_row[:self.words].long()] = float("-inf")
        return expected


# --- logit_bias.py --------------------------------------------------------------------------

ALLOWED = (3, 70000, 131071, 5, 9)
BIASED = (70000, 5, 17)
BIAS = (0.5, -2.0, 4.0)
STOPPED = (9, 3)
MIN_LEN = 10


def biased(values, allowed, bias_ids, bias, stop_ids, pos, min_len):
    """One logits row after _bias_kernel, in float64."""
    values = values.double()
    out = values.clone()
    if len(allowed):
        out = torch.full_like(values, float("-inf"))
        out[list(allowed)] = values[list(allowed)]
    for token, amount in zip(bias_ids, bias):
        out[token] += amount
    if len(stop_ids) and pos + 1 < min_len:
        out[list(stop_ids)] = float("-inf")
    return out


class LogitBiasCase(RowsCase):
    name = "apply_logit_bias"
    module = "logit_bias"

    def inputs(self, run):
        device = run.device

        def table(ids, dtype=I32):
            return torch.tensor([ids], dtype=dtype, device=device)

        def count(ids):
            return torch.tensor([len(ids)], dtype=I32, device=device)

        return {"mapping": _zeros(run.rows, device), "pos": _zeros(run.rows, device, I64),
                "num_allowed": count(ALLOWED), "allowed": table(ALLOWED),
                "num_bias": count(BIASED), "bias_ids": table(BIASED),
                "bias": table(BIAS, torch.float32),
                "min_lens": torch.tensor([MIN_LEN], dtype=I32, device=device),
                "num_stop": count(STOPPED), "stop_ids": table(STOPPED)}

    def launch(self, kernels, logits, run, *, mapping, pos, num_allowed, allowed, num_bias,
               bias_ids, bias, min_lens, num_stop, stop_ids):
        kernels.apply_logit_bias(logits, mapping, pos, num_allowed, allowed, num_bias, bias_ids,
                                 bias, min_lens, num_stop, stop_ids)
        return logits

    def expected_row(self, values, row, **inputs):
        return biased(values, ALLOWED, BIASED, BIAS, STOPPED, 0, MIN_LEN)


class AllowedIdsTableCase(SlotTableCase):
    """The huge tensor is ``allowed_token_ids [max_num_reqs, 1024]``; each slot allows the first
    16 ids of its row."""

    name = "apply_logit_bias (allowed ids table)"
    module = "logit_bias"
    width = 1024
    vocab_size = 4096
    allowed = 16
    id_range = (0, vocab_size - 1)  # poison rows are planted + 1: still token ids

    def inputs(self, table, run):
        device, rows, slots = run.device, len(run.slots), run.rows
        source = torch.randn(self.vocab_size, generator=torch.Generator().manual_seed(4))
        column = torch.zeros(slots, 1, dtype=I32, device=device)
        return {"source": source,
                "logits": source.expand(rows, -1).contiguous().to(device),
                "mapping": torch.tensor(run.slots, dtype=I32, device=device),
                "pos": _zeros(rows, device, I64),
                "num_allowed": _full(slots, self.allowed, I32, device),
                "num_bias": _zeros(slots, device), "bias_ids": column,
                "bias": torch.zeros(slots, 1, device=device), "min_lens": _zeros(slots, device),
                "num_stop": _zeros(slots, device), "stop_ids": column}

    def launch(self, kernels, table, run, *, source, logits, mapping, pos, num_allowed, num_bias,
               bias_ids, bias, min_lens, num_stop, stop_ids):
        kernels.apply_logit_bias(logits, mapping, pos, num_allowed, table, num_bias, bias_ids,
                                 bias, min_lens, num_stop, stop_ids)
        return logits

    def expected_row(self, table_row, slot, *, source, **inputs):
        return biased(source, table_row[:self.allowed].tolist(), (), (), (), 0, 0)


# --- logprob.py -----------------------------------------------------------------------------

TOKEN_IDS = (7, 0, 2**17 - 1)  # an interior, the first and the last vocab entry


class TokenLogprobsCase(RowsCase):
    name = "compute_token_logprobs"
    module = "logprob"

    def inputs(self, run):
        ids = torch.tensor(TOKEN_IDS, dtype=I64, device=run.device)
        return {"ids": ids.expand(run.rows, -1).contiguous()}

    def launch(self, kernels, logits, run, *, ids):
        return kernels.compute_token_logprobs(logits, ids)

    def expected_row(self, values, row, **inputs):
        return torch.log_softmax(values.double(), dim=0)[list(TOKEN_IDS)]


class TopkLogprobsCase(RowsCase):
    """compute_topk_logprobs with no top-k columns: the sampled token's logprob (the softmax
    kernel) and its rank (the ranks kernel)."""

    name = "compute_topk_logprobs (sampled logprob and rank)"
    module = "logprob"
    sampled = 5

    def inputs(self, run):
        return {"sampled": _full(run.rows, self.sampled, I64, run.device)}

    def launch(self, kernels, logits, run, *, sampled):
        out = kernels.compute_topk_logprobs(logits, 0, sampled)
        return torch.cat([out.logprobs.double(), out.selected_token_ranks[:, None].double()], 1)

    def check_row(self, actual, values, row, what, **inputs):
        values = values.double()
        logprob = torch.log_softmax(values, dim=0)[self.sampled]
        self.compare(actual[:1], logprob[None], f"{what}: logprob of the sampled token", row)
        rank = int((values >= values[self.sampled]).sum())
        if float(actual[1]) != rank:
            raise AssertionError(f"{what}: rank {float(actual[1])}, expected {rank}")


# --- topk_topp_triton.py (vllm/v1/sample/ops) -----------------------------------------------

class TopKTopPCase(RowsCase):
    """k = 50, then p = 0.9 over the softmax of the 50 kept logits (the launcher sizes its
    persistent grid from the device's multiprocessor count)."""

    name = "apply_top_k_top_p_triton"
    module = "topk_topp_triton"
    top_k, top_p = 50, 0.9

    def inputs(self, run):
        return {"k": _full(run.rows, self.top_k, I32, run.device),
                "p": _full(run.rows, self.top_p, device=run.device)}

    def launch(self, kernels, logits, run, *, k, p):
        return kernels.apply_top_k_top_p_triton(logits, k, p)

    def check_row(self, actual, values, row, what, **inputs):
        values, actual = values.double(), actual.cpu().double()
        kept = actual > float("-inf")
        if not torch.equal(actual[kept], values[kept]):
            raise AssertionError(f"{what}: a kept logit changed")
        order = values.argsort(descending=True)
        count = int(kept.sum())
        if not bool(kept[order[:count]].all()):
            raise AssertionError(f"{what}: the {count} kept logits are not the largest")
        # Top-p over the top-k: the smallest prefix whose probability reaches p; a prefix
        # within 1e-4 of p may end one token either side.
        top = values[order[:self.top_k]]
        cumulative = torch.softmax(top, dim=0).cumsum(dim=0)
        expected = int((cumulative < self.top_p).sum()) + 1
        near = (cumulative[max(count - 2, 0):count + 1] - self.top_p).abs().min()
        if count != min(expected, self.top_k) and not (abs(count - expected) == 1
                                                       and float(near) < 1e-4):
            raise AssertionError(f"{what}: {count} logits kept, expected {expected} (top-k "
                                 f"{self.top_k}, then top-p {self.top_p})")


# --- rejection_sampler_utils.py (vllm/v1/worker/gpu/spec_decode) ---------------------------

class RejectionBonusCase(RowsCase):
    """rejection_sample with no drafts: every request is one bonus row, which the resample
    kernel samples from the target logits with the request's Gumbel noise (temperature already
    applied upstream); the block statistics and the rejection loop have nothing to do."""

    name = "rejection_sample (bonus rows)"
    module = "rejection_sampler_utils"
    temperature = 0.9
    # The envelope of the per-request products (`req_idx * sampled_stride`, ...): up to 16384
    # requests (the grid), K + 1 <= 16 tokens each, up to 2048 vocab blocks a request.
    limits = {"rows": 16384, "sampled_stride": 16, "resampled_local_argmax_stride": 2048,
              "resampled_local_max_stride": 2048}

    def inputs(self, run):
        device, rows = run.device, run.rows
        return {"draft_sampled": _zeros(rows, device, I64),
                "cu_num_logits": torch.arange(rows + 1, dtype=I32, device=device),
                "pos": _full(rows, POSITION, I64, device),
                "idx_mapping": _zeros(rows, device), "expanded_idx_mapping": _zeros(rows, device),
                "expanded_local_pos": _zeros(rows, device),
                "temperature": torch.tensor([self.temperature], device=device),
                "seed": torch.tensor([SEED], dtype=I64, device=device)}

    def launch(self, kernels, logits, run, *, draft_sampled, cu_num_logits, pos, idx_mapping,
               expanded_idx_mapping, expanded_local_pos, temperature, seed):
        sampled, num_sampled = kernels.rejection_sample(
            logits, None, draft_sampled, cu_num_logits, pos, idx_mapping, expanded_idx_mapping,
            expanded_local_pos, temperature, seed, 0)
        return torch.cat([sampled, num_sampled[:, None].long()], dim=1)

    def check_row(self, actual, values, row, what, **inputs):
        if int(actual[1]) != 1:
            raise AssertionError(f"{what}: {int(actual[1])} tokens sampled, expected 1")
        scores = values.double() + gumbel_noise(SEED, POSITION, values.numel())
        assert_best_score(actual[0], scores, what)


# --- the case objects -----------------------------------------------------------------------

def _pair(case_class, after=SAFE):
    """Two objects of ``case_class``: on the copy before the fix (it overflows) and on the copy
    after it (``after``: SAFE, or OVERFLOWS where the fix left the product in int32)."""
    objects = []
    for package, side, expect in ((BEFORE, "before", OVERFLOWS), (AFTER, "after", after)):
        case = case_class()
        case.name = f"{case_class.name} [{side}]"
        case.module = f"{package}.{case_class.module}"
        case.expect = expect
        objects.append(case)
    return objects


TEMPERATURE_BEFORE, TEMPERATURE_AFTER = _pair(TemperatureCase)
GUMBEL_SAMPLE_BEFORE, GUMBEL_SAMPLE_AFTER = _pair(GumbelSampleCase)
GUMBEL_SIDE_OUTPUT_BEFORE, GUMBEL_SIDE_OUTPUT_AFTER = _pair(GumbelSideOutputCase)
MIN_P_BEFORE, MIN_P_AFTER = _pair(MinPCase)
PENALTIES_BEFORE, PENALTIES_AFTER = _pair(PenaltiesCase)
# The fix widened token_idx only: req_state_idx * <table stride> stays int32.
PENALTY_COUNTS_BEFORE, PENALTY_COUNTS_AFTER = _pair(PenaltyCountsCase, after=OVERFLOWS)
PENALTY_PROMPT_MASK_BEFORE, PENALTY_PROMPT_MASK_AFTER = _pair(PenaltyPromptMaskCase,
                                                              after=OVERFLOWS)
BINCOUNT_BEFORE, BINCOUNT_AFTER = _pair(BincountCase, after=OVERFLOWS)  # not touched by the fix
BAD_WORDS_BEFORE, BAD_WORDS_AFTER = _pair(BadWordsCase)
BAD_WORDS_HISTORY_BEFORE, BAD_WORDS_HISTORY_AFTER = _pair(BadWordsHistoryCase, after=OVERFLOWS)
BAD_WORD_TOKENS_BEFORE, BAD_WORD_TOKENS_AFTER = _pair(BadWordTokensCase, after=OVERFLOWS)
LOGIT_BIAS_BEFORE, LOGIT_BIAS_AFTER = _pair(LogitBiasCase)
ALLOWED_IDS_BEFORE, ALLOWED_IDS_AFTER = _pair(AllowedIdsTableCase, after=OVERFLOWS)
TOKEN_LOGPROBS_BEFORE, TOKEN_LOGPROBS_AFTER = _pair(TokenLogprobsCase)
TOPK_LOGPROBS_BEFORE, TOPK_LOGPROBS_AFTER = _pair(TopkLogprobsCase)
TOP_K_TOP_P_BEFORE, TOP_K_TOP_P_AFTER = _pair(TopKTopPCase)
REJECTION_BONUS_BEFORE, REJECTION_BONUS_AFTER = _pair(RejectionBonusCase)

BEFORE_CASES = [value for name, value in list(globals().items()) if name.endswith("_BEFORE")]
AFTER_CASES = [value for name, value in list(globals().items()) if name.endswith("_AFTER")]
