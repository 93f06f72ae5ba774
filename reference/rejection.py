"""Reference for ``kernels.rejection``: one request at a time, in float64, with the kernels'
own Philox streams (``reference.philox``), so accepted drafts and tokens compare exactly.

``rejection_trace`` also returns, per request, how close each random acceptance test came to
its threshold and the float64 scores of the resampled row, so a test can tell a real mismatch
from fp32 rounding at a near-tie.
"""

from dataclasses import dataclass, field

import numpy as np
import torch

from reference import philox
from reference.gumbel import gumbel_scores


@dataclass
class RequestTrace:
    accepted: int = 0
    resampled_step: int = 0
    closest_margin: float = float("inf")  # smallest |log p - log u - log q| of a test made
    scores: torch.Tensor | None = None  # float64 scores of the resampled row (None: greedy)
    sampled: list = field(default_factory=list)


def uniform64(seed, pos):
    hi, lo, _, _ = philox.randint4x(int(seed), np.array([int(pos)]), offset_bits=64)
    bits = int((hi[0] << np.uint64(32)) | lo[0])
    return ((bits >> 11) + 1) * 2.0**-53


def rejection_trace(target_logits, draft_logits, draft_sampled, cu_num_logits, pos, idx_mapping,
                    temperature, seed, num_speculative_steps, synthetic_conditional_rates=None):
    traces = []
    cu = cu_num_logits.tolist()
    for i, req in enumerate(idx_mapping.tolist()):
        start, end = cu[i], cu[i + 1]
        t, s = float(temperature[req]), int(seed[req])
        trace = RequestTrace()
        accepted = True
        for j in range(end - start - 1):
            if not accepted:
                break
            row = start + j
            draft = int(draft_sampled[row + 1])
            target = target_logits[row].double()
            if t == 0:
                best = int(torch.argmax(target))
                if synthetic_conditional_rates is not None:
                    accepted = (uniform64(s, pos[row]) < float(synthetic_conditional_rates[j])
                                and draft >= 0)
                else:
                    accepted = best == draft
                trace.sampled.append(draft if accepted else best)
            else:
                token = max(draft, 0)
                log_p = float(torch.log_softmax(target, 0)[token])
                log_q = 0.0
                if draft_logits is not None:
                    log_q = float(torch.log_softmax(draft_logits[req, j].double(), 0)[token])
                uniform = uniform64(s, pos[row])
                if synthetic_conditional_rates is not None:
                    margin = float(synthetic_conditional_rates[j]) - uniform
                else:
                    margin = log_p - (np.log(uniform) + log_q)
                trace.closest_margin = min(trace.closest_margin, abs(margin))
                accepted = margin > 0 and draft >= 0
                trace.sampled.append(draft)
            trace.accepted += int(accepted)
        step = trace.accepted
        row = start + step
        bonus = row == end - 1
        if not (t == 0 and not bonus):
            x = target_logits[row].double()
            if not bonus:
                if draft_logits is not None:
                    log_p = torch.log_softmax(x, 0)
                    log_q = torch.log_softmax(draft_logits[req, step].double(), 0)
                    ratio = torch.exp(log_q - log_p)
                    x = torch.where(ratio < 1, log_p + torch.log1p(-ratio.clamp(max=1)),
                                    torch.tensor(float("-inf"), dtype=torch.float64))
                else:
                    x = x.clone()
                    rejected = int(draft_sampled[row + 1])
                    if 0 <= rejected < x.numel():
                        x[rejected] = float("-inf")
            trace.scores = gumbel_scores(x, t, s, int(pos[row]), apply_temperature=False)
            token = int(torch.argmax(trace.scores))
            if len(trace.sampled) > step:
                trace.sampled[step] = token
            else:
                trace.sampled.append(token)
        trace.resampled_step = step
        traces.append(trace)
    return traces


def rejection_sample(target_logits, draft_logits, draft_sampled, cu_num_logits, pos, idx_mapping,
                     expanded_idx_mapping, expanded_local_pos, temperature, seed,
                     num_speculative_steps, synthetic_conditional_rates=None, use_fp64=False, *,
                     check_values=True):
    """Same contract as ``kernels.rejection.rejection_sample`` (fp32 noise only)."""
    del expanded_idx_mapping, expanded_local_pos, use_fp64, check_values
    traces = rejection_trace(target_logits.cpu(), None if draft_logits is None else draft_logits.cpu(),
                             draft_sampled.cpu(), cu_num_logits.cpu(), pos.cpu(), idx_mapping.cpu(),
                             temperature.cpu(), seed.cpu(), num_speculative_steps,
                             None if synthetic_conditional_rates is None
                             else synthetic_conditional_rates.cpu())
    sampled = torch.full((len(traces), num_speculative_steps + 1), -1, dtype=torch.int64)
    for i, trace in enumerate(traces):
        sampled[i, :len(trace.sampled)] = torch.tensor(trace.sampled, dtype=torch.int64)
    num_sampled = torch.tensor([t.accepted + 1 for t in traces], dtype=torch.int32)
    return sampled, num_sampled
