"""Reference for ``kernels.topk_topp``: sort-based top-k then top-p, per row, in float64."""

import torch


def apply_top_k_top_p(logits, k, p, mask_value=float("-inf"), *, num_programs=None):
    """Same contract as ``kernels.topk_topp.apply_top_k_top_p`` (``num_programs`` is ignored)."""
    del num_programs
    for row in range(logits.size(0)):
        values = logits[row].double()
        keep = _kept(values, None if k is None else int(k[row]), None if p is None else float(p[row]))
        logits[row][~keep] = mask_value
    return logits


def _kept(values, k, p):
    keep = torch.ones_like(values, dtype=torch.bool)
    if k is not None and k < values.numel():
        kth_largest = torch.sort(values, descending=True).values[k - 1]
        keep &= values >= kth_largest
    if p is not None and p < 1 and values[keep].max() > float("-inf"):
        survivors = torch.sort(values[keep], descending=True).values
        cumulative = torch.cumsum(torch.softmax(survivors, 0), 0)
        cutoff_index = int(torch.searchsorted(cumulative, p * cumulative[-1]))
        keep &= values >= survivors[min(cutoff_index, survivors.numel() - 1)]
    return keep


def top_p_mass(values, keep):
    """Probability mass (float64) of ``keep`` within the softmax of ``values``."""
    probs = torch.softmax(values.double(), 0)
    return float(probs[keep].sum())


# Mass tolerance of the top-p cutoff: the kernel sums probabilities in fp32, so a cutoff whose
# float64 mass lies within this of p may fall on either side.
TOP_P_MASS_TOLERANCE = 1e-4


def assert_valid_mask(values, out, k, p, mask_value=float("-inf"), what="row"):
    """Check one masked row ``out`` of input row ``values`` against the reference.

    Equal to the reference, or, where only the top-p cutoff differs, a set of the form
    {x >= t} within the top-k survivors whose float64 mass reaches p within
    ``TOP_P_MASS_TOLERANCE`` while the same set without its smallest value does not.
    """
    values, out = values.double().cpu(), out.double().cpu()
    expected = values.clone()
    expected[~_kept(values, k, p)] = mask_value
    same = (out == expected) | (out.isnan() & expected.isnan())
    if bool(same.all()):
        return
    if p is None or p >= 1:
        raise AssertionError(f"{what}: {int((~same).sum())} entries differ from the reference "
                             f"(k={k}, p={p}); first at {(~same).nonzero()[:4].flatten().tolist()}")
    top_k_kept = _kept(values, k, None)
    kept = (out != mask_value) if mask_value == mask_value else ~out.isnan()
    kept &= top_k_kept
    problems = []
    if not bool((out[kept] == values[kept]).all()):
        problems.append("kept entries were changed")
    if not bool(((out == mask_value) | kept).all()):
        problems.append("dropped entries do not hold mask_value")
    if bool(kept.any()):
        cutoff = values[kept].min()
        if bool((values[top_k_kept & ~kept] >= cutoff).any()):
            problems.append("kept set is not every survivor >= a cutoff")
        probs = torch.softmax(values[top_k_kept], 0)
        survivors = values[top_k_kept]
        mass = float(probs[survivors >= cutoff].sum())
        mass_above = float(probs[survivors > cutoff].sum())
        if mass < p - TOP_P_MASS_TOLERANCE or mass_above >= p + TOP_P_MASS_TOLERANCE:
            problems.append(f"kept mass {mass:.6f} (without the cutoff value {mass_above:.6f}) "
                            f"does not straddle p = {p}")
    else:
        problems.append("nothing kept")
    if problems:
        raise AssertionError(f"{what} (k={k}, p={p}): " + "; ".join(problems))
