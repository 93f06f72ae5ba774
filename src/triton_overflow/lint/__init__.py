"""The static check: i32 products on the way into an address, found in TTIR on the CPU.

Each kernel under the given paths (``discover``) is compiled to TTIR for an sm_90 target (no
GPU, driver or ptxas needed) with the types its code implies (``signature``) or, from a
recorded launch, exactly as it was launched; every i32 multiply that feeds an address is a
finding (``analysis``), with how far it is from 2**31 where the launch or stated limits tell
(``ranges``). One kernel that cannot be checked is one line, and the run goes on.

Each finding has a level (``levels``): ``error`` (the product can pass 2**31 at a realistic
shape), ``warning`` or ``note`` (bounded by what the kernel states, the bound said).

Exit codes: 0 every kernel checked and no error (warnings and notes are printed); 1 at least
one error (whatever else happened; ``fail_on`` may lower the bar to warnings); 2 no error, but
nothing found, nothing checked, or some kernels not checked. The command line exits 3 on a
usage error (``cli.USAGE_ERROR``), before anything is checked.
"""

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from triton_overflow.lint import discover
from triton_overflow.lint.analysis import Finding, find_products, with_roots_of_errors
from triton_overflow.lint.envelope import judged
from triton_overflow.lint.guards import guarded, launched_flags, launcher_guards
from triton_overflow.lint.ir import build_graph, compile_ttir, quiet
from triton_overflow.lint.levels import ERROR, LEVELS, NOTE, WARNING
from triton_overflow.lint.signature import VariantSearch, plan

CLEAN, FINDINGS, NOT_CHECKED = 0, 1, 2


@dataclass
class KernelResult:
    name: str
    file: str
    line: int
    findings: list = field(default_factory=list)
    variants: int = 0  # compiled variants
    twin_of: str | None = None
    launch: str = ""  # which recorded launch, if any
    notes: list = field(default_factory=list)  # what its check assumed
    per_variant: list = field(default_factory=list)  # the finding keys of each variant compiled
    complete: bool = False  # every variant compiled: a product it lacks is not in the kernel


@dataclass
class Report:
    results: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    label: str = "kernels"
    fail_on: str = ERROR  # the least level that makes the exit code 1
    baseline: object = None  # findings known before (``baseline.Baseline``), not failing
    seconds: dict = field(default_factory=dict)  # file -> seconds its check took
    top: int = 0  # show only this many findings, those reaching furthest first (0: all)

    @property
    def findings(self):
        return [f for r in self.results for f in r.findings]

    @property
    def failing(self):
        """The findings that set the exit code to 1."""
        bar = LEVELS.index(self.fail_on)
        found = [f for f in self.findings if LEVELS.index(f.level) <= bar]
        if self.baseline is not None:
            found = [f for f in found if not self.baseline.known(f)]
        return found

    @property
    def exit_code(self):
        if self.failing:
            return FINDINGS
        if not self.results or self.problems:
            return NOT_CHECKED
        return CLEAN

    def merge(self, other):
        self.results += other.results
        self.problems += other.problems
        self.notes += other.notes
        self.seconds.update(other.seconds)


class KernelNotChecked(Exception):
    pass


class CompilerDiagnostic(Exception):
    """The error line the compiler printed (MLIR prints, then raises a bare failure)."""


def check_kernel(kernel, facts=None, verify_fixes=False, envelope=None):
    """The ``KernelResult`` of one ``discover.Kernel`` over every variant of its flags; with
    ``verify_fixes``, each error's fix is compiled into the kernel to see that it holds; with an
    ``envelope`` (``envelope.Envelope``), each level follows from what its tensor can hold.
    A kernel that compiles under no variant while it calls stand-ins is tried once more with
    stand-ins that return a scalar (a helper that reduces a block gives one)."""
    try:
        return _check_kernel(kernel, facts, verify_fixes, envelope)
    except KernelNotChecked:
        if not kernel.standins:
            raise
    from triton_overflow.lint import standins
    with standins.returning_scalar(vars(kernel.module), kernel.standins):
        return _check_kernel(kernel, facts, verify_fixes, envelope,
                             returning=standins.SCALAR_RESULT)


