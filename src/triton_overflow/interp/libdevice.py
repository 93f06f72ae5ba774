"""``libdevice`` math in Triton's CPU interpreter, computed with numpy.

Triton's interpreter (3.4, 3.6 and 3.9 read) runs no ``libdevice`` function, in three ways:

* ``triton.language.extra.libdevice`` holds stubs whose body is ``...``; the compiler swaps them
  for the backend's functions (its module map), the interpreter calls them: ``None`` comes back.
* The backend modules (``triton.language.extra.cuda.libdevice``, ``...hip.libdevice``) hold
  builtins that need a ``_semantic``; the interpreter hands one only to ``triton.language``, so
  they raise "Did you forget to add @triton.jit ?".
* Given one, they reach ``InterpreterBuilder.create_extern_elementwise``, which raises
  ``NotImplementedError``.

``install`` closes the three gaps through the interpreter's own path: during each interpreted
launch the stubs and the backend builtins get the interpreter's semantic (restored with the
interpreter's own patches), so Triton's extern dispatch picks the symbol (``__nv_log1pf``) and
the result type as on the GPU; the builder then computes that symbol with numpy in the input's
dtype. Only the functions in ``OPS`` are touched, and only while the interpreter has not
already handled them itself.
"""

import importlib
import math
import sys

import numpy as np

from triton_overflow.interp import runtime

BACKENDS = ("triton.language.extra.cuda.libdevice", "triton.language.extra.hip.libdevice")
GENERIC = "triton.language.extra.libdevice"


def _float64(function):
    """``function`` of Python floats, over an array, in float64 (the caller casts back)."""
    vectorised = np.frompyfunc(function, 1, 1)
    return lambda x: vectorised(np.asarray(x, dtype=np.float64)).astype(np.float64)


def _round_half_away(x):
    whole = np.trunc(x)
    return np.where(np.abs(x - whole) >= 0.5, whole + np.copysign(1.0, x), whole)


def _normcdf(x):
    return 0.5 * _erfc(-np.asarray(x, dtype=np.float64) / math.sqrt(2.0))


def _fma(a, b, c):
    # numpy has no fused multiply-add; float64 holds an fp32 product exactly (an fp64
    # one is rounded twice).
    return np.asarray(a, dtype=np.float64) * b + c


_erf = _float64(math.erf)
_erfc = _float64(math.erfc)
_NUMPY = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x),
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt,
    "rcbrt": lambda x: 1 / np.cbrt(x), "rcp_rn": np.reciprocal,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": _erf, "erfc": _erfc, "normcdf": _normcdf,
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "nearbyint": np.rint, "round": _round_half_away,
    "saturatef": lambda x: np.where(np.isnan(x), 0, np.clip(x, 0, 1)),
    "isnan": np.isnan, "isinf": np.isinf, "signbit": np.signbit,
    "finitef": np.isfinite, "isfinited": np.isfinite,
    "pow": np.power, "atan2": np.arctan2, "hypot": np.hypot, "fmod": np.fmod,
    "copysign": np.copysign, "nextafter": np.nextafter, "ldexp": np.ldexp, "scalbn": np.ldexp,
    "fdim": lambda x, y: np.maximum(x - y, 0), "add_rn": np.add, "sub_rn": np.subtract,
    "mul_rn": np.multiply, "div_rn": np.divide, "fma": _fma, "fma_rn": _fma,
}
# The device approximates these; the exact value is within their stated error.
_FAST = {"fast_expf": "exp", "fast_exp10f": "exp10", "fast_logf": "log", "fast_log2f": "log2",
         "fast_log10f": "log10", "fast_sinf": "sin", "fast_cosf": "cos", "fast_tanf": "tan",
         "fast_powf": "pow", "fast_dividef": "div_rn", "sqrt_rn": "sqrt", "rsqrt_rn": "rsqrt"}
OPS = {**_NUMPY, **{fast: _NUMPY[exact] for fast, exact in _FAST.items()}}


def _symbols(builtin):
    """The library symbols a backend builtin dispatches to: the strings of its code."""
    code = getattr(getattr(builtin, "__wrapped__", None), "__code__", None)
    constants = code.co_consts if code else ()
    return [value for value in constants if isinstance(value, str) and value.startswith("__")]


def _modules(names):
    found = []
    for name in names:
        try:
            found.append(importlib.import_module(name))
        except ImportError:
            continue
    return found


def _interpreted(builtin, semantic):
    def call(*args, **kwargs):
        kwargs.pop("_semantic", None)
        return builtin(*args, _semantic=semantic, **kwargs)
    return call


def _set(scope, owner, name, value):
    """Set through the interpreter's patch scope (restored after the launch) when it has one;
    Triton 3.4's interpreter patches for good, and so does this then."""
    if scope is not None and hasattr(scope, "set_attr"):
        scope.set_attr(owner, name, value)
    else:
        setattr(owner, name, value)


