"""Hypothesis strategies: draw shapes, parameters and a seed; tensors are built from the seed.

An example never holds tensor data (hypothesis keeps at most 8 KiB of choices per example), so
every drawn case is small and replayable: ``build_logits(spec)`` makes the same tensor again.
"""

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

# Vocab sizes around the kernels' blocks (1024, 2048, 4096, 8192) and odd ones.
VOCABS = (1, 2, 3, 17, 100, 1000, 1023, 2049, 4095, 4097, 5003, 8193)
VALUE_KINDS = ("normal", "ties", "some -inf", "all -inf rows", "wide")
NAN_KINDS = ("some nan", "nan rows")  # for kernels that define what NaN gives (logprobs, ranks)


@dataclass(frozen=True)
class LogitsSpec:
    rows: int
    vocab: int
    row_padding: int  # extra elements per row: a strided view of a padded buffer
    kind: str
    seed: int
    dtype: torch.dtype = torch.float32

    @property
    def row_stride(self):
        return self.vocab + self.row_padding


@st.composite
def logits_specs(draw, max_rows=5, vocabs=VOCABS, dtypes=(torch.float32, ), kinds=VALUE_KINDS):
    return LogitsSpec(rows=draw(st.integers(1, max_rows)),
                      vocab=draw(st.sampled_from(vocabs)),
                      row_padding=draw(st.sampled_from((0, 0, 1, 37))),
                      kind=draw(st.sampled_from(kinds)),
                      seed=draw(st.integers(0, 2**31 - 1)),
                      dtype=draw(st.sampled_from(dtypes)))


def build_logits(spec, device):
    """The logits of ``spec`` as a [rows, vocab] view of a padded buffer on ``device``."""
    generator = torch.Generator().manual_seed(spec.seed)
    shape = (spec.rows, spec.row_stride)
    if spec.kind == "ties":
        values = torch.randint(-3, 4, shape, generator=generator).float()
    elif spec.kind == "wide":
        values = 30 * torch.randn(shape, generator=generator)
    else:
        values = torch.randn(shape, generator=generator)
    if spec.kind == "some -inf":
        values[torch.rand(shape, generator=generator) < 0.3] = float("-inf")
    if spec.kind == "all -inf rows":
        values[torch.rand(spec.rows, generator=generator) < 0.5] = float("-inf")
    if spec.kind == "some nan":
        values[torch.rand(shape, generator=generator) < 0.2] = float("nan")
    if spec.kind == "nan rows":
        values[torch.rand(spec.rows, generator=generator) < 0.5] = float("nan")
    buffer = values.to(spec.dtype).to(device)
    return buffer[:, :spec.vocab]


def top_k_values(vocab):
    """Per-row k: 1, the vocab size, past it, and anything between."""
    return st.one_of(st.sampled_from((1, vocab, vocab + 3)), st.integers(1, vocab + 1))


def top_p_values():
    """Per-row p: 1 (off), tiny, and anything in (0, 1)."""
    return st.one_of(st.sampled_from((1.0, 1e-6, 0.5)), st.floats(0.01, 0.999))


def row_slots(rows, slots, seed, device):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, slots, (rows, ), generator=generator, dtype=torch.int32).to(device)


LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
EDGE_KINDS = ("normal", "ties", "wide", "some -inf", "all -inf rows")


def padded(table, padding, fill):
    """``table`` [R, W] as a view of a [R, W + padding] buffer whose extra columns hold ``fill``:
    a row stride that is not the width, as a slice of a larger table has."""
    if padding == 0 or table.dim() != 2:
        return table
    buffer = torch.full((table.size(0), table.size(1) + padding), fill, dtype=table.dtype,
                        device=table.device)
    buffer[:, :table.size(1)] = table
    return buffer[:, :table.size(1)]


def lying_row_stride(tensor):
    """``tensor`` reporting its width as its row stride: what a launcher passing ``.size(1)``
    (or the vocab size) where ``.stride(0)`` belongs would see. For padded rows only."""
    width = tensor.size(1)
    tensor.stride = lambda *dim: (width, 1) if not dim else (width if dim[0] == 0 else 1)
    return tensor
