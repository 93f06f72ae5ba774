"""The sm_90 target (H100 / H200) kernels are compiled for on the CPU, and a kernel's first IR
for it: the static check reads that IR (``ir.compile_ttir``), ``gpu_compile`` lowers it on to
LLVM IR and PTX. Triton is imported when a kernel is built, not when this module is.
"""

from dataclasses import dataclass

from triton_overflow import triton_versions

CAPABILITY = 90
_WARP_SIZE = 32


@dataclass
class Build:
    """A kernel's IR for sm_90, with what lowering it further takes."""

    module: object
    context: object  # the IR context; the module lives only as long as it does
    backend: object
    options: object  # the backend's parsed options


def build(jit_function, signature, constexprs, attrs=None, options=None):
    """The ``Build`` of ``jit_function`` with argument types ``signature``, constexpr values
    ``constexprs``, per-argument ``attrs`` and backend ``options`` (``{"num_warps": 4}``)."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    target = GPUTarget("cuda", CAPABILITY, _WARP_SIZE)
    backend = make_backend(target)
    parsed = backend.parse_options(dict(options or {}))
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    source = ASTSource(jit_function, signature, constexprs=constexprs, attrs=attrs or {})
    module = triton_versions.make_ir(source, target, parsed, backend, context)
    return Build(module=module, context=context, backend=backend, options=parsed)
