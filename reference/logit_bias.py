"""Reference for ``kernels.logit_bias``, per row in float64."""


def apply_logit_bias(logits, expanded_idx_mapping, pos, num_allowed_token_ids, allowed_token_ids,
                     num_logit_bias, logit_bias_token_ids, logit_bias, min_lens,
                     num_stop_token_ids, stop_token_ids, *, check_values=True):
    """Same contract as ``kernels.logit_bias.apply_logit_bias``."""
    del check_values
    for row in range(logits.size(0)):
        req = int(expanded_idx_mapping[row])
        values = logits[row].double()
        allowed = allowed_token_ids[req, :int(num_allowed_token_ids[req])].long()
        if allowed.numel():
            kept = values[allowed].clone()
            values[:] = float("-inf")
            values[allowed] = kept
        biased = logit_bias_token_ids[req, :int(num_logit_bias[req])].long()
        values[biased] += logit_bias[req, :biased.numel()].double()
        if int(pos[row]) + 1 < int(min_lens[req]):
            values[stop_token_ids[req, :int(num_stop_token_ids[req])].long()] = float("-inf")
        logits[row] = values.to(logits.dtype)
