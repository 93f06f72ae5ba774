"""Names that an engine's own modules bind to Triton's modules, read from their source.

Engines import Triton through a wrapper of their own (``from vllm.triton_utils import tl,
triton, tldevice``; ``import mypkg.triton_utils as tu``), which may hand out placeholders where
the engine finds Triton unusable (no GPU driver, say). A kernel compiled here needs Triton's own
modules under those names, so the wrapper is read, never run: a name is Triton's when the
wrapper binds it, in any branch of its top level, by ``import triton.language as tl``, ``from
triton.language.extra import libdevice``, ``tl = triton.language``, or by importing it in turn
from another module it can be found in. Where the wrapper's source cannot be found, a module
whose dotted name mentions Triton (``torch._inductor.runtime.triton_helpers``) re-exports
Triton under the names Triton's own code uses.
"""

import ast
import functools
import importlib
import sys
import types
from pathlib import Path

_CONVENTIONAL = {"triton": "triton", "tl": "triton.language", "language": "triton.language",
                 "libdevice": "triton.language.extra.libdevice",
                 "tldevice": "triton.language.extra.libdevice"}


def triton_bindings(statement, file):
    """{bound name: Triton module (or a module of them)} for one ``import`` statement of
    ``file``: the names it binds that are Triton's, whatever importing it would give."""
    bound = {}
    if isinstance(statement, ast.ImportFrom):
        if statement.module and statement.level == 0 and _is_triton(statement.module):
            for alias in statement.names:
                module = _triton_module(f"{statement.module}.{alias.name}")
                if module is not None:
                    bound[alias.asname or alias.name] = module
            return bound
        source = module_file(statement, file)
        names = _bindings_of(source) if source is not None else {}
        for alias in statement.names:
            if alias.name == "*":
                bound.update({name: _triton_module(path) for name, path in names.items()})
                continue
            path = names.get(alias.name)
            if path is None and source is None and "triton" in (statement.module or ""):
                path = _CONVENTIONAL.get(alias.name)
            module = _triton_module(path) if path else None
            if module is not None:
                bound[alias.asname or alias.name] = module
        return {name: module for name, module in bound.items() if module is not None}
    for alias in statement.names:
        if _is_triton(alias.name):
            continue  # Python's own import binds Triton here
        source = _file_for(alias.name.split("."), None, 0)
        names = _bindings_of(source) if source is not None else {}
        if alias.asname and names:
            bound[alias.asname] = _module_of_bindings(alias.name, names)
    return bound


def module_file(statement, file):
    """The ``.py`` file a ``from X import ...`` names, found without importing anything: relative
    to ``file``, or under an entry of ``sys.path``."""
    parts = statement.module.split(".") if statement.module else []
    return _file_for(parts, file, statement.level)


def _file_for(parts, file, level):
    if not parts and not level:
        return None
    if level:
        base = Path(file).resolve().parent
        for _ in range(level - 1):
            base = base.parent
        return _file_under((str(base),), tuple(parts))
    return _file_under(_path_bases(tuple(sys.path), str(Path.cwd())), tuple(parts))


@functools.lru_cache(maxsize=64)
def _path_bases(path, cwd):
    return tuple(str(Path(cwd, entry or ".").resolve()) for entry in path)


@functools.lru_cache(maxsize=None)
def _file_under(bases, parts):
    for base in bases:
        candidate = Path(base).joinpath(*parts)
        for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
            if path.is_file():
                return path
    return None


def _is_triton(dotted):
    return dotted == "triton" or dotted.startswith("triton.")


def _triton_module(path):
    if not path or not _is_triton(path):
        return None
    try:
        return importlib.import_module(path)
    except ImportError:
        return None


def _module_of_bindings(name, names):
    """A module standing in for an engine's wrapper imported whole (``import pkg.tu as tu``):
    its Triton names bound, every other attribute a stand-in."""
    from triton_overflow.lint import standins
    module = types.ModuleType(name)
    for attribute, path in names.items():
        value = _triton_module(path)
        if value is not None:
            setattr(module, attribute, value)
    module.__getattr__ = lambda attribute: standins.StandIn(f"{name}.{attribute}")
    return module


_READING = set()  # the files being read: an import cycle binds nothing more


@functools.lru_cache(maxsize=None)
def _bindings_of(file):
    if file in _READING:
        return {}
    _READING.add(file)
    try:
        return _read_bindings(file)
    finally:
        _READING.discard(file)


@functools.lru_cache(maxsize=None)
def _source_tree(file):
    """The syntax tree of a module that mentions Triton at all, else None (it binds nothing of
    Triton, so it is not parsed)."""
    try:
        text = Path(file).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    if "triton" not in text:
        return None
    try:
        return ast.parse(text, filename=str(file))
    except (SyntaxError, ValueError):
        return None


def _read_bindings(file):
    """{name: dotted Triton module} that ``file`` binds at its top level, in any branch, by
    itself or by importing it from another module of the project; the
    first binding of a name wins (``try: from triton.language.extra import libdevice`` before
    its fallback, ``if HAS_TRITON: import triton`` before its placeholder)."""
    tree = _source_tree(file) if file is not None else None
    if tree is None:
        return {}
    names = {}
    for statement in _top_level(tree.body):
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if _is_triton(alias.name):
                    names.setdefault(alias.asname or "triton",
                                     alias.name if alias.asname else "triton")
        elif isinstance(statement, ast.ImportFrom):
            if statement.level == 0 and statement.module and _is_triton(statement.module):
                for alias in statement.names:
                    names.setdefault(alias.asname or alias.name,
                                     f"{statement.module}.{alias.name}")
                continue
            source = module_file(statement, file)
            if source is None or Path(source).resolve() == Path(file).resolve():
                continue
            inner = _bindings_of(source)
            for alias in statement.names:
                if alias.name in inner:
                    names.setdefault(alias.asname or alias.name, inner[alias.name])
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 and \
                isinstance(statement.targets[0], ast.Name):
            dotted = _dotted(statement.value)
            if dotted:
                head, _, rest = dotted.partition(".")
                if head in names:
                    names.setdefault(statement.targets[0].id,
                                     names[head] + (f".{rest}" if rest else ""))
    return names


def _top_level(body):
    from triton_overflow.lint.statements import inner_statements
    for statement in body:
        inner = inner_statements(statement)
        if inner is None:
            yield statement
        else:
            yield from _top_level(inner)


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None
