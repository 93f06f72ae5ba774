"""Huge cases for ``kernels.rejection``: requests whose logit rows start past 2**31 elements
(row starts loaded from ``cu_num_logits``), and draft logits ``[max_num_reqs, K, V]`` read at a
high request slot. Every request has K drafts and a bonus row; copies of request 0 (same rows,
slot and positions) must give request 0's tokens.

Both cases make every read matter. In the target-rows case the first two drafts are accepted
with a margin of one nat, so a log-sum-exp built from another row's block statistics rejects
them, and the third is rejected, so its row is resampled. In the draft-logits case the first
draft is accepted (target equal to draft) and the second rejected (its target probability far
below the draft's, in a target row that is not the draft's), so the resample reads the draft
row of the high slot, and what it reads changes the token.
"""

import math

import torch

from reference.rejection import rejection_sample as reference_rejection_sample
from reference.rejection import uniform64
from triton_overflow import Case, CompileSpec, assert_rows_equal
from triton_overflow.bench import Benchmark
from triton_overflow.engine.huge import landing_row

STEPS = 3
ROWS = STEPS + 1
VOCAB = 2**17
SEED = 77
ACCEPT_MARGIN = 1.0  # nats between log p and log u of an accepted draft
I32, I64 = "*i32", "*i64"


def _first_position():
    """A position whose first two uniforms allow an acceptance by ACCEPT_MARGIN nats."""
    base = 2**33
    while any(math.log(uniform64(SEED, base + j)) > -2 * ACCEPT_MARGIN for j in range(2)):
        base += ROWS
    return base


POSITION = _first_position()


def _spike(row, token, log_p):
    """Raise ``row[token]`` so that the token's log-probability in ``row`` is ``log_p``."""
    others = torch.cat([row[:token], row[token + 1:]]).double()
    rest = torch.logsumexp(others, 0).item()
    row[token] = log_p + rest - math.log(-math.expm1(log_p))


def _common(rows, slots, device):
    return {"cu_num_logits": torch.arange(0, rows + 1, ROWS, dtype=torch.int32, device=device),
            "pos": (torch.arange(rows, device=device) % ROWS) + POSITION,
            "expanded_local_pos": (torch.arange(rows, device=device) % ROWS).int(),
            "temperature": torch.full((slots, ), 0.9, device=device),
            "seed": torch.full((slots, ), SEED, dtype=torch.int64, device=device),
            "num_speculative_steps": STEPS}


def _reference(target, draft, inputs):
    cpu = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    return reference_rejection_sample(
        target, draft, cpu["draft_sampled"][:ROWS], torch.tensor([0, ROWS]), cpu["pos"][:ROWS],
        torch.zeros(1, dtype=torch.int32), None, None, cpu["temperature"][:1], cpu["seed"][:1],
        STEPS)


