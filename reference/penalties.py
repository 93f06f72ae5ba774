"""Reference for ``kernels.penalties``, per request and per row, in float64."""

import torch


def build_penalty_state(idx_mapping, all_token_ids, prompt_len, total_len, prompt_bin_mask,
                        output_bin_counts, *, check_values=True):
    """Same contract as ``kernels.penalties.build_penalty_state``."""
    del check_values
    vocab = output_bin_counts.size(1)
    for req in idx_mapping.tolist():
        tokens = all_token_ids[req, :int(total_len[req])].long().cpu()
        prompt, output = tokens[:int(prompt_len[req])], tokens[int(prompt_len[req]):]
        bits = torch.zeros(prompt_bin_mask.size(1) * 32, dtype=torch.bool)
        bits[prompt] = True
        words = bits.view(-1, 32).long() << torch.arange(32)
        prompt_bin_mask[req] = words.sum(1).to(torch.int64).to(torch.int32).to(prompt_bin_mask.device)
        output_bin_counts[req] = torch.bincount(output, minlength=vocab).to(torch.int32).to(
            output_bin_counts.device)


def apply_penalties(logits, expanded_idx_mapping, token_ids, expanded_local_pos,
                    repetition_penalty, frequency_penalty, presence_penalty, prompt_bin_mask,
                    output_bin_counts, *, check_values=True):
    """Same contract as ``kernels.penalties.apply_penalties``."""
    del check_values
    vocab = logits.size(1)
    for row in range(logits.size(0)):
        req = int(expanded_idx_mapping[row])
        rep, freq, pres = (float(t[req]) for t in (repetition_penalty, frequency_penalty,
                                                   presence_penalty))
        if rep == 1 and freq == 0 and pres == 0:
            continue
        first = row - int(expanded_local_pos[row])
        counts = output_bin_counts[req].long().cpu().clone()
        for token in token_ids[first + 1:row + 1].tolist():
            counts[token] += 1
        seen = counts > 0
        x = logits[row].double().cpu()
        if rep != 1:
            words = prompt_bin_mask[req].long().cpu() & 0xFFFFFFFF
            in_prompt = ((words[torch.arange(vocab) // 32] >> (torch.arange(vocab) % 32)) & 1) == 1
            scale = torch.where(in_prompt | seen, rep, 1.0)
            x = torch.where(x > 0, x / scale, x * scale)
        x = x - freq * counts.double() - pres * seen.double()
        logits[row] = x.to(logits.dtype).to(logits.device)
