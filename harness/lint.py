"""Static check: i32 multiplies that feed pointer offsets, found in TTIR, on the CPU.

Each launched kernel of a module (a ``@triton.jit`` function that no other jit function of the
module calls) is compiled to TTIR for an sm_90 target; no GPU, driver or ptxas is needed. Every
int parameter is typed ``i32``, as Triton types any int argument below 2**31, so a product that
would wrap at run time is an ``arith.muli ... : i32`` here. Pointer parameters are the ones named
``*_ptr`` (or annotated ``*...``); since their element types are unknown, the kernel is compiled
with all of them fp32, all of them i32, and each one i32 in turn, so an index loaded from any
table is seen as the int32 it is at run time.

A finding is an i32 ``muli`` (or ``shli``) on the value flow into a ``tt.addptr`` offset,
with at least one operand that comes from a program id, a loop variable, a loaded value or an
int argument. Widening either operand to int64 first removes it. A product known to stay small
(a vocab block index times the block size, say) is accepted by a comment on its line,
``# overflow-lint: bounded by <reason>``; the reason is required.

Constexpr parameters take their default value; without one, block sizes take 1024 and flags
(``HAS_*``, ``USE_*``, ``APPLY_*``, ``IS_*``, ``*_ENABLED``) take True.
"""

import importlib
import importlib.util
import inspect
import linecache
import os
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path

_DEF = re.compile(r"^\s*(%[\w.$-]+)(?::\d+)?\s*=\s*([\w.]+)\s*(.*)$")
_REF = re.compile(r"%[\w.$-]+")
_LOC_ALIAS = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
_LOC_REF = re.compile(r"loc\((#loc\d*|\"[^\"]*\":\d+:\d+)\)\s*$")
_FILE_LOC = re.compile(r"\"([^\"]+)\":(\d+):\d+")
_FLOW_OPS = {
    "arith.addi", "arith.subi", "arith.muli", "arith.shli", "arith.extsi", "arith.extui",
    "arith.trunci", "arith.select", "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui",
    "arith.index_cast", "tt.splat", "tt.broadcast", "tt.expand_dims", "tt.reshape",
    "ttg.convert_layout", "tt.trans",
}
_FLAG = re.compile(r"^(HAS|USE|APPLY|IS|ENABLE)_|_(ENABLED|FLAG)$")


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    kernel: str
    expression: str
    operands: str

    def format(self, root=None):
        shown = _relative(self.file, root)
        return (f"{shown}:{self.line}: {self.kernel}: i32 multiply feeds a pointer offset: "
                f"`{self.expression}` ({self.operands})")


class LintError(Exception):
    pass


def launched_kernels(module):
    """The module's jit functions that no other jit function of the module calls."""
    from triton.runtime.jit import JITFunction

    functions = {name: value for name, value in vars(module).items()
                 if isinstance(value, JITFunction) and value.fn.__module__ == module.__name__}
    called = set()
    for own_name, function in functions.items():
        body = function.src.replace(f"def {own_name}(", "", 1)
        called |= {name for name in re.findall(r"\b(\w+)\s*\(", body)
                   if name in functions and name != own_name}
    return [functions[name] for name in sorted(functions) if name not in called]


def lint_kernel(kernel):
    """All findings in one jit kernel, over the pointer-type variants that compile."""
    pointers, signature, constants = _signature(kernel)
    variants = [{}]
    variants.append({name: "*i32" for name in pointers})
    variants += [{name: "*i32"} for name in pointers]
    findings, errors = {}, []
    for variant in variants:
        types = dict(signature)
        types.update(variant)
        try:
            text = compile_ttir(kernel, types, constants)
        except Exception as error:  # noqa: BLE001 - a variant that does not compile is skipped
            errors.append(error)
            continue
        for finding in analyse_ttir(text, kernel.__name__):
            findings.setdefault((finding.file, finding.line, finding.expression), finding)
    if len(errors) == len(variants):
        raise LintError(f"{kernel.__name__}: no pointer-type variant compiles; first error: "
                        f"{_innermost(errors[0])}")
    return sorted(findings.values(), key=lambda f: (f.file, f.line))


