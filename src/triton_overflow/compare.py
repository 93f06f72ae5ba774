"""Row comparisons that say where they differ, and how far past 2**31 that row starts."""

import torch

TOLERANCES: dict[torch.dtype, dict[str, float]] = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=1e-2, atol=1e-2),
    torch.float64: dict(rtol=1e-9, atol=1e-9),
}


class RowMismatch(AssertionError):
    pass


def row_position(row: int | None, row_stride: int | None) -> str:
    """Where ``row`` starts relative to 2**31 (or 2**32 past it), e.g. '2**31 + 8257536'."""
    if row is None or row_stride is None:
        return ""
    start = row * row_stride
    if start < 2**30:
        return f" (row {row} starts at element {start})"
    boundary, name = (2**32, "2**32") if start >= 2**32 else (2**31, "2**31")
    delta = start - boundary
    sign = "+" if delta >= 0 else "-"
    return f" (row {row} starts at element {name} {sign} {abs(delta)})"


def assert_rows_equal(actual: torch.Tensor, expected: torch.Tensor, what: str,
                      row: int | None = None, row_stride: int | None = None) -> None:
    """Exact equality, for ids, masks, and outputs that must match bit for bit."""
    actual, expected = actual.cpu(), expected.cpu()
    if actual.shape != expected.shape:
        raise RowMismatch(f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}")
    same = (actual == expected) | (_isnan(actual) & _isnan(expected))
    if not bool(same.all()):
        raise RowMismatch(_describe(what, ~same, actual, expected, row, row_stride))


def assert_rows_close(actual: torch.Tensor, expected: torch.Tensor, what: str,
                      dtype: torch.dtype | None = None, row: int | None = None,
                      row_stride: int | None = None) -> None:
    """Closeness with tolerances for ``dtype`` (the input's precision); NaN only matches NaN."""
    tolerance = TOLERANCES[dtype or expected.dtype]
    actual, expected = actual.cpu().double(), expected.cpu().double()
    if actual.shape != expected.shape:
        raise RowMismatch(f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}")
    close = torch.isclose(actual, expected, equal_nan=True, **tolerance)
    if not bool(close.all()):
        raise RowMismatch(_describe(what, ~close, actual, expected, row, row_stride))


def _isnan(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.isnan() if tensor.is_floating_point() else torch.zeros_like(tensor, dtype=torch.bool)


def _describe(what: str, bad: torch.Tensor, actual: torch.Tensor, expected: torch.Tensor,
              row: int | None, row_stride: int | None) -> str:
    where = bad.nonzero().tolist()
    first = where[:4]
    shown = ", ".join(f"{tuple(i)}: {actual[tuple(i)].item()} != {expected[tuple(i)].item()}"
                      for i in first)
    return (f"{what}: {len(where)} of {bad.numel()} differ{row_position(row, row_stride)}; "
            f"first: {shown}")
