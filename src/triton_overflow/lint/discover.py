"""Find every kernel under the paths a user names: files, folders, importable modules.

A kernel is a ``@triton.jit`` function that no other jit function calls, of its module or of
another module found under the same paths that imports it by name (so a family's helper module,
checked with its family, holds no kernels; checked alone, its functions count as kernels), found
behind any stack of ``@triton.autotune`` / ``@triton.heuristics`` (or any wrapper whose ``.fn``
leads to it). Folders are searched recursively, files starting with ``_`` included; files that
never mention ``triton`` are passed over without being imported.

A module whose imports fail (say it belongs to an engine that is not installed here) is loaded
statement by statement, with stand-ins for what its imports would have bound (``loader``,
``standins``); kernels behind module-level ``if`` / ``try`` / ``with`` are found whichever
branch ran. A declared kernel that could not be defined, and a syntax error, are one problem
line each.
"""

import ast
import functools
import importlib.util
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

from triton_overflow.lint import jit_functions, loader, standins
from triton_overflow.triton_versions import jit_function_of

_SKIPPED_FOLDERS = {"__pycache__", ".git", ".venv", "venv", "node_modules", ".tox", ".eggs",
                    "build", "dist"}


@dataclass
class Kernel:
    jit: object  # triton.runtime.jit.JITFunction
    name: str
    file: str
    line: int
    module: types.ModuleType
    configs: list = field(default_factory=list)  # autotune configs, if any
    heuristics: dict = field(default_factory=dict)  # @triton.heuristics: name -> fn(args)
    wrappers: tuple = ()
    first_line: int = 0  # of its first decorator
    standins: list = field(default_factory=list)  # value-only helpers standing in for imports

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


def find(paths, execute=True):
    """``Found`` for every path: kernels, problems (one line each) and notes; without
    ``execute`` nothing of the files runs but what Triton needs (``loader``)."""
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
            _find_in_file(file, found, execute)
    called = _called_from_other_modules(found.kernels)
    found.kernels = [k for k in found.kernels if _identity(k.jit) not in called]
    return found


def files_under(paths):
    """(the ``.py`` files under ``paths`` that declare a jit function, in order; a ``Problem``
    for each path that names nothing)."""
    files, problems = [], []
    for spec in paths:
        try:
            found = _files(spec)
        except LookupError as error:
            problems.append(Problem(str(spec), str(error)))
            continue
        files += [file for file in found if file not in files]
    return [file for file in files if _declares_jit(file)], problems


def _declares_jit(file):
    tree = _tree(file)
    return tree is None or bool(jit_functions.declared_jit_functions(tree))


@functools.lru_cache(maxsize=None)
def _tree(file):
    """The syntax tree of a file that mentions Triton, None where it cannot be parsed (the
    check says why), or an empty module where it never mentions Triton."""
    try:
        text = Path(file).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    if "triton" not in text:
        return ast.Module(body=[], type_ignores=[])
    try:
        return ast.parse(text, filename=str(file))
    except (SyntaxError, ValueError):
        return None


def helpers_called_across(files):
    """{file: names of its jit functions that a jit function of another of ``files`` calls}:
    through a name imported from it (``from pkg.helpers import f``) or through the module
    (``import pkg.helpers as h``; ``h.f(...)``), read from the sources."""
    from triton_overflow.lint.reexports import module_file
    declared = {}
    for file in files:
        tree = _tree(file)
        if tree is not None:
            declared[Path(file).resolve()] = (tree, {f.name for f in
                                                     jit_functions.declared_jit_functions(tree)})
    called = {}
    for file, (tree, _) in declared.items():
        by_name, by_module = {}, {}  # local name -> (file, name); local module name -> file
        for statement in ast.walk(tree):
            if isinstance(statement, ast.ImportFrom):
                source = module_file(statement, file)
                for alias in statement.names:
                    target = source.resolve() if source is not None else None
                    if target in declared and alias.name in declared[target][1]:
                        by_name[alias.asname or alias.name] = (target, alias.name)
                    submodule = _submodule_file(statement, alias, file)
                    if submodule in declared:
                        by_module[alias.asname or alias.name] = submodule
            elif isinstance(statement, ast.Import):
                for alias in statement.names:
                    if alias.asname:
                        target = _submodule_file(ast.ImportFrom(module=alias.name, level=0,
                                                                names=[]), None, file)
                        if target in declared:
                            by_module[alias.asname] = target
        for function in jit_functions.declared_jit_functions(tree):
            for node in ast.walk(function):
                if isinstance(node, ast.Name) and node.id in by_name:
                    target, name = by_name[node.id]
                    if target != file:
                        called.setdefault(target, set()).add(name)
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                        node.value.id in by_module:
                    target = by_module[node.value.id]
                    if target != file and node.attr in declared[target][1]:
                        called.setdefault(target, set()).add(node.attr)
    return called


def _submodule_file(statement, alias, file):
    """The file of module ``X.alias`` (``from X import alias``), or of ``X`` when ``alias`` is
    None."""
    from triton_overflow.lint.reexports import module_file
    module = statement.module
    if alias is not None:
        module = f"{module}.{alias.name}" if module else alias.name
    found = module_file(ast.ImportFrom(module=module, level=statement.level, names=[]), file)
    return found.resolve() if found is not None else None


def declared_parameters(files):
    """The parameter names of every jit function the files declare."""
    names = set()
    for file in files:
        tree = _tree(file)
        for function in jit_functions.declared_jit_functions(tree) if tree else ():
            names |= {a.arg for a in function.args.args + function.args.kwonlyargs}
    return names