def compile_ttir(kernel, signature, constants):
    """TTIR text (with locations) of ``kernel`` for an sm_90 target."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    if os.environ.get("TRITON_INTERPRET") == "1":
        raise LintError("TTIR cannot be compiled with TRITON_INTERPRET=1 set; unset it")
    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    source = ASTSource(kernel, signature, constexprs=constants)
    module = source.make_ir(target, options, backend.get_codegen_implementation(options),
                            backend.get_module_map(), context)
    module = backend.make_ttir(module, {}, options, 90)
    return module.str()


def compile_for_gpu(module, kernel, types=None, constants=None, num_warps=4):
    """Compile ``module:kernel`` for sm_90 through LLVM IR, on the CPU; return the IR's size.

    ``types`` and ``constants`` override the lint's signature. A kernel that fails here would
    fail at its first launch on a GPU, so this runs in the CPU tier.
    """
    return len(_compile_sm90(module, kernel, types, constants, num_warps, (), "llir"))


def global_accesses(module, kernel, types=None, constants=None, num_warps=4, aligned=()):
    """Count the global loads and stores of each width in the sm_90 PTX of ``module:kernel``.

    ``aligned`` names the integer arguments to compile as multiples of 16, as a launch with
    such values specialises them (pointers always are); returns e.g. ``{"ld.global.v4.b32": 8,
    "st.global.b32": 1}``.
    """
    ptx = _compile_sm90(module, kernel, types, constants, num_warps, aligned, "ptx")
    counts = {}
    for access in re.findall(r"\b((?:ld|st)\.global(?:\.[\w:]+)*)", ptx):
        counts[access] = counts.get(access, 0) + 1
    return counts


def _compile_sm90(module, kernel, types, constants, num_warps, aligned, last_stage):
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    kernel = getattr(importlib.import_module(module), kernel)
    _, signature, defaults = _signature(kernel)
    signature.update(types or {})
    defaults.update(constants or {})
    unknown = set(aligned) - set(signature)
    if unknown:
        raise LintError(f"{kernel.__name__} has no arguments {sorted(unknown)}")
    attrs = {(index, ): [["tt.divisibility", 16]] for index, name in enumerate(kernel.arg_names)
             if name in aligned or signature.get(name, "").startswith("*")}
    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    options = backend.parse_options({"num_warps": num_warps})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    ir_module = ASTSource(kernel, signature, constexprs=defaults, attrs=attrs).make_ir(
        target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
        context)
    metadata = {}
    for stage in ("ttir", "ttgir", "llir", "ptx"):
        ir_module = getattr(backend, f"make_{stage}")(ir_module, metadata, options, 90)
        if stage == last_stage:
            return str(ir_module)
    raise LintError(f"unknown stage {last_stage}")


def analyse_ttir(text, kernel_name):
    lines = text.splitlines()
    aliases = {}
    for line in lines:
        match = _LOC_ALIAS.match(line)
        if match:
            aliases[match.group(1)] = match.group(2)
    definitions, origins = {}, {}
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("tt.func"):
            for name, kind in re.findall(r"(%[\w.$-]+): ([^ ,)]+)", stripped):
                origins[name] = "int argument" if re.fullmatch(r"i\d+", kind) else "pointer argument"
        for name in re.findall(r"scf\.for (%[\w.$-]+) =", stripped):
            origins[name] = "loop variable"
        for group in re.findall(r"(?:iter_args|scf\.while \()\(?([^)]*)\)", stripped):
            for name in re.findall(r"(%[\w.$-]+) =", group):
                origins[name] = "loop variable"
        if stripped.startswith("^bb"):
            for name in re.findall(r"(%[\w.$-]+):", stripped):
                origins[name] = "loop variable"
        match = _DEF.match(line)
        if match:
            name, op, rest = match.groups()
            definitions[name] = (op, rest, line)
            if op == "tt.get_program_id":
                origins[name] = "program id"
            elif op in ("tt.load", "tt.atomic_rmw", "tt.atomic_cas"):
                origins[name] = "loaded value"
            elif op in ("scf.for", "scf.while", "scf.if"):
                origins[name] = "loop variable"
            elif op == "arith.constant":
                origins[name] = "constant"

    def operands(rest):
        body = rest.split(" : ")[0]
        return [ref.split("#")[0] for ref in _REF.findall(body)]

    def sources(name, seen):
        """Non-constant origins that flow into ``name``."""
        if name in seen:
            return set()
        seen.add(name)
        if name in origins:
            return set() if origins[name] == "constant" else {origins[name]}
        if name not in definitions:
            return set()
        op, rest, _ = definitions[name]
        if op not in _FLOW_OPS:
            return {"computed value"} if op.startswith(("arith.", "tt.", "math.")) else set()
        found = set()
        args = operands(rest)
        if op == "arith.select":
            args = args[1:]
        for arg in args:
            found |= sources(arg, seen)
        return found

    findings = []
    reported = set()

    def visit(name, seen):
        if name in seen or name not in definitions:
            return
        seen.add(name)
        op, rest, line = definitions[name]
        if op not in _FLOW_OPS:
            return
        args = operands(rest)
        if op in ("arith.muli", "arith.shli") and _is_i32(rest) and name not in reported:
            kinds = [sources(arg, set()) for arg in args[:2]]
            file, lineno = _location(line, aliases)
            if any(kinds) and not _suppressed(file, lineno):
                reported.add(name)
                described = " x ".join(", ".join(sorted(k)) or "constant" for k in kinds)
                findings.append(Finding(file, lineno, kernel_name, _source_line(file, lineno),
                                        described))
        if op == "arith.select":
            args = args[1:]
        for arg in args:
            visit(arg, seen)

    for line in lines:
        match = _DEF.match(line)
        if match and match.group(2) == "tt.addptr":
            args = operands(match.group(3))
            if len(args) >= 2:
                visit(args[1], set())
    return findings


def load_modules(paths, twins=False):
    """Modules named by ``paths`` (dotted names, .py files, or folders of them)."""
    from harness.twin import load_twin

    files = []
    for spec in paths:
        path = Path(spec)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.py") if not p.name.startswith("_"))
        elif path.suffix == ".py" and path.exists():
            files.append(path)
        else:
            try:
                module = importlib.import_module(spec)
            except ImportError as error:
                raise LintError(f"{spec}: not a file, folder or importable module ({error})")
            files.append(Path(module.__file__))
    modules = []
    for file in files:
        module = _import_file(file.resolve())
        if twins:
            if not launched_kernels(module):
                continue
            module = load_twin(module)
        modules.append(module)
    return modules


def lint_paths(paths, twins=False):
    """(per-kernel findings, kernels checked) for every launched kernel under ``paths``."""
    results = []
    for module in load_modules(paths, twins=twins):
        for kernel in launched_kernels(module):
            results.append((module, kernel, lint_kernel(kernel)))
    return results


def main(paths, twins=False, out=sys.stdout):
    """CLI body: print findings; 0 when clean, 1 with findings, 2 when something cannot be checked."""
    root = Path.cwd()
    try:
        results = lint_paths(paths, twins=twins)
    except LintError as error:
        print(f"lint: {error}", file=out)
        return 2
    total = 0
    for module, kernel, findings in results:
        origin = getattr(module, "__int32_twin_of__", None)
        for finding in findings:
            if origin and finding.file == module.__file__:
                # The twin keeps every line number, so the kernel's own file:line is the place.
                finding = replace(finding, file=origin)
            print(finding.format(root) + (" [int32 twin]" if origin else ""), file=out)
        total += len(findings)
    kernels = len(results)
    flagged = sum(1 for _, _, findings in results if findings)
    label = "int32 twins" if twins else "kernels"
    print(f"lint: {kernels} {label} checked, {flagged} with findings, {total} findings", file=out)
    if kernels == 0:
        print("lint: no @triton.jit kernel found under " + " ".join(paths), file=out)
        return 2
    return 1 if total else 0


def _signature(kernel):
    pointers, signature, constants = [], {}, {}
    for name, parameter in inspect.signature(kernel.fn).parameters.items():
        annotation = parameter.annotation
        annotation = "" if annotation is inspect.Parameter.empty else str(annotation)
        if "constexpr" in annotation:
            signature[name] = "constexpr"
            if parameter.default is not inspect.Parameter.empty:
                constants[name] = parameter.default
            elif _FLAG.search(name):
                constants[name] = True
            else:
                constants[name] = 1024
        elif annotation.startswith("*") or name.endswith("_ptr") or name == "ptr":
            pointers.append(name)
            signature[name] = annotation if annotation.startswith("*") else "*fp32"
        elif annotation in ("fp32", "fp16", "bf16", "fp64", "i1", "i64"):
            signature[name] = annotation
        else:
            signature[name] = "i32"
    return pointers, signature, constants


def _innermost(error):
    while error.__cause__ is not None:
        error = error.__cause__
    return f"{type(error).__name__}: {str(error).strip()[-600:]}"


def _is_i32(rest):
    types = rest.split(" : ")[-1]
    return bool(re.search(r"(^|[x<\s])i32\b", types)) and "i64" not in types


def _location(line, aliases):
    match = _LOC_REF.search(line)
    if not match:
        return "<unknown>", 0
    return _resolve(match.group(1), aliases, 0)


def _resolve(loc, aliases, depth):
    if depth > 50:
        return "<unknown>", 0
    direct = _FILE_LOC.search(loc) if not loc.startswith("#") else None
    if direct:
        return direct.group(1), int(direct.group(2))
    body = aliases.get(loc, loc) if loc.startswith("#") else loc
    direct = _FILE_LOC.search(body)
    refs = re.findall(r"#loc\d*", body)
    if body.startswith("callsite(") and refs:
        return _resolve(refs[0], aliases, depth + 1)
    if direct:
        return direct.group(1), int(direct.group(2))
    for ref in refs:
        file, line = _resolve(ref, aliases, depth + 1)
        if line:
            return file, line
    return "<unknown>", 0


def _suppressed(file, line):
    text = linecache.getline(file, line)
    marker = "# overflow-lint: bounded"
    return marker in text and len(text.split(marker, 1)[1].strip()) > 3


def _source_line(file, line):
    text = linecache.getline(file, line).strip()
    return text or "<source unavailable>"


def _relative(file, root):
    if not file or root is None:
        return file
    try:
        return str(Path(file).resolve().relative_to(root))
    except ValueError:
        return file


def _import_file(path):
    for base in map(Path, sys.path or ["."]):
        try:
            relative = path.relative_to((base or Path.cwd()).resolve())
        except (ValueError, OSError):
            continue
        dotted = ".".join(relative.with_suffix("").parts)
        if all(part.isidentifier() for part in relative.with_suffix("").parts):
            return importlib.import_module(dotted)
    name = f"linted_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