class _Plan:
    """What one interpreted launch replaces: ``(owner, name, original, replacement)``."""

    def __init__(self, semantic):
        import triton.language as tl
        self.backends = _modules(BACKENDS)
        generic = _modules([GENERIC])
        self.entries = []
        for module in self.backends:
            for name in OPS:
                member = vars(module).get(name)
                if member is not None and tl.core.is_builtin(member):
                    self.entries.append((module, name, member, _interpreted(member, semantic)))
        # The stubs stand for the first backend (CUDA), as the compiler's module map has them.
        first = self.backends[0] if self.backends else None
        primary = {name: new for module, name, _, new in self.entries if module is first}
        for module in generic:
            for name, replacement in primary.items():
                stub = vars(module).get(name)
                if stub is not None and not tl.core.is_builtin(stub):
                    self.entries.append((module, name, stub, replacement))
        self.by_original = {id(old): (old, new) for _, _, old, new in self.entries}

    def symbols(self):
        """``{symbol: numpy op}`` for every backend function in ``OPS``."""
        return {symbol: OPS[name] for module, name, old, _ in self.entries
                if module in self.backends for symbol in _symbols(old)}

    def apply(self, fn, scope):
        for owner, name, original, replacement in self.entries:
            if vars(owner).get(name) is original:  # else the interpreter patched it itself
                _set(scope, owner, name, replacement)
        self._apply_to_globals(fn, scope)

    def _apply_to_globals(self, fn, scope):
        """Functions imported by name (``from ...libdevice import tanh``) live in the
        kernel module's globals, out of reach of the module patches."""
        module = sys.modules.get(getattr(fn, "__module__", None))
        if module is None or vars(module) is not getattr(fn, "__globals__", None):
            return
        for name, value in list(vars(module).items()):
            entry = self.by_original.get(id(value))
            if entry is not None and entry[0] is value:
                _set(scope, module, name, entry[1])


def _extern_elementwise(original, ops, interpreter):
    def create_extern_elementwise(self, lib_name, lib_path, symbol, args, ret_type, is_pure):
        try:
            return original(self, lib_name, lib_path, symbol, args, ret_type, is_pure)
        except NotImplementedError:
            if symbol not in ops:
                raise
        dtype = ret_type.scalar
        with np.errstate(all="ignore"):
            data = np.asarray(ops[symbol](*(arg.data for arg in args)))
        return interpreter.TensorHandle(data.astype(interpreter._get_np_dtype(dtype)), dtype)
    return create_extern_elementwise


class _OncePerLaunch:
    """The interpreter's ``_patch_lang`` with the libdevice plan applied, done once per launch.

    The interpreter patches ``triton.language`` when a launch starts (and restores it when the
    launch ends), and again at every call of a ``@triton.jit`` helper inside it, where nothing
    is left to patch but ``inspect.getmembers`` walks the whole language each time: most of an
    interpreted launch of a kernel made of small helpers. The patch depends only on the
    function's module globals (the language modules in them, the libdevice names bound there),
    so a helper call whose globals the launch already patched is skipped.
    """

    def __init__(self, patch_lang, plan):
        self.patch_lang, self.plan = patch_lang, plan
        self.patched = None  # while a launch runs: ids of the globals dicts patched

    def __call__(self, fn):
        key = id(fn.__globals__)
        if self.patched is not None and key in self.patched:
            return runtime.interpreter()._LangPatchScope()
        scope = self.patch_lang(fn)
        self.plan.apply(fn, scope)
        if self.patched is None:
            restore = scope.restore

            def restore_and_forget():
                self.patched = None
                restore()

            scope.restore = restore_and_forget
            self.patched = set()
        self.patched.add(key)
        return scope


_installed = False


def install():
    """Make the ``libdevice`` functions in ``OPS`` run in Triton's interpreter (idempotent).

    Returns whether the hooks are in place. Where the interpreter lacks the internals they
    use (``_patch_lang``, ``interpreter_semantic``, ``create_extern_elementwise``), nothing
    is changed. Tested on Triton 3.4, 3.6 and 3.9.
    """
    global _installed
    if _installed:
        return True
    interpreter = runtime.interpreter()
    builder = getattr(interpreter, "InterpreterBuilder", None)
    patch_lang = getattr(interpreter, "_patch_lang", None)
    semantic = getattr(interpreter, "interpreter_semantic", None)
    needed = (builder, patch_lang, semantic, getattr(interpreter, "_get_np_dtype", None),
              getattr(builder, "create_extern_elementwise", None),
              getattr(interpreter, "_LangPatchScope", None))
    if any(part is None for part in needed):
        return False
    plan = _Plan(semantic)
    builder.create_extern_elementwise = _extern_elementwise(
        builder.create_extern_elementwise, plan.symbols(), interpreter)

    once = _OncePerLaunch(patch_lang, plan)
    interpreter._patch_lang = once
    executor = runtime.grid_executor()
    launch = executor.__call__

    def call(self, *args, **kwargs):
        once.patched = None  # every launch patches the language afresh
        return launch(self, *args, **kwargs)

    executor.__call__ = call
    _installed = True
    return True
