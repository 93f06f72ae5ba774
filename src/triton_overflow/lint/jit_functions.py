"""Defining a kernel file's jit functions when not all of their decorators can run.

A jit function is defined as written where it can be; otherwise with Triton's own decorators
only (``jit``, ``autotune``, ``heuristics``), each keeping the arguments that can be read here
(without execution, only literal ones), and with the defaults and annotations that are literals.
What was dropped is said. Also: finding the jit functions a file declares, inside module-level
``if`` / ``try`` / ``with`` too, and telling whether one of them is a given definition.
"""

import ast
import copy
import sys

from triton_overflow.lint import standins, statements
from triton_overflow.triton_versions import jit_function_of

TRITON_DECORATORS = ("jit", "autotune", "heuristics")
_AUTOTUNE_REQUIRED = {"configs": "[]", "key": "[]"}


def has_triton_decorator(function):
    return not getattr(function, NOT_TRITON, False) and \
        any(_is_triton_decorator(d) for d in function.decorator_list)


NOT_TRITON = "_overflow_lint_not_triton"  # set on a FunctionDef another DSL's ``jit`` makes


def _mark_other_dsls(tree):
    """Mark the functions whose ``jit`` decorators all come from a module that is not Triton
    (``import cutlass.cute as cute``; ``@cute.jit``): CuTe DSL, Numba, JAX functions are no
    Triton kernels. A ``jit`` from anywhere else (``from engine.utils import jit``, Triton
    re-exported) keeps counting as Triton's."""
    foreign = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in _OTHER_DSLS:
                    foreign.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                node.module.split(".")[0] in _OTHER_DSLS:
            foreign.update(alias.asname or alias.name for alias in node.names)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            roots = [_root(d) for d in node.decorator_list if _is_triton_decorator(d)]
            if roots and all(root in foreign for root in roots):
                setattr(node, NOT_TRITON, True)


_OTHER_DSLS = {"cutlass", "numba", "jax", "cupy", "tilelang", "warp", "cuda", "mojo"}


def _root(decorator):
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    while isinstance(target, ast.Attribute):
        target = target.value
    return getattr(target, "id", "")


def _is_triton_decorator(decorator):
    return _decorator_name(decorator) in TRITON_DECORATORS


def _decorator_name(decorator):
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def define(function, file, namespace, left_out, execute):
    """Define a jit function: as written, else with Triton's decorators and what of their
    arguments can be read. Returns the wrapper, or None."""
    _bind_names_of_defaults(function, namespace)
    if execute and not _reads_stand_ins(function, namespace):
        try:
            statements.run(function, file, namespace)
            if jit_function_of(namespace.get(function.name)) is not None or \
                    not has_triton_decorator(function):
                return namespace.get(function.name)
        except Exception:  # noqa: BLE001 - retried with what can be read
            pass
    if not has_triton_decorator(function):
        left_out.append(f"line {function.lineno} ({function.name})")
        return None
    rewritten, dropped = _readable_definition(function, namespace, execute)
    try:
        statements.run(rewritten, file, namespace)
    except Exception as error:  # noqa: BLE001 - left out after all
        left_out.append(f"{function.name} at line {function.lineno} "
                        f"({statements.error_line(error)})")
        return None
    if dropped:
        left_out.append(f"of {function.name} at line {function.lineno}: " + ", ".join(dropped))
    return namespace.get(function.name)


def _bind_names_of_defaults(function, namespace):
    """A stand-in for each name a parameter's default reads that the module could not bind
    (``FP8_MIN: tl.constexpr = float8_info.min`` where ``float8_info`` comes from the engine's
    platform): the parameter is then guessed from its use, as one without a default, and
    Triton, which reads the defaults again as it compiles, finds the name."""
    import builtins
    arguments = function.args
    for default in list(arguments.defaults) + [d for d in arguments.kw_defaults if d]:
        for node in ast.walk(default):
            if isinstance(node, ast.Name) and node.id not in namespace and \
                    not hasattr(builtins, node.id):
                namespace[node.id] = standins.StandIn(f"{node.id} (not loaded)")


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
        return statements.is_safe_expression(node, lambdas=True)
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
        if annotation is not None and not statements.is_safe_expression(annotation) and \
                not isinstance(annotation, ast.Name):
            removed.append(f"the annotation of `{arg.arg}`")
            annotation = None
        copy.args.append(ast.arg(arg=arg.arg, annotation=annotation))
    defaults = list(arguments.defaults)
    unsafe = [i for i, d in enumerate(defaults) if not statements.is_safe_expression(d)]
    if unsafe:
        # Defaults bind to the last parameters: dropping one drops those before it too.
        removed.append(f"{unsafe[-1] + 1} default(s) that are not literals")
        defaults = defaults[unsafe[-1] + 1:]
    copy.defaults = defaults
    copy.kw_defaults = [d if d is None or statements.is_safe_expression(d) else None
                        for d in arguments.kw_defaults]
    return copy, removed


# --- the jit functions a file declares ------------------------------------------------------

def declared_jit_functions(tree):
    """``[FunctionDef]`` with a Triton decorator at module level, inside module-level
    ``if`` / ``try`` / ``with`` too, and inside a module-level function that defines its
    kernels when called (``def _kernels(): import triton ... @triton.jit ...``); a function
    made a kernel by a call (``kernel = triton.jit(fn)``) is given as if it were decorated
    so."""
    found, pending = [], list(tree.body)
    _mark_other_dsls(tree)
    called = _jit_by_call(tree)
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.FunctionDef) and has_triton_decorator(node):
            found.append(node)
            continue
        if isinstance(node, ast.FunctionDef) and node.name in called:
            decorated = ast.FunctionDef(**{name: getattr(node, name) for name in node._fields})
            decorator = copy.deepcopy(called[node.name])
            for part in ast.walk(decorator):  # placed on the def, where Python starts the code
                part.lineno, part.end_lineno = node.lineno, node.lineno
                part.col_offset, part.end_col_offset = node.col_offset, node.col_offset
            decorated.decorator_list = [decorator] + list(node.decorator_list)
            found.append(ast.copy_location(decorated, node))
            continue
        inner = statements.inner_statements(node)
        if inner is None and isinstance(node, ast.FunctionDef):
            inner = [statement for statement in node.body
                     if isinstance(statement, ast.FunctionDef) or
                     statements.inner_statements(statement) is not None]
        if inner is not None:
            pending[:0] = inner
    return found


def _jit_by_call(tree):
    """{function name: the decorator it would have} for each module-level ``triton.jit(fn)``
    (``jit(fn)``, ``triton.jit(**options)(fn)``) that names a function of the module."""
    made = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or len(node.args) != 1 or \
                not isinstance(node.args[0], ast.Name):
            continue
        maker = node.func  # triton.jit, or triton.jit(**options)
        if _decorator_name(maker) == "jit":
            made[node.args[0].id] = maker
    return made


def first_line(function):
    return min([function.lineno] + [d.lineno for d in function.decorator_list])


def defines(function, name, line):
    """Whether a jit function ``name`` whose code starts at ``line`` is ``function``'s
    definition (with all its decorators, some, or none)."""
    return name == function.name and first_line(function) <= line <= function.lineno
