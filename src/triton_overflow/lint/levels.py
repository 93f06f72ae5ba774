"""How much a finding matters: ``error``, ``warning`` or ``note``, and why, in one line.

Each side of a product is one of:

* a **workload index**: it grows with the work a launch is given: ``program_id(0)``, a value
  loaded from a table (a slot, a token, a page, an expert), an atomic's slot, a loop that
  strides over the programs (persistent) or runs to a loaded count;
* an **argument**: an int argument (a stride, a size), a loop from a constant to an argument
  (a reduction over K, a walk along one row), a remainder by an argument, a computed value;
* **bounded**: at most a number the kernel itself states: a constant or constexpr, a
  ``tl.arange``, a program id of grid axis 1 or 2 (CUDA launches at most 65535 there), a loop
  over constants, the program id of a persistent kernel (as many programs as the device runs).

``error``: a workload index times an argument or another workload index, or times a bound when
the product is itself the offset (``block * BLOCK_SIZE`` over a flat tensor, ``row * 151936``):
what a reviewer asks to widen. ``warning``: bounded by what the kernel states (a bound times an
argument, two arguments, a workload index times a bound that is scaled again before it reaches
the address, like a tile's first row ``pid_m * BLOCK_M``). ``note``: bounded by numbers alone.
Launch facts (``--launches``) or an envelope (``--limits``) replace the level by the answer:
``error`` where the product reaches 2**31 there, ``note`` where it stays below.
"""

import functools

from triton_overflow.lint.ops import (
    CARRIERS, DIVISIONS, LOADED_VALUE_OPS, PASS_THROUGH, REMAINDERS, STRUCTURED)

ERROR, WARNING, NOTE = "error", "warning", "note"
LEVELS = (ERROR, WARNING, NOTE)
BOUNDED, ARGUMENT, WORKLOAD = 1, 2, 3
GRID_AXIS_LIMIT = 65_535  # programs CUDA launches at most on grid axis 1 or 2


# The operand that holds an access's mask, and the ops a mask is combined through.
_MASK_OPERAND = {"tt.load": 1, "tt.store": 2, "tt.atomic_rmw": 2}
_MASK_COMBINERS = frozenset({"arith.andi", "tt.broadcast", "tt.expand_dims", "tt.splat",
                             "tt.reshape", "ttg.convert_layout"})


def _below(comparison):
    """Whether an ``arith.cmpi`` keeps its first operand below its second (``<``, ``<=``)."""
    predicate = comparison.text.split("arith.cmpi", 1)[-1].split(",", 1)[0].strip()
    return predicate in ("slt", "sle", "ult", "ule")


