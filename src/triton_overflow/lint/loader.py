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

from triton_overflow.compat import jit_function_of
from triton_overflow.lint import standins

EXTRA = "__overflow_lint_extra__"  # [(name, jit wrapper)] defined beside the module's names
TRITON_DECORATORS = ("jit", "autotune", "heuristics")
_TRITON_NAMES = {"triton": "triton", "tl": "triton.language", "language": "triton.language",
                 "libdevice": "triton.language.extra.libdevice"}
_TRITON_MODULES = ("triton", "math", "functools", "typing", "__future__", "itertools")
_AUTOTUNE_REQUIRED = {"configs": "[]", "key": "[]"}


def load(file, tree, execute=True):
    """(module, note): the module with its jit functions, or (None, why not)."""
    first_error = None
    if execute:
        module, first_error = _import(file)
        if module is not None:
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
    from triton_overflow.lint.discover import dotted_name
    name = dotted_name(file)
    try:
        if name is not None:
            return importlib.import_module(name), None
        module = _empty_module(file)
        spec = importlib.util.spec_from_file_location(module.__name__, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module.__name__] = module
        spec.loader.exec_module(module)
        return module, None
    except Exception as error:  # noqa: BLE001 - any failure falls back to the tolerant load
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
            _bind_without_running(statement, file, namespace)
            return
        try:
            _run(statement, file, namespace)
        except Exception:  # noqa: BLE001 - the engine is not here: Triton's names, stand-ins
            _bind_triton_names(statement, namespace)
            standins.bind(namespace, _bound_names(statement), _import_text(statement))
            left_out.append(f"line {statement.lineno} (its import failed: stand-ins used)")
        return
    if isinstance(statement, ast.FunctionDef):
        if execute or _has_triton_decorator(statement):
            _define(statement, file, namespace, left_out, execute)
        return
    compound = _inner_statements(statement)
    if not execute:
        if compound is not None:
            for inner in compound:
                _run_tolerantly(inner, file, module, left_out, execute)
        elif _is_literal_assignment(statement):
            try:
                _run(statement, file, namespace)
            except Exception:  # noqa: BLE001 - a constant that cannot be bound is left out
                left_out.append(f"line {statement.lineno}")
        return
    try:
        _run(statement, file, namespace)
    except Exception as error:  # noqa: BLE001 - left out, and said so
        if compound is None:
            left_out.append(f"line {statement.lineno} ({type(error).__name__}: "
                            f"{str(error).splitlines()[0] if str(error) else ''})")
            return
        for inner in compound:
            _run_tolerantly(inner, file, module, left_out, execute)


_LOADING = {}  # file -> module, for the files loaded without running them


def _bind_without_running(statement, file, namespace):
    """An import, without running the imported module: a ``from`` import of a file that can be
    found on the path (the project's own helper kernels) is loaded the same way, without
    running it; every other name is a stand-in."""
    source = _module_file(statement, file) if isinstance(statement, ast.ImportFrom) else None
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


def _module_file(statement, file):
    """The ``.py`` file a ``from X import ...`` names, found without importing anything."""
    from pathlib import Path
    parts = (statement.module or "").split(".") if statement.module else []
    if statement.level:
        base = Path(file).resolve().parent
        for _ in range(statement.level - 1):
            base = base.parent
        bases = [base]
    else:
        installed = {Path(p).resolve() for p in
                     (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                      sysconfig.get_paths()["platlib"])}
        # The project's own files only: the standard library and installed packages are
        # stand-ins (loading them would be slow, and they define no kernel of the project).
        bases = [base for base in (Path(entry or ".").resolve() for entry in sys.path)
                 if not any(base == root or root in base.parents for root in installed)
                 and "site-packages" not in base.parts]
    for base in bases:
        candidate = base.joinpath(*parts)
        for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
            if parts and path.is_file():
                return path
    return None


def _inner_statements(statement):
    """The statements inside a module-level ``if`` / ``try`` / ``with``, in order, or None."""
    if isinstance(statement, ast.If):
        return statement.body + statement.orelse
    if isinstance(statement, ast.Try) or type(statement).__name__ == "TryStar":
        inner = list(statement.body)
        for handler in statement.handlers:
            inner += handler.body
        return inner + statement.orelse + statement.finalbody
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return statement.body
    return None


