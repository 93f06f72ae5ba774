"""The engine's results as test results: a huge run that did not happen is a skip with the
engine's reason; a static check that did not run is a failure with its reason.

The engine (``triton_overflow.engine``) returns outcomes and raises its own errors; only the
pytest side decides what a test makes of them.
"""

import pytest

from triton_overflow.engine import case_static, runner


def ran(outcome):
    """``outcome``, or the test skipped with the reason it did not run."""
    if outcome.skipped:
        pytest.skip(outcome.message)
    return outcome


def huge_run(case, wrap, backend, **options):
    """``runner.run_huge``: the case (its twin, a mutant) in a child process."""
    return ran(runner.run_huge(case, wrap, backend, **options))


def kernel_run(case, wrap, backend, wrap_check=False):
    """``runner.kernel_outcome``: the kernel itself, run once however many tests ask."""
    return ran(runner.kernel_outcome(case, wrap, backend, wrap_check=wrap_check))


def case_check(case, twin):
    """``case_static.case_summary``: the static check of the kernels ``case`` launches."""
    try:
        return case_static.case_summary(case, twin)
    except case_static.StaticCheckError as error:
        pytest.fail(str(error), pytrace=False)


def module_check(module, twins, widening=None):
    """``case_static.lint_summary``: the static check of a whole module (a twin, a mutant)."""
    try:
        return case_static.lint_summary(module, twins, widening)
    except case_static.StaticCheckError as error:
        pytest.fail(str(error), pytrace=False)
