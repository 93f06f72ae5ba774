"""Stand-ins for what a kernel file names but the check cannot load.

A kernel file imports its engine (``from myengine.utils import fast_tanh, autotune_kwargs``);
where the engine is not installed, or where the check is told not to run the file's code, every
name such an import would bind is a ``StandIn``: an object any expression can use (call it,
take an attribute, unpack it, spread it as ``**kwargs``) without failing. Before a kernel is
compiled, every stand-in it calls (``fast_tanh(x)``, ``engine_math.rsqrt(x)``) is replaced by a
generated jit helper that returns its first argument unchanged (a zero of a dtype it is
given): a value-only helper, which forms no address. An engine's own wrapper of a grid query
(``tle.program_id(0)``) is the Triton function of its name instead, int32 as Triton gives it:
a wrapper that widens it can only be seen where it loads. A finding that depends on one says
so.
"""

import ast
import contextlib
import linecache
import textwrap
import types

from triton_overflow.triton_versions import jit_function_of


class StandIn:
    """Whatever a failed import would have bound: every use gives another stand-in."""

    def __init__(self, name):
        object.__setattr__(self, "_name", name)

    def __repr__(self):
        return f"<stand-in for {self._name}>"

    def __getattr__(self, attribute):
        if attribute.startswith("__") and attribute.endswith("__"):
            raise AttributeError(attribute)
        return StandIn(f"{self._name}.{attribute}")

    def __call__(self, *args, **kwargs):
        # A decorator that cannot be loaded leaves the function it decorates as it was.
        if len(args) == 1 and not kwargs and callable(args[0]) and \
                not isinstance(args[0], StandIn):
            return args[0]
        return StandIn(f"{self._name}()")

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __bool__(self):
        return True

    def __getitem__(self, key):
        return StandIn(f"{self._name}[...]")

    def keys(self):
        return []

    def __mro_entries__(self, bases):
        return (object, )


def _operator(self, *other):
    return StandIn(self._name)


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
              "lshift", "rshift", "neg", "pos", "invert", "lt", "le", "gt", "ge"):
    for _prefix in ("", "r"):
        if _prefix and _name in ("neg", "pos", "invert", "lt", "le", "gt", "ge"):
            continue
        setattr(StandIn, f"__{_prefix}{_name}__", _operator)


def name_of(value):
    return value._name if isinstance(value, StandIn) else None


def bind(namespace, names, origin):
    """Bind each name (an ``import`` that failed) to a stand-in, unless it is bound already."""
    for name in names:
        if name not in namespace:
            namespace[name] = StandIn(f"{name} (from {origin})")


def replace_called(jit_functions, namespace):
    """Replace every stand-in the jit functions call by a value-only jit helper; return the
    names replaced (``fast_tanh``, ``engine_math.rsqrt``)."""
    calls = {}
    for jit in jit_functions:
        try:
            tree = ast.parse(textwrap.dedent(jit.src))
        except SyntaxError:
            continue
        unpacked = _unpacked_arity(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            combined = _combine_function(node)
            if combined is not None and isinstance(_resolve(namespace, combined[0]), StandIn):
                path, inputs = combined
                shape = calls.setdefault(path, [0, set(), 1])
                shape[0], shape[2] = max(shape[0], 2 * inputs), max(shape[2], inputs)
            path = _dotted(node.func)
            if path is None or not isinstance(_resolve(namespace, path), StandIn):
                continue
            shape = calls.setdefault(path, [0, set(), 1])
            shape[0] = max(shape[0], len(node.args))
            shape[1] |= {k.arg for k in node.keywords if k.arg}
            shape[2] = max(shape[2], unpacked.get(id(node), 1))
    for path, (positional, keywords, results) in sorted(calls.items()):
        helper = _value_helper(path, positional, sorted(keywords), results)
        _assign(namespace, path, helper)
    return sorted(calls)


# Triton's grid queries: a stand-in of one of these names (an engine's ``program_id`` wrapper)
# asks the same question of the grid.
GRID_QUERIES = ("program_id", "num_programs")
GRID_QUERY_RESULT = "what Triton's function of its name returns (an int32 index)"


def is_grid_query(path):
    return path.rsplit(".", 1)[-1] in GRID_QUERIES


# What a stand-in that reduces returns: a scalar that still depends on its first argument
# (so the loads that feed it are not dropped as dead code).
SCALAR_RESULT = "the sum of its first argument"
_SCALAR_BODY = """\
    if isinstance(a0, tl.dtype):
        scalar = tl.full([], 0, a0)
    elif not hasattr(a0, "shape"):
        scalar = a0
    elif len(a0.shape) > 0:
        scalar = tl.sum(tl.ravel(a0).to(tl.float32), axis=0).to(tl.int32)
    else:
        scalar = a0.to(tl.int32)
"""
# A stand-in given a dtype (``get_dtype_min(x.dtype.element_ty)``) returns a value of it.
_VALUE_BODY = """\
    if isinstance({first}, tl.dtype):
        value = tl.full([], 0, {first})
    else:
        value = {first}
"""


@contextlib.contextmanager
def returning_scalar(namespace, paths):
    """Within the block, the stand-ins ``paths`` return a scalar (``SCALAR_RESULT``, each
    result) instead of their first argument: a helper that reduces a block (``value, index =
    block_argmax(logits, ...)``) gives a scalar, and a kernel that stores one compiles."""
    previous = {path: _resolve(namespace, path) for path in paths}
    for path, helper in previous.items():
        positional, keywords, results = helper.stand_in_shape
        _assign(namespace, path, _value_helper(path, positional, keywords, results,
                                               scalar=positional > 0))
    try:
        yield
    finally:
        for path, helper in previous.items():
            _assign(namespace, path, helper)


def depends_on(file, product_line, names):
    """Which of the stand-ins ``names`` the values on ``file:product_line`` are computed from
    (through the kernel's local assignments)."""
    from triton_overflow.lint.analysis import line_values
    if not names:
        return []
    _, values, _ = line_values(file, product_line)
    return sorted({path for value in values for inner in ast.walk(value)
                   if isinstance(inner, ast.Call) and (path := _dotted(inner.func)) in names})


def _combine_function(call):
    """(the dotted name, how many inputs it combines) of a combine function passed to
    ``tl.associative_scan`` or ``tl.reduce`` by name, else None: a stand-in there is called
    with two of each input and returns one of each."""
    name = _dotted(call.func)
    if name is None or name.rsplit(".", 1)[-1] not in ("associative_scan", "reduce"):
        return None
    given = call.args[2] if len(call.args) > 2 else next(
        (k.value for k in call.keywords if k.arg == "combine_fn"), None)
    path = _dotted(given) if given is not None else None
    if path is None or not call.args:
        return None
    inputs = len(call.args[0].elts) if isinstance(call.args[0], ast.Tuple) else 1
    return path, inputs


def _unpacked_arity(tree):
    arity = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            target = node.targets[0]
            if isinstance(target, (ast.Tuple, ast.List)):
                arity[id(node.value)] = len(target.elts)
    return arity


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id] + parts[::-1])


