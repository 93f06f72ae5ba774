"""Interval arithmetic over a kernel's integers: how far a product is from wrapping.

Without launch facts only constants and block offsets (``tl.arange``) have known ranges, which
proves products like ``tl.arange(0, BLOCK) * 4`` small. With the facts of a recorded launch (the
grid, the int arguments, the range of each int table) or a deployment's stated limits
(``--limits``), program ids, arguments, loaded indices and loop variables get ranges too, and a
finding says the largest product it reaches there and the factor left to 2**31.
"""

import re
from dataclasses import dataclass, field

from triton_overflow.lint.ops import LOADED_VALUE_OPS, PASS_THROUGH, STRUCTURED

INT32_LIMIT = 2**31
GRID_YZ_LIMIT = 65535  # programs along the second and third grid axes on CUDA
_RANGE = re.compile(r"end\s*=\s*(-?\d+)\s*:\s*i32,\s*start\s*=\s*(-?\d+)")


@dataclass
class LaunchFacts:
    """What is known of a launch: programs per axis, int arguments, int tables' ranges."""

    grid: tuple | None = None
    ints: dict = field(default_factory=dict)  # argument -> value
    tables: dict = field(default_factory=dict)  # pointer argument -> (smallest, largest)
    where: str = "at the recorded launch"
    names: list = field(default_factory=list)  # the names an envelope gave, as given


class Ranges:
    def __init__(self, graph, flow, facts):
        self.graph = graph
        self.flow = flow
        self.facts = facts
        self._memo = {}

    def interval(self, value):
        """``(lo, hi)`` of an integer value, or None when unknown."""
        if value in self._memo:
            return self._memo[value]
        self._memo[value] = None  # a cycle (loop-carried) stays unknown
        found = self._compute(value)
        self._memo[value] = found
        return found

    def product_bound(self, op):
        """The largest |product| of a muli / shli op, or None when an operand is unknown."""
        a, b = (self.interval(v) for v in op.operands[:2])
        if a is None or b is None:
            return None
        if op.name == "arith.shli":
            if b[0] < 0 or b[1] > 62:
                return None
            b = (2**b[0], 2**b[1])
        return max(abs(x * y) for x in a for y in b)

    def headroom(self, op, written=("", "")):
        """(text, largest) for a finding; ``written`` is the product's two sides as written."""
        sides = [self.interval(v) for v in op.operands[:2]]
        names = [w or side for w, side in zip(written, ("the left side", "the right side"))]
        if op.name == "arith.shli":
            names[1] = f"2**{names[1]}"
        largest = self.product_bound(op)
        if self.facts is None or largest is None:
            return self._wraps_once(op, sides, names), None
        where = self.facts.where
        if largest >= INT32_LIMIT:
            return (f"reaches {_number(largest)} {where}, {largest / INT32_LIMIT:.2f}x 2**31: "
                    f"it wraps there"), largest
        factor = INT32_LIMIT / largest if largest else float("inf")
        return (f"stays below 2**31 {where}: largest {_number(largest)}, wraps at "
                f"{factor:.1f}x that"), largest

    def _written_side_of(self, op, sides, constant, names):
        """Which written side is the operand that is not ``constant`` (a constexpr such as
        ``B`` reads as a name, and the compiler may put it on either side): the side that
        names where that operand comes from, else the one in the operands' order."""
        variable = op.operands[0] if sides[0] != constant else op.operands[1]
        origins = {origin.name for origin in self.flow.origins(variable) if origin.name}
        naming = [name for name in names if origins & set(re.findall(r"[A-Za-z_]\w*", name))]
        if len(naming) == 1:
            return naming[0]
        return names[0] if sides[0] != constant else names[1]

    def _wraps_once(self, op, sides, names):
        known = [s for s in sides if s is not None and s[0] == s[1] and s[0] != 0]
        if len(known) == 1 and op.name == "arith.muli":
            constant = abs(known[0][0])
            written = [name.strip("() ") for name in names]
            if str(known[0][0]) in written:  # the source order may differ from the operands'
                other = names[1 - written.index(str(known[0][0]))]
            else:
                other = self._written_side_of(op, sides, known[0], names)
            text = f"wraps once {other} reaches 2**31 / {constant} = {-(-INT32_LIMIT // constant):,}"
        else:
            text = f"wraps once {names[0]} * {names[1]} reaches 2**31"
        if self.facts is not None:
            unknown = [n for n, s in zip(names, sides) if s is None]
            text += f"; {' and '.join(unknown)} not known {self.facts.where}"
        return text

    # --- per op ----------------------------------------------------------------------------

    def _compute(self, value):
        op, _ = self.flow.producer(value)
        if op is not None:
            return self._op_interval(op, value)
        if value in self.graph.block_args:
            return self._argument_interval(value)
        return None

    def _op_interval(self, op, value):
        name = op.name
        if name == "arith.constant":
            return None if op.constant is None else (op.constant, op.constant)
        if name == "tt.make_range":
            match = _RANGE.search(op.text)
            return (int(match.group(2)), int(match.group(1)) - 1) if match else None
        if name in ("tt.get_program_id", "tt.get_num_programs"):
            grid = self.facts.grid if self.facts else None
            axis = op.axis or 0
            count = (grid[axis] if axis < len(grid) else 1) if grid else None
            if count is None and axis:
                # CUDA launches at most 65535 programs along the grid's second and third axes.
                return (0, GRID_YZ_LIMIT - 1) if name == "tt.get_program_id" else (1, GRID_YZ_LIMIT)
            if count is None:
                return None
            return (0, count - 1) if name == "tt.get_program_id" else (count, count)
        if name in LOADED_VALUE_OPS:
            root = self.flow.pointer_root(op.operands[0])
            return self.facts.tables.get(root) if self.facts and root else None
        if name in PASS_THROUGH:
            return self.interval(op.operands[0])
        sides = [self.interval(v) for v in op.operands[:2]]
        if name in ("arith.addi", "arith.subi", "arith.muli", "arith.shli", "arith.maxsi",
                    "arith.minsi", "arith.divsi", "arith.divui", "arith.remsi", "arith.remui",
                    "arith.andi", "arith.ceildivsi"):
            return _binary(name, *sides)
        if name == "arith.select":
            return _union([self.interval(v) for v in op.operands[1:3]])
        if name in STRUCTURED:
            return _union([self.interval(v) for v in self.flow.sources(value)])
        return None

    def _argument_interval(self, value):
        block, position = self.graph.block_args[value]
        owner = self.graph.block_owner.get(block)
        if owner is None:
            return None
        op = self.graph.ops[owner[0]]
        if op.name == "scf.for" and position == 0:
            lower, upper, step = (self.interval(v) for v in op.operands[:3])
            if lower is None or upper is None or step is None or step[0] <= 0:
                return None
            return (lower[0], max(lower[0], upper[1] - 1))
        if op.name == "tt.func" and self.flow._symbol_of(op) == self.flow.kernel_symbol:
            name = self.flow.parameter_name(self.flow.kernel_symbol, position)
            known = self.facts.ints.get(name) if self.facts else None
            return None if known is None else (known, known)
        return _union([self.interval(v) for v in self.flow.sources(value)])


