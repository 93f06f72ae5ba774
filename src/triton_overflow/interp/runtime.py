"""Triton's CPU interpreter as the suite runs it: int32 loop variables, grid-stride loops
narrowed to the rows a case plants, reductions with ``^`` in one numpy call, and where each
Triton release keeps the interpreter's pieces (the grid executor, the builder).

These patch interpreter internals (the grid executor, the interpreter builder, the AST
rewriter), which Triton does not promise to keep; each is tested on Triton 3.4, 3.6 and 3.9.
"""

import ast
import contextlib
import contextvars

import numpy as np

LOOP_RANGE_GLOBAL = "__overflow_int32_loop_range__"
GRID_STRIDE_KEYWORD = "overflow_start_from_program_id"


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