def _check_kernel(kernel, facts, verify_fixes, envelope,
                  returning="its first argument (each argument, where a call unpacks it)"):
    kernel_plan = plan(kernel.jit, kernel.configs,
                       pointee=envelope.pointee if envelope is not None else None,
                       heuristics=kernel.heuristics,
                       flags=launched_flags(kernel.file, kernel.name))
    types, first_error, compiled = _first_compiling_types(kernel, kernel_plan)
    for start in _other_starts(kernel_plan) if compiled is None else ():
        found_types, _, compiled = _first_compiling_types(kernel, start, TYPINGS_PER_START)
        if compiled is not None:
            kernel_plan, types = start, found_types
            break
    result = KernelResult(kernel.name, kernel.file, kernel.line, notes=list(kernel_plan.notes))
    findings = {}
    seen_in = {}  # finding key -> (variant index, types, constexprs, that variant's products)
    errors = []
    guards = launcher_guards(kernel.file, kernel.name, vars(kernel.module)) \
        if facts is None and kernel.module is not None else []

    def check_variant(index, variant):
        """The products of one variant (keys and levels), or None where it does not compile."""
        variant_types, constexprs = _apply_variant(types, variant)
        try:
            module, context = compiled if index == 0 and compiled else \
                _compile(kernel.jit, variant_types, constexprs)
        except Exception as error:  # noqa: BLE001 - a flag combination may not compile
            errors.append(error)
            return None
        result.variants += 1
        graph = build_graph(module, context, _arguments(kernel.jit, variant_types))
        found = find_products(graph, kernel.name, facts)
        if envelope is not None and facts is None:
            found = [judged(finding, envelope, _shown_file(finding.file)) for finding in found]
        if facts is None:
            found = with_roots_of_errors(guarded(found, guards, constexprs))
        products = [finding.product for finding in found]
        for finding in found:
            if _worse(finding, findings.get(finding.key)):
                findings[finding.key] = finding
                seen_in[finding.key] = (index, variant_types, constexprs, products)
        result.per_variant.append([finding.key for finding in found])
        return frozenset((finding.key, finding.level, finding.largest) for finding in found)

    search = VariantSearch(kernel_plan)
    outcomes = {index: check_variant(index, variant)
                for index, variant in enumerate(search.first_round)}
    offset = len(search.first_round)
    for index, variant in enumerate(search.second_round(outcomes)):
        check_variant(offset + index, variant)
    if not result.variants:
        raise KernelNotChecked(describe_error(errors[0] if errors else first_error))
    result.complete = not errors
    if verify_fixes:
        findings = {f.key: f for f in _with_verified_fixes(kernel, findings.values(), seen_in,
                                                           facts)}
    result.findings = sorted(_with_stand_ins(findings.values(), kernel),
                             key=lambda f: (f.file, f.line, f.product))
    from triton_overflow.lint import standins
    grid_queries = [name for name in kernel.standins if standins.is_grid_query(name)]
    values_only = [name for name in kernel.standins if name not in grid_queries]
    if values_only:
        names = ", ".join(f"`{name}`" for name in values_only)
        result.notes.append(f"{names} could not be loaded: checked with a value-only stand-in "
                            f"that returns {returning}")
    if grid_queries:
        names = ", ".join(f"`{name}`" for name in grid_queries)
        result.notes.append(f"{names} could not be loaded: checked as returning "
                            f"{standins.GRID_QUERY_RESULT}")
    return result


def _shown_file(file):
    return discover._shown(file, None)


def _worse(finding, known):
    """Whether ``finding`` (from one variant of the flags) says more than ``known`` (from
    another): a higher level, or a larger product at the launch facts or envelope."""
    if known is None:
        return True
    if finding.level != known.level:
        return LEVELS.index(finding.level) < LEVELS.index(known.level)
    return (finding.largest or 0) > (known.largest or 0)


# Distinct fixes tried per kernel, at most: each compiles the kernel once more.
VERIFIED_FIXES_PER_KERNEL = 24


def _with_verified_fixes(kernel, findings, seen_in, facts):
    """Each error finding with the first of its candidate fixes that compiles and holds
    (``verify``), or its first candidate marked as not holding alone. One edit is compiled
    once, however many products it fixes."""
    from dataclasses import replace

    from triton_overflow.lint import verify
    compiled = {}  # (edit, variant) -> products after it, or None
    chosen = []
    for finding in findings:
        candidates = [c for c in finding.candidate_fixes if c.with_ is not None]
        if finding.level != ERROR or not candidates or finding.file != kernel.file:
            chosen.append(finding)
            continue
        variant, variant_types, constexprs, products = seen_in[finding.key]

        def compile_variant(jit, variant_types=variant_types, constexprs=constexprs):
            module, context = _compile(jit, variant_types, constexprs)
            return find_products(build_graph(module, context, _arguments(jit, variant_types)),
                                 kernel.name, facts)

        fix = None
        for candidate in candidates:
            edit = (candidate.line, candidate.replace, candidate.with_, variant)
            if edit not in compiled:
                if len(compiled) >= VERIFIED_FIXES_PER_KERNEL:
                    break
                compiled[edit] = verify.products_after(kernel, candidate, compile_variant)
            if verify.holds(compiled[edit], products, finding.product):
                fix = replace(candidate, verified=True)
                break
        if fix is None:
            tried = any((c.line, c.replace, c.with_, variant) in compiled for c in candidates)
            fix = replace(candidates[0], verified=False if tried else None)
        chosen.append(replace(finding, fix=fix))
    return chosen


