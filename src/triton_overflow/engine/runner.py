"""Drive one huge case: obtain memory, plant rows, launch, compare.

``run_case`` is what a child process runs (``triton_overflow.engine.isolation``); it returns a
JSON summary, raises ``Skipped`` when the memory is not there, and raises on a wrong row. The
parent's side is here too: ``run_huge`` starts that child (on a GPU of the run, for a device
backend) and returns its ``Outcome``, a skip included; ``kernel_outcome`` runs the kernel itself
once however many tests ask; ``gpu_caught``, ``interpreter_caught``, ``how_caught`` and
``wrap_location`` read an outcome; ``sanitizer_report`` reruns a case under Triton's overflow
sanitizer. Turning outcomes into test results is the pytest side's (``triton_overflow.plugin``).
"""

import contextlib
import dataclasses
import re
import resource
import time

import torch

from triton_overflow.cases import CannotRun, HugeRun, case_reference, resolve_case
from triton_overflow.engine import devices, memory
from triton_overflow.engine.huge import huge_layout
from triton_overflow.engine.isolation import Outcome, Skipped, run_isolated
from triton_overflow.interp.device_view import presented
from triton_overflow.interp.execution_mode import INTERPRETER, interpreted
from triton_overflow.interp.hooks import (configs_without_benchmarks, int32_wrap_checked,
                                          only_programs, unwrap_interpreter_error)
from triton_overflow.locations import function_at
from triton_overflow.twin import load_twin

PLANT_SEED = 20260
POISON_SEED = 7919
CASE_TIME_LIMIT = 900  # seconds a huge case's child may run before it is killed


def layout_for(case, wrap):
    return huge_layout(wrap, case.width, row_stride=case.row_stride)


def planned_run(case, wrap, device, is_interpreted, backend=""):
    return HugeRun(layout_for(case, wrap), torch.device(device), is_interpreted,
                   run_poison_slots=case.run_poison_slots, backend=backend)


def small_run(case, device, rows):
    """A ``HugeRun`` of ``rows`` rows: row 0, the last row a checked row, the rest poison."""
    from triton_overflow.engine.huge import HugeLayout
    layout = HugeLayout("small", rows, case.width, case.row_stride or case.width,
                        check_rows=(rows - 1, ), poison_rows=tuple(range(1, rows - 1)))
    return HugeRun(layout, torch.device(device), interpreted(),
                   run_poison_slots=case.run_poison_slots)


def small_batch(case, run, copy_row=False):
    """Random rows for a ``small_run`` on ``run.device``, ``run.row_stride`` apart; with
    ``copy_row`` the last row a copy of row 0."""
    generator = torch.Generator().manual_seed(run.rows)
    rows = torch.stack([case.random_row(generator, case.width) for _ in range(run.rows)])
    buffer = torch.zeros(run.rows, run.row_stride, dtype=case.dtype)
    buffer[:, :case.width] = rows.to(case.dtype)
    if copy_row:
        buffer[-1] = buffer[0]
    return buffer.to(run.device)[:, :case.width]


def bytes_needed(case, run, backend):
    """The huge tensor on ``backend`` plus the case's side inputs, with room for the launch."""
    memory_backend = memory.BACKENDS[backend]
    estimate = memory_backend.estimate(run.layout, case.dtype, run.planted_rows)
    return estimate + case.extra_bytes(run) + memory_backend.spare_bytes


