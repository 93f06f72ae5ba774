"""Each file's report kept on disk, so that a rerun on an unchanged tree takes seconds.

A report is stored under a key made of everything it depends on: the file's source, the
sources of the project files it imports (and theirs, within the project), the Triton version,
the suite's own source, the Python version and the check's options. Anything else changed
means a new key; an entry that cannot be read is checked again. The folder is
``$TRITON_OVERFLOW_CACHE``, else ``$XDG_CACHE_HOME/triton-overflow``, else
``~/.cache/triton-overflow``; ``--no-cache`` turns it off.
"""

import ast
import functools
import hashlib
import os
import pickle
import sys
from pathlib import Path

_FORMAT = "lint-report-1"
_IMPORT_DEPTH = 3  # project imports followed this many files deep


def folder():
    explicit = os.environ.get("TRITON_OVERFLOW_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "triton-overflow"


def key(file, options):
    digest = hashlib.sha256()
    for part in (_FORMAT, sys.version, _triton_version(), _suite_digest(), repr(sorted(
            (name, repr(value)) for name, value in options.items()))):
        digest.update(part.encode() + b"\0")
    for source in sorted(_sources(Path(file).resolve(), _IMPORT_DEPTH)):
        digest.update(str(source).encode() + b"\0" + _file_digest(source) + b"\0")
    return digest.hexdigest()


def load(entry):
    path = folder() / "lint" / entry[:2] / entry
    try:
        with open(path, "rb") as handle:
            return pickle.load(handle)
    except Exception:  # noqa: BLE001 - a missing or unreadable entry is checked again
        return None


def store(entry, report):
    path = folder() / "lint" / entry[:2] / entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        with open(partial, "wb") as handle:
            pickle.dump(report, handle)
        os.replace(partial, path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass  # a cache that cannot be written only costs the next run its time


def _sources(file, depth):
    """``file`` and the project files it imports, ``depth`` imports deep."""
    from triton_overflow.lint.reexports import module_file
    found = {file}
    frontier = [file]
    for _ in range(depth):
        following = []
        for current in frontier:
            for imported in _imports(current):
                source = module_file(imported, current)
                if source is None:
                    continue
                source = source.resolve()
                if source not in found and "site-packages" not in source.parts:
                    found.add(source)
                    following.append(source)
        frontier = following
    return found


@functools.lru_cache(maxsize=None)
def _imports(file):
    try:
        tree = ast.parse(file.read_text(), filename=str(file))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return ()
    return tuple(node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom))


@functools.lru_cache(maxsize=None)
def _file_digest(file):
    try:
        return hashlib.sha256(file.read_bytes()).digest()
    except OSError:
        return b"unreadable"


@functools.lru_cache(maxsize=None)
def _triton_version():
    import triton
    return triton.__version__


@functools.lru_cache(maxsize=None)
def _suite_digest():
    """The suite's own source: a change to the check is a new key."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for source in sorted(package.rglob("*.py")):
        digest.update(str(source.relative_to(package)).encode() + source.read_bytes())
    return digest.hexdigest()
