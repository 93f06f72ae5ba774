"""Load a kernel file as shipped, whatever of its engine is missing, or without running it.

``load(file, tree)`` imports the file. Where that fails (its engine is not installed here), the
file is run statement by statement: a failed ``import`` binds Triton's own modules under
Triton's names and a stand-in (``standins``) under every other name; a module-level ``if`` /
``try`` / ``with`` that fails is run statement by statement inside; a jit function whose
decorators fail keeps Triton's own decorators, with the arguments that can be read.

``load(file, tree, execute=False)`` runs nothing of the file but what Triton needs to build its
kernels: imports of Triton, module constants that are literals, and the jit functions (their
decorators' literal arguments, their literal defaults and annotations); every other name is a
stand-in.

Either way, a jit function defined only in a branch the load did not take (``if
has_fast_path(): @triton.jit def ...``) is defined all the same, and kept beside the module's
names (``EXTRA``), so two kernels of one name in two branches are both checked.
"""

import ast
import importlib
import importlib.util
import sys
import sysconfig
import types

from triton_overflow.lint import reexports, standins, statements
from triton_overflow.lint.jit_functions import (declared_jit_functions, define, defines,
                                                has_triton_decorator)
from triton_overflow.triton_versions import jit_function_of

EXTRA = "__overflow_lint_extra__"  # [(name, jit wrapper)] defined beside the module's names
_TRITON_NAMES = {"triton": "triton", "tl": "triton.language", "language": "triton.language",
                 "libdevice": "triton.language.extra.libdevice"}
_TRITON_MODULES = ("triton", "math", "functools", "typing", "__future__", "itertools", "torch",
                   "numpy")  # modules the check has imported itself: importing runs nothing new


def load(file, tree, execute=True):
    """(module, note): the module with its jit functions, or (None, why not)."""
    first_error = None
    if execute:
        module, first_error = _import(file)
        if module is not None:
            _bind_reexported_triton(tree, file, module.__dict__)
            left_out = _define_unreached(module, tree, file, execute=True)
            return module, _said("defined outside the branches the import took", left_out)
    module = _empty_module(file)
    left_out = []
    for statement in tree.body:
        _run_tolerantly(statement, file, module, left_out, execute)
    left_out += _define_unreached(module, tree, file, execute)
    if execute:
        reason = f"{type(first_error).__name__}: {first_error}"
        note = f"imported statement by statement, because importing it failed ({reason})"
    else:
        note = "loaded without running its code (--no-exec)"
    if not _jit_values(module):
        sys.modules.pop(module.__name__, None)
        return None, _said(f"no jit function could be defined; {note}", left_out) or note
    return module, _said(note, left_out)


def _said(note, left_out):
    if not left_out:
        return note if note.startswith(("imported", "loaded")) else ""
    return f"{note}; left out: " + ", ".join(left_out)


def _import(file):
    """(module, None) or (None, the error importing ``file`` raised); whatever the engine's
    modules print or warn while they import is not the check's output."""
    import contextlib
    import io
    import warnings
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        return _import_quietly(file)


# Top-level packages whose own ``__init__`` failed to import in this process, with the error:
# every module under them fails the same way, so they are not imported again and again (an
# engine's package init can take a second, for each of hundreds of import statements).
_UNIMPORTABLE = {}


def _package_failed(dotted):
    return _UNIMPORTABLE.get((dotted or "").split(".")[0]) if dotted else None


def _note_failure(dotted, error):
    top = (dotted or "").split(".")[0]
    if top and top not in sys.modules:
        _UNIMPORTABLE.setdefault(top, error)