def _with_stand_ins(findings, kernel):
    """Each finding, saying which stand-in helpers its values come from."""
    from dataclasses import replace

    from triton_overflow.lint import standins
    if not kernel.standins:
        return list(findings)
    return [replace(f, stand_ins=tuple(standins.depends_on(f.file, f.line, kernel.standins)))
            if f.file == kernel.file else f for f in findings]


def _apply_variant(types, variant):
    """(types, constexprs) of one variant: a pointer the variant sets to None is launched as
    None, which Triton makes a constexpr."""
    from triton_overflow.lint.signature import POINTER
    types = dict(types)
    constexprs = {}
    for name, value in variant.items():
        if value is POINTER:
            continue
        if value is None and types.get(name, "").startswith("*"):
            types[name] = "constexpr"
        constexprs[name] = value
    return types, constexprs


def _compile(jit, types, constexprs):
    with warnings.catch_warnings(), quiet() as printed:
        warnings.simplefilter("ignore")  # Triton's deprecation warnings are not ours to print
        try:
            return compile_ttir(jit, types, constexprs)
        except Exception as error:
            diagnostic = printed.first_error()
            if diagnostic:
                raise CompilerDiagnostic(diagnostic) from error
            raise


def check_launch(kernel, record):
    """The ``KernelResult`` of one kernel compiled exactly as ``record`` says it was launched."""
    module, context = _compile(kernel.jit, record.signature, record.constexprs)
    result = KernelResult(kernel.name, kernel.file, kernel.line, variants=1, launch=record.label)
    graph = build_graph(module, context, _arguments(kernel.jit, record.signature))
    worst = {}
    for facts in record.launches or [None]:
        for finding in find_products(graph, kernel.name, facts):
            known = worst.get(finding.key)
            if known is None or (finding.largest or 0) > (known.largest or 0):
                worst[finding.key] = finding
    result.findings = sorted(worst.values(), key=lambda f: (f.file, f.line, f.product))
    return result


def _arguments(jit, types):
    """The kernel's runtime arguments, in order: every parameter that is not a constexpr."""
    return [p.name for p in jit.params if types.get(p.name) != "constexpr"]


# Variants of the flags tried as the starting point, at most.
OTHER_STARTS = 8


def _other_starts(kernel_plan):
    """Plans to start from where the default variant compiles under no typing, in order: the
    guessed constexpr sizes set to each of ``constexpr_fallbacks`` (the guesses may break a
    power-of-two ``tl.arange``, a ``tl.static_assert``, the tile limit), then another variant
    of the flags as the default (a pointer that is a table of addresses under one flag and a
    tensor under another types only one way)."""
    from dataclasses import replace
    variants = kernel_plan.constexpr_variants
    for fallback in kernel_plan.constexpr_fallbacks:
        adjusted = []
        for variant in variants:
            changed = {**variant, **{n: v for n, v in fallback.items()
                                     if variant.get(n) == variants[0][n]}}
            if changed not in adjusted:
                adjusted.append(changed)
        shown = ", ".join(f"{name} = {value}" for name, value in sorted(fallback.items()))
        yield replace(kernel_plan, constexpr_variants=adjusted, notes=list(kernel_plan.notes) + [
            f"the guessed sizes do not compile; checked with {shown}"])
    for start in variants[1:1 + OTHER_STARTS]:
        yield replace(kernel_plan, constexpr_variants=[start] + [
            v for v in variants if v is not start])


# Typings tried with each other starting point (guessed sizes, flag variants): the inferred
# one and the first fallbacks; every typing is tried with the default only.
TYPINGS_PER_START = 3


def _first_compiling_types(kernel, kernel_plan, typings=None):
    """(types, first error, the default variant compiled): the inferred types, or the first
    fallback typing whose default variant compiles (of the first ``typings`` of them)."""
    candidates = [kernel_plan.types] + [{**kernel_plan.types, **fallback}
                                       for fallback in kernel_plan.pointer_fallbacks]
    candidates = candidates[:typings] if typings else candidates
    first_error = None
    for types in candidates:
        try:
            compiled = _compile(kernel.jit,
                                *_apply_variant(types, kernel_plan.constexpr_variants[0]))
            return types, None, compiled
        except Exception as error:  # noqa: BLE001 - try the next typing
            first_error = first_error or error
    return kernel_plan.types, first_error, None


