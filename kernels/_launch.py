"""Input checks and grid sizing shared by the launchers.

Every check raises ``ValueError`` naming the argument and the offending value, so that a bad
argument stops on the host instead of reaching the GPU as an illegal memory access.
"""

import functools
import math
import numbers

import torch


def check_tensor(value, name):
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor; got {type(value).__name__}")


def check_int(value, name, low, high=None):
    """A Python int in [low, high] (``high`` None: no upper bound). Bools are not ints."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int; got {value!r} ({type(value).__name__})")
    if value < low or (high is not None and value > high):
        upper = "" if high is None else f" and <= {high}"
        raise ValueError(f"{name} must be an int >= {low}{upper}; got {value!r}")


def check_flag(value, name):
    """A Python bool: it selects a compiled variant, so a truthy int or tensor is refused."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool; got {value!r} ({type(value).__name__})")


def check_real(value, name):
    """A real number, not a bool and not NaN."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise ValueError(f"{name} must be a real number, not NaN; got {value!r}")


def check_logits(logits, name, dtypes):
    check_tensor(logits, name)
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
        check_int(requested, "num_programs", 1)
        return min(requested, n_rows)
    if device.type == "cuda":
        return min(n_rows, 4 * multiprocessors(device))
    return min(n_rows, 3)


def multiprocessors(device):
    """Streaming multiprocessors of the CUDA ``device``."""
    return _multiprocessors(device.index if device.index is not None else
                            torch.cuda.current_device())


@functools.cache
def _multiprocessors(index):
    return torch.cuda.get_device_properties(index).multi_processor_count


def _names(dtypes):
    return "(" + ", ".join(str(d).removeprefix("torch.") for d in dtypes) + ")"


def check_table(values, name, rows, device, dtypes, width=None, written=False):
    """A 1-D ``[rows]`` or 2-D ``[rows, width]`` tensor of ``dtypes`` on ``device``, contiguous in
    its last dimension; ``rows`` None accepts any length and ``width`` -1 any width. A table the
    kernel writes (``written``) must not have overlapping rows."""
    check_tensor(values, name)
    if values.dtype not in dtypes:
        raise ValueError(f"{name} must have dtype in {_names(dtypes)}; got {values.dtype}")
    if values.device != device:
        raise ValueError(f"{name} is on {values.device} but must be on {device}")
    want = (rows, ) if width is None else (rows, width)
    actual = tuple(values.shape)
    if len(actual) != len(want) or any(w not in (None, -1) and w != a for w, a in zip(want, actual)):
        shown = ", ".join("N" if w is None else "W" if w == -1 else str(w) for w in want)
        raise ValueError(f"{name} must have shape ({shown}{',' if len(want) == 1 else ''}); got {actual}")
    if values.numel() and values.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dimension; got strides "
                         f"{tuple(values.stride())}")
    if written and values.dim() == 2 and values.size(0) > 1 and values.stride(0) < values.size(1):
        raise ValueError(f"{name} rows overlap: row stride {values.stride(0)} < width "
                         f"{values.size(1)}, and the kernel writes them")


def check_value_range(values, name, low, high, check_values=True):
    """Every entry of ``values`` lies in [low, high] (floats: NaN is out of range)."""
    if not check_values or values.numel() == 0:
        return
    bad = ~((values >= low) & (values <= high))
    if bool(bad.any()):
        raise ValueError(f"{name} must lie in [{low}, {high}]; got {values[bad][0].item()}")


def check_finite(values, name):
    """Every entry of ``values`` is finite (no NaN, no infinity)."""
    bad = ~values.isfinite()
    if values.numel() and bool(bad.any()):
        raise ValueError(f"{name} must be finite; got {values[bad][0].item()}")


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


def check_distinct(values, name, counts=None):
    """No id repeats: among all of ``values [N]``, or among the first ``counts[r]`` entries of
    each row ``r`` of ``values [R, W]``."""
    rows = values.reshape(1, -1) if values.dim() == 1 else values
    if rows.numel() == 0:
        return
    keys = rows.long()
    if counts is not None:
        # Unused entries become distinct values below any int32 id, so only used ones can repeat.
        filler = torch.iinfo(torch.int64).min + torch.arange(rows.size(1), device=rows.device)
        keys = torch.where(leading_entries(counts, rows.size(1)), keys, filler[None, :])
    keys = keys.sort(dim=1).values
    repeats = keys[:, 1:] == keys[:, :-1]
    if bool(repeats.any()):
        row, col = (int(i) for i in repeats.nonzero()[0])
        where = f" in row {row}" if values.dim() == 2 else ""
        raise ValueError(f"{name} must not repeat an id{where}; got {int(keys[row, col])} twice")