class RejectionTargetRowsCase(Case):
    """The huge tensor is the target logits; requests are ROWS rows each."""

    name = "rejection_sample (target rows)"
    module = "kernels.rejection"

    def _requests(self, run):
        return sorted({0} | {row // ROWS for row in run.check_rows})

    def programs(self, run):
        requests = self._requests(run)
        rows = [r * ROWS + j for r in requests for j in range(ROWS)]
        return {"_block_stats_kernel": rows, "_verify_kernel": requests,
                "_resample_kernel": requests, "_insert_kernel": requests}

    def extra_bytes(self, run):
        return run.rows * 96

    def prepare(self, target, run):
        if run.rows % ROWS:
            raise ValueError(f"{run.rows} rows do not split into requests of {ROWS}")
        device = run.device
        generator = torch.Generator().manual_seed(11)
        source = 2 * torch.randn(ROWS, VOCAB, generator=generator)
        proposals = torch.zeros(run.rows, dtype=torch.int64)
        proposals[1:ROWS] = torch.randint(0, VOCAB, (STEPS, ), generator=generator)
        # Drafts 0 and 1 accepted by ACCEPT_MARGIN nats; draft 2 the row's least likely token.
        for step in range(2):
            log_u = math.log(uniform64(SEED, POSITION + step))
            _spike(source[step], int(proposals[step + 1]), log_u + ACCEPT_MARGIN)
        proposals[STEPS] = source[STEPS - 1].argmin()
        target[:ROWS] = source.to(device)
        for request in self._requests(run)[1:]:
            target[request * ROWS:(request + 1) * ROWS] = target[:ROWS]
            for j in range(ROWS):
                landed = landing_row(request * ROWS + j, run.row_stride, run.rows)
                if landed is not None and landed >= ROWS:
                    target[landed] = (5 * torch.randn(VOCAB, generator=generator)).to(device)
        inputs = _common(run.rows, 1, device)
        for request in self._requests(run)[1:]:
            proposals[request * ROWS:(request + 1) * ROWS] = proposals[:ROWS]
        requests = run.rows // ROWS
        inputs.update(draft_sampled=proposals.to(device),
                      idx_mapping=torch.zeros(requests, dtype=torch.int32, device=device),
                      expanded_idx_mapping=torch.zeros(run.rows, dtype=torch.int32, device=device),
                      draft_logits=None, source=source)
        return inputs

    def launch(self, kernels, target, run, *, source, **inputs):
        return kernels.rejection_sample(target, **inputs, check_values=not run.interpreted)

    def check(self, produced, target, run, planted, *, source, **inputs):
        sampled, num_sampled = produced
        expected, expected_num = _reference(source, None, inputs)
        assert int(expected_num[0]) == 3, "the case plants two accepted drafts and a rejected one"
        for request in self._requests(run):
            assert_rows_equal(sampled[request], expected[0],
                              f"request {request} against the reference", request * ROWS,
                              run.row_stride)
            assert int(num_sampled[request]) == int(expected_num[0]), (request,
                                                                       num_sampled[request])


class RejectionDraftSlotsCase(Case):
    """The huge tensor is the draft logits, one row (K * V wide) per request slot."""

    name = "rejection_sample (draft logits)"
    module = "kernels.rejection"
    width = STEPS * VOCAB

    def _slots(self, run):
        return (0, ) + run.check_rows

    def programs(self, run):
        requests = list(range(len(self._slots(run))))
        return {"_block_stats_kernel": list(range(len(requests) * ROWS)),
                "_verify_kernel": requests, "_resample_kernel": requests,
                "_insert_kernel": requests}

    def extra_bytes(self, run):
        return run.rows * 64 + 64 * VOCAB

    def prepare(self, drafts, run):
        device = run.device
        generator = torch.Generator().manual_seed(12)
        slots = self._slots(run)
        source = 2 * torch.randn(ROWS, VOCAB, generator=generator)
        rows = ROWS * len(slots)
        inputs = _common(rows, run.rows, device)
        table = drafts.view(run.rows, STEPS, VOCAB)
        # The drafts propose slot 0's favourites. At step 0 the target equals the draft (p = q):
        # accepted. At step 1 the target is another row, in which the proposal is unlikely:
        # rejected, and resampled from max(p - q, 0), which reads the draft row of the slot and
        # differs from p. Rows a wrap can land on favour the proposals far more, so a wrong
        # draft read changes what is accepted, and a wrong draft row the resampled token.
        source = torch.cat([table[0].cpu(), source[STEPS:]])
        proposals = torch.zeros(rows, dtype=torch.int64)
        proposals[1:ROWS] = source[:STEPS].argmax(1)
        source[1] = 2 * torch.randn(VOCAB, generator=generator)
        source[1, int(proposals[2])] = -30.0
        for index in range(1, len(slots)):
            proposals[index * ROWS:(index + 1) * ROWS] = proposals[:ROWS]
        for slot in run.poison_rows:
            for near in (slot, slot + 1):
                table[near, :, proposals[1:ROWS].to(device)] = 50.0
        inputs.update(target=source.repeat(len(slots), 1).to(device), draft_logits=table,
                      draft_sampled=proposals.to(device),
                      idx_mapping=torch.tensor(slots, dtype=torch.int32, device=device),
                      expanded_idx_mapping=torch.tensor(slots, dtype=torch.int32,
                                                        device=device).repeat_interleave(ROWS))
        return inputs

    def launch(self, kernels, drafts, run, *, target, **inputs):
        return kernels.rejection_sample(target, **inputs, check_values=not run.interpreted)

    def check(self, produced, drafts, run, planted, *, target, **inputs):
        sampled, num_sampled = produced
        draft_row = planted[0].view(1, STEPS, VOCAB)
        expected, expected_num = _reference(target[:ROWS].cpu(), draft_row, inputs)
        assert int(expected_num[0]) == 2, "the case plants an accepted draft and a rejected one"
        for index, slot in enumerate(self._slots(run)):
            assert_rows_equal(sampled[index], expected[0],
                              f"request at slot {slot} against the reference (draft row starts "
                              f"at slot * K * V)", slot, run.row_stride)
            assert int(num_sampled[index]) == int(expected_num[0])


REJECTION_TARGET_ROWS = RejectionTargetRowsCase()
REJECTION_DRAFT_SLOTS = RejectionDraftSlotsCase()
CASES = [REJECTION_TARGET_ROWS, REJECTION_DRAFT_SLOTS]
# Each pointer whose dtype the signature planner would guess wrong is named with its own.
_VERIFY = {"sampled_ptr": I64, "num_sampled_ptr": I32, "target_argmax_ptr": I64,
           "target_ptr": "*fp32", "target_max_ptr": "*fp32", "draft_ptr": "*fp32",
           "rates_ptr": "*fp32", "draft_sampled_ptr": I64, "cu_num_logits_ptr": I32,
           "idx_mapping_ptr": I32, "seed_ptr": I64, "pos_ptr": I64}
_RESAMPLE = {"block_id_ptr": I64, "num_sampled_ptr": I32, "draft_sampled_ptr": I64,
             "cu_num_logits_ptr": I32, "expanded_idx_mapping_ptr": I32, "temperature_ptr": "*fp32",
             "seed_ptr": I64, "pos_ptr": I64}
_INSERT = {"sampled_ptr": I64, "num_sampled_ptr": I32, "block_id_ptr": I64,
           "block_value_ptr": "*fp32", "cu_num_logits_ptr": I32, "idx_mapping_ptr": I32,
           "temperature_ptr": "*fp32"}
COMPILE_SPECS = [
    CompileSpec("kernels.rejection:_block_stats_kernel",
                {"target_argmax_ptr": I64, "idx_mapping_ptr": I32, "local_pos_ptr": I32},
                num_warps=8, label="block stats"),
    CompileSpec("kernels.rejection:_verify_kernel", _VERIFY, num_warps=1, label="verify"),
    CompileSpec("kernels.rejection:_verify_kernel", {**_VERIFY, "draft_sampled_ptr": I32},
                {"HAS_DRAFT_LOGITS": False, "SYNTHETIC_MODE": True}, num_warps=1,
                label="verify synthetic"),
    CompileSpec("kernels.rejection:_resample_kernel", _RESAMPLE, label="resample"),
    CompileSpec("kernels.rejection:_resample_kernel", {**_RESAMPLE, "block_value_ptr": "*fp64"},
                {"HAS_DRAFT_LOGITS": False, "USE_FP64": True}, label="resample fp64 no draft"),
    CompileSpec("kernels.rejection:_insert_kernel", _INSERT, label="insert"),
    CompileSpec("kernels.rejection:_insert_kernel", {**_INSERT, "block_value_ptr": "*fp64"},
                label="insert fp64"),
]


def benchmarks(batch, kernels, data):
    """Benchmark rows at ``batch`` rows (B / 4 requests of K = 3 drafts and a bonus row)."""
    pristine, generator = data.pristine, data.generator
    vocab = pristine.size(1)
    requests = batch // ROWS
    slots = torch.arange(requests, dtype=torch.int32, device="cuda")
    arguments = dict(
        target_logits=pristine,
        draft_logits=torch.randn(requests, STEPS, vocab, device="cuda", generator=generator),
        draft_sampled=torch.randint(0, vocab, (batch, ), device="cuda", generator=generator),
        cu_num_logits=torch.arange(0, batch + 1, ROWS, dtype=torch.int32, device="cuda"),
        pos=torch.arange(batch, dtype=torch.int64, device="cuda"), idx_mapping=slots,
        expanded_idx_mapping=slots.repeat_interleave(ROWS),
        expanded_local_pos=(torch.arange(batch, device="cuda") % ROWS).int(),
        temperature=torch.full((requests, ), 0.7, device="cuda"),
        seed=torch.arange(requests, dtype=torch.int64, device="cuda"),
        num_speculative_steps=STEPS)
    return {"rejection_sample, draft logits, K=3": Benchmark(
        lambda **kw: kernels.rejection_sample(**arguments, **kw), None, None,
        data.size + requests * STEPS * vocab * 4, (55, 152, 522))}
