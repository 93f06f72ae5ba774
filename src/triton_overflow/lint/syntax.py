"""Small readers of a jit function's Python syntax tree: its definition, the name a call is
made by, a call's argument by position or keyword, the names and the dtype an expression spells."""

import ast
import inspect
import textwrap


def function_tree(jit_function):
    """The ``ast.FunctionDef`` of a ``JITFunction``'s source."""
    source = textwrap.dedent(inspect.getsource(jit_function.fn))
    module = ast.parse(source)
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    raise ValueError(f"no function definition in the source of {jit_function.fn.__name__}")


def call_name(node):
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def argument(node, position, keyword):
    for item in node.keywords:
        if item.arg == keyword:
            return item.value
    return node.args[position] if len(node.args) > position else None


def names(expression):
    return {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)}


def dtype_name(node):
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None