def _resolve(namespace, path):
    head, *rest = path.split(".")
    value = namespace.get(head)
    for attribute in rest:
        if isinstance(value, StandIn):
            return value
        value = getattr(value, attribute, None)
    return value


def _namespace(stand_in):
    """What a stand-in module becomes once some of its attributes are jit helpers: a module
    (the only kind of object besides constants a kernel may name from its globals) whose other
    attributes are the stand-in's."""
    module = types.ModuleType(name_of(stand_in) or "stand-in")
    module.__getattr__ = lambda attribute: getattr(stand_in, attribute)
    module.__stand_in_namespace__ = True
    return module


def _assign(namespace, path, helper):
    head, *rest = path.split(".")
    if not rest:
        namespace[head] = helper
        return
    owner = namespace[head]
    if not getattr(owner, "__stand_in_namespace__", False):
        owner = _namespace(owner)
        namespace[head] = owner
    for attribute in rest[:-1]:
        inner = getattr(owner, attribute)
        if not getattr(inner, "__stand_in_namespace__", False):
            inner = _namespace(inner)
            setattr(owner, attribute, inner)
        owner = inner
    setattr(owner, rest[-1], helper)


_COUNTER = [0]


def _value_helper(path, positional, keywords, results, scalar=False):
    """A ``@triton.jit`` function that takes what the calls pass and returns its first
    argument (a zero of it, where it is a dtype), or with ``scalar`` a scalar made from it;
    where a call unpacks ``results`` values, that many: the first as many arguments, when it
    is given that many, else the one value repeated."""
    import triton
    import triton.language as tl
    _COUNTER[0] += 1
    name = "stand_in_" + path.replace(".", "_")
    params = [f"a{i}" for i in range(positional)] + [k for k in keywords]
    returned = "scalar" if scalar else "value" if params else "0"
    if is_grid_query(path) and params:
        axis = "axis" if "axis" in keywords and not positional else params[0]
        returned = f"tl.{path.rsplit('.', 1)[-1]}({axis})"
    value = returned if results == 1 else "(" + ", ".join([returned] * results) + ")"
    if results > 1 and returned == "value" and positional >= results:
        # ``b, o = merge(b, o, ...)``: each unpacked value is what was passed in its place.
        value = "(" + ", ".join(params[:results]) + ")"
    signature = ", ".join(params[:1] + [f"{p}=None" for p in params[1:]])
    body = _SCALAR_BODY if scalar else \
        _VALUE_BODY.format(first=params[0]) if returned == "value" else ""
    source = f"def {name}({signature}):\n{body}    return {value}\n"
    filename = f"<overflow-lint stand-in {path} #{_COUNTER[0]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": __name__, "tl": tl}
    exec(compile(source, filename, "exec"), namespace)
    helper = triton.jit(namespace[name])
    assert jit_function_of(helper) is not None
    helper.stand_in_shape = (positional, keywords, results)
    return helper