def _run(statement, file, namespace):
    exec(compile(ast.Module(body=[statement], type_ignores=[]), str(file), "exec"), namespace)


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
    return all(isinstance(t, ast.Name) for t in targets) and _is_safe_expression(statement.value)


def _is_safe_expression(node, lambdas=False):
    """A literal, a container of them, or ``tl.constexpr(...)`` / ``triton.Config(...)`` of
    them (and, with ``lambdas``, lambdas, which run nothing until called): what can be
    evaluated without running the file's own code."""
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if lambdas and isinstance(node, ast.Lambda):
        return True
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_is_safe_expression(e, lambdas) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_safe_expression(k, lambdas) and
                   _is_safe_expression(v, lambdas) for k, v in zip(node.keys, node.values))
    if isinstance(node, ast.Call):
        name = standins._dotted(node.func) or ""
        return name.split(".")[-1] in ("constexpr", "Config") and \
            all(_is_safe_expression(a, lambdas) for a in node.args) and \
            all(k.arg and _is_safe_expression(k.value, lambdas) for k in node.keywords)
    if isinstance(node, ast.Attribute):
        return (standins._dotted(node) or "").split(".")[0] in ("tl", "triton", "language")
    return False


# --- jit functions ------------------------------------------------------------------------

def _has_triton_decorator(function):
    return any(_is_triton_decorator(d) for d in function.decorator_list)


def _is_triton_decorator(decorator):
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name in TRITON_DECORATORS


def _define(function, file, namespace, left_out, execute):
    """Define a jit function: as written, else with Triton's decorators and what of their
    arguments can be read. Returns the wrapper, or None."""
    if execute and not _reads_stand_ins(function, namespace):
        try:
            _run(function, file, namespace)
            if jit_function_of(namespace.get(function.name)) is not None or \
                    not _has_triton_decorator(function):
                return namespace.get(function.name)
        except Exception:  # noqa: BLE001 - retried with what can be read
            pass
    if not _has_triton_decorator(function):
        left_out.append(f"line {function.lineno} ({function.name})")
        return None
    rewritten, dropped = _readable_definition(function, namespace, execute)
    try:
        _run(rewritten, file, namespace)
    except Exception as error:  # noqa: BLE001 - left out after all
        left_out.append(f"{function.name} at line {function.lineno} ({type(error).__name__}: "
                        f"{str(error).splitlines()[0] if str(error) else ''})")
        return None
    if dropped:
        left_out.append(f"of {function.name} at line {function.lineno}: " + ", ".join(dropped))
    return namespace.get(function.name)


def _reads_stand_ins(function, namespace):
    """Whether a Triton decorator of ``function`` takes an argument that cannot be read here
    (a stand-in, or an error)."""
    for decorator in function.decorator_list:
        if _is_triton_decorator(decorator) and isinstance(decorator, ast.Call):
            values = list(decorator.args) + [k.value for k in decorator.keywords]
            if not all(_readable(value, namespace, True) for value in values):
                return True
    return False


def _readable_definition(function, namespace, execute):
    """A copy of ``function`` with Triton's decorators only, each with the arguments that can
    be evaluated (and, without execution, only literal ones); and what was dropped."""
    dropped = []
    decorators = []
    for decorator in function.decorator_list:
        shown = ast.unparse(decorator)
        if not _is_triton_decorator(decorator):
            dropped.append(f"decorator @{shown}")
            continue
        if isinstance(decorator, ast.Call):
            decorator, removed = _readable_call(decorator, namespace, execute)
            dropped += [f"`{text}` of @{ast.unparse(decorator.func)}" for text in removed]
            if _decorator_name(decorator) == "heuristics" and removed:
                continue
        decorators.append(decorator)
    copy = ast.FunctionDef(name=function.name, args=function.args, body=function.body,
                           decorator_list=decorators, returns=None, type_comment=None,
                           lineno=function.lineno, col_offset=function.col_offset,
                           end_lineno=function.end_lineno, end_col_offset=function.end_col_offset)
    if sys.version_info >= (3, 12):
        copy.type_params = []
    if not execute:
        copy.args, removed = _readable_arguments(function.args)
        dropped += removed
    return ast.fix_missing_locations(copy), dropped


