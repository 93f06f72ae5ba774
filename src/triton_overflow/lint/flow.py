"""Where an integer value can come from, through every op that carries it.

``Flow.sources(value)`` lists the values a value is made from: the operands of integer
arithmetic, casts and shape ops; for a loop-carried value its initial value and what each
iteration yields (``scf.for`` / ``scf.while``); for a branch result what each branch yields
(``scf.if``); for a call result what the callee returns, and for a callee's parameter what every
call passes. ``Flow.origins(value)`` follows them to the leaves: program ids, kernel arguments,
loop variables, loaded values, block offsets and other computed values (constants are dropped).
"""

import re
from dataclasses import dataclass

from triton_overflow.lint.ops import CARRIERS, LOADED_VALUE_OPS, POINTER_CARRIERS, STRUCTURED


@dataclass(frozen=True)
class Origin:
    kind: str  # "program id", "program count", "int argument", "pointer argument",
    #            "loop variable", "loaded value", "atomic result", "block offsets",
    #            "computed value"
    name: str = ""  # the argument, the table a value is loaded from, the axis, the op

    def describe(self):
        if self.kind == "program id":
            return f"program_id({self.name})"
        if self.kind == "program count":
            return f"num_programs({self.name})"
        if self.kind in ("int argument", "pointer argument"):
            return f"{self.kind} `{self.name}`"
        if self.kind == "loaded value":
            return f"value loaded from `{self.name}`" if self.name else "loaded value"
        if self.kind == "atomic result":
            return f"old value an atomic returned from `{self.name}`" if self.name else self.kind
        if self.kind == "loop variable" and self.name:
            return f"loop variable over {self.name}"
        return self.kind


