"""Everything that depends on the installed Triton version, in one place.

The suite supports Triton 3.4 through 3.9. The static check uses Triton's public compiler
objects (``ASTSource``, the CUDA backend's stages, the IR bindings); the interpreter tier patches
interpreter internals (the grid executor, the interpreter builder, the AST rewriter), which
Triton does not promise to keep. Each such patch lives here, with the versions it was tested on.
"""

import ast
import contextlib
import contextvars
import functools

import numpy as np

SUPPORTED = ((3, 4), (3, 9))  # inclusive range of Triton minor versions
SUPPORTED_TEXT = "3.4 to 3.9"
LOOP_RANGE_GLOBAL = "__overflow_int32_loop_range__"
GRID_STRIDE_KEYWORD = "overflow_start_from_program_id"


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


# --- the interpreter ------------------------------------------------------------------------

def interpreter():
    from triton.runtime import interpreter as module
    return module


def scalar_handle(value, dtype):
    """An interpreter scalar of numpy ``dtype`` (np.int32 or np.int64)."""
    import triton.language as tl
    module = interpreter()
    ty = tl.int32 if dtype == np.int32 else tl.int64
    return tl.core.tensor(module.TensorHandle(np.array([value], dtype=dtype), ty), ty)


class _LoopRangeRewriter(ast.NodeTransformer):
    """``for x in range(...)`` and ``for x in <lang>.range(...)`` iterate int32 scalars; a loop
    whose start is computed from ``program_id`` is marked as a possible grid-stride loop."""

    def __init__(self):
        self.from_program_id = set()

    def visit_FunctionDef(self, node):
        assignments = [n for n in ast.walk(node) if isinstance(n, ast.Assign)]
        known = None
        while known != self.from_program_id:
            known = set(self.from_program_id)
            for statement in assignments:
                if self._uses_program_id(statement.value):
                    self.from_program_id.update(target.id for target in statement.targets
                                                if isinstance(target, ast.Name))
        return self.generic_visit(node)

    def _uses_program_id(self, expression):
        return any((isinstance(n, ast.Attribute) and n.attr == "program_id")
                   or (isinstance(n, ast.Name) and (n.id == "program_id"
                                                    or n.id in self.from_program_id))
                   for n in ast.walk(expression))

    def visit_For(self, node):
        self.generic_visit(node)
        call = node.iter
        if isinstance(call, ast.Call) and _is_loop_range(call.func):
            call.func = ast.copy_location(ast.Name(id=LOOP_RANGE_GLOBAL, ctx=ast.Load()),
                                          call.func)
            if len(call.args) >= 3 and self._uses_program_id(call.args[0]):
                call.keywords.append(ast.keyword(arg=GRID_STRIDE_KEYWORD,
                                                 value=ast.Constant(value=True)))
        return node


def _is_loop_range(func):
    if isinstance(func, ast.Name):
        return func.id == "range"
    return isinstance(func, ast.Attribute) and func.attr == "range"


# (start, end, step, values) -> the values an interpreted grid-stride loop visits; set only
# inside ``loops_narrowed_by``.
_loop_filter: contextvars.ContextVar = contextvars.ContextVar("loop_filter", default=None)


@contextlib.contextmanager
def loops_narrowed_by(loop_filter):
    """Inside the block, every interpreted loop whose start is computed from ``program_id``
    visits only ``loop_filter(start, end, step, values)``."""
    token = _loop_filter.set(loop_filter)
    try:
        yield
    finally:
        _loop_filter.reset(token)


def int32_loop_range(*args, overflow_start_from_program_id=False, **_options):
    """What the GPU's loop variable is: an integer scalar tensor, int64 when a bound is. A loop
    whose start is computed from ``program_id`` may be narrowed (``loops_narrowed_by``)."""
    bounds = [_as_int(value) for value in args]
    wide = any(_is_int64(value) for value in args)
    start, end, step = ((0, bounds[0], 1) if len(bounds) == 1 else
                        (bounds[0], bounds[1], 1) if len(bounds) == 2 else tuple(bounds[:3]))
    dtype = np.int64 if wide else np.int32
    values = range(start, end, step)
    loop_filter = _loop_filter.get()
    if loop_filter is not None and overflow_start_from_program_id:
        values = loop_filter(start, end, step, values)
    for value in values:
        yield scalar_handle(value, dtype)


def _as_int(value):
    handle = getattr(value, "handle", None)
    if handle is not None:
        return int(np.asarray(handle.data).reshape(-1)[0])
    return int(getattr(value, "value", value))


def _is_int64(value):
    dtype = getattr(value, "dtype", None)
    return getattr(dtype, "name", "") in ("int64", "uint64")


_loop_ranges_installed = False


def install_int32_loop_ranges():
    """Make interpreted loop variables int32 scalars, as on the GPU (idempotent).

    Triton's interpreter runs ``range`` and ``tl.range`` loops with Python ints, so a kernel
    that calls ``row.to(tl.int64)`` on its loop variable fails there, and ``row * stride``
    never wraps. The interpreter's AST rewriter is extended to call ``int32_loop_range``.
    Tested on Triton 3.4 to 3.9.
    """
    global _loop_ranges_installed
    if _loop_ranges_installed:
        return
    module = interpreter()
    rewriter = module.FunctionRewriter
    original = rewriter._transform_ast

    def transform(self, src):
        tree = original(self, src)
        tree = _LoopRangeRewriter().visit(tree)
        ast.fix_missing_locations(tree)
        return tree

    rewriter._transform_ast = transform
    setattr(module, LOOP_RANGE_GLOBAL, int32_loop_range)
    module.InterpretedFunction.rewritten_fn.clear()
    _loop_ranges_installed = True


_xor_reductions_installed = False


def install_vectorised_xor_reductions():
    """Let the interpreter reduce with ``^`` in one numpy call (idempotent).

    ``tl.sort`` and ``tl.flip`` swap elements through ``xor_sum`` over axes of length 2. The
    interpreter vectorises only the built-in min, max and sum reductions and runs any other
    combine function once per element in Python: for a kernel that sorts 1024 keys, most of its
    time. XOR is associative and commutative, so one ``np.bitwise_xor.reduce`` gives the same
    bits. Tested on Triton 3.6; where the interpreter lacks these names it is left as it is.
    """
    global _xor_reductions_installed
    if _xor_reductions_installed:
        return
    import triton.language as tl
    reduce_ops = getattr(interpreter(), "ReduceOps", None)
    xor_combine = getattr(tl.standard, "_xor_combine", None)
    if reduce_ops is None or xor_combine is None or not hasattr(reduce_ops, "apply_impl"):
        return
    original = reduce_ops.apply_impl

    def apply_impl(self, input):
        if (self.combine_fn is not xor_combine or len(input) != 1
                or not hasattr(self, "keep_dims") or not hasattr(self, "to_tensor")):
            return original(self, input)
        data = input[0].handle.data
        return self.to_tensor(np.bitwise_xor.reduce(data, axis=self.axis,
                                                    keepdims=self.keep_dims), input[0].dtype)

    reduce_ops.apply_impl = apply_impl
    _xor_reductions_installed = True


@contextlib.contextmanager
def patched(owner, **replacements):
    """Temporarily replace attributes of ``owner``."""
    originals = {name: getattr(owner, name) for name in replacements}
    for name, value in replacements.items():
        setattr(owner, name, value)
    try:
        yield originals
    finally:
        for name, value in originals.items():
            setattr(owner, name, value)


def grid_executor():
    return interpreter().GridExecutor


def interpreter_builder():
    return interpreter().InterpreterBuilder
