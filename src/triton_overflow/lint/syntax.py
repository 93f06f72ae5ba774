"""Small readers of Python syntax trees: a file's tree as ``linecache`` serves it, a jit
function's definition, the name a call is made by, a call's argument by position or keyword,
the offsets a block pointer call takes, the names and the dtype an expression spells."""

import ast
import functools
import inspect
import linecache
import textwrap


@functools.lru_cache(maxsize=256)
def source_tree(file):
    """The module tree of ``file`` as ``linecache`` holds it, or None where it does not parse."""
    try:
        return ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return None


@functools.lru_cache(maxsize=256)
def nodes_of(file):
    """{node type: the nodes of ``file``'s tree of that type, in walk order}: one walk of the
    file for all the products of all its kernels."""
    tree = source_tree(file)
    index = {}
    for node in ast.walk(tree) if tree is not None else ():
        index.setdefault(type(node), []).append(node)
    return index


@functools.lru_cache(maxsize=256)
def _encoded_lines(file):
    return tuple(line.encode() for line in linecache.getlines(file))


def segment(file, node):
    """The source text of ``node`` in ``file`` as written (``ast.get_source_segment``, without
    splitting the whole file again for every node), or ""."""
    lines = _encoded_lines(file)
    end_line = getattr(node, "end_lineno", None)
    if end_line is None or node.lineno < 1 or end_line > len(lines):
        return ""
    first, last = node.lineno - 1, end_line - 1
    if first == last:
        return lines[first][node.col_offset:node.end_col_offset].decode(errors="replace")
    parts = [lines[first][node.col_offset:]] + list(lines[first + 1:last]) + \
        [lines[last][:node.end_col_offset]]
    return b"".join(parts).decode(errors="replace")


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


# Where the offsets of a block pointer call are, by position.
_BLOCK_POINTER_OFFSETS = {"make_block_ptr": 3, "advance": 1}


def block_pointer_offsets(node):
    """The expressions a ``tl.make_block_ptr`` or ``tl.advance`` call gives as its offsets
    (empty for any other call)."""
    position = _BLOCK_POINTER_OFFSETS.get(call_name(node))
    if position is None:
        return []
    offsets = [k.value for k in node.keywords if k.arg == "offsets"]
    return offsets + node.args[position:position + 1]


def names(expression):
    return {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)}


def dtype_name(node):
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None
