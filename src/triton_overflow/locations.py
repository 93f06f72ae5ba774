"""Where source sits: a module's file, the function holding a line, the functions a line
reaches, and a file as reports show it (relative to the working directory).

The static check and the huge-run engine both name kernels by where they are; this is the one
place that reads a file's functions for them.
"""

import ast
import importlib.util
from pathlib import Path


def functions_reaching(file, line):
    """The names of the functions of ``file`` that are, or call (through the file's other
    functions), the function holding ``line``: the kernels a change on that line can change.
    None when the line is in no function."""
    tree = ast.parse(Path(file).read_text())
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    target = function_at(file, line)
    if target not in functions:
        return None
    calls = {name: {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
                    if isinstance(n, (ast.Name, ast.Attribute))}
             for name, node in functions.items()}
    reaching, grew = {target}, True
    while grew:
        more = {name for name, used in calls.items() if used & reaching} - reaching
        reaching |= more
        grew = bool(more)
    return reaching


def function_at(file, line):
    """The function whose body holds ``file:line``."""
    try:
        tree = ast.parse(Path(file).read_text())
    except (OSError, SyntaxError):
        return "unknown kernel"
    inside = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
              and node.lineno <= line <= node.end_lineno]
    return min(inside, key=lambda n: n.end_lineno - n.lineno).name if inside else "unknown kernel"


def module_file(module):
    """The resolved path of ``module`` (dotted)."""
    return str(Path(importlib.util.find_spec(module).origin).resolve())


def shown(file, root=None):
    """``file`` relative to ``root`` (the working directory) where it is under it, else as given."""
    root = Path.cwd() if root is None else Path(root)
    try:
        return str(Path(file).resolve().relative_to(root.resolve()))
    except (ValueError, OSError):
        return str(file)
