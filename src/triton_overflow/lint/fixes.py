"""The fix of a finding: the source to write instead of the i32 product, as one replacement.

The widening goes on an operand, before the multiply: ``tl.cast(row, tl.int64) * stride``.
``tl.cast`` rather than ``row.to(tl.int64)``, because Triton makes an int argument equal to 1
a compile-time constant, which has no ``.to`` (a common reason teams move the cast after the
multiply, where it comes too late). The operand widened is the one that grows with the
workload (a value loaded from a table first, then a program id or a loop variable). Where that
operand is a name given once, from a program id, a load or an atomic, it is widened there
(``row = tl.program_id(0).to(tl.int64)``): that fixes every product it feeds, and keeps the
values a branch or a loop joins of one type (a product widened alone in one branch of an ``if``
does not compile). A cast written around the product (``tl.cast(B * T, tl.int64)``,
``(a * b).to(tl.int64)``) is replaced whole: it changes the type of a result that has already
wrapped.
"""

import ast
import re
from dataclasses import dataclass

from triton_overflow.lint.ops import LOADS
from triton_overflow.lint.syntax import (block_pointer_offsets, call_name, segment,
                                          source_tree)

# What an operand is made of, by how surely it grows with the workload (``flow.Origin.kind``).
_GROWTH = {"loaded value": 3, "atomic result": 3, "program id": 2, "loop variable": 2,
           "computed value": 1}


@dataclass(frozen=True)
class Fix:
    replace: str  # the source as written (whitespace inside it made single spaces)
    with_: str | None  # what to write instead; None where the fix is advice only
    line: int  # where ``replace`` starts
    also: str = ""  # a wider fix, in words (widen a loaded index where it is loaded)
    elsewhere: bool = False  # on another line than the finding's (where the operand is made)
    verified: bool | None = None  # compiled with the fix written in, the product gone

    def describe(self):
        if self.with_ is None:
            return self.also
        text = f"replace `{self.replace}` with `{self.with_}`"
        text += f" on line {self.line}" if self.elsewhere else ""
        text += f"; {self.also}" if self.also else ""
        if self.verified is False:
            text += (" (this edit alone did not compile or left the product here: the value is "
                     "carried through a loop or joined by a branch with others to widen too)")
        return text

    def as_dict(self):
        return {"line": self.line, "replace": self.replace, "with": self.with_,
                "also": self.also or None, "verified": self.verified, "text": self.describe()}


def widenings(file, line, product, left, right, sides, shift=False, cast_after=False,
              block_offsets=False):
    """The candidate ``Fix``es of the product ``left * right`` (``left << right`` with
    ``shift``) written at ``file:line``, best first, where ``sides`` are the two operands'
    origins (``flow.Origin`` sets); none where the product is not an expression with two sides
    (a call into a library). ``block_offsets``: the product is an offset of a block pointer,
    which Triton keeps 32-bit."""
    if not left or not right:
        return []
    growth = [max((_GROWTH.get(origin.kind, 0) for origin in side), default=0)
              for side in sides]
    widen_left = growth[0] > growth[1] or growth[0] == growth[1] and not _number(left)
    operator = "<<" if shift else "*"
    augmented = re.match(r"^(?P<target>.+?)\s*(\*|<<)=\s*(?P<value>.+)$", product)
    if augmented:
        target = augmented["target"]
        value = _cast(right) if not widen_left else right
        written = f"{target} = {_cast(left) if widen_left else left} {operator} {value}"
    else:
        written = (f"{_cast(left)} {operator} {right}" if widen_left
                   else f"{left} {operator} {_cast(right)}")
    if block_offsets:
        return [Fix(product, None, line, verified=False, also=(
            f"block pointers take 32-bit offsets only: move this offset, times its dimension's "
            f"stride and widened (`{written}` times that stride), into the block pointer's base, "
            f"and give 0 here"))]
    replaced = product
    if cast_after:
        replaced = _late_cast(file, line, product) or product
    chosen = sides[0] if widen_left else sides[1]
    loaded = sorted(o.name for o in chosen if o.kind == "loaded value" and o.name)
    also = ""
    if loaded and len(chosen) == len(loaded):
        names = ", ".join(f"`{name}`" for name in loaded)
        also = (f"or widen the index where it is loaded from {names} "
                f"(`tl.load(...).to(tl.int64)`), which fixes every product it feeds")
    local = Fix(replaced, written, line, also)
    made = None if cast_after else _made_once(file, line, left if widen_left else right)
    return [made, local] if made is not None else [local]