class Flow:
    def __init__(self, graph):
        self.graph = graph
        self.ops = graph.ops
        self.call_sites = {}
        for op in self.ops:
            if op.name == "tt.call" and op.callee:
                self.call_sites.setdefault(op.callee, []).append(op)
        self.kernel_symbol = next((symbol for symbol, (index, _) in graph.functions.items()
                                   if self.ops[index].text.startswith("tt.func public")), None)
        self._origins = {}

    # --- structure ---------------------------------------------------------------------

    def producer(self, value):
        found = self.graph.producer.get(value)
        return (self.ops[found[0]], found[1]) if found else (None, None)

    def sources(self, value):
        """The values ``value`` is made from (empty for a leaf)."""
        op, position = self.producer(value)
        if op is not None:
            return self._result_sources(op, position)
        if value in self.graph.block_args:
            return self._argument_sources(*self.graph.block_args[value])
        return []

    def _result_sources(self, op, position):
        name = op.name
        if name in CARRIERS:
            return op.operands[1:] if name == "arith.select" else list(op.operands)
        if name == "scf.for":
            return [op.operands[3 + position]] + self._yielded(op, 0, position)
        if name == "scf.if":
            return self._yielded(op, 0, position) + self._yielded(op, 1, position)
        if name == "scf.while":
            return [t.operands[position + 1] for t in self.graph.region_terminators(op, 0)
                    if t.name == "scf.condition" and len(t.operands) > position + 1]
        if name == "tt.call" and op.callee in self.graph.functions:
            index, _ = self.graph.functions[op.callee]
            return [t.operands[position] for t in self._returns(self.ops[index])
                    if len(t.operands) > position]
        return []

    def _argument_sources(self, block, position):
        owner = self.graph.block_owner.get(block)
        if owner is None:
            return []
        op, region = self.ops[owner[0]], owner[1]
        if op.name == "scf.for":
            if position == 0:
                return []
            return [op.operands[3 + position - 1]] + self._yielded(op, 0, position - 1)
        if op.name == "scf.while":
            if region == 0:
                initial = [op.operands[position]] if position < len(op.operands) else []
                return initial + self._yielded(op, 1, position)
            return [t.operands[position + 1] for t in self.graph.region_terminators(op, 0)
                    if t.name == "scf.condition" and len(t.operands) > position + 1]
        if op.name == "tt.func":
            symbol = self._symbol_of(op)
            return [call.operands[position] for call in self.call_sites.get(symbol, [])
                    if len(call.operands) > position]
        return []

    def _yielded(self, op, region, position):
        if region >= len(op.regions):
            return []
        return [t.operands[position] for t in self.graph.region_terminators(op, region)
                if t.name == "scf.yield" and len(t.operands) > position]

    def _returns(self, function):
        return [self.ops[i] for block in self.graph.region_blocks.get(function.regions[0], [])
                for i in self.graph.block_ops.get(block, []) if self.ops[i].name == "tt.return"]

    def _symbol_of(self, function_op):
        for symbol, (index, _) in self.graph.functions.items():
            if index == function_op.index:
                return symbol
        return None

    # --- leaves -------------------------------------------------------------------------

    def leaf(self, value):
        """The ``Origin`` of a value that ``sources`` does not look through, None for a constant."""
        op, _ = self.producer(value)
        if op is not None:
            if op.name == "arith.constant":
                return None
            if op.name == "tt.get_program_id":
                return Origin("program id", str(op.axis or 0))
            if op.name == "tt.get_num_programs":
                return Origin("program count", str(op.axis or 0))
            if op.name in LOADED_VALUE_OPS:
                kind = "loaded value" if op.name == "tt.load" else "atomic result"
                return Origin(kind, self.pointer_root(op.operands[0]) or "")
            if op.name == "tt.make_range":
                return Origin("block offsets")
            if op.name in CARRIERS or op.name in STRUCTURED:
                return None  # looked through by ``sources``
            return Origin("computed value", op.name)
        if value not in self.graph.block_args:
            return Origin("computed value")
        block, position = self.graph.block_args[value]
        owner = self.graph.block_owner.get(block)
        if owner is None:
            return Origin("computed value")
        op = self.ops[owner[0]]
        if op.name == "scf.for" and position == 0:
            return Origin("loop variable", self.describe_bound(op.operands[1]))
        if op.name == "tt.func":
            symbol = self._symbol_of(op)
            if symbol == self.kernel_symbol:
                name = self.parameter_name(symbol, position)
                pointer = "ptr" in self.graph.value_types.get(value, "")
                return Origin("pointer argument" if pointer else "int argument", name)
            return None
        if op.name in ("scf.for", "scf.while"):
            return None
        return Origin("computed value", op.name)

    def parameter_name(self, symbol, position):
        names = self.graph.functions.get(symbol, (None, []))[1]
        return names[position] if position < len(names) else f"argument {position}"

    def origins(self, value):
        """Every non-constant leaf ``value`` is made from."""
        if value in self._origins:
            return self._origins[value]
        found, seen, stack = set(), set(), [value]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            leaf = self.leaf(current)
            if leaf is not None:
                found.add(leaf)
                continue
            stack.extend(self.sources(current))
        self._origins[value] = frozenset(found)
        return self._origins[value]

    def upstream(self, values, stop=frozenset()):
        """Every op that produces a value ``values`` are computed from, through what carries
        an integer (``sources``), each once; not past an op named in ``stop``, nor yielding it."""
        seen, stack = set(), list(values)
        while stack:
            value = stack.pop()
            if value in seen:
                continue
            seen.add(value)
            op, _ = self.producer(value)
            if op is not None and op.name in stop:
                continue
            if op is not None:
                yield op
            stack.extend(self.sources(value))

    def pointer_root(self, pointer):
        """The kernel parameter a pointer value was derived from, or None."""
        seen, stack = set(), [pointer]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            op, _ = self.producer(current)
            if op is not None and op.name in POINTER_CARRIERS:
                operands = op.operands[1:] if op.name == "arith.select" else op.operands[:1]
                stack.extend(operands)
                continue
            if op is None and current in self.graph.block_args:
                leaf = self.leaf(current)
                if leaf is not None and leaf.kind == "pointer argument":
                    return leaf.name
            stack.extend(self.sources(current))
        return None

    def describe_bound(self, value):
        names = sorted(o.describe() for o in self.origins(value))
        return " and ".join(names) if names else "constants"


def is_i32(printed_type):
    return bool(re.search(r"(^|x)i32(>|$|,)", printed_type or ""))
