"""The tests of a reproduction: the kernel as shipped and widened, in the interpreter and on a
GPU, each saying what it shows.

    class TestNumNans(ReproductionTests):
        reproductions = [AS_SHIPPED, WIDENED]

For each reproduction and each wrap ("negative": the offset turns negative; "aliased": it
lands on an earlier row) this generates ``test_interpreter`` (lazily allocated CPU memory,
Triton's interpreter, every i32 operation checked) and ``test_gpu`` (the whole launch on a CUDA
device, the huge tensor in aliased virtual memory). A test passes when every checked row gives
row 0's output and nothing wraps; on a kernel whose product wraps it fails, naming the line.
"""

from typing import ClassVar

import pytest

from triton_overflow.engine.memory import BACKENDS, INTERPRETER_BACKEND, AliasedDeviceMemory
from triton_overflow.engine.runner import wrap_line
from triton_overflow.plugin.outcomes import kernel_run
from triton_overflow.plugin.tiers import WRAPS, _fresh, register
from triton_overflow.repro.case import Reproduction

GPU_BACKEND = AliasedDeviceMemory.key


class ReproductionTests:
    """Base of a test class that runs its ``reproductions``."""

    reproductions: ClassVar[list[Reproduction]] = []

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        missing = {}
        for reproduction in cls.reproductions:
            if not isinstance(reproduction, Reproduction):
                raise TypeError(f"reproductions of {cls.__name__} must be Reproduction objects; "
                                f"got {reproduction!r}")
            missing[reproduction.name] = reproduction.unavailable()
            if not missing[reproduction.name]:
                register(reproduction)

        def marks(reproduction, wrap, backend, where, *tier):
            if missing[reproduction.name]:
                return [*tier, pytest.mark.huge]  # the test fails, saying what it needs
            return [*tier, pytest.mark.huge,
                    pytest.mark.needs(_needs(reproduction, wrap, backend, where))]
        interpreted = [pytest.param(r, w, id=f"{r.name}-{w}", marks=marks(
            r, w, INTERPRETER_BACKEND, "Triton's interpreter", pytest.mark.interp))
            for r in cls.reproductions for w in WRAPS]
        on_gpu = [pytest.param(r, w, id=f"{r.name}-{w}", marks=marks(
            r, w, GPU_BACKEND, "a CUDA device with virtual memory", pytest.mark.gpu,
            pytest.mark.memory_backend(GPU_BACKEND)))
            for r in cls.reproductions for w in WRAPS]
        if cls.reproductions:
            cls.test_interpreter = pytest.mark.parametrize("reproduction, wrap", interpreted)(
                _fresh(_test_interpreter))
            cls.test_gpu = pytest.mark.parametrize("reproduction, wrap", on_gpu)(_fresh(_test_gpu))


def _needs(reproduction, wrap, backend, where):
    from triton_overflow.engine.runner import CASE_TIME_LIMIT, bytes_needed, planned_run
    interpreted = backend == INTERPRETER_BACKEND
    run = planned_run(reproduction, wrap, "cpu", interpreted, backend)
    mib = bytes_needed(reproduction, run, backend) / 2**20
    took = reproduction.seconds.get("interpreter" if interpreted else "gpu")
    time = (f"about {took:.0f} s (measured where it was written)" if took is not None else
            f"at most {CASE_TIME_LIMIT} s (its limit; `triton-overflow repro --run` measures it)")
    return (f"{where}, {mib:,.0f} MiB of memory for a [{run.rows:,}, {run.width:,}] "
            f"`{reproduction.huge}` (stride {run.row_stride:,}) of which it touches "
            f"{len(run.planted_rows)} rows, and {time}")


def _test_interpreter(self, reproduction, wrap, request):
    """In Triton's interpreter, with every i32 operation checked: no product wraps and every
    checked row gives row 0's output."""
    _require_source(reproduction)
    outcome = kernel_run(reproduction, wrap, INTERPRETER_BACKEND, wrap_check=True)
    _record(request, outcome)
    if not outcome.passed:
        pytest.fail(_failure(reproduction, outcome, "in the interpreter"), pytrace=False)


def _test_gpu(self, reproduction, wrap, request):
    """On the device, the whole launch: every checked row gives row 0's output, no fault."""
    _require_source(reproduction)
    outcome = kernel_run(reproduction, wrap, GPU_BACKEND)
    _record(request, outcome)
    if not outcome.passed:
        pytest.fail(_failure(reproduction, outcome, f"on the GPU ({BACKENDS[GPU_BACKEND].name})"),
                    pytrace=False)


def _require_source(reproduction):
    """A reproduction that cannot find the engine's kernel fails: skipped, it would look
    green wherever it is attached."""
    missing = reproduction.unavailable()
    if missing:
        pytest.fail(f"{reproduction.name}: cannot run: it needs {missing}", pytrace=False)


def _record(request, outcome):
    """The run's layout, seconds and peak memory, as the test's JUnit ``case`` property."""
    if isinstance(outcome.value, dict) and "seconds" in outcome.value:
        request.node.user_properties.append(("case", outcome.value))
    else:
        request.node.user_properties.append(("case", {"outcome": outcome.summary()[:300]}))


def _failure(reproduction, outcome, where):
    kernel = "with the fix" if reproduction.widened else "as shipped"
    if outcome.wrapped:
        shown = f"an i32 product wraps at {wrap_line(outcome)}"
    elif outcome.faulted:
        shown = f"the kernel faults: {outcome.summary()}"
    elif outcome.wrong_row:
        shown = f"a checked row differs from row 0: {outcome.summary()}"
    else:
        shown = outcome.summary()
    return (f"{reproduction.kernel} ({reproduction.source}:{reproduction.line}, "
            f"`{reproduction.product}`) {kernel}, {where}: {shown}\n{outcome.output[-4000:]}")
