"""Reference for ``kernels.logprob``: log-softmax and ranks per row, in float64."""

import torch


def compute_token_logprobs(logits, token_ids):
    """Same contract as ``kernels.logprob.compute_token_logprobs``."""
    out = torch.empty(token_ids.shape, dtype=torch.float32, device=logits.device)
    for row in range(logits.size(0)):
        log_probs = torch.log_softmax(logits[row].double(), 0)
        out[row] = log_probs[token_ids[row].long()].float()
    return out


def compute_token_ranks(logits, token_ids):
    """Same contract as ``kernels.logprob.compute_token_ranks``."""
    out = torch.empty(token_ids.shape, dtype=torch.int64, device=logits.device)
    for row in range(logits.size(0)):
        values = logits[row].double()
        out[row] = int((values >= values[int(token_ids[row])]).sum())
    return out
