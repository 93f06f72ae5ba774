"""Device timing of kernels, for benchmarks declared beside each family's cases.

``median_us`` times callables with CUDA events, each launch after the L2 cache was flushed (a
256 MiB write) and, for in-place kernels, after the inputs were restored: flush and restore lie
outside the timed region. With ``hide_host`` the device first waits (a ~2 ms spin) while the
host queues the whole call, so the events bracket the kernels and the gaps between them, not
Python's launch cost. Several callables are timed in alternating launches, so that clock drift
falls on all alike.
"""

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

HOST_COVER_CYCLES = 4_000_000  # ~2 ms at 1.98 GHz: longer than any launcher takes to queue


@dataclass
class Benchmark:
    """One row of the benchmark: ``run(**launcher_options)`` calls our launcher."""

    run: Callable[..., object]
    baseline: Callable[[], object] | None = None  # the PyTorch formulation a user would write
    restore: Callable[[], object] | None = None  # puts in-place inputs back
    bytes_moved: int = 0
    target_us: tuple[float, ...] = ()  # per batch size of the benchmark, if there is a target
    published_us: tuple[float, ...] = ()  # per batch size: another engine's kernel, measured
    no_slower_than: tuple[str, ...] = ()  # names of rows at the same batch size it must not trail


def _time_once(run: Callable[[], object], restore: Callable[[], object] | None,
               flush: "torch.Tensor", hide_host: bool) -> float:
    import torch
    if restore is not None:
        restore()
    flush.zero_()
    if hide_host:
        torch.cuda._sleep(HOST_COVER_CYCLES)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    torch.cuda.synchronize()
    milliseconds: float = start.elapsed_time(end)
    return milliseconds * 1000


def median_us(runs: Sequence[Callable[[], object]], restore: Callable[[], object] | None = None,
              reps: int = 50, warmup: int = 5, hide_host: bool = True) -> list[float]:
    """Median µs of each callable in ``runs``, timed in alternating order rep after rep."""
    import torch
    flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
    times: list[list[float]] = [[] for _ in runs]
    for index in range(warmup + reps):
        order = list(range(len(runs)))
        if index % 2:
            order.reverse()
        for which in order:
            elapsed = _time_once(runs[which], restore, flush, hide_host)
            if index >= warmup:
                times[which].append(elapsed)
    return [statistics.median(each) for each in times]
