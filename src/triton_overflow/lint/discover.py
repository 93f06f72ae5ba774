"""Find every kernel under the paths a user names: files, folders, importable modules.

A kernel is a ``@triton.jit`` function that no other jit function of its module calls, found
behind any stack of ``@triton.autotune`` / ``@triton.heuristics`` (or any wrapper whose ``.fn``
leads to it). Folders are searched recursively, files starting with ``_`` included; files that
never mention ``triton`` are passed over without being imported.

A module whose imports fail (say it belongs to an engine that is not installed here) is loaded
statement by statement: a failing ``import`` of ``triton`` / ``tl`` under another package's
name binds Triton's own modules, any other failing statement is left out, and the kernels that
need what was left out say so when they are checked. A syntax error is one problem line.
"""

import ast
import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

from triton_overflow.compat import jit_function_of

_SKIPPED_FOLDERS = {"__pycache__", ".git", ".venv", "venv", "node_modules", ".tox", ".eggs",
                    "build", "dist"}
_TRITON_NAMES = {"triton": "triton", "tl": "triton.language", "language": "triton.language",
                 "libdevice": "triton.language.extra.libdevice"}


@dataclass
class Kernel:
    jit: object  # triton.runtime.jit.JITFunction
    name: str
    file: str
    line: int
    module: types.ModuleType
    configs: list = field(default_factory=list)  # autotune configs, if any
    wrappers: tuple = ()

    @property
    def where(self):
        return f"{self.file}:{self.line}"


@dataclass
class Problem:
    """Something under the paths that could not be checked: one line of the report."""

    where: str
    reason: str
    kernel: str = ""

    def format(self, root=None):
        shown = _shown(self.where, root)
        if self.kernel:
            return f"could not check {self.kernel} at {shown}: {self.reason}"
        return f"could not check {shown}: {self.reason}"


@dataclass
class Found:
    kernels: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    files: list = field(default_factory=list)


def find(paths):
    """``Found`` for every path: kernels, problems (one line each) and notes."""
    found = Found()
    for spec in paths:
        try:
            files = _files(spec)
        except LookupError as error:
            found.problems.append(Problem(str(spec), str(error)))
            continue
        for file in files:
            if file in found.files:
                continue
            found.files.append(file)
            _find_in_file(file, found)
    return found


def _files(spec):
    path = Path(spec)
    if path.is_dir():
        return sorted(p.resolve() for p in path.rglob("*.py")
                      if not _SKIPPED_FOLDERS & set(p.relative_to(path).parts[:-1]))
    if path.suffix == ".py" and path.is_file():
        return [path.resolve()]
    if path.suffix == ".py" or "/" in str(spec):
        raise LookupError("no such file or folder")
    try:
        module_spec = importlib.util.find_spec(str(spec))
    except (ImportError, ValueError) as error:
        raise LookupError(f"not a file, folder or importable module ({error})") from None
    if module_spec is None or not module_spec.origin or not module_spec.origin.endswith(".py"):
        raise LookupError("not a file, folder or importable module")
    if module_spec.submodule_search_locations:
        return _files(Path(module_spec.origin).parent)
    return [Path(module_spec.origin).resolve()]


def _find_in_file(file, found):
    try:
        text = file.read_text()
    except (OSError, UnicodeDecodeError) as error:
        found.problems.append(Problem(str(file), f"cannot read it ({error})"))
        return
    if "triton" not in text:
        return
    try:
        tree = ast.parse(text, filename=str(file))
    except SyntaxError as error:
        found.problems.append(Problem(f"{file}:{error.lineno or 0}",
                                      f"SyntaxError: {error.msg}"))
        return
    declared = _declared_jit_functions(tree)
    if not declared:
        return
    module, note = load_module(file, tree)
    if module is None:
        found.problems.append(Problem(str(file), note))
        return
    if note:
        found.notes.append(f"{_shown(str(file), None)}: {note}")
    kernels, helpers = _kernels_of(module, file)
    found.kernels += kernels
    reached = {k.name for k in kernels} | helpers
    for name, line in declared.items():
        if name not in reached:
            found.problems.append(Problem(f"{file}:{line}", "the jit function is not a module-"
                                          "level name after the module ran", kernel=name))


def _declared_jit_functions(tree):
    """Names and lines of functions decorated with something from Triton (jit, autotune, ...)."""
    declared = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(_is_triton_decorator(d)
                                                     for d in node.decorator_list):
            declared[node.name] = node.lineno
    return declared


def _is_triton_decorator(decorator):
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name in ("jit", "autotune", "heuristics")


