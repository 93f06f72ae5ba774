"""The static check of one module as the generated tests read it, and where a line sits.

``module_summary`` runs in a child process: the check's exit code, text, kernels, the i32
products of each kernel's flag combinations, and its findings, as JSON. ``function_at`` and
``functions_reaching`` place a line among a file's functions.
"""

import ast
import importlib.util
from pathlib import Path


def module_summary(module, twins, widening=None):
    """A JSON summary of the static check of ``module`` (dotted; its twins with ``twins``, or with
    ``widening`` the mutant that undoes only that widening)."""
    from triton_overflow.lint import lint
    from triton_overflow.lint.report import as_text, shown
    from triton_overflow.twin import write_twin
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        raise LookupError(f"module {module} not found")
    path, only = spec.origin, None
    if widening is not None:
        from triton_overflow.twin import list_widenings
        path = str(write_twin(spec.origin, only=widening))
        only = functions_reaching(spec.origin, list_widenings(spec.origin)[widening].line)
    report = lint([path], twins=twins, only=only)
    origin = {path: spec.origin}
    return {"exit": report.exit_code, "text": as_text(report, [path]),
            "kernels": [r.name for r in report.results],
            "variants": {r.name: [sorted([f"{shown(origin.get(file, file))}:{line}", product]
                                         for file, line, product in keys)
                                  for keys in r.per_variant] for r in report.results},
            "findings": [{"kernel": f.kernel,
                          "where": f"{shown(origin.get(f.file, f.file))}:{f.line}",
                          "product": f.product, "level": f.level} for f in report.findings]}


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
