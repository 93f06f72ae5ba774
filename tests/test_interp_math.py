"""``triton_overflow.interp.libdevice``: libdevice functions run in Triton's CPU interpreter and
give what float64 numpy gives, rounded to the input's dtype (within a few ulp)."""

import math

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.cuda import libdevice as cuda_libdevice
from triton.language.extra.libdevice import tanh

from triton_overflow import triton_versions
from triton_overflow.interp import execution_mode, runtime
from triton_overflow.interp import libdevice as numpy_libdevice

pytestmark = [
    pytest.mark.selftest,
    pytest.mark.skipif(not execution_mode.interpreted(),
                       reason="checks the interpreter's libdevice hooks; kernels run natively "
                       "here (pass --overflow-mode interpreter)"),
    pytest.mark.skipif(triton_versions.interpreter_problem() is not None,
                       reason=str(triton_versions.interpreter_problem())),
]
INF, NAN = math.inf, math.nan
RTOL = {torch.float32: 1e-6, torch.float64: 1e-12}


@triton.jit
def _libdevice_kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, FUNCTION: tl.constexpr,
                      ARITY: tl.constexpr, BLOCK: tl.constexpr):
    # The interpreter runs this body as Python: getattr is the lookup `libdevice.<name>` does.
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    function = getattr(libdevice, FUNCTION)
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    if ARITY == 1:
        result = function(x)
    elif ARITY == 2:
        result = function(x, y)
    else:
        result = function(x, y, tl.load(z_ptr + offsets, mask=mask))
    tl.store(out_ptr + offsets, result, mask=mask)


@triton.jit
def _import_styles_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    tl.store(out_ptr + offsets, libdevice.log1p(x))
    tl.store(out_ptr + BLOCK + offsets, cuda_libdevice.log1p(x))
    tl.store(out_ptr + 2 * BLOCK + offsets, tanh(x))
    tl.store(out_ptr + 3 * BLOCK + offsets, libdevice.pow(x, 3))
    tl.store(out_ptr + 4 * BLOCK + offsets, libdevice.pow(x, 0.5))


def wide(function):
    """``function`` on the float inputs widened to float64 (int inputs stay int)."""
    return lambda *args: function(*(a.astype(np.float64) if a.dtype.kind == "f" else a
                                    for a in args))


def _math(function):
    return wide(np.vectorize(function, otypes=[np.float64]))


REALS = [-INF, -30.5, -2.5, -1.0, -0.5, -1e-6, -0.0, 0.0, 1e-6, 0.5, 1.5, 2.5, 7.25, 30.5,
         INF, NAN]
POSITIVE = [0.0, 1e-30, 1e-6, 0.25, 1.0, 2.0, 10.0, 1e30, INF, -1.0, -INF, NAN]
UNIT = [-1.0, -0.9, -0.5, -1e-6, 0.0, 1e-6, 0.5, 0.9, 1.0, 1.5, -INF, NAN]
PAIRS = ([1.0, 1e30, -3.0, 0.0, 1.0, -2.5, INF], [3.0, 1e10, 7.0, 0.0, 0.0, 0.5, 2.0])
POWERS = ([2.0, 2.0, 0.5, -2.0, -2.0, 0.0, 1.0, INF, 10.0, 3.0],
          [10.0, -3.0, 0.5, 3.0, 0.5, -1.0, NAN, 0.0, -30.0, 2.5])
POSITIVE_POWERS = ([2.0, 2.0, 0.5, 10.0, 3.0, 1.0], [10.0, -3.0, 0.5, -30.0, 2.5, 0.0])