def _binary(name, a, b):
    if name in ("arith.remsi", "arith.remui") and b is not None and b[0] > 0:
        if a is None or a[0] < 0:
            return (-(b[1] - 1), b[1] - 1) if name == "arith.remsi" or a is not None else \
                (0, b[1] - 1)
        return (0, min(a[1], b[1] - 1))
    if name == "arith.andi":
        limits = [side[1] for side in (a, b) if side is not None and side[0] >= 0]
        return (0, min(limits)) if limits else None
    if a is None or b is None:
        return None
    if name == "arith.addi":
        return (a[0] + b[0], a[1] + b[1])
    if name == "arith.subi":
        return (a[0] - b[1], a[1] - b[0])
    if name == "arith.muli":
        corners = [x * y for x in a for y in b]
        return (min(corners), max(corners))
    if name == "arith.shli":
        if b[0] < 0 or b[1] > 62:
            return None
        corners = [x * 2**y for x in a for y in b]
        return (min(corners), max(corners))
    if name == "arith.maxsi":
        return (max(a[0], b[0]), max(a[1], b[1]))
    if name == "arith.minsi":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if name in ("arith.divsi", "arith.divui", "arith.ceildivsi"):
        if b[0] <= 0:
            return None
        corners = [int(x / y) for x in a for y in b]
        return (min(corners), max(corners) + (1 if name == "arith.ceildivsi" else 0))
    return None


def _union(intervals):
    if not intervals or any(i is None for i in intervals):
        return None
    return (min(i[0] for i in intervals), max(i[1] for i in intervals))


def _number(value):
    return f"{value:,}" if value < 10**6 else f"{value:.2e}".replace("e+0", "e").replace("e+", "e")
