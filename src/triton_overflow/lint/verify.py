"""Whether a fix compiles and holds: the kernel rebuilt from its file with the fix written in,
compiled as the variant that showed the product, with the product gone and none added.

The jit functions of the kernel's file are compiled again from the edited text (their bodies
only: decorators are not run again) into a copy of the module's namespace, under a file name
of their own that ``linecache`` serves, so the findings of the rebuilt kernel are read as
any others are. Nothing of the file runs but the function definitions.
"""

import ast
import itertools
import linecache
import re
from collections import Counter

_ATTEMPTS = itertools.count()


def locate(text, line, replace):
    """(start, end) character offsets in ``text`` of ``replace`` as written from the start of
    ``line`` on (the report writes it with whitespace made single spaces); None if absent."""
    lines = text.splitlines(keepends=True)
    if not 1 <= line <= len(lines) or not replace.strip():
        return None
    offset = sum(len(lines[n]) for n in range(line - 1))
    pattern = r"\s*".join(re.escape(character) for character in replace if not character.isspace())
    match = re.compile(pattern).search(text, offset)
    if match is None or text.count("\n", offset, match.start()) > 0:
        return None  # not on its line
    return match.start(), match.end()


def region(text, span):
    """(start line, start column, end line, end column), 1-based, of a character span."""
    start, end = span
    start_line = text.count("\n", 0, start) + 1
    end_line = text.count("\n", 0, end) + 1
    start_column = start - (text.rfind("\n", 0, start) + 1) + 1
    end_column = end - (text.rfind("\n", 0, end) + 1) + 1
    return start_line, start_column, end_line, end_column


def products_after(kernel, fix, compile_variant):
    """The products (``Counter`` of their text) of ``kernel`` rebuilt with ``fix`` written
    into its file, where ``compile_variant(jit)`` gives a rebuilt kernel's findings; None
    where the fix's source is not where it says or the rebuilt kernel does not compile."""
    text = "".join(linecache.getlines(kernel.file))
    edited = edited_text(text, fix.line, fix.replace, fix.with_)
    if edited is None:
        return None
    try:
        return Counter(f.product for f in compile_variant(_rebuilt(kernel, edited)))
    except Exception:  # noqa: BLE001 - a fix that does not compile does not hold
        return None


def holds(after, products_before, product):
    """Whether the products ``after`` a fix are those before it, one ``product`` fewer at
    least and none added."""
    if after is None:
        return False
    wanted = Counter(products_before)
    wanted[product] -= 1
    return all(count <= wanted[name] for name, count in after.items())


def _rebuilt(kernel, edited):
    """The kernel's jit function compiled from ``edited``, its file's jit helpers with it."""
    return rebuilt(kernel.module, kernel.file, kernel.jit.fn.__name__, edited,
                   f"{kernel.file} (with a fix, {next(_ATTEMPTS)})")


def rebuilt(module, file, function, edited, name):
    """The jit function ``function`` of ``module`` (loaded from ``file``) compiled again from
    ``edited``, the text of ``file`` with an edit, under the file name ``name``; the file's
    other jit functions are rebuilt with it, so a call between them sees the edit."""
    import triton

    from triton_overflow.lint.discover import jit_function_of
    linecache.cache[name] = (len(edited), None, edited.splitlines(keepends=True), name)
    namespace = dict(vars(module))
    own = {attribute: value for attribute, value in namespace.items()
           if (jit := jit_function_of(value)) is not None
           and getattr(jit.fn, "__code__", None) is not None
           and jit.fn.__code__.co_filename == str(file)}
    functions = {jit_function_of(value).fn.__name__ for value in own.values()}
    definitions = [node for node in _module_level_functions(ast.parse(edited))
                   if node.name in functions]
    for node in definitions:
        node.decorator_list = []
    exec(compile(ast.Module(body=definitions, type_ignores=[]), name, "exec"), namespace)
    rebuilt_functions = {name: triton.jit(namespace[name]) for name in functions
                         if name in namespace}
    namespace.update(rebuilt_functions)
    for attribute, value in own.items():
        namespace[attribute] = rebuilt_functions.get(jit_function_of(value).fn.__name__, value)
    return rebuilt_functions[function]


def edited_text(text, fix_line, replace, with_):
    """``text`` with ``replace`` on ``fix_line`` replaced by ``with_``; None where it is not
    there."""
    span = locate(text, fix_line, replace)
    if span is None:
        return None
    return text[:span[0]] + with_ + text[span[1]:]


def _module_level_functions(tree):
    """The function definitions of a module outside other functions (under ``if`` or ``try``
    too), the later one where a name is defined twice."""
    found = {}
    pending = list(tree.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node
        elif not isinstance(node, (ast.ClassDef, ast.AsyncFunctionDef)):
            pending.extend(child for child in ast.iter_child_nodes(node)
                           if isinstance(child, ast.stmt))
    return list(found.values())