def lint(paths, twins=False, facts=None, execute=True, only=None, verify_fixes=False, jobs=1,
         progress=None, use_cache=False, envelope=None):
    """The ``Report`` over every kernel under ``paths`` (their int32 twins with ``twins``, whose
    fixes are not verified: they are the widenings undone); without ``execute`` nothing of the
    files runs but what Triton needs (``loader``); with ``only`` (names), just those kernels;
    ``verify_fixes`` compiles each error's fix into its kernel (``verify``). Files are checked
    by ``jobs`` worker processes, each file's report kept on disk with ``use_cache``
    (``driver``)."""
    from triton_overflow.lint import driver
    options = dict(twins=twins, facts=facts, execute=execute, only=only,
                   verify_fixes=verify_fixes, envelope=envelope)
    return driver.lint_files(paths, options, jobs=jobs, progress=progress, use_cache=use_cache)


def check_file_kernels(file, helpers=(), twins=False, facts=None, execute=True, only=None,
                       verify_fixes=False, envelope=None):
    """The ``Report`` of one file's kernels, leaving out the jit functions named in
    ``helpers`` (called by kernels of other files)."""
    found = discover.find([file], execute=execute)
    found.kernels = [k for k in found.kernels if k.name not in helpers]
    found.problems = [p for p in found.problems if not p.kernel or p.kernel not in helpers]
    report = Report(problems=list(found.problems), notes=list(found.notes),
                    label="int32 twins" if twins else "kernels")
    kernels = _twin_kernels(found, report) if twins else found.kernels
    kernels = [k for k in kernels if only is None or k.name in only]
    for kernel in kernels:
        try:
            result = check_kernel(kernel, facts, verify_fixes=verify_fixes and not twins,
                                  envelope=envelope)
        except KernelNotChecked as error:
            report.problems.append(discover.Problem(kernel.where, str(error), kernel=kernel.name))
            continue
        except Exception as error:  # noqa: BLE001 - one line, and the run goes on
            report.problems.append(discover.Problem(kernel.where, describe_error(error),
                                                    kernel=kernel.name))
            continue
        result.twin_of = getattr(kernel, "twin_of", None)
        if result.twin_of:
            result.findings = [_to_origin(f, result.twin_of) for f in result.findings]
            result.file = result.twin_of
        report.notes += [f"{discover._shown(kernel.where, None)}: {kernel.name}: {note}"
                         for note in result.notes]
        report.results.append(result)
    return report


def _twin_kernels(found, report):
    from triton_overflow.twin import NoWidening, write_twin
    kernels = []
    for file in sorted({Path(k.file) for k in found.kernels}):
        try:
            twin_path = write_twin(file)
        except NoWidening:
            report.notes.append(f"{discover._shown(str(file), None)}: no int64 widening, so no "
                                f"int32 twin")
            continue
        module, note = discover.load_module(twin_path)
        if module is None:
            report.problems.append(discover.Problem(str(file), f"its int32 twin: {note}"))
            continue
        twin_found, _ = discover._kernels_of(module, twin_path)
        for kernel in twin_found:
            kernel.twin_of = str(file)
            kernels.append(kernel)
    return kernels


def _to_origin(finding, origin):
    from dataclasses import replace
    from triton_overflow.twin import twin_origin
    if twin_origin(finding.file):
        return replace(finding, file=origin, twin_of=origin)
    return replace(finding, twin_of=origin)


def describe_error(error):
    """One line for an exception from compiling a kernel: its innermost cause."""
    if error is None:
        return "it does not compile"
    while error.__cause__ is not None and not isinstance(error, CompilerDiagnostic):
        error = error.__cause__
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    message = lines[-1] if lines else ""
    if type(error).__name__ == "CompilationError" and lines:
        message = lines[-1]
        marked = [lines[index - 1] for index in range(1, len(lines)) if set(lines[index]) == {"^"}]
        if marked:  # the source line Triton's compiler points at
            message = f"{message[:240]} (at `{marked[-1][:120]}`)"
    return f"{type(error).__name__}: {message[:400]}"


__all__ = ["Finding", "Report", "KernelResult", "check_kernel", "check_file_kernels",
           "check_launch", "lint",
           "describe_error", "CLEAN", "FINDINGS", "NOT_CHECKED", "ERROR", "WARNING", "NOTE",
           "LEVELS"]
