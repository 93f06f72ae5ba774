"""Huge cases for ``kernels.rejection``: requests whose logit rows start past 2**31 elements
(row starts loaded from ``cu_num_logits``), and draft logits ``[max_num_reqs, K, V]`` read at a
high request slot. Every request has K drafts and a bonus row; copies of request 0 (same rows,
slot and positions) must give request 0's tokens."""

import torch

from harness.compare import assert_rows_equal
from harness.huge import landing_row
from reference.rejection import rejection_sample as reference_rejection_sample

STEPS = 3
ROWS = STEPS + 1
VOCAB = 2**17


def _common(rows, slots, device, generator):
    counts = rows // ROWS
    cu = torch.arange(0, rows + 1, ROWS, dtype=torch.int32, device=device)
    return {"cu_num_logits": cu,
            "pos": (torch.arange(rows, device=device) % ROWS) + 2**33,
            "expanded_local_pos": (torch.arange(rows, device=device) % ROWS).int(),
            "temperature": torch.full((slots, ), 0.9, device=device),
            "seed": torch.full((slots, ), 77, dtype=torch.int64, device=device),
            "num_speculative_steps": STEPS}, counts


class RejectionTargetRowsCase:
    """The huge tensor is the target logits; requests are ROWS rows each."""

    name = "rejection_sample (target rows)"
    module = "kernels.rejection"
    vocab = VOCAB
    dtype = torch.float32

    def _requests(self, layout):
        return sorted({0} | {row // ROWS for row in layout.check_rows})

    def programs(self, layout):
        requests = self._requests(layout)
        rows = [r * ROWS + j for r in requests for j in range(ROWS)]
        return {"_block_stats_kernel": rows, "_verify_kernel": requests,
                "_resample_kernel": requests, "_insert_kernel": requests}

    def extra_bytes(self, layout):
        return layout.rows * 96

    def prepare(self, target, layout):
        if layout.rows % ROWS:
            raise ValueError(f"{layout.rows} rows do not split into requests of {ROWS}")
        device = target.device
        generator = torch.Generator().manual_seed(11)
        source = 2 * torch.randn(ROWS, VOCAB, generator=generator)
        target[:ROWS] = source.to(device)
        for request in self._requests(layout)[1:]:
            target[request * ROWS:(request + 1) * ROWS] = target[:ROWS]
            for j in range(ROWS):
                landed = landing_row(request * ROWS + j, layout.row_stride, layout.rows)
                if landed is not None and landed >= ROWS:
                    target[landed] = (5 * torch.randn(VOCAB, generator=generator)).to(device)
        inputs, requests = _common(layout.rows, 1, device, generator)
        proposals = torch.zeros(layout.rows, dtype=torch.int64)
        proposals[1:ROWS] = source[:STEPS].argmax(1)  # every draft the target's favourite
        for request in self._requests(layout)[1:]:
            proposals[request * ROWS:(request + 1) * ROWS] = proposals[:ROWS]
        inputs.update(draft_sampled=proposals.to(device),
                      idx_mapping=torch.zeros(requests, dtype=torch.int32, device=device),
                      expanded_idx_mapping=torch.zeros(layout.rows, dtype=torch.int32, device=device),
                      draft_logits=None)
        inputs["source"] = source
        return inputs

    def launch(self, module, target, inputs, layout, interpreted):
        args = {k: v for k, v in inputs.items() if k != "source"}
        return module.rejection_sample(target, **args, check_values=not interpreted)

    def check(self, produced, target, inputs, layout, planted):
        sampled, num_sampled = produced
        requests = self._requests(layout)
        cpu = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        expected, expected_num = reference_rejection_sample(
            inputs["source"], None, cpu["draft_sampled"][:ROWS], torch.tensor([0, ROWS]),
            cpu["pos"][:ROWS], torch.zeros(1, dtype=torch.int32), None, None,
            cpu["temperature"], cpu["seed"], STEPS)
        for request in requests:
            first_row = request * ROWS
            assert_rows_equal(sampled[request], expected[0],
                              f"request {request} against the reference", first_row,
                              layout.row_stride)
            assert int(num_sampled[request]) == int(expected_num[0]), (request, num_sampled[request])


class RejectionDraftSlotsCase:
    """The huge tensor is the draft logits, one row (K * V wide) per request slot."""

    name = "rejection_sample (draft logits)"
    module = "kernels.rejection"
    vocab = STEPS * VOCAB
    dtype = torch.float32

    def _slots(self, layout):
        return (0, ) + layout.check_rows

    def programs(self, layout):
        requests = list(range(len(self._slots(layout))))
        return {"_block_stats_kernel": list(range(len(requests) * ROWS)),
                "_verify_kernel": requests, "_resample_kernel": requests,
                "_insert_kernel": requests}

    def extra_bytes(self, layout):
        return layout.rows * 64 + 64 * VOCAB

    def prepare(self, drafts, layout):
        device = drafts.device
        generator = torch.Generator().manual_seed(12)
        slots = self._slots(layout)
        source = 2 * torch.randn(ROWS, VOCAB, generator=generator)
        rows = ROWS * len(slots)
        inputs, _ = _common(rows, layout.rows, device, generator)
        table = drafts.view(layout.rows, STEPS, VOCAB)
        # The target equals slot 0's draft, so every draft is accepted (p = q); rows a wrap can
        # land on favour the proposals far more, so a wrong draft read rejects at once.
        source = torch.cat([table[0].cpu(), source[STEPS:]])
        proposals = torch.zeros(rows, dtype=torch.int64)
        proposals[1:ROWS] = source[:STEPS].argmax(1)
        for index in range(1, len(slots)):
            proposals[index * ROWS:(index + 1) * ROWS] = proposals[:ROWS]
        for slot in layout.poison_rows:
            for near in (slot, slot + 1):
                table[near, :, proposals[1:ROWS].to(device)] = 50.0
        inputs.update(target=source.repeat(len(slots), 1).to(device), draft_logits=table,
                      draft_sampled=proposals.to(device),
                      idx_mapping=torch.tensor(slots, dtype=torch.int32, device=device),
                      expanded_idx_mapping=torch.tensor(slots, dtype=torch.int32,
                                                        device=device).repeat_interleave(ROWS))
        return inputs

    def launch(self, module, drafts, inputs, layout, interpreted):
        args = dict(inputs)
        return module.rejection_sample(args.pop("target"), **args, check_values=not interpreted)

    def check(self, produced, drafts, inputs, layout, planted):
        sampled, num_sampled = produced
        cpu = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        draft_row = planted[0].view(1, STEPS, VOCAB)
        expected, expected_num = reference_rejection_sample(
            cpu["target"][:ROWS], draft_row, cpu["draft_sampled"][:ROWS], torch.tensor([0, ROWS]),
            cpu["pos"][:ROWS], torch.zeros(1, dtype=torch.int32), None, None,
            cpu["temperature"][:1], cpu["seed"][:1], STEPS)
        for index, slot in enumerate(self._slots(layout)):
            assert_rows_equal(sampled[index], expected[0],
                              f"request at slot {slot} against the reference (draft row starts "
                              f"at slot * K * V)", slot, layout.row_stride)
            assert int(num_sampled[index]) == int(expected_num[0])


REJECTION_TARGET_ROWS = RejectionTargetRowsCase()
REJECTION_DRAFT_SLOTS = RejectionDraftSlotsCase()
