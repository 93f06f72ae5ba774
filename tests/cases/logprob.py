"""Huge cases for ``kernels.logprob``: token log-probabilities and ranks at the highest rows."""

import torch

from harness.compare import assert_rows_close, assert_rows_equal
import reference.logprob as reference

TOKEN_IDS = (7, 0, 2**17 - 1)  # first, last and an interior vocab entry


class _RowKernelCase:
    module = "kernels.logprob"
    vocab = 2**17
    dtype = torch.float32

    def programs(self, layout):
        return [0, *layout.poison_rows, *layout.check_rows]

    def check(self, produced, logits, inputs, layout, planted):
        stride = layout.row_stride
        for row in (0, ) + layout.poison_rows + layout.check_rows:
            expected = self.reference(planted[row][None], inputs["ids"][row:row + 1].cpu())[0]
            self.compare(produced[row], expected,
                         f"row {row} against the reference on its own input", row, stride)
        for row in layout.check_rows:
            assert_rows_equal(produced[row], produced[0], f"row {row} against row 0", row, stride)


class TokenLogprobsCase(_RowKernelCase):
    name = "compute_token_logprobs"

    def extra_bytes(self, layout):
        return layout.rows * len(TOKEN_IDS) * 12

    def prepare(self, logits, layout):
        ids = torch.tensor(TOKEN_IDS, dtype=torch.int64, device=logits.device)
        return {"ids": ids.expand(layout.rows, -1).contiguous()}

    def launch(self, module, logits, inputs, layout, interpreted):
        return module.compute_token_logprobs(logits, inputs["ids"])

    def reference(self, rows, ids):
        return reference.compute_token_logprobs(rows, ids)

    def compare(self, actual, expected, what, row, stride):
        assert_rows_close(actual, expected, what, self.dtype, row, stride)


class TokenRanksCase(_RowKernelCase):
    name = "compute_token_ranks"

    def extra_bytes(self, layout):
        return layout.rows * 16

    def prepare(self, logits, layout):
        return {"ids": torch.full((layout.rows, ), TOKEN_IDS[0], dtype=torch.int64,
                                  device=logits.device)}

    def launch(self, module, logits, inputs, layout, interpreted):
        return module.compute_token_ranks(logits, inputs["ids"])

    def reference(self, rows, ids):
        return reference.compute_token_ranks(rows, ids)

    def compare(self, actual, expected, what, row, stride):
        assert_rows_equal(actual, expected, what, row, stride)


TOKEN_LOGPROBS = TokenLogprobsCase()
TOKEN_RANKS = TokenRanksCase()