def _import_quietly(file):
    from triton_overflow.lint.discover import dotted_name
    name = dotted_name(file)
    if _package_failed(name) is not None:
        return None, _package_failed(name)
    try:
        if name is not None:
            try:
                return importlib.import_module(name), None
            except (Exception, SystemExit) as error:  # noqa: BLE001 - noted, then re-raised
                _note_failure(name, error)
                raise
        module = _empty_module(file)
        spec = importlib.util.spec_from_file_location(module.__name__, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module.__name__] = module
        spec.loader.exec_module(module)
        return module, None
    except (Exception, SystemExit) as error:  # noqa: BLE001 - any failure: the tolerant load
        if name is None:
            sys.modules.pop(_synthetic_name(file), None)
        return None, error


def _synthetic_name(file):
    return f"overflow_linted_{abs(hash(str(file)))}"


def _empty_module(file):
    module = types.ModuleType(_synthetic_name(file))
    module.__file__ = str(file)
    sys.modules[module.__name__] = module
    return module


def _jit_values(module):
    values = [v for v in vars(module).values() if jit_function_of(v) is not None]
    return values + [wrapper for _, wrapper in vars(module).get(EXTRA, [])]


# --- statement by statement -----------------------------------------------------------------

def _run_tolerantly(statement, file, module, left_out, execute):
    namespace = module.__dict__
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        if not execute and not _is_triton_import(statement):
            namespace.update(_triton_bindings(statement, file))
            _bind_without_running(statement, file, namespace)
            return
        try:
            failed = _package_failed(_imported_module(statement))
            if failed is not None:
                raise ImportError(f"its package could not be imported: {failed}")
            try:
                statements.run(statement, file, namespace)
            except (Exception, SystemExit) as error:  # noqa: BLE001 - noted, then re-raised
                _note_failure(_imported_module(statement), error)
                raise ImportError(str(error)) from error
            namespace.update(_triton_bindings(statement, file))
        except Exception:  # noqa: BLE001 - the engine is not here: Triton's names, stand-ins
            namespace.update(_triton_bindings(statement, file))
            _bind_triton_names(statement, namespace)
            # The project's own jit helpers and constants, read without running their module.
            _bind_without_running(statement, file, namespace)
            left_out.append(f"line {statement.lineno} (its import failed: stand-ins used)")
        return
    if isinstance(statement, ast.FunctionDef):
        if execute or has_triton_decorator(statement):
            define(statement, file, namespace, left_out, execute)
        return
    compound = statements.inner_statements(statement)
    if not execute:
        if isinstance(statement, ast.Try):
            _bind_try_without_running(statement, file, module, left_out)
        elif compound is not None:
            for inner in compound:
                _run_tolerantly(inner, file, module, left_out, execute)
        elif _is_literal_assignment(statement):
            try:
                statements.run(statement, file, namespace)
            except Exception:  # noqa: BLE001 - a constant that cannot be bound is left out
                left_out.append(f"line {statement.lineno}")
        return
    try:
        statements.run(statement, file, namespace)
    except Exception as error:  # noqa: BLE001 - left out, and said so
        if compound is None:
            left_out.append(f"line {statement.lineno} ({statements.error_line(error)})")
            return
        for inner in compound:
            _run_tolerantly(inner, file, module, left_out, execute)


def _bind_try_without_running(statement, file, module, left_out):
    """A module-level ``try``, read without running the file: its handlers bind only what its
    body could not (``from triton.language.extra import libdevice``, else ``libdevice =
    None``), as running it would."""
    namespace = module.__dict__
    for inner in statement.body:
        _run_tolerantly(inner, file, module, left_out, execute=False)
    bound = {name for inner in statement.body for name in _assigned_names(inner)
             if name in namespace}
    for handler in statement.handlers:
        for inner in handler.body:
            names = _assigned_names(inner)
            if not (names and names <= bound):
                _run_tolerantly(inner, file, module, left_out, execute=False)
    for inner in statement.orelse + statement.finalbody:
        _run_tolerantly(inner, file, module, left_out, execute=False)


def _assigned_names(statement):
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return set(_bound_names(statement))
    if isinstance(statement, ast.Assign):
        return {t.id for t in statement.targets if isinstance(t, ast.Name)}
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return {statement.target.id}
    return set()


