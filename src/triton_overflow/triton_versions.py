"""What differs between the Triton releases the suite supports (3.4 through 3.9).

The static check uses Triton's public compiler objects (``ASTSource``, the CUDA backend's
stages, the IR bindings) and the launch path (``JITFunction.run``, the interpreter's launcher);
where a release moved or changed one, the difference is handled here. The interpreter's own
internals, which Triton does not promise to keep, are patched in ``triton_overflow.interp.runtime``.
"""

import functools

import numpy as np

SUPPORTED = ((3, 4), (3, 9))  # inclusive range of Triton minor versions
SUPPORTED_TEXT = "3.4 to 3.9"


class UnsupportedTriton(RuntimeError):
    """The installed Triton cannot run a tier of the suite."""


def triton_version():
    import triton
    major, minor = (int(part) for part in triton.__version__.split(".")[:2])
    return major, minor


def check_supported():
    """Raise ``UnsupportedTriton`` when the installed Triton is outside the supported range."""
    import triton
    if not SUPPORTED[0] <= triton_version() <= SUPPORTED[1]:
        raise UnsupportedTriton(f"Triton {triton.__version__} is not supported; this suite "
                                f"supports Triton {SUPPORTED_TEXT}")


def interpreter_problem():
    """Why Triton's CPU interpreter cannot run here, or None."""
    import triton
    try:
        check_supported()
    except UnsupportedTriton as error:
        return str(error)
    numpy_version = tuple(int(part) for part in np.__version__.split(".")[:2])
    if triton_version() <= (3, 6) and numpy_version >= (2, 4):
        return (f"Triton {triton.__version__}'s interpreter breaks with numpy >= 2.4 "
                f"(found {np.__version__}); install 'numpy<2.4'")
    return None


def require_interpreter():
    problem = interpreter_problem()
    if problem:
        raise UnsupportedTriton(problem)


def source_columns_are_starts():
    """Where an op's source column points: up to Triton 3.7, 0-based at the right operand of a
    binary operation; from 3.8, 1-based at the start of the expression."""
    return triton_version() >= (3, 8)


def block_pointers_supported():
    """Triton 3.9 removed ``tl.make_block_ptr`` in favour of tensor descriptors."""
    return triton_version() < (3, 9)


# --- compiling on the CPU -------------------------------------------------------------------

def make_ir(source, target, options, backend, context):
    """``ASTSource.make_ir``: Triton 3.5 added the ``target`` argument."""
    codegen = backend.get_codegen_implementation(options)
    module_map = backend.get_module_map()
    if triton_version() < (3, 5):
        return source.make_ir(options, codegen, module_map, context)
    return source.make_ir(target, options, codegen, module_map, context)


def analysis_passes(module):
    """Inline helpers and rewrite block pointers into plain addresses, and nothing else: no CSE,
    so that a product written on two lines stays two products with their own lines."""
    from triton._C.libtriton import ir, passes
    manager = ir.pass_manager(module.context)
    passes.common.add_inliner(manager)
    if hasattr(passes.ttir, "add_rewrite_tensor_pointer"):
        passes.ttir.add_rewrite_tensor_pointer(manager)
    passes.common.add_symbol_dce(manager)
    try:
        manager.run(module)
    except TypeError:  # Triton 3.7+ names the pipeline
        manager.run(module, "overflow-lint")
    return module


def set_interpret(enabled):
    """Switch Triton's interpreter flag for ``@triton.jit`` decorations made after this call."""
    import triton
    triton.knobs.runtime.interpret = bool(enabled)


def jit_function_of(obj):
    """The ``JITFunction`` under ``obj`` (through autotune / heuristics wrappers), or None.

    An ``InterpretedFunction`` (a kernel decorated while the interpreter was on) is compiled
    again as a ``JITFunction`` from the same Python function.
    """
    from triton.runtime.jit import JITFunction
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every supported version has it
        InterpretedFunction = ()
    seen = set()
    while obj is not None and id(obj) not in seen:
        seen.add(id(obj))
        if isinstance(obj, JITFunction):
            return obj
        if InterpretedFunction and isinstance(obj, InterpretedFunction):
            return _jit_from_interpreted(obj)
        try:
            obj = getattr(obj, "fn", None)
        except Exception:  # noqa: BLE001 - an engine object that raises on any attribute
            return None
    return None


@functools.cache
def _jit_from_interpreted(interpreted):
    from triton.runtime.jit import JITFunction
    return JITFunction(interpreted.fn)


def observe_launches(observe):
    """Call ``observe(kernel, args, kwargs, grid)`` before every launch that is not a warm-up,
    on both launch paths: ``JITFunction.run`` (GPU) and the interpreter's. From Triton 3.6 the
    interpreter launches through ``InterpretedFunction.run`` too; before, ``kernel[grid](...)``
    goes straight to a ``GridExecutor`` and autotuners call a ``run`` each instance builds in
    ``__init__``, so both of those are wrapped instead."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    def observed(run, bound=True):
        def launch(*args, grid, warmup=False, **kwargs):
            if not warmup:
                kernel, arguments = (args[0], args[1:]) if bound else (launch.kernel, args)
                observe(kernel, arguments, kwargs, grid)
            return run(*args, grid=grid, warmup=warmup, **kwargs)
        return launch

    JITFunction.run = observed(JITFunction.run)
    if "run" in vars(InterpretedFunction):
        InterpretedFunction.run = observed(InterpretedFunction.run)
        return
    original_init, original_getitem = InterpretedFunction.__init__, InterpretedFunction.__getitem__

    def __init__(self, fn, **kwargs):
        original_init(self, fn, **kwargs)
        self.run = observed(self.run, bound=False)
        self.run.kernel = self

    def __getitem__(self, grid):
        executor = original_getitem(self, grid)

        def launch(*args, **kwargs):
            if not kwargs.get("warmup", False):
                observe(self, args, {k: v for k, v in kwargs.items() if k != "warmup"}, grid)
            return executor(*args, **kwargs)
        return launch

    InterpretedFunction.__init__ = __init__
    InterpretedFunction.__getitem__ = __getitem__


def argument_type(value):
    """Triton's type string for a launch argument: '*fp32', 'i32', 'i64', 'fp32', 'i1', ..."""
    from triton.runtime.jit import mangle_type
    return mangle_type(value)