def _called_from_other_modules(kernels):
    """(file, name) of the jit functions that a jit function of another module calls by a name
    it imported (``from helpers import f``; a call through a module, ``helpers.f``, is not
    followed): helpers there, not kernels. By file and name, not by object: without
    execution, the loader defines an imported file's functions again for the importer."""
    called = set()
    for module in {id(k.module): k.module for k in kernels}.values():
        namespace = vars(module)
        files = {_file_of(k.jit) for k in kernels if k.module is module}
        own = [jit for jit in map(jit_function_of, list(namespace.values()))
               if jit is not None and _file_of(jit) in files]
        for jit in own:
            try:
                tree = ast.parse(_dedent(jit.src))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    named = jit_function_of(namespace.get(node.id))
                    if named is not None and _file_of(named) != _file_of(jit):
                        called.add(_identity(named))
    return called


def _file_of(jit):
    return str(Path(jit.fn.__code__.co_filename).resolve())


def _identity(jit):
    return _file_of(jit), jit.fn.__name__


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


def _find_in_file(file, found, execute):
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
    declared = jit_functions.declared_jit_functions(tree)
    if not declared:
        return
    module, note = loader.load(file, tree, execute=execute)
    if module is None:
        found.problems.append(Problem(str(file), note))
        return
    if note:
        found.notes.append(f"{_shown(str(file), None)}: {note}")
    kernels, helpers = _kernels_of(module, file)
    if not execute:  # a heuristic is the file's own code: it is not called
        for kernel in kernels:
            kernel.heuristics = {}
    found.kernels += kernels
    reached = [(k.name, k.first_line) for k in kernels] + list(helpers)
    for function in declared:
        if not any(jit_functions.defines(function, name, line) for name, line in reached):
            found.problems.append(Problem(f"{file}:{function.lineno}", "it could not be defined "
                                          "(see the note on this file)", kernel=function.name))


def load_module(file, tree=None, execute=True):
    """(module, note) for a file: imported, or loaded as ``loader`` says."""
    tree = tree or ast.parse(Path(file).read_text(), filename=str(file))
    return loader.load(Path(file), tree, execute=execute)


def dotted_name(file):
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


# What Triton passes its own builtins: a jit function taking one (``def gather(src, index,
# axis, _builder=None)``, a stand-in for ``tl.gather``) is a helper for kernels to call.
BUILTIN_PARAMETERS = frozenset({"_builder", "_semantic"})


def _kernels_of(module, file):
    """(launched kernels, (name, first line) of helpers) among the module's jit functions: a
    helper is one that another jit function of the module names, or that takes what Triton
    passes its builtins (``_builder``)."""
    file = Path(file).resolve()
    entries = []  # (attribute, wrapper, jit)
    values = list(vars(module).items()) + list(vars(module).get(loader.EXTRA, []))
    for attribute, value in values:
        jit = jit_function_of(value)
        if jit is None or any(jit is known for _, _, known in entries):
            continue
        code = getattr(jit.fn, "__code__", None)
        if code is None or Path(code.co_filename).resolve() != file:
            continue
        entries.append((attribute, value, jit))
    replaced = standins.replace_called([jit for _, _, jit in entries], module.__dict__)
    names = {attribute for attribute, _, _ in entries} | {jit.fn.__name__ for _, _, jit in entries}
    called = set()
    for attribute, _, jit in entries:
        try:
            tree = ast.parse(_dedent(jit.src))
        except SyntaxError:
            continue
        own = {attribute, jit.fn.__name__}
        # Called, or passed on (the combine function of tl.reduce or tl.associative_scan).
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and \
                    node.id in names and node.id not in own:
                called.add(node.id)
    kernels, helpers = [], set()
    for attribute, wrapper, jit in sorted(entries, key=lambda e: (e[2].fn.__code__.co_firstlineno)):
        line = jit.fn.__code__.co_firstlineno
        if attribute in called or jit.fn.__name__ in called or \
                BUILTIN_PARAMETERS & {p.name for p in jit.params}:
            helpers.add((jit.fn.__name__, line))
            continue
        kernels.append(Kernel(jit=jit, name=jit.fn.__name__, file=str(file), line=line,
                              module=module, configs=_configs(wrapper),
                              heuristics=_heuristics(wrapper),
                              wrappers=_wrappers(wrapper), first_line=line,
                              standins=[r for r in replaced if _calls(jit, r)]))
    return kernels, helpers


def _calls(jit, path):
    return path.split(".")[0] in (jit.src or "")


def _stack(wrapper):
    """Each object of a decorator stack, outermost first, down its ``.fn`` chain."""
    seen = set()
    while wrapper is not None and id(wrapper) not in seen:
        seen.add(id(wrapper))
        yield wrapper
        wrapper = getattr(wrapper, "fn", None)


def _configs(wrapper):
    return next((list(layer.configs) for layer in _stack(wrapper)
                 if getattr(layer, "configs", None)), [])


def _heuristics(wrapper):
    """{constexpr: function of the launch's arguments} of every ``@triton.heuristics`` in
    the stack, the outermost last (it runs last, and may read what an inner one set)."""
    stack = [layer.values for layer in _stack(wrapper) if type(layer).__name__ == "Heuristics"
             and isinstance(getattr(layer, "values", None), dict)]
    return {name: fn for values in reversed(stack) for name, fn in values.items()
            if callable(fn)}


def _wrappers(wrapper):
    names = [type(layer).__name__ for layer in _stack(wrapper)]
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