_MAKERS = frozenset({"program_id"}) | LOADS


def _number(text):
    try:
        return isinstance(ast.literal_eval(text), (int, float))
    except (ValueError, SyntaxError, TypeError):
        return False


def _made_once(file, line, name):
    """The ``Fix`` that widens ``name`` where it is made, if the function holding
    ``file:line`` gives it a value once, from a program id, a load or an atomic."""
    tree = source_tree(file) if name.isidentifier() else None
    if tree is None:
        return None
    function = next((node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                     and node.lineno <= line <= node.end_lineno
                     and not any(isinstance(inner, ast.FunctionDef) and inner is not node
                                 and inner.lineno <= line <= inner.end_lineno
                                 for inner in ast.walk(node))), None)
    if function is None or name in {argument.arg for argument in function.args.args}:
        return None
    stores = [node for node in ast.walk(function) if isinstance(node, ast.Name)
              and node.id == name and isinstance(node.ctx, ast.Store)]
    made = [node for node in ast.walk(function) if isinstance(node, ast.Assign)
            and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name]
    if len(stores) != 1 or len(made) != 1 or not isinstance(made[0].value, ast.Call):
        return None
    if _used_in_block_pointers(function, name):
        return None  # widened there, the block pointer would refuse it
    if call_name(made[0].value) not in _MAKERS:
        return None
    value = " ".join((segment(file, made[0].value) or "").split())
    return Fix(f"{name} = {value}", f"{name} = {value}.to(tl.int64)", made[0].lineno,
               elsewhere=made[0].lineno != line)


def _used_in_block_pointers(function, name):
    return any(isinstance(inner, ast.Name) and inner.id == name
               for node in ast.walk(function) if isinstance(node, ast.Call)
               for offset in block_pointer_offsets(node) for inner in ast.walk(offset))


def _cast(side):
    """``side`` widened before any multiply in it: a chain ``pid * heads`` widens its first
    factor (``tl.cast(pid, tl.int64) * heads``), never the product it has already made."""
    inner = side[1:-1] if side.startswith("(") and side.endswith(")") and \
        _balanced(side[1:-1]) else side
    try:
        tree = ast.parse(inner, mode="eval").body
    except SyntaxError:
        return f"tl.cast({inner}, tl.int64)"
    leaf = tree
    while isinstance(leaf, ast.BinOp) and isinstance(leaf.op, (ast.Mult, ast.LShift)):
        leaf = leaf.left
    if leaf is tree:
        return f"tl.cast({inner}, tl.int64)"
    start = _offset(inner, leaf.lineno, leaf.col_offset)
    end = _offset(inner, leaf.end_lineno, leaf.end_col_offset)
    widened = _cast(inner[start:end])
    return inner[:start] + widened + inner[end:]


def _offset(text, line, column):
    lines = text.splitlines(keepends=True)
    return sum(len(lines[n]) for n in range(line - 1)) + column


def _balanced(text):
    depth = 0
    for character in text:
        depth += {"(": 1, ")": -1}.get(character, 0)
        if depth < 0:
            return False
    return depth == 0


def _late_cast(file, line, product):
    """The cast written around ``product`` on ``file:line`` (``tl.cast(a * b, tl.int64)``,
    ``(a * b).to(tl.int64)``), as written; None if there is none."""
    tree = source_tree(file)
    if tree is None:
        return None
    wanted = _normal(product)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.lineno <= line <= node.end_lineno:
            continue
        function = node.func
        if isinstance(function, ast.Attribute) and function.attr == "to":
            inside = function.value
        elif (isinstance(function, ast.Attribute) and function.attr == "cast"
              or isinstance(function, ast.Name) and function.id == "cast") and node.args:
            inside = node.args[0]
        else:
            continue
        if _normal(segment(file, inside) or "") == wanted:
            return " ".join((segment(file, node) or "").split())
    return None


def _normal(expression):
    text = re.sub(r"\s+", "", expression)
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1]
    return text