# name: (reference, inputs, ...); a list of ints is an int32 input.
CASES = {
    "exp": (wide(np.exp), [-INF, -80.0, -20.0, -1.0, -1e-7, 0.0, 1e-7, 1.0, 20.0, 80.0, 100.0,
                           INF, NAN]),
    "exp2": (wide(np.exp2), [-INF, -120.0, -1.0, 0.0, 0.5, 1.0, 100.0, 130.0, INF, NAN]),
    "exp10": (wide(lambda x: 10.0 ** x), [-INF, -30.0, -1.0, 0.0, 0.5, 1.0, 30.0, 40.0, NAN]),
    "expm1": (wide(np.expm1), [-INF, -20.0, -1.0, -1e-7, -0.0, 1e-7, 1.0, 20.0, 100.0, NAN]),
    "log": (wide(np.log), POSITIVE),
    "log2": (wide(np.log2), POSITIVE),
    "log10": (wide(np.log10), POSITIVE),
    "log1p": (wide(np.log1p), [-2.0, -1.0, -0.999, -0.5, -1e-7, 0.0, 1e-7, 0.5, 3.0, 1e30, INF,
                               NAN]),
    "sqrt": (wide(np.sqrt), POSITIVE),
    "rsqrt": (wide(lambda x: 1.0 / np.sqrt(x)), POSITIVE + [-0.0]),
    "cbrt": (wide(np.cbrt), REALS),
    "rcbrt": (wide(lambda x: 1.0 / np.cbrt(x)), REALS),
    "rcp_rn": (wide(lambda x: 1.0 / x), REALS),
    "sin": (wide(np.sin), REALS),
    "cos": (wide(np.cos), REALS),
    "tan": (wide(np.tan), REALS),
    "asin": (wide(np.arcsin), UNIT),
    "acos": (wide(np.arccos), UNIT),
    "atan": (wide(np.arctan), REALS),
    "sinh": (wide(np.sinh), REALS),
    "cosh": (wide(np.cosh), REALS),
    "tanh": (wide(np.tanh), REALS),
    "asinh": (wide(np.arcsinh), REALS),
    "acosh": (wide(np.arccosh), [1.0, 1.5, 10.0, 1e30, INF, 0.5, NAN]),
    "atanh": (wide(np.arctanh), UNIT),
    "erf": (_math(math.erf), REALS),
    "erfc": (_math(math.erfc), REALS + [9.0, -9.0]),
    "normcdf": (_math(lambda x: 0.5 * math.erfc(-x / math.sqrt(2.0))), REALS),
    "abs": (wide(np.abs), REALS),
    "floor": (wide(np.floor), REALS),
    "ceil": (wide(np.ceil), REALS),
    "trunc": (wide(np.trunc), REALS),
    "rint": (wide(np.rint), REALS),
    "nearbyint": (wide(np.rint), REALS),
    "round": (wide(lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)), REALS),
    "saturatef": (wide(lambda x: np.fmin(np.fmax(x, 0.0), 1.0)), REALS),
    "isnan": (np.isnan, REALS),
    "isinf": (np.isinf, REALS),
    "signbit": (np.signbit, REALS),
    "finitef": (np.isfinite, REALS),
    "isfinited": (np.isfinite, REALS),
    "pow": (wide(np.power), *POWERS),
    "atan2": (wide(np.arctan2), [1.0, -1.0, 0.0, -0.0, 1.0, INF, 3.0],
              [1.0, -1.0, -1.0, -1.0, 0.0, INF, -4.0]),
    "hypot": (wide(np.hypot), [3.0, -5.0, 0.0, INF, 1e30, NAN], [4.0, 12.0, 0.0, 1.0, 1e30, 1.0]),
    "fmod": (wide(np.fmod), [5.5, -5.5, 5.5, 1.0, 0.0, INF], [2.0, 2.0, -2.0, 0.0, 3.0, 2.0]),
    "copysign": (wide(np.copysign), [1.0, 1.0, -2.0, 0.0, INF], [-1.0, 1.0, 3.0, -0.0, -1.0]),
    "nextafter": (np.nextafter,  # the neighbour in the input's own dtype
                  [1.0, 1.0, 0.0, -1.0, 0.0], [2.0, 0.0, 1.0, -2.0, -1.0]),
    "ldexp": (wide(np.ldexp), [1.0, -1.5, 3.0, 0.0, INF, 1.0], [3, -2, 100, 5, -1, -200]),
    "scalbn": (wide(np.ldexp), [1.0, -1.5, 3.0, 0.0, INF, 1.0], [3, -2, 100, 5, -1, -200]),
    "fdim": (wide(lambda x, y: np.where(np.isnan(x - y), np.nan, np.where(x > y, x - y, 0.0))),
             [3.0, 1.0, -1.0, NAN, INF], [1.0, 3.0, -1.0, 0.0, 1.0]),
    "add_rn": (wide(np.add), *PAIRS),
    "sub_rn": (wide(np.subtract), *PAIRS),
    "mul_rn": (wide(np.multiply), *PAIRS),
    "div_rn": (wide(np.divide), *PAIRS),
    "fma": (wide(lambda a, b, c: a * b + c), [1.5, 2.0, -3.0, 1e-20, 0.1],
            [2.0, 3.0, 4.0, 1e-20, 10.0], [0.25, -6.0, 5.0, 1.0, -1.0]),
    "fma_rn": (wide(lambda a, b, c: a * b + c), [1.5, 2.0, -3.0, 0.1], [2.0, 3.0, 4.0, 10.0],
               [0.25, -6.0, 5.0, -1.0]),
}
FAST = {"fast_expf": "exp", "fast_exp10f": "exp10", "fast_logf": "log", "fast_log2f": "log2",
        "fast_log10f": "log10", "fast_sinf": "sin", "fast_cosf": "cos", "fast_tanf": "tan",
        "fast_dividef": "div_rn", "sqrt_rn": "sqrt", "rsqrt_rn": "rsqrt"}
