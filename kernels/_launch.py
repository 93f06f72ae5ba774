"""Input checks and grid sizing shared by the launchers.

Every check raises ``ValueError`` naming the argument and the offending value, so that a bad
argument stops on the host instead of reaching the GPU as an illegal memory access.
"""

import functools

import torch


def check_logits(logits, name, dtypes):
    if not isinstance(logits, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor; got {type(logits).__name__}")
    if logits.dtype not in dtypes:
        raise ValueError(f"{name} must have dtype in {_names(dtypes)}; got {logits.dtype}")
    if logits.dim() != 2:
        raise ValueError(f"{name} must be 2-D [rows, vocab]; got shape {tuple(logits.shape)}")
    if logits.size(1) > 1 and logits.stride(1) != 1:
        raise ValueError(f"{name} must have a contiguous vocab dimension; got strides "
                         f"{tuple(logits.stride())}")
    if logits.size(0) > 1 and logits.stride(0) < logits.size(1):
        raise ValueError(f"{name} rows overlap: row stride {logits.stride(0)} < vocab size "
                         f"{logits.size(1)}")


def check_index_range(indices, name, upper):
    """Every entry of ``indices`` must lie in [0, upper)."""
    if indices.numel() == 0:
        return
    bad = (indices < 0) | (indices >= upper)
    if bool(bad.any()):
        raise ValueError(f"{name} must lie in [0, {upper}); got {int(indices[bad][0])}")


def persistent_programs(device, n_rows, requested):
    """Programs of a persistent grid: ``requested``, or enough to fill the device."""
    if requested is not None:
        if not isinstance(requested, int) or requested < 1:
            raise ValueError(f"num_programs must be a positive int; got {requested!r}")
        return min(requested, n_rows)
    if device.type == "cuda":
        return min(n_rows, 4 * _multiprocessors(device.index or 0))
    return min(n_rows, 3)


@functools.cache
def _multiprocessors(index):
    return torch.cuda.get_device_properties(index).multi_processor_count


def _names(dtypes):
    return "(" + ", ".join(str(d).removeprefix("torch.") for d in dtypes) + ")"


def check_table(values, name, rows, device, dtypes, width=None):
    """A 1-D ``[rows]`` or 2-D ``[rows, width]`` tensor of ``dtypes`` on ``device``, contiguous in
    its last dimension; ``rows`` None accepts any length and ``width`` -1 any width."""
    if not isinstance(values, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor; got {type(values).__name__}")
    if values.dtype not in dtypes:
        raise ValueError(f"{name} must have dtype in {_names(dtypes)}; got {values.dtype}")
    if values.device != device:
        raise ValueError(f"{name} is on {values.device} but logits are on {device}")
    want = (rows, ) if width is None else (rows, width)
    actual = tuple(values.shape)
    if len(actual) != len(want) or any(w not in (None, -1) and w != a for w, a in zip(want, actual)):
        shown = ", ".join("N" if w is None else "W" if w == -1 else str(w) for w in want)
        raise ValueError(f"{name} must have shape ({shown}{',' if len(want) == 1 else ''}); got {actual}")
    if values.numel() and values.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dimension; got strides "
                         f"{tuple(values.stride())}")


def check_value_range(values, name, low, high, check_values=True):
    """Every entry of ``values`` lies in [low, high] (floats: NaN is out of range)."""
    if not check_values or values.numel() == 0:
        return
    bad = ~((values >= low) & (values <= high))
    if bool(bad.any()):
        raise ValueError(f"{name} must lie in [{low}, {high}]; got {values[bad][0].item()}")


def check_local_positions(local_pos, n_rows):
    """Each row's position within its request must not reach back before row 0."""
    rows = torch.arange(n_rows, device=local_pos.device)
    if n_rows and bool(((local_pos < 0) | (local_pos > rows)).any()):
        raise ValueError("expanded_local_pos must lie in [0, row]: a row cannot start before row 0")


def check_history_lengths(prompt_len, total_len, all_token_ids):
    """Each slot's prompt and total length fit its row of the token history."""
    if bool(((prompt_len < 0) | (total_len < prompt_len) |
             (total_len > all_token_ids.size(1))).any()):
        raise ValueError("need 0 <= prompt_len <= total_len <= all_token_ids.size(1)")


def leading_entries(counts, width):
    """``[len(counts), width]`` bool: True where the column lies before the row's count."""
    return torch.arange(width, device=counts.device)[None, :] < counts[:, None].long()
