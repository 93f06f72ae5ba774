"""Huge cases for ``kernels.topk_topp``: row 0 and its copies at the highest rows, k=50, p=0.9."""

import torch

from harness.compare import assert_rows_equal
from reference.topk_topp import assert_valid_mask


class TopKTopPCase:
    name = "apply_top_k_top_p"
    module = "kernels.topk_topp"
    vocab = 2**17
    dtype = torch.float32
    top_k = 50
    top_p = 0.9

    def programs(self, layout):
        # Launched with one persistent program per row, so program id == row.
        return [0, *layout.poison_rows, *layout.check_rows]

    def extra_bytes(self, layout):
        return layout.rows * 8

    def prepare(self, logits, layout):
        rows, device = layout.rows, logits.device
        return {"k": torch.full((rows, ), self.top_k, dtype=torch.int32, device=device),
                "p": torch.full((rows, ), self.top_p, dtype=torch.float32, device=device)}

    def launch(self, module, logits, inputs, layout, interpreted):
        programs = layout.rows if interpreted else None
        return module.apply_top_k_top_p(logits, inputs["k"], inputs["p"], num_programs=programs)

    def check(self, produced, logits, inputs, layout, planted):
        stride = layout.row_stride
        for row in (0, ) + layout.poison_rows + layout.check_rows:
            assert_valid_mask(planted[row], logits[row], self.top_k, self.top_p,
                              what=f"row {row} against the reference on its own input")
        for row in layout.check_rows:
            assert_rows_equal(logits[row], logits[0], f"row {row} against row 0", row, stride)


TOP_K_TOP_P = TopKTopPCase()