_LOADING = {}  # file -> module, for the files loaded without running them


def _triton_bindings(statement, file):
    try:
        return reexports.triton_bindings(statement, file)
    except Exception:  # noqa: BLE001 - an unreadable wrapper binds nothing of Triton
        return {}


def _bind_reexported_triton(tree, file, namespace):
    """Triton's own modules under the names the file imports them by through its engine's
    wrapper, in place of whatever the wrapper gave (a placeholder where it found no GPU)."""
    for statement in ast.walk(tree):
        if isinstance(statement, (ast.Import, ast.ImportFrom)) and \
                not _is_triton_import(statement):
            for name, module in _triton_bindings(statement, file).items():
                if namespace.get(name) is not module:
                    namespace[name] = module


def _bind_without_running(statement, file, namespace):
    """An import, without running the imported module: a ``from`` import of a file that can be
    found on the path (the project's own helper kernels) is loaded the same way, without
    running it; every other name is a stand-in."""
    source = _module_file(statement, file) if isinstance(statement, ast.ImportFrom) else None
    if source is not None and not _defines_any(source, [a.name for a in statement.names]):
        source = None  # nothing the check needs: stand-ins, without reading further
    if source is not None:
        module = _LOADING.get(source)
        if module is None and source not in _LOADING:
            _LOADING[source] = None  # an import cycle finds stand-ins
            try:
                tree = ast.parse(source.read_text(), filename=str(source))
                module, _ = load(source, tree, execute=False)
            except (OSError, SyntaxError, UnicodeDecodeError):
                module = None
            _LOADING[source] = module
        if module is not None:
            for alias in statement.names:
                value = vars(module).get(alias.name)
                if value is not None and alias.name != "*":
                    namespace.setdefault(alias.asname or alias.name, value)
    standins.bind(namespace, _bound_names(statement), _import_text(statement))


def _defines_any(file, names):
    """Whether ``file`` declares a jit function or a literal constant under one of ``names``
    (or any, for ``*``): what loading it without running it can give an importer."""
    jit_names, constants = _loadable_names(file)
    return "*" in names and bool(jit_names | constants) or \
        bool(set(names) & (jit_names | constants))


_LOADABLE = {}  # file -> (jit function names, literal constant names)


def _loadable_names(file):
    if file not in _LOADABLE:
        try:
            tree = ast.parse(file.read_text(), filename=str(file))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        jit_names = {f.name for f in declared_jit_functions(tree)}
        constants = set()
        for statement in _top_level_statements(tree.body):
            if _is_literal_assignment(statement):
                targets = statement.targets if isinstance(statement, ast.Assign) else \
                    [statement.target]
                constants |= {t.id for t in targets}
        _LOADABLE[file] = (jit_names, constants)
    return _LOADABLE[file]


def _top_level_statements(body):
    for statement in body:
        inner = statements.inner_statements(statement)
        if inner is None:
            yield statement
        else:
            yield from _top_level_statements(inner)


def _module_file(statement, file):
    """The project's own ``.py`` file a ``from X import ...`` names, found without importing
    anything: the standard library and installed packages are stand-ins (loading them would be
    slow, and they define no kernel of the project)."""
    from pathlib import Path
    path = reexports.module_file(statement, file)
    if path is None:
        return None
    installed = {Path(p).resolve() for p in
                 (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                  sysconfig.get_paths()["platlib"])}
    resolved = path.resolve()
    if "site-packages" in resolved.parts or any(root in resolved.parents for root in installed):
        return None
    return path


def _imported_module(statement):
    """The absolute dotted module an import statement names (its first, for ``import a, b``),
    or None for a relative import."""
    if isinstance(statement, ast.ImportFrom):
        return statement.module if statement.level == 0 else None
    return statement.names[0].name if statement.names else None


