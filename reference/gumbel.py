"""Reference for ``kernels.gumbel``: temperature per row, and Gumbel-max sampling in float64
with the kernel's own Philox noise (``reference.philox``), so tokens compare exactly."""

import numpy as np
import torch

from reference import philox

# fp32 scores within this (relative) of the best may be reordered by the kernel's rounding.
SCORE_TOLERANCE = 1e-5


def apply_temperature(logits, expanded_idx_mapping, temperature, *, check_values=True):
    del check_values
    for row in range(logits.size(0)):
        t = float(temperature[int(expanded_idx_mapping[row])])
        if t not in (0.0, 1.0):
            logits[row] = (logits[row].double() / t).to(logits.dtype)


def gumbel_scores(logits_row, temperature, seed, pos, apply_temperature, use_fp64=False):
    """float64 scores whose argmax is the sampled token of one row."""
    x = logits_row.double().cpu()
    if apply_temperature and temperature != 0:
        x = x / temperature
    if temperature == 0:
        return x
    if use_fp64:
        hi, lo, _, _ = philox.randint4x(_stream(seed, pos), np.arange(x.numel()))
        bits = (hi << np.uint64(32)) | lo
        uniform = np.maximum(bits.astype(np.float64) * 2.0**-64, 2.2250738585072014e-308)
        noise = -np.log(-np.log(uniform))
    else:
        uniform = uniform_fp32(fp32_magnitudes(seed, pos, x.numel())).astype(np.float64)
        noise = -np.log(-np.log(1.0 - uniform))
    return x + torch.from_numpy(noise)


def fp32_magnitudes(seed, pos, vocab_size):
    """The fp32 path's Philox word magnitude of each vocab id (word ``v % 4`` of counter
    ``v // 4``, ``w`` or ``-w - 1`` as int32): what the kernel ranks lanes by."""
    vocab = np.arange(vocab_size)
    words = np.choose(vocab % 4, philox.randint4x(_stream(seed, pos), vocab // 4))
    return philox.magnitudes(words)


def uniform_fp32(magnitudes):
    """The fp32 path's uniform of each magnitude, clamped away from 0 as the kernel does."""
    return np.maximum(magnitudes.astype(np.float32) * np.float32(4.6566127342e-10),
                      np.float32(4.6566127342e-10))


def _stream(seed, pos):
    return int(philox.randint(int(seed), np.array([int(pos)]), offset_bits=64)[0])


def gumbel_sample(logits, expanded_idx_mapping, temperature, seed, pos, apply_temperature,
                  output_processed_logits=None, output_processed_logits_col=None, use_fp64=False,
                  *, check_values=True):
    """Same contract as ``kernels.gumbel.gumbel_sample``."""
    del check_values
    out = torch.empty(logits.size(0), dtype=torch.int64)
    for row in range(logits.size(0)):
        req = int(expanded_idx_mapping[row])
        t = float(temperature[req])
        scores = gumbel_scores(logits[row], t, int(seed[req]), int(pos[row]), apply_temperature,
                               use_fp64)
        out[row] = int(torch.argmax(scores))
        if output_processed_logits is not None:
            col = _column(output_processed_logits_col, row, logits.size(0))
            x = logits[row].double()
            if apply_temperature and t != 0:
                x = x / t
            output_processed_logits[req, col] = x.float().to(output_processed_logits.device)
    return out.to(logits.device)


def assert_valid_token(token, scores, what="row"):
    """``token`` has the best float64 score, up to fp32 rounding among near-ties."""
    best = float(scores.max())
    chosen = float(scores[int(token)])
    if chosen < best - SCORE_TOLERANCE * max(1.0, abs(best)):
        raise AssertionError(f"{what}: sampled {int(token)} (score {chosen:.6f}), but "
                             f"{int(scores.argmax())} scores {best:.6f}")


def _column(col, row, n_rows):
    if col is None:
        return 0
    col = col.reshape(-1)
    return int(col[row]) if col.numel() == n_rows and n_rows != 1 else int(col[0])
