"""Compile a kernel for sm_90 (H100 / H200) on the CPU: through LLVM IR and PTX, no GPU needed.

A kernel that the interpreter and TTIR accept can still fail in the GPU compiler's later passes
(seen: a constexpr assigned inside ``tl.static_range``); compiling here puts that failure in
the CPU tier instead of the first GPU launch. ``global_accesses`` counts the widths of the
global loads and stores in the PTX, for checks that streaming kernels keep 16-byte accesses.
"""

import importlib
import re

from triton_overflow import triton_versions
from triton_overflow.lint import sm90
from triton_overflow.lint.signature import plan


class CompileError(Exception):
    pass


def compile_for_gpu(kernel, types=None, constants=None, num_warps=4):
    """Compile ``kernel`` ("module:name") for sm_90 through LLVM IR; return the IR's size.

    ``types`` and ``constants`` override what the static check infers for its arguments.
    """
    return len(_compile_sm90(kernel, types, constants, num_warps, (), "llir"))


def global_accesses(kernel, types=None, constants=None, num_warps=4, aligned=()):
    """Count the global loads and stores of each width in the sm_90 PTX of ``kernel``.

    ``aligned`` names the integer arguments to compile as multiples of 16, as a launch with
    such values specialises them (pointers always are); returns e.g. ``{"ld.global.v4.b32": 8,
    "st.global.b32": 1}``.
    """
    ptx = _compile_sm90(kernel, types, constants, num_warps, aligned, "ptx")
    counts = {}
    for access in re.findall(r"\b((?:ld|st)\.global(?:\.[\w:]+)*)", ptx):
        counts[access] = counts.get(access, 0) + 1
    return counts


def resolve_kernel(reference):
    module_name, _, name = reference.partition(":")
    jit = triton_versions.jit_function_of(getattr(importlib.import_module(module_name), name))
    if jit is None:
        raise CompileError(f"{reference} is not a Triton jit function")
    return jit


def _compile_sm90(kernel, types, constants, num_warps, aligned, last_stage):
    jit = resolve_kernel(kernel)
    kernel_plan = plan(jit)
    signature = dict(kernel_plan.types)
    signature.update(types or {})
    defaults = dict(kernel_plan.constexpr_variants[0])
    defaults.update(constants or {})
    unknown = (set(aligned) | set(types or {}) | set(constants or {})) - set(signature)
    if unknown:
        raise CompileError(f"{kernel} has no arguments {sorted(unknown)}")
    attrs = {(index, ): [["tt.divisibility", 16]] for index, param in enumerate(jit.params)
             if param.name in aligned or signature.get(param.name, "").startswith("*")}
    built = sm90.build(jit, signature, defaults, attrs, {"num_warps": num_warps})
    module, metadata = built.module, {}
    for stage in ("ttir", "ttgir", "llir", "ptx"):
        lower = getattr(built.backend, f"make_{stage}")
        module = lower(module, metadata, built.options, sm90.CAPABILITY)
        if stage == last_stage:
            return str(module)
    raise CompileError(f"unknown stage {last_stage}")