class Levels:
    """Classifies the operands of one compiled kernel's products."""

    def __init__(self, graph, flow, static):
        self.graph = graph
        self.flow = flow
        self.static = static
        self._memo = {}
        self.persistent = any(self._strides_over_programs(op) for op in graph.ops
                              if op.name == "scf.for")

    def level(self, op, direct, facts_largest=None, facts_given=False):
        """(level, why) of a product op; ``direct`` when the product reaches the address
        without being scaled again."""
        sides = [self.side(v) for v in op.operands[:2]]
        if facts_given and facts_largest is not None:
            return (ERROR if facts_largest >= 2**31 else NOTE), ""  # the headroom says why
        dividend = self._at_most_dividend(op)
        if dividend is not None:
            return NOTE, (f"a quotient times a factor of its divisor: at most what was "
                          f"divided, {self.side(dividend)[1]}")
        (high, high_why), (low, low_why) = sorted(sides, key=lambda s: -s[0])
        if direct == "block offsets" and high == WORKLOAD and low == BOUNDED:
            return WARNING, (f"{high_why} times {low_why}: an offset of a block pointer, "
                             f"bounded by the block's shape")
        if high == WORKLOAD:
            if low >= ARGUMENT:
                return ERROR, f"{high_why} grows with the workload; {low_why} can be any size"
            if direct:
                return ERROR, (f"{high_why} grows with the workload, times {low_why}, and the "
                               f"product is the offset itself")
            return WARNING, (f"{high_why} times {low_why}: an index that is scaled again "
                             f"before the address, so it wraps only past 2**31 of them")
        if high == ARGUMENT:
            return WARNING, f"bounded by the kernel's own arguments: {high_why} times {low_why}"
        return NOTE, f"bounded: {high_why} times {low_why}"

    def grows(self, op):
        """Whether a product runs over the rows of what it indexes, as far as the tensor goes:
        a side that grows with the workload (``program_id(0)``, a loaded slot, page or token,
        a loop over the programs or to a loaded count, ``offs_m % M`` of a tile on axis 0), or
        a tile of rows on grid axis 1 or 2 (``pid_m * BLOCK_M``, scaled past what the axis alone
        holds). A bare program id of axis 1 or 2 (a head, a split) is an inner index, and so is
        the inner coordinate of a flat index the kernel splits (a token's place in its page):
        they do not."""
        if self._at_most_dividend(op) is not None:
            return False
        return any(self._runs_over_rows(value) for value in op.operands[:2])

    def outer_on_grid(self, op):
        """Whether a product is an index on grid axis 1 or 2 (a batch, a head: ``bid``,
        ``off_hz // H``) times an int argument (a stride): it runs over the rows of what it
        indexes where the layout puts that index outermost (``[batch, seq, ...]``,
        ``[batch x heads, seq, dim]``), which the kernel alone does not show. The inner part of
        an index the kernel splits (``off_hz % H``) is not one."""
        for index, stride in (op.operands[:2], op.operands[1::-1]):
            if self._grid_index(index) and not self._inner_coordinate(index) and \
                    {o.kind for o in self.flow.origins(stride)} == {"int argument"}:
                return True
        return False

    def divided(self, op):
        """Whether a side of the product is a quotient (``token // top_k``)."""
        return any((producer := self._through_casts(value)) is not None and
                   producer.name in DIVISIONS for value in op.operands[:2])

    def grows_by_workload(self, op):
        """Whether a product runs over rows through the workload itself (``program_id(0)``, a
        loaded index, a loop over the programs), not only through a tile on grid axis 1 or 2."""
        return self._at_most_dividend(op) is None and \
            any(self._runs_over_rows(value, tiles=False) for value in op.operands[:2])

    def _at_most_dividend(self, op):
        """The dividend ``a`` of a product ``(a // (b * c)) * b``: the first program of a
        group of programs, ``pid // (GROUP_M * n) * GROUP_M``, is at most ``pid``. Else None."""
        for quotient, factor in (op.operands[:2], op.operands[1::-1]):
            division = self._through_casts(quotient)
            if division is not None and division.name in DIVISIONS and \
                    self._root(factor) in self._factors(division.operands[1]):
                return division.operands[0]
        return None

    def _factors(self, value):
        """The factors of a product (``b`` and ``c`` of ``b * c``), each as ``_root`` gives it."""
        op = self._through_casts(value)
        if op is not None and op.name == "arith.muli":
            return self._factors(op.operands[0]) | self._factors(op.operands[1])
        return {self._root(value)}

    def _runs_over_rows(self, value, tiles=True):
        """Whether ``value`` runs over the rows of what it indexes; with ``tiles`` false, only
        through the workload itself, not through a tile on grid axis 1 or 2."""
        beneath = self._beneath_bounded(value)
        if self._inner_coordinate(beneath) or beneath in self._masked_below_constants:
            return False
        op = self._through_casts(value)
        if op is not None and op.name in ("arith.muli", "arith.shli") and \
                any(self._inner_coordinate(factor) for factor in op.operands[:2]):
            return any(self._runs_over_rows(factor, tiles) for factor in op.operands[:2])
        origins = self.flow.origins(value)
        kinds = {origin.kind for origin in origins}
        if kinds & {"loaded value", "atomic result"}:
            return True
        interval = self.static.interval(value)
        if interval is not None and max(abs(interval[0]), abs(interval[1])) <= GRID_AXIS_LIMIT:
            return False  # bounded by the kernel's own numbers (``pid % SPLIT_K * BLOCK_K``)
        axes = {origin.name for origin in origins if origin.kind == "program id"}
        if "0" in axes and not self.persistent:
            return True
        if axes:  # past what grid axis 1 or 2 holds alone: a tile of rows (``pid_m * BLOCK_M``)
            return tiles
        return self.side(value)[0] == WORKLOAD

    # --- one side ----------------------------------------------------------------------

    def side(self, value):
        """(class, description) of one operand."""
        if value in self._memo:
            return self._memo[value] or (ARGUMENT, "a value computed in a loop")
        self._memo[value] = None  # a loop-carried cycle
        found = self._side(value)
        self._memo[value] = found
        return found

    def _side(self, value):
        op, _ = self.flow.producer(value)
        interval = self.static.interval(value)
        if interval is not None and (op is None or op.name != "tt.get_program_id"):
            return BOUNDED, f"at most {max(abs(interval[0]), abs(interval[1])):,}"
        if op is None:
            return self._argument_side(value)
        name = op.name
        if name == "tt.get_program_id":
            if (op.axis or 0) == 0 and not self.persistent:
                return WORKLOAD, "program_id(0)"
            if (op.axis or 0) == 0:
                return BOUNDED, "the program id of a persistent kernel (as many as the device runs)"
            return BOUNDED, f"program_id({op.axis}) (at most 65,535 programs on that axis)"
        if name == "tt.get_num_programs":
            return ARGUMENT, f"num_programs({op.axis or 0})"
        if name in LOADED_VALUE_OPS:
            root = self.flow.pointer_root(op.operands[0])
            return WORKLOAD, f"a value loaded from `{root}`" if root else "a loaded value"
        if name in REMAINDERS:
            divisor = self.side(op.operands[1])
            return min(divisor[0], ARGUMENT), f"a remainder by {divisor[1]}"
        if name in DIVISIONS:
            return self.side(op.operands[0])
        if name == "arith.subi" and self._is_remainder(op):
            divisor = self.side(self._remainder_divisor(op))
            return min(divisor[0], ARGUMENT), f"a remainder by {divisor[1]}"
        if name in ("arith.muli", "arith.shli"):
            sides = [self.side(v) for v in op.operands[:2]]
            grid = [self._grid_index(v) for v in op.operands[:2]]
            for index in (0, 1):
                if grid[index] and sides[1 - index][0] == ARGUMENT:
                    return WORKLOAD, (f"a position ({sides[index][1]} times "
                                      f"{sides[1 - index][1]})")
            return max(sides, key=lambda s: s[0])
        if name in ("arith.minsi", "arith.minui", "arith.andi"):
            return min((self.side(v) for v in op.operands[:2]), key=lambda s: s[0])
        if name in CARRIERS or name in STRUCTURED:
            sources = self.flow.sources(value) if name not in ("arith.maxsi", "arith.maxui") \
                else op.operands[:2]
            sides = [self.side(v) for v in sources]
            sides = [s for s in sides if s[0] > 0] or [(BOUNDED, "constants")]
            return max(sides, key=lambda s: s[0])
        return ARGUMENT, f"a computed value ({name})"

    def _inner_coordinate(self, value):
        """``x % r`` (or a quotient of it) where the kernel also takes ``x // r``: a flat index
        split into an outer and an inner coordinate (a slot into its page and its place in the
        page, a row into its token and its head). The inner one stays below ``r`` however far
        ``x`` runs; ``offs_m % M`` alone, with no ``offs_m // M``, is not one."""
        op = self._through_casts(value)
        while op is not None and op.name in DIVISIONS:
            op = self._through_casts(op.operands[0])
        if op is None:
            return False
        if op.name in REMAINDERS:
            dividend, divisor = op.operands[:2]
        elif op.name == "arith.subi":
            dividend, divisor = op.operands[0], self._remainder_divisor(op)
            if divisor is None:
                return False
        else:
            return False
        return (self._root(dividend), self._root(divisor)) in self._quotients

    def _beneath_bounded(self, value):
        """``value`` without the bounded terms and factors around it: ``pid_n`` of ``pid_n *
        BLOCK_N + tl.arange(0, BLOCK_N)``, so that a tile of an inner coordinate is one too."""
        while True:
            op = self._through_casts(value)
            if op is None or op.name not in ("arith.addi", "arith.subi", "arith.muli"):
                return self._uncast(value)
            bounded = [self.side(v)[0] == BOUNDED for v in op.operands[:2]]
            if bounded == [False, True]:
                value = op.operands[0]
            elif bounded == [True, False]:
                value = op.operands[1]
            else:
                return self._uncast(value)

    @functools.cached_property
    def _masked_below_constants(self):
        """The indices an access's mask keeps below a constant, each as ``_beneath_bounded``
        gives it: ``i_d`` of ``o_d = i_d * BD + tl.arange(0, BD)`` under ``mask=o_d < D``,
        ``D`` a constexpr. A size fixed when the kernel compiles is a model's (a head's width,
        a hidden size), not the workload's, and the lanes the mask keeps stay below it."""
        masked, seen = set(), set()  # accesses share masks: each value is walked once
        stack = [op.operands[_MASK_OPERAND[op.name]] for op in self.graph.ops
                 if op.name in _MASK_OPERAND and len(op.operands) > _MASK_OPERAND[op.name]]
        while stack:
            value = stack.pop()
            if value in seen:
                continue
            seen.add(value)
            producer = self.flow.producer(value)[0]
            if producer is None:
                continue
            if producer.name in _MASK_COMBINERS:
                stack.extend(producer.operands[:2] if producer.name == "arith.andi"
                             else producer.operands[:1])
            elif producer.name == "arith.cmpi" and _below(producer):
                index, bound = producer.operands[:2]
                interval = self.static.interval(bound)
                if interval is not None and interval[0] == interval[1]:
                    masked.add(self._beneath_bounded(index))
        return masked

    @functools.cached_property
    def _quotients(self):
        """(dividend, divisor) of every division in the kernel, each as ``_root`` gives it."""
        return {(self._root(op.operands[0]), self._root(op.operands[1]))
                for op in self.graph.ops if op.name in DIVISIONS}

    def _through_casts(self, value):
        """The op that makes ``value``, past any cast, broadcast or reshape."""
        return self.flow.producer(self._uncast(value))[0]

    def _root(self, value):
        """``value`` before any cast, broadcast or reshape; a constant by its number."""
        value = self._uncast(value)
        op, _ = self.flow.producer(value)
        if op is not None and op.name == "arith.constant" and op.constant is not None:
            return ("constant", op.constant)
        return value

    def _uncast(self, value):
        op, _ = self.flow.producer(value)
        while op is not None and op.name in PASS_THROUGH:
            value = op.operands[0]
            op, _ = self.flow.producer(value)
        return value

    def _remainder_divisor(self, subtraction):
        """``b`` of ``a - (a // b) * b`` (a remainder written out), else None."""
        total, taken = subtraction.operands[:2]
        product, _ = self.flow.producer(taken)
        if product is None or product.name != "arith.muli":
            return None
        for quotient_value, divisor in (product.operands[:2], product.operands[1::-1]):
            quotient, _ = self.flow.producer(quotient_value)
            if quotient is not None and quotient.name in ("arith.divsi", "arith.divui") and \
                    quotient.operands[0] == total and quotient.operands[1] == divisor:
                return divisor
        return None

    def _is_remainder(self, subtraction):
        return self._remainder_divisor(subtraction) is not None

    def _grid_index(self, value):
        """A program id of grid axis 1 or 2, or one divided or shifted by arguments: scaled by
        a size it becomes a position along a dimension of unknown extent."""
        origins = self.flow.origins(value)
        axes = {o.name for o in origins if o.kind == "program id"}
        others = {o.kind for o in origins} - {"program id", "int argument"}
        return bool(axes) and "0" not in axes and not others

    def _argument_side(self, value):
        if value not in self.graph.block_args:
            return ARGUMENT, "a computed value"
        block, position = self.graph.block_args[value]
        owner = self.graph.block_owner.get(block)
        if owner is None:
            return ARGUMENT, "a computed value"
        op = self.graph.ops[owner[0]]
        if op.name == "scf.for" and position == 0:
            return self._loop_side(op)
        if op.name == "tt.func":
            leaf = self.flow.leaf(value)
            if leaf is not None:
                return ARGUMENT, leaf.describe()
        sides = [self.side(v) for v in self.flow.sources(value)]
        return max(sides, key=lambda s: s[0]) if sides else (ARGUMENT, "a computed value")

    def _loop_side(self, loop):
        if self._strides_over_programs(loop):
            return WORKLOAD, "a loop that strides over the programs (a persistent kernel's rows)"
        lower, upper = (self.side(v) for v in loop.operands[:2])
        if upper[0] == WORKLOAD or lower[0] == WORKLOAD:
            return WORKLOAD, f"a loop from {lower[1]} to {upper[1]}"
        return ARGUMENT, f"a loop to {upper[1]}"

    def _strides_over_programs(self, loop):
        """A loop that starts at program_id(0) or steps by num_programs(0)."""
        start, step = loop.operands[0], loop.operands[2]
        kinds = {(o.kind, o.name) for o in self.flow.origins(start)}
        steps = {(o.kind, o.name) for o in self.flow.origins(step)}
        return ("program count", "0") in steps or ("program id", "0") in kinds and \
            bool(steps - {("block offsets", "")})
