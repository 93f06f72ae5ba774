"""The int32 twin of a kernel module: the same source with its int64 widening undone.

A kernel is fixed by widening an index before it multiplies a stride: ``x.to(tl.int64)`` or
``tl.cast(x, tl.int64)``. The twin replaces each such call inside the module's ``@triton.jit``
functions by its operand, byte for byte in place, so every other character, comment and line
number stays as written: a finding on twin line N is a finding on line N of the kernel.

The twin is written beside a cache of generated modules and imported under its own name, so its
launchers run its own kernels. No hand-written copy exists anywhere.
"""

import ast
import hashlib
import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Only signed widening is undone: indices are signed, while a uint64 conversion is arithmetic
# (random bits assembled from two uint32 words) that the twin must keep to stay the same kernel.
WIDE_TYPES = ("int64", )
TWIN_MARKER = "# int32 twin of "
TWIN_ORIGINS = {}  # generated twin file -> the kernel file it was derived from


@dataclass(frozen=True)
class Widening:
    line: int
    text: str  # the call as written, e.g. "row.to(tl.int64)"


def twin_source(source: str, only: int | None = None) -> tuple[str, list[Widening]]:
    """Return ``source`` with every int64 widening inside a jit function undone (or only the
    ``only``-th, counted in source order), and the spots undone."""
    tree = ast.parse(source)
    spans = []
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_jit(function):
            for node in ast.walk(function):
                operand = _widened_operand(node)
                if operand is not None:
                    spans.append((node, operand))
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def position(lineno, col):
        return offsets[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    edits = []
    for node, operand in spans:
        start = position(node.lineno, node.col_offset)
        end = position(node.end_lineno, node.end_col_offset)
        inner = source[position(operand.lineno, operand.col_offset):
                       position(operand.end_lineno, operand.end_col_offset)]
        if not _is_atom(operand):
            inner = f"({inner})"
        edits.append((start, end, inner, Widening(node.lineno, source[start:end])))
    edits.sort(key=lambda edit: edit[0])
    if only is not None:
        if not 0 <= only < len(edits):
            raise ValueError(f"widening {only} does not exist; the source has {len(edits)}")
        edits = [edits[only]]
    edits.sort(key=lambda edit: edit[0], reverse=True)
    text = source
    for start, end, inner, _ in edits:
        text = text[:start] + inner + text[end:]
    return text, sorted((edit[3] for edit in edits), key=lambda w: w.line)


class NoWidening(ValueError):
    """The module has no int64 widening: its twin would be itself."""


def write_twin(module, only=None):
    """Write the int32 twin of ``module`` (a module object or a file path) to the twin cache
    and return its path; with ``only``, the mutant that undoes only that widening."""
    path = Path(module if isinstance(module, (str, os.PathLike)) else module.__file__).resolve()
    text, widenings = twin_source(path.read_text(), only=only)
    if not widenings:
        raise NoWidening(f"{path}: no int64 widening in any @triton.jit function; nothing to "
                         "undo (a kernel known to overflow has no twin)")
    digest = hashlib.sha256(f"{text}{TWIN_MARKER}{path}".encode()).hexdigest()[:12]
    out_dir = Path(os.environ.get("OVERFLOW_TWIN_DIR", Path(tempfile.gettempdir()) / "int32-twins"))
    out_dir.mkdir(parents=True, exist_ok=True)
    twin_path = out_dir / f"{path.stem}_int32_twin_{digest}.py"
    if not twin_path.exists():
        tmp = twin_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(f"{text}\n{TWIN_MARKER}{path}\n")
        tmp.replace(twin_path)
    TWIN_ORIGINS[str(twin_path)] = str(path)
    return twin_path


def load_twin(module, only=None):
    """Import and return the int32 twin of ``module`` (see ``write_twin``)."""
    path = Path(module if isinstance(module, (str, os.PathLike)) else module.__file__).resolve()
    twin_path = write_twin(path, only=only)
    widenings = twin_source(path.read_text(), only=only)[1]
    digest = twin_path.stem.rsplit("_", 1)[-1]
    name = f"int32_twin_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, twin_path)
    twin = importlib.util.module_from_spec(spec)
    twin.__int32_twin_of__ = str(path)
    twin.__int32_widenings__ = widenings
    sys.modules[name] = twin
    spec.loader.exec_module(twin)
    return twin


def twin_origin(filename):
    """The kernel file a generated twin file was derived from, or None for any other file."""
    filename = str(filename)
    if filename in TWIN_ORIGINS:
        return TWIN_ORIGINS[filename]
    if "_int32_twin_" not in Path(filename).name:
        return None
    try:
        last = Path(filename).read_text().rstrip("\n").rsplit("\n", 1)[-1]
    except OSError:
        return None
    if last.startswith(TWIN_MARKER):
        TWIN_ORIGINS[filename] = last[len(TWIN_MARKER):]
        return TWIN_ORIGINS[filename]
    return None


def list_widenings(module):
    """The widenings of ``module`` (a module object or a file path), in source order."""
    path = Path(module if isinstance(module, (str, os.PathLike)) else module.__file__)
    return twin_source(path.read_text())[1]


def _is_jit(function):
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("jit", "autotune", "heuristics"):
            return True
    return False


def _widened_operand(node):
    """The operand of ``x.to(tl.int64, ...)`` or ``tl.cast(x, tl.int64, ...)``, else None."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "to" and node.args:
        if _is_wide_type(node.args[0]):
            return func.value
    if isinstance(func, ast.Attribute) and func.attr == "cast" and len(node.args) >= 2:
        if _is_wide_type(node.args[1]):
            return node.args[0]
    return None


def _is_wide_type(node):
    return isinstance(node, ast.Attribute) and node.attr in WIDE_TYPES


def _is_atom(node):
    return isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant))
