"""Reference for ``kernels.bad_words``: each row's history built as a list, words matched in Python."""


def apply_bad_words(logits, expanded_idx_mapping, bad_word_token_ids, bad_word_offsets,
                    num_bad_words, all_token_ids, prompt_len, total_len, input_ids,
                    expanded_local_pos, max_num_bad_words, *, check_values=True):
    """Same contract as ``kernels.bad_words.apply_bad_words``."""
    del check_values
    for row in range(logits.size(0)):
        req = int(expanded_idx_mapping[row])
        local_pos = int(expanded_local_pos[row])
        first = row - local_pos
        output = all_token_ids[req, int(prompt_len[req]):int(total_len[req])].tolist()
        history = output + input_ids[first + 1:row + 1].tolist()
        for word in range(min(int(num_bad_words[req]), max_num_bad_words)):
            start, end = int(bad_word_offsets[req, word]), int(bad_word_offsets[req, word + 1])
            tokens = bad_word_token_ids[req, start:end].tolist()
            prefix = tokens[:-1]
            if len(prefix) <= len(history) and history[len(history) - len(prefix):] == prefix:
                logits[row, tokens[-1]] = float("-inf")
