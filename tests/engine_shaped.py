"""A kernel written the way engines write them, for the case API's self-tests: persistent
(a grid-stride loop over the rows, the grid sized from the device's multiprocessor count),
autotuned, and with its int64 widening behind a constexpr flag, so that a fixed and a buggy
launcher share one kernel."""

import torch
import triton
import triton.language as tl

from triton_overflow import OVERFLOWS, RowsCase


@triton.autotune(configs=[triton.Config({"BLOCK": 1024}), triton.Config({"BLOCK": 2048})],
                 key=["vocab_size"])
@triton.jit
def _scale_rows_kernel(logits, output, stride, output_stride, num_rows, vocab_size, scale,
                       WIDEN: tl.constexpr, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), num_rows, tl.num_programs(0)):
        if WIDEN:
            row = row.to(tl.int64)
        for start in range(0, vocab_size, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < vocab_size
            values = tl.load(logits + row * stride + cols, mask=mask)
            tl.store(output + row * output_stride + cols, values * scale, mask=mask)


def scale_rows(logits, scale, widen=True):
    rows, vocab = logits.shape
    output = torch.empty_like(logits)
    programs = torch.cuda.get_device_properties(logits.device).multi_processor_count
    _scale_rows_kernel[(min(rows, programs), )](logits, output, logits.stride(0),
                                                output.stride(0), rows, vocab, scale,
                                                WIDEN=widen)
    return output


class ScaleRowsCase(RowsCase):
    name = "engine_shaped_scale_rows"
    module = "tests.engine_shaped"
    width = 2**16

    def launch(self, kernels, logits, run):
        return kernels.scale_rows(logits, 0.5)

    def expected_row(self, values, row):
        return values.double() * 0.5


class UnwidenedScaleRowsCase(ScaleRowsCase):
    name = "engine_shaped_scale_rows_unwidened"
    expect = OVERFLOWS

    def launch(self, kernels, logits, run):
        return kernels.scale_rows(logits, 0.5, widen=False)


class PaddedScaleRowsCase(ScaleRowsCase):
    """Rows padded to a stride past the width: the launcher must see the padded stride."""

    name = "engine_shaped_scale_rows_padded"
    width = 65000
    row_stride = 2**16

    def launch(self, kernels, logits, run):
        if logits.stride(0) != run.row_stride:
            raise AssertionError(f"logits stride {logits.stride(0)}, planned {run.row_stride}")
        return super().launch(kernels, logits, run)


SCALE_ROWS = ScaleRowsCase()
SCALE_ROWS_PADDED = PaddedScaleRowsCase()
SCALE_ROWS_UNWIDENED = UnwidenedScaleRowsCase()
