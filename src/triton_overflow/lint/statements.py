"""Module-level statements of a kernel file, for the loader: running one in a namespace, the
statements inside a compound one, and whether an expression can be evaluated without running
any of the file's own code."""

import ast

from triton_overflow.lint import standins


def inner_statements(statement):
    """The statements inside a module-level ``if`` / ``try`` / ``with``, in order, or None."""
    if isinstance(statement, ast.If):
        return statement.body + statement.orelse
    if isinstance(statement, ast.Try) or type(statement).__name__ == "TryStar":
        inner = list(statement.body)
        for handler in statement.handlers:
            inner += handler.body
        return inner + statement.orelse + statement.finalbody
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return statement.body
    return None


def run(statement, file, namespace):
    exec(compile(ast.Module(body=[statement], type_ignores=[]), str(file), "exec"), namespace)


def error_line(error):
    """What a statement that failed raised, in one line."""
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


def is_safe_expression(node, lambdas=False):
    """A literal, a container of them, a name in Triton's own modules, or a call of
    ``tl.constexpr(...)`` / ``triton.Config(...)`` or of Triton's own API
    (``triton.runtime.jit.constexpr_function(core.get_int_dtype)``) on them (and, with
    ``lambdas``, lambdas, which run nothing until called): what can be evaluated without
    running the file's own code."""
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if lambdas and isinstance(node, ast.Lambda):
        return True
    if isinstance(node, ast.IfExp):
        # ``tl.constexpr(0x8000) if HAS_TRITON else 0x8000``: a test of names runs nothing.
        return all(isinstance(n, (ast.Name, ast.Attribute, ast.Constant, ast.Compare,
                                  ast.BoolOp, ast.UnaryOp, ast.Load, ast.cmpop, ast.boolop,
                                  ast.unaryop))
                   for n in ast.walk(node.test)) and \
            is_safe_expression(node.body, lambdas) and is_safe_expression(node.orelse, lambdas)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(is_safe_expression(e, lambdas) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and is_safe_expression(k, lambdas) and
                   is_safe_expression(v, lambdas) for k, v in zip(node.keys, node.values))
    if isinstance(node, ast.Call):
        name = standins._dotted(node.func) or ""
        return (name.split(".")[-1] in ("constexpr", "Config") or
                name.split(".")[0] in _TRITON_ROOTS and "." in name) and \
            all(is_safe_expression(a, lambdas) for a in node.args) and \
            all(k.arg and is_safe_expression(k.value, lambdas) for k in node.keywords)
    if isinstance(node, ast.Attribute):
        return (standins._dotted(node) or "").split(".")[0] in _TRITON_ROOTS
    return False


# The names a kernel file reaches Triton's own modules by (``core``: ``triton.language.core``).
_TRITON_ROOTS = ("tl", "triton", "language", "core")