def _decorator_name(decorator):
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def _readable_call(call, namespace, execute):
    kept_args, keywords, removed = [], [], []
    for arg in call.args:
        if _readable(arg, namespace, execute):
            kept_args.append(arg)
        else:
            removed.append(ast.unparse(arg))
            break  # positions after a dropped one would shift
    for keyword in call.keywords:
        if _readable(keyword.value, namespace, execute):
            keywords.append(keyword)
        else:
            removed.append(("**" if keyword.arg is None else f"{keyword.arg}=")
                           + ast.unparse(keyword.value))
    if _decorator_name(call) == "autotune":
        given = {k.arg for k in keywords} | set(list(_AUTOTUNE_REQUIRED)[:len(kept_args)])
        for name, empty in _AUTOTUNE_REQUIRED.items():
            if name not in given:
                keywords.append(ast.keyword(arg=name, value=ast.parse(empty, mode="eval").body))
    rebuilt = ast.Call(func=call.func, args=kept_args, keywords=keywords)
    return ast.copy_location(rebuilt, call), removed


def _readable(node, namespace, execute):
    if not execute:
        return _is_safe_expression(node, lambdas=True)
    try:
        value = eval(compile(ast.Expression(node), "<decorator argument>", "eval"), namespace)
    except Exception:  # noqa: BLE001 - cannot be read here
        return False
    return not isinstance(value, standins.StandIn) and \
        not any(isinstance(v, standins.StandIn) for v in _items(value))


def _items(value):
    if isinstance(value, (list, tuple, set)):
        return list(value)
    if isinstance(value, dict):
        return list(value.values())
    return []


def _readable_arguments(arguments):
    """Without execution: defaults and annotations that are literals or Triton's names."""
    removed = []
    copy = ast.arguments(posonlyargs=arguments.posonlyargs, args=[], vararg=arguments.vararg,
                         kwonlyargs=arguments.kwonlyargs, kw_defaults=arguments.kw_defaults,
                         kwarg=arguments.kwarg, defaults=[])
    for arg in arguments.args:
        annotation = arg.annotation
        if annotation is not None and not _is_safe_expression(annotation) and \
                not isinstance(annotation, ast.Name):
            removed.append(f"the annotation of `{arg.arg}`")
            annotation = None
        copy.args.append(ast.arg(arg=arg.arg, annotation=annotation))
    defaults = list(arguments.defaults)
    unsafe = [i for i, d in enumerate(defaults) if not _is_safe_expression(d)]
    if unsafe:
        # Defaults bind to the last parameters: dropping one drops those before it too.
        removed.append(f"{unsafe[-1] + 1} default(s) that are not literals")
        defaults = defaults[unsafe[-1] + 1:]
    copy.defaults = defaults
    copy.kw_defaults = [d if d is None or _is_safe_expression(d) else None
                        for d in arguments.kw_defaults]
    return copy, removed


# --- jit functions in branches the load did not take ----------------------------------------

def declared_jit_functions(tree):
    """``[FunctionDef]`` with a Triton decorator at module level, inside module-level
    ``if`` / ``try`` / ``with`` too."""
    found, pending = [], list(tree.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.FunctionDef) and _has_triton_decorator(node):
            found.append(node)
            continue
        inner = _inner_statements(node)
        if inner is not None:
            pending[:0] = inner
    return found


def first_line(function):
    return min([function.lineno] + [d.lineno for d in function.decorator_list])


def defines(function, name, line):
    """Whether a jit function ``name`` whose code starts at ``line`` is ``function``'s
    definition (with all its decorators, some, or none)."""
    return name == function.name and first_line(function) <= line <= function.lineno


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
    for function in declared_jit_functions(tree):
        if any(defines(function, name, line) for name, line in defined):
            continue
        missing = object()
        previous = namespace.get(function.name, missing)
        wrapper = _define(function, file, namespace, left_out, execute)
        if previous is not missing:
            namespace[function.name] = previous
        if jit_function_of(wrapper) is not None:
            namespace.setdefault(EXTRA, []).append((function.name, wrapper))
    return left_out
