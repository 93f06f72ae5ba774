"""Reference for ``kernels.min_p``, per row in float64."""

import math

import torch

# The kernel forms max + log(min_p) in fp32: entries this close to the cutoff may go either way.
CUTOFF_TOLERANCE = 1e-5


def apply_min_p(logits, expanded_idx_mapping, min_p, *, check_values=True):
    """Same contract as ``kernels.min_p.apply_min_p``."""
    del check_values
    for row in range(logits.size(0)):
        keep = _kept(logits[row], float(min_p[int(expanded_idx_mapping[row])]))
        logits[row][~keep] = float("-inf")


def _kept(values, min_p):
    values = values.double()
    if min_p == 0:
        return torch.ones_like(values, dtype=torch.bool)
    return values >= values.max() + math.log(min_p)


def assert_valid_row(before, after, min_p, what="row"):
    """``after`` equals the reference except for entries within CUTOFF_TOLERANCE of the cutoff."""
    before, after = before.double().cpu(), after.double().cpu()
    expected = before.clone()
    expected[~_kept(before, min_p)] = float("-inf")
    differ = ~((after == expected) | (after.isnan() & expected.isnan()))
    if min_p > 0 and bool(differ.any()):
        cutoff = before.max() + math.log(min_p)
        near = (before - cutoff).abs() <= CUTOFF_TOLERANCE * max(1.0, abs(float(cutoff)))
        allowed = near & ((after == before) | (after == float("-inf")))
        differ &= ~allowed
    if bool(differ.any()):
        where = differ.nonzero().flatten()[:4].tolist()
        raise AssertionError(f"{what} (min_p={min_p}): {int(differ.sum())} entries differ from the "
                             f"reference; first at {where}")