def run_case(case, wrap, backend, twin=False, wrap_check=False, widening=None):
    """Run ``case`` (a ``case_reference``) with the ``wrap`` layout ("negative" or "aliased")
    on ``backend``; raise on a wrong row.

    ``twin`` runs the int32 twin instead of the kernel; with ``widening`` the mutant that undoes
    only that widening.
    """
    phases = _Phases()
    case = resolve_case(case)
    allocator = memory.allocator(backend)
    is_interpreted = interpreted()
    if is_interpreted != (allocator.device.type == "cpu"):
        raise RuntimeError(f"backend {backend} cannot run with the interpreter "
                           f"{'on' if is_interpreted else 'off'}")
    run = planned_run(case, wrap, allocator.device, is_interpreted, backend)
    shortfall = allocator.shortfall(bytes_needed(case, run, backend), case=case.name)
    if shortfall:
        raise Skipped(shortfall)
    kernels = case.kernels()
    if twin:
        kernels = load_twin(kernels, only=widening)
    configs = []
    phases.mark("set-up")
    try:
        with allocator.reserve(run.layout, case.dtype, run.planted_rows) as huge, \
                as_on_gpu(case, is_interpreted) as configs:
            run = dataclasses.replace(run, allocator=allocator)
            phases.mark("reserve")
            planted = plant(huge, run.layout, fill_background=allocator.fills_background,
                            random_row=case.random_row, rows=run.planted_rows,
                            shared=allocator.background())
            inputs = case.prepare(huge, run)
            phases.mark("plant")
            with _maybe(is_interpreted,
                        lambda: only_programs(case.programs(run), case.programs_axis)) as ran, \
                    _maybe(wrap_check, int32_wrap_checked):
                try:
                    produced = case.launch(kernels, huge, run, **inputs)
                except Exception as error:
                    raise unwrap_interpreter_error(error) from None
            if huge.is_cuda:
                torch.cuda.synchronize()
            phases.mark("launch")
            case.check(produced, huge, run, planted, **inputs)
            phases.mark("check")
    except CannotRun as error:
        raise Skipped(str(error)) from None
    except torch.cuda.OutOfMemoryError as error:
        raise Skipped("out of device memory inside the case: "
                      f"{str(error).splitlines()[0]}") from None
    except memory.VirtualMemoryError as error:
        if not error.out_of_memory:
            raise
        raise Skipped(f"out of device memory inside the case: {error}") from None
    except Exception as error:
        if configs:
            error.add_note("autotuned kernels ran " + "; ".join(configs))
        raise
    peak = allocator.peak_bytes()
    phases.mark("release")
    return {"layout": run.layout.describe(), "seconds": phases.total(), "phases": phases.seconds,
            "peak_gib": round(peak / memory.GIB, 3), "backend": backend, "configs": configs,
            "programs": ran.programs_run if ran is not None else None,
            "resident_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}


class _Phases:
    """Seconds spent in each phase of a run, each phase ending at its ``mark``."""

    def __init__(self):
        self.started = self.last = time.monotonic()
        self.seconds = {}

    def mark(self, phase):
        now = time.monotonic()
        self.seconds[phase] = round(now - self.last, 2)
        self.last = now

    def total(self):
        return round(self.last - self.started, 2)


@contextlib.contextmanager
def as_on_gpu(case, is_interpreted):
    """In the interpreter, the launcher sees the case's GPU model and autotuned kernels run
    without benchmarks; yields the list of configs that ran. On a GPU, nothing changes."""
    if not is_interpreted:
        yield []
        return
    with presented(case.interpreted_gpu), \
            configs_without_benchmarks(case.autotune_configs) as configs:
        yield configs


def plant(huge, layout, fill_background, random_row, rows, shared=()):
    """Row 0 random, the checked rows copies of it, the poison rows other data; CPU copies back.

    With ``fill_background`` every other row is filled with random data too, so that a read
    from any wrong row shows; with ``shared`` (tensors over the memory the unplanted rows of a
    virtual tensor share) that memory is; lazy host memory leaves them untouched (zero pages
    cost nothing).
    """
    device = huge.device
    width = layout.vocab
    for index, region in enumerate(shared):
        region.copy_(random_row(torch.Generator(device).manual_seed(PLANT_SEED + 1 + index),
                                region.numel()).to(region.dtype))
    if fill_background:
        background = torch.Generator(device).manual_seed(PLANT_SEED + 1)
        chunk = max(1, 2**28 // width)
        for start in range(0, layout.rows, chunk):
            count = min(chunk, layout.rows - start)
            huge[start:start + count] = random_row(background, count * width).view(count, width)
    huge[0] = random_row(torch.Generator().manual_seed(PLANT_SEED), width).to(device)
    for row in layout.check_rows:
        huge[row] = huge[0]
    poison = torch.Generator().manual_seed(POISON_SEED)
    for row in layout.poison_rows:
        huge[row] = (random_row(poison, width) * 3 if huge.is_floating_point()
                     else random_row(poison, width) + 1).to(device)
    return {row: huge[row].cpu().clone() for row in rows}


class _maybe:
    def __init__(self, enabled, factory):
        self.context = factory() if enabled else None

    def __enter__(self):
        return self.context.__enter__() if self.context else None

    def __exit__(self, *exc):
        return self.context.__exit__(*exc) if self.context else False


# --- the parent side: one huge case in a child process, and what its outcome shows ----------

def run_huge(case, wrap, backend, twin=False, wrap_check=False, widening=None, env=None):
    """Run ``case`` in a child process and return its ``Outcome`` (``skipped``, with the
    reason, where the case does not fit). A device case first reserves its memory on a GPU of
    the run (``devices``)."""
    arguments = dict(case=case_reference(case), wrap=wrap, backend=backend, twin=twin,
                     wrap_check=wrap_check, widening=widening)
    execution = memory.BACKENDS[backend].execution

    def run_child(child_env):
        return run_isolated("triton_overflow.engine.runner:run_case", arguments, mode=execution,
                            env=child_env, timeout=CASE_TIME_LIMIT)
    if execution == INTERPRETER:
        outcome = run_child(env)
    else:
        needed = bytes_needed(case, planned_run(case, wrap, "cpu", False, backend), backend)
        try:
            with devices.reserve(needed, f"{case.name} {wrap} {backend}") as gpu:
                child_env = dict(env or {})
                if gpu is not None:
                    child_env["CUDA_VISIBLE_DEVICES"] = gpu
                outcome = run_child(child_env)
        except devices.NeverFits as reason:
            return Outcome("skipped", 0.0, message=str(reason))
    return outcome


def kernel_outcome(case, wrap, backend, wrap_check=False):
    """``run_huge`` of the kernel itself (no twin, no mutant), run once per test run: the huge
    case's test and each widening test that asks whether its catch is the mutant's own read the
    same run."""
    from dataclasses import asdict

    from triton_overflow.engine import session_values
    key = ["kernel_outcome", case_reference(case), wrap, backend, wrap_check]
    return Outcome(**session_values.once(key, lambda: asdict(run_huge(
        case, wrap, backend, wrap_check=wrap_check))))


SANITIZER_LINE = re.compile(r"(?P<file>\S+\.py):(?P<line>\d+): (?P<function>\S+): block: "
                             r"\[(?P<block>[^\]]*)\], thread: \[(?P<thread>[^\]]*)\] Assertion "
                             r"`(?P<message>[^`]*overflow[^`]*)` failed")


def sanitizer_report(case, wrap, backend, twin=False):
    """Run the case again under Triton's overflow sanitizer (``TRITON_DEBUG=1``); one line per
    kernel line it stopped at: file:line, kernel, operation, the first block and thread."""
    from triton_overflow.locations import shown
    from triton_overflow.twin import twin_origin
    outcome = run_huge(case, wrap, backend, twin=twin, env={"TRITON_DEBUG": "1"})
    reports = {}
    for match in SANITIZER_LINE.finditer(outcome.output):
        file, line = match["file"], int(match["line"])
        origin = twin_origin(file)
        key = (origin or file, line, match["message"])
        if key in reports:
            reports[key][1] += 1
            continue
        kernel = match["function"] if match["function"] != "unknown" else \
            function_at(file, line)
        reports[key] = [f"{shown(origin or file)}:{line}: {kernel}: {match['message']}",
                        1, f"first at block [{match['block']}], thread [{match['thread']}]",
                        " [int32 twin]" if origin else ""]
    lines = [f"{text} ({where}; {count} report{'s' if count > 1 else ''}){twin}"
             for text, count, where, twin in reports.values()]
    return "\n".join(lines) or f"the sanitizer reported nothing ({outcome.summary()})"


def gpu_caught(outcome):
    """A GPU twin is caught by an illegal address, a fault signal or a wrong row; never by an
    out-of-memory kill or a timeout."""
    return outcome.faulted or outcome.wrong_row


def interpreter_caught(outcome):
    """An interpreted twin or mutant is caught by the wrap check, a wrong row, or a fault (a
    wrapped offset that left the tensor before the checked rows were reached)."""
    return outcome.wrapped or outcome.wrong_row or outcome.faulted


def how_caught(outcome):
    if outcome.wrapped:
        return "wrap check at " + wrap_line(outcome)[:160]
    if outcome.faulted:
        return "a memory fault, a detection: " + outcome.summary()[:160]
    return outcome.summary()[:160]


def wrap_location(outcome):
    """``file:line`` of the operation that wrapped in a ``wrapped`` outcome; a twin's line is
    given in the file it was derived from."""
    from triton_overflow.locations import shown
    from triton_overflow.twin import twin_origin
    file = outcome.fields["file"]
    return f"{shown(twin_origin(file) or file)}:{outcome.fields['line']}"


def wrap_line(outcome):
    """Where a ``wrapped`` outcome wrapped and what: ``file:line: int32 * wraps: ...``."""
    return f"{wrap_location(outcome)}: {outcome.fields['what']}"