def load_module(file, tree=None):
    """(module, note) for a file: imported normally, or statement by statement."""
    name = _dotted_name(file)
    if name is not None:
        try:
            return importlib.import_module(name), ""
        except Exception as error:  # noqa: BLE001 - any failure falls back to the tolerant load
            first_error = error
    else:
        first_error = None
        synthetic = f"overflow_linted_{abs(hash(str(file)))}"
        spec = importlib.util.spec_from_file_location(synthetic, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[synthetic] = module
        try:
            spec.loader.exec_module(module)
            return module, ""
        except Exception as error:  # noqa: BLE001
            first_error = error
            del sys.modules[synthetic]
    return _tolerant_load(file, tree, first_error)


def _dotted_name(file):
    """The module name ``file`` has on ``sys.path`` (a package module), or None."""
    for base in sys.path or ["."]:
        try:
            relative = file.relative_to(Path(base or ".").resolve())
        except (ValueError, OSError):
            continue
        parts = relative.with_suffix("").parts
        if parts and all(part.isidentifier() for part in parts):
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts:
                return ".".join(parts)
    return None


def _tolerant_load(file, tree, first_error):
    text = file.read_text()
    tree = tree or ast.parse(text, filename=str(file))
    synthetic = f"overflow_linted_{abs(hash(str(file)))}"
    module = types.ModuleType(synthetic)
    module.__file__ = str(file)
    sys.modules[synthetic] = module
    left_out = []
    for statement in tree.body:
        try:
            _run(statement, file, module)
        except Exception as error:  # noqa: BLE001 - the statement is left out, and said so
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                _bind_triton_names(statement, module)
            elif isinstance(statement, ast.FunctionDef) and _without_failing_decorators(
                    statement, file, module):
                left_out.append(f"the decorators of {statement.name} at line "
                                f"{statement.lineno} other than Triton's own")
                continue
            left_out.append(f"line {statement.lineno} ({type(error).__name__}: "
                            f"{str(error).splitlines()[0] if str(error) else ''})")
    reason = f"{type(first_error).__name__}: {first_error}" if first_error else "import failed"
    if not any(jit_function_of(v) is not None for v in vars(module).values()):
        del sys.modules[synthetic]
        return None, f"cannot import it: {reason}"
    return module, ("imported statement by statement, because importing it failed (" + reason
                    + "); left out: " + ", ".join(left_out))


def _run(statement, file, module):
    exec(compile(ast.Module(body=[statement], type_ignores=[]), str(file), "exec"),
         module.__dict__)


def _without_failing_decorators(function, file, module):
    """Define ``function`` with Triton's own decorators only (an engine's wrapper failed)."""
    kept = [d for d in function.decorator_list if _is_triton_decorator(d)]
    if not kept or len(kept) == len(function.decorator_list):
        return False
    original = function.decorator_list
    function.decorator_list = kept
    try:
        _run(function, file, module)
        return True
    except Exception:  # noqa: BLE001 - left out after all
        return False
    finally:
        function.decorator_list = original


def _bind_triton_names(statement, module):
    names = [(a.asname or a.name).split(".")[0] for a in statement.names]
    for name in names:
        target = _TRITON_NAMES.get(name)
        if target and name not in module.__dict__:
            try:
                module.__dict__[name] = importlib.import_module(target)
            except ImportError:
                pass


def _kernels_of(module, file):
    """(launched kernels, names of helpers) among the module's jit functions: a helper is one
    that another jit function of the module names."""
    entries = {}
    for attribute, value in vars(module).items():
        jit = jit_function_of(value)
        if jit is None:
            continue
        source_file = getattr(jit.fn, "__code__", None)
        if source_file is None or Path(source_file.co_filename).resolve() != file:
            continue
        entries[attribute] = (value, jit)
    called = set()
    own_names = {jit.fn.__name__: attribute for attribute, (_, jit) in entries.items()}
    for attribute, (_, jit) in entries.items():
        try:
            tree = ast.parse(_dedent(jit.src))
        except SyntaxError:
            continue
        # Called, or passed on (the combine function of tl.reduce or tl.associative_scan).
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id in entries and node.id != attribute:
                    called.add(node.id)
                elif node.id in own_names and own_names[node.id] != attribute:
                    called.add(own_names[node.id])
    kernels = []
    for attribute in sorted(entries):
        if attribute in called:
            continue
        wrapper, jit = entries[attribute]
        kernels.append(Kernel(jit=jit, name=jit.fn.__name__, file=str(file),
                              line=jit.fn.__code__.co_firstlineno, module=module,
                              configs=_configs(wrapper), wrappers=_wrappers(wrapper)))
    helpers = {entries[a][1].fn.__name__ for a in called}
    return kernels, helpers


def _configs(wrapper):
    seen = set()
    while wrapper is not None and id(wrapper) not in seen:
        seen.add(id(wrapper))
        configs = getattr(wrapper, "configs", None)
        if configs:
            return list(configs)
        wrapper = getattr(wrapper, "fn", None)
    return []


def _wrappers(wrapper):
    names, seen = [], set()
    while wrapper is not None and id(wrapper) not in seen:
        seen.add(id(wrapper))
        names.append(type(wrapper).__name__)
        wrapper = getattr(wrapper, "fn", None)
    return tuple(names[:-2]) if len(names) > 1 else ()


def _dedent(source):
    import textwrap
    source = textwrap.dedent(source)
    return source[source.find("def "):] if not source.lstrip().startswith(("def", "@")) else source


def _shown(where, root):
    if root is None:
        root = Path.cwd()
    try:
        path, _, rest = where.partition(":") if not Path(where).exists() else (where, "", "")
        relative = str(Path(path).resolve().relative_to(root))
        return relative + (f":{rest}" if rest else "")
    except (ValueError, OSError):
        return where