def _is_triton_import(statement):
    if isinstance(statement, ast.ImportFrom):
        return bool(statement.module) and statement.level == 0 and \
            statement.module.split(".")[0] in _TRITON_MODULES
    return all(alias.name.split(".")[0] in _TRITON_MODULES for alias in statement.names)


def _bound_names(statement):
    if isinstance(statement, ast.ImportFrom):
        return [alias.asname or alias.name for alias in statement.names if alias.name != "*"]
    return [(alias.asname or alias.name).split(".")[0] for alias in statement.names]


def _import_text(statement):
    if isinstance(statement, ast.ImportFrom):
        return "." * statement.level + (statement.module or "")
    return ", ".join(alias.name for alias in statement.names)


def _bind_triton_names(statement, namespace):
    for name in _bound_names(statement):
        target = _TRITON_NAMES.get(name)
        if target and name not in namespace:
            try:
                namespace[name] = importlib.import_module(target)
            except ImportError:
                pass


def _is_literal_assignment(statement):
    if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is None:
        return False
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    return all(isinstance(t, ast.Name) for t in targets) and \
        statements.is_safe_expression(statement.value)


# --- jit functions in branches the load did not take ----------------------------------------

def _bind_triton_imported_anywhere(tree, file, namespace):
    """Triton's names as the file imports them in a branch the load did not take (``if
    has_triton(): import triton``, false where there is no GPU), where nothing is bound yet."""
    for statement in ast.walk(tree):
        if isinstance(statement, (ast.Import, ast.ImportFrom)) and \
                _is_triton_import(statement) and \
                any(name not in namespace for name in _bound_names(statement)):
            scratch = {}
            try:
                statements.run(statement, file, scratch)
            except Exception:  # noqa: BLE001 - a part of Triton this release does not have
                continue
            for name, value in scratch.items():
                namespace.setdefault(name, value)


def _bind_what_factories_import(tree, unreached, file, module):
    """For kernels a module-level function defines when called (``def _kernels(): from
    engine.triton_utils import triton ...``), the names that function imports or assigns at
    its top: imports as ``--no-exec`` binds them (Triton, the project's own jit helpers read
    without running, stand-ins), assignments as stand-ins, where the module has no such name."""
    wanted = {id(function) for function in unreached}
    for factory in tree.body:
        if not isinstance(factory, ast.FunctionDef) or \
                not any(id(inner) in wanted for inner in ast.walk(factory)):
            continue
        for statement in ast.walk(factory):
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                _run_tolerantly(statement, file, module, [], execute=False)
        for statement in factory.body:
            if isinstance(statement, ast.Assign):
                names = [t.id for t in statement.targets if isinstance(t, ast.Name)]
                standins.bind(module.__dict__, names, f"{factory.name}()")


def _define_unreached(module, tree, file, execute):
    """Define every declared jit function the load did not; keep each beside the module's
    names. Returns what could not be defined."""
    from pathlib import Path
    defined = [(jit.fn.__name__, jit.fn.__code__.co_firstlineno)
               for jit in (jit_function_of(v) for v in _jit_values(module))
               if getattr(jit.fn, "__code__", None) is not None
               and Path(jit.fn.__code__.co_filename).resolve() == Path(file).resolve()]
    namespace = module.__dict__
    left_out = []
    unreached = [function for function in declared_jit_functions(tree)
                 if not any(defines(function, name, line) for name, line in defined)]
    if unreached:
        _bind_triton_imported_anywhere(tree, file, namespace)
        _bind_what_factories_import(tree, unreached, file, module)
    for function in unreached:
        missing = object()
        previous = namespace.get(function.name, missing)
        wrapper = define(function, file, namespace, left_out, execute)
        if previous is not missing:
            namespace[function.name] = previous
        if jit_function_of(wrapper) is not None:
            namespace.setdefault(EXTRA, []).append((function.name, wrapper))
    return left_out
