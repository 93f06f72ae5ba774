"""Geometry of a huge case: which rows wrap an i32 offset, where the wrap lands, what to check.

For a row stride ``s``, row ``r`` starts at element ``P = r * s``. An i32 product wraps once
``P >= 2**31``:

* ``P`` in ``[2**31, 2**32)`` ("negative"): the offset turns negative, so the access lands before
  the tensor (an illegal memory access on a GPU, a segfault in the interpreter);
* ``P`` in ``[2**32, 2**32 + 2**31)`` ("aliased"): the offset wraps to ``P - 2**32``, inside
  the tensor, and the kernel silently reads or writes an earlier row.

A ``HugeLayout`` names the rows a case plants with a copy of row 0 (``check_rows``), the rows a
wrap from those rows lands on (``poison_rows``, filled with other data so that a wrong read
shows), and asserts that the case really crosses the boundary it claims.
"""

from dataclasses import dataclass

INT32_MAX = 2**31 - 1
SPAN = 2**32


def first_wrapping_row(row_stride):
    return -(-2**31 // row_stride)


def wrapped_offset(row, row_stride):
    """The element offset an i32 ``row * row_stride`` really produces."""
    return (row * row_stride + 2**31) % SPAN - 2**31


def landing_row(row, row_stride, rows):
    """The row a wrapped offset of ``row`` points into, or None when it lands outside."""
    offset = wrapped_offset(row, row_stride)
    if offset < 0:
        return None
    landed = offset // row_stride
    return landed if landed < rows else None


@dataclass(frozen=True)
class HugeLayout:
    wrap: str  # "negative" or "aliased"
    rows: int
    vocab: int
    row_stride: int
    check_rows: tuple
    poison_rows: tuple

    @property
    def shape(self):
        return (self.rows, self.vocab)

    @property
    def elements(self):
        return (self.rows - 1) * self.row_stride + self.vocab

    def describe(self):
        boundary, name = (2**31, "2**31") if self.wrap == "negative" else (SPAN, "2**32")
        parts = [f"row {row} starts at {name} + {row * self.row_stride - boundary}"
                 for row in self.check_rows]
        return (f"{self.wrap}: [{self.rows}, {self.vocab}] stride {self.row_stride}; "
                + "; ".join(parts))


def huge_layout(wrap, vocab, extra_rows=64, row_stride=None):
    """The smallest ``[rows, vocab]`` whose last ``extra_rows`` rows wrap as ``wrap`` says
    ("negative" or "aliased").

    Checked rows are the first row past the boundary and the last row, except one whose wrap
    lands exactly on the start of row 0, where a wrong read would look right (a wrap into
    another column of row 0 reads shifted data, which shows). The rows a wrap reads from,
    other than row 0 and the checked rows, are poisoned.
    """
    stride = row_stride or vocab
    if stride < vocab:
        raise ValueError(f"row stride {stride} < vocab {vocab}")
    if stride > INT32_MAX:
        raise ValueError(f"row stride {stride} >= 2**31 would be typed i64 and hide the bug")
    boundary = {"negative": 2**31, "aliased": SPAN}.get(wrap)
    if boundary is None:
        raise ValueError(f"wrap must be 'negative' or 'aliased'; got {wrap!r}")
    first = -(-boundary // stride)
    rows = first + extra_rows
    last = rows - 1
    for row in (first, last):
        offset = row * stride
        if not boundary <= offset < boundary + 2**31:
            raise ValueError(f"{wrap} layout for stride {stride}: row {row} offset {offset} "
                             "does not land in the intended range")
    candidates = [first, last] if first != last else [last]
    check = tuple(r for r in candidates if wrapped_offset(r, stride) != 0)
    poison = set()
    for row in check:
        landed = landing_row(row, stride, rows)
        if landed is not None:
            poison.add(landed)
            if wrapped_offset(row, stride) % stride + vocab > stride:
                poison.add(landed + 1)  # a read from mid-row runs into the next row
    poison = tuple(sorted(r for r in poison - {0} - set(check) if r < rows))
    return HugeLayout(wrap, rows, vocab, stride, check, poison)
