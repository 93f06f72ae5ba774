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
