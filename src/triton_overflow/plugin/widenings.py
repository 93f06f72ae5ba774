"""The per-widening mutant tests: each widening of a case's module undone alone, and the
mutant caught by the module's huge cases (in the interpreter and on the GPU), unless a bounded
marker on its line says its product cannot reach 2**31."""

import pytest

from triton_overflow.cases import SAFE, expectation
from triton_overflow.engine.memory import BACKENDS, INTERPRETER_BACKEND, MUTANT_DEVICE_BACKEND
from triton_overflow.engine.runner import gpu_caught, how_caught, interpreter_caught, wrap_location
from triton_overflow.locations import shown
from triton_overflow.locations import function_at, module_file
from triton_overflow.plugin.detector_report import detail
from triton_overflow.plugin.outcomes import case_check, huge_run, kernel_run, module_check


INTERPRETER_ORACLES = (("negative", True), ("aliased", True), ("aliased", False))


GPU_ORACLES = (("negative", False), ("aliased", False))


def mutant_tests(cases, fresh):
    """The per-widening tests of the modules of ``cases`` (none without a widening), in the
    interpreter and on a GPU: test name -> a ``fresh`` copy of its function, parametrized."""
    widenings = widening_params(cases)
    if not widenings:
        return {}
    from triton_overflow.plugin.tiers import START_EARLY, tier_marks

    def params(backend):
        marks = [pytest.mark.widening(detector=BACKENDS[backend].detector),
                 START_EARLY["mutants"], *tier_marks(backend=backend)]
        return [pytest.param(*p.values, id=p.id, marks=[*p.marks, *marks]) for p in widenings]
    return {
        "test_interpreter_huge_cases_catch_each_widening": pytest.mark.parametrize(
            "module, widening", params(INTERPRETER_BACKEND))(fresh(caught_in_the_interpreter)),
        "test_gpu_huge_cases_catch_each_widening": pytest.mark.parametrize(
            "module, widening", params(MUTANT_DEVICE_BACKEND))(fresh(caught_on_the_gpu)),
    }


def widening_params(cases):
    from triton_overflow.twin import list_widenings
    params = []
    for module in dict.fromkeys(case.module for case in cases):
        file = module_file(module)
        for index, widening in enumerate(list_widenings(file)):
            where = f"{shown(file)}:{widening.line}"
            params.append(pytest.param(module, index, id=where, marks=[pytest.mark.widening_site(
                where=where, kernel=function_at(file, widening.line), text=widening.text)]))
    return params


def caught_in_the_interpreter(self, module, widening, request):
    """The mutant undoing only this widening is caught by a huge case in the interpreter."""
    _catch_widening(self, module, widening, request, INTERPRETER_BACKEND, INTERPRETER_ORACLES,
                    interpreter_caught)


def caught_on_the_gpu(self, module, widening, request):
    """The mutant undoing only this widening is caught by a huge case on the GPU: an illegal
    address or a wrong row, with no wrap check."""
    _catch_widening(self, module, widening, request, MUTANT_DEVICE_BACKEND, GPU_ORACLES,
                    gpu_caught)


def _catch_widening(test, module, widening, request, backend, oracles, caught):
    """A mutant must be caught when undoing the widening exposes an i32 product the module did
    not have (a product behind a flag the module already leaves i32 is not this widening's),
    and no bounded marker on the widening's line says it stays small. A catch counts when the
    wrap is at an exposed product, or when the case passes without the mutation."""
    from triton_overflow.lint.analysis import markers
    from triton_overflow.twin import list_widenings
    file = module_file(module)
    site = list_widenings(file)[widening]
    bounded = markers(file, site.line)
    if bounded:
        product, reason = bounded[0]
        detail(request, f"bounded: {product} by {reason}")
        return
    exposed = _exposed_products(module, widening)
    if not exposed:
        detail(request, "redundant: without it no new i32 product reaches an address")
        return
    cases = [c for c in test.cases if c.module == module and expectation(c) == SAFE]
    tried = []
    # Each oracle over every case before the next oracle: a mutant that only some cases'
    # launches reach costs one run, not one per oracle, in each case that misses it.
    for wrap, wrap_check in oracles:
        for case in cases:
            outcome = huge_run(case, wrap, backend, twin=True, wrap_check=wrap_check,
                               widening=widening)
            if caught(outcome) and _attributable(outcome, exposed, case, wrap, backend,
                                                 wrap_check):
                detail(request, f"caught by {case.name} ({wrap}): {how_caught(outcome)}")
                return
            tried.append(f"{case.name} ({wrap}{', wrap check' if wrap_check else ''}): "
                         f"{outcome.summary()[:160]}")
    pytest.fail(f"the mutant undoing {site.text} at {shown(file)}:{site.line} survived every "
                f"huge case of {module}; it exposes {', '.join(sorted(exposed))}, which no case "
                f"drives past 2**31{_unlaunched_hint(cases, file, site.line)}:\n  "
                + "\n  ".join(tried))


def _exposed_products(module, widening):
    """``file:line`` of each i32 product the mutant has in a flag combination where the
    module has not (a product the module leaves i32 behind another flag value is not this
    widening's)."""
    before = module_check(module, False)["variants"]
    exposed = set()
    for kernel, variants in module_check(module, False, widening)["variants"].items():
        known = before.get(kernel, [])
        for index, pairs in enumerate(variants):
            had = {tuple(pair) for pair in known[index]} if index < len(known) else set()
            exposed |= {where for where, product in pairs if (where, product) not in had}
    return exposed


def _attributable(outcome, exposed, case, wrap, backend, wrap_check):
    """Whether a caught mutant was caught by its own widening: the wrap is at an exposed
    product, or the unmutated kernel passes the same run."""
    if outcome.wrapped and wrap_location(outcome) in exposed:
        return True
    return kernel_run(case, wrap, backend, wrap_check=wrap_check).passed


def _unlaunched_hint(cases, file, line):
    kernel = function_at(file, line)
    launched = {name for c in cases for name in case_check(c, False)["kernels"]}
    if kernel not in launched:
        names = ", ".join(c.name for c in cases) or "none"
        return (f" (no SAFE case launches {kernel}; the SAFE cases of this module: {names}: "
                "add a case that calls its launcher)")
    return (f" (a case launches {kernel}, but none plants a huge tensor that the exposed "
            "product indexes: add a case whose huge tensor is that one)")
