"""The number an arithmetic expression computes as written, from literals and named numbers,
without running it: an envelope's shapes (``requests * (drafts + 1) * vocab``) and a
launcher's limits (``2**31 - 1``, ``INT32_MAX // 2``)."""

import ast
import operator

OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
             ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
             ast.LShift: operator.lshift}
# Past this a power or a shift is no size, only a slow number to compute.
_LARGEST_EXPONENT = 64


def value(node, names, kinds=(int,)):
    """The number ``node`` computes from literals of ``kinds`` and ``names`` ({name:
    number}) with ``OPERATORS`` and negation, or None where it reads anything else (a call, an
    attribute, a name not in ``names``), divides by zero, raises to or shifts by less than 0 or
    more than 64, or divides exactly where ``kinds`` has no float."""
    if isinstance(node, ast.Constant):
        number = node.value
        return number if isinstance(number, kinds) and not isinstance(number, bool) else None
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = value(node.operand, names, kinds)
        return None if inner is None else -inner
    if not (isinstance(node, ast.BinOp) and type(node.op) in OPERATORS) or \
            isinstance(node.op, ast.Div) and float not in kinds:
        return None
    left, right = value(node.left, names, kinds), value(node.right, names, kinds)
    if left is None or right is None or \
            isinstance(node.op, (ast.Pow, ast.LShift)) and not 0 <= right <= _LARGEST_EXPONENT or \
            isinstance(node.op, (ast.Div, ast.FloorDiv)) and right == 0:
        return None
    return OPERATORS[type(node.op)](left, right)