CASES.update({fast: CASES[exact] for fast, exact in FAST.items()})
CASES["fast_powf"] = (wide(np.power), *POSITIVE_POWERS)
FLOAT32_ONLY = {name for name in CASES if name.startswith("fast_")} | {"saturatef", "finitef",
                                                                       "rsqrt_rn"}
FLOAT64_ONLY = {"isfinited"}
PREDICATES = {"isnan", "isinf", "signbit", "finitef", "isfinited"}
DTYPE_CASES = [(name, dtype) for name in CASES for dtype in (torch.float32, torch.float64)
               if not (dtype == torch.float64 and name in FLOAT32_ONLY)
               and not (dtype == torch.float32 and name in FLOAT64_ONLY)]


def _tensor(values, dtype):
    is_int = all(isinstance(value, int) for value in values)
    return torch.tensor(values, dtype=torch.int32 if is_int else dtype)


def run_libdevice(name, dtype, inputs):
    """``libdevice.<name>`` of ``inputs`` (lists, one per argument) in an interpreted kernel."""
    tensors = [_tensor(values, dtype) for values in inputs]
    n = tensors[0].numel()
    out = torch.empty(n, dtype=dtype)
    padded = tensors + [tensors[0]] * (3 - len(tensors))
    _libdevice_kernel[(1, )](*padded, out, n, FUNCTION=name, ARITY=len(tensors),
                             BLOCK=triton.next_power_of_2(n))
    return out.numpy(), [tensor.numpy() for tensor in tensors]


def assert_close_to(actual, expected, dtype, what):
    with np.errstate(all="ignore"):
        expected = np.asarray(expected).astype(actual.dtype)
    np.testing.assert_allclose(actual, expected, rtol=RTOL[dtype], atol=0, equal_nan=True,
                               err_msg=what)


@pytest.mark.parametrize("name, dtype", DTYPE_CASES, ids=lambda v: str(v).split(".")[-1])
def test_libdevice_function_matches_numpy(name, dtype):
    """Each hooked libdevice function, on ordinary, boundary and out-of-domain inputs, gives
    the float64 reference rounded to the input dtype (infinities and NaNs where it has them);
    predicates are nonzero exactly where numpy's are true."""
    reference, *inputs = CASES[name]
    actual, arrays = run_libdevice(name, dtype, inputs)
    with np.errstate(all="ignore"):
        expected = reference(*arrays)
    if name in PREDICATES:
        assert np.array_equal(actual != 0, expected), f"{name}: {actual} vs {expected}"
    else:
        assert_close_to(actual, expected, dtype, f"libdevice.{name}{tuple(inputs)}")


def test_every_import_style_reaches_the_hooks():
    """The generic module, the CUDA backend's module, a function imported by name, and scalar
    arguments (an int exponent dispatches to ``powi``) all compute; afterwards libdevice's
    functions are Triton's own again where the interpreter restores its patches."""
    stubs = {name: vars(libdevice)[name] for name in ("log1p", "tanh", "pow")}
    x = torch.tensor([-0.5, 0.0, 0.25, 1.0, 3.0, 7.5, 20.0, 1e-7])
    out = torch.empty(5, x.numel())
    _import_styles_kernel[(1, )](x, out, BLOCK=x.numel())
    wide_x = x.numpy().astype(np.float64)
    for row, expected in enumerate([np.log1p(wide_x), np.log1p(wide_x), np.tanh(wide_x),
                                    wide_x ** 3, np.sqrt(wide_x)]):
        assert_close_to(out[row].numpy(), expected, torch.float32, f"row {row}")
    if hasattr(runtime.interpreter(), "_LangPatchScope"):
        assert {name: vars(libdevice)[name] for name in stubs} == stubs
        assert globals()["tanh"] is stubs["tanh"]


def test_install_is_idempotent():
    """A second ``install`` changes nothing: the interpreter is wrapped once."""
    assert numpy_libdevice.install()
    interpreter = runtime.interpreter()
    wrapped = (interpreter._patch_lang, interpreter.InterpreterBuilder.create_extern_elementwise)
    assert numpy_libdevice.install()
    assert (interpreter._patch_lang,
            interpreter.InterpreterBuilder.create_extern_elementwise) == wrapped
