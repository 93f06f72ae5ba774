"""Time every family's kernels on the GPU against PyTorch, published figures and their own int32
twins.

    python ci/benchmark.py [--out benchmark.md] [--reps 50] [--only NAME ...] [--host]
                           [--compile-jobs N]

The rows come from the families: each ``tests/cases/<family>.py`` declares
``benchmarks(batch, kernels, data)``, returning ``triton_overflow.bench.Benchmark`` rows for its
launchers (``kernels`` is the family's module or its int32 twin), and may declare
``benchmark_inputs(data)``: the tensors its rows and their twins' share, by name, which ``data``
(``Inputs``) then carries as attributes. Timing method: see
``triton_overflow.bench``. "µs" is device time, the host's queueing hidden. V = 151936; B is the
number of logits rows. "GB/s" counts the bytes a row must move at least (read the logits once,
write what it writes), so "% copy" compares it with a device-to-device copy timed in the same
run. A row meets its goal when it is no slower than its target, the published figure, the
PyTorch formulation and every row it names in ``no_slower_than`` (at the same B). ``--host``
adds per-call and range-checked call figures (host time included). Before timing, N processes
(``--compile-jobs``, default up to 8) launch every row once, so that Triton compiles the
kernels and twins in parallel into its cache (no more processes than the free device memory
holds, about 12 GiB each); the timing process then loads them from there.
"""

import argparse
import importlib
import math
import multiprocessing
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.cases import families  # noqa: E402
from triton_overflow.bench import median_us  # noqa: E402
from triton_overflow.twin import load_twin  # noqa: E402

VOCAB = 151936
BATCHES = (64, 256, 1024)
# Device memory one compile process holds with the rows of the largest batch (11.4 GiB seen on
# an H200 at B = 1024): the parallel compile runs no more processes than fit.
SHARE_BYTES = 12 * 2**30


class Inputs:
    """Logits and the tensors every family's rows share, at one batch size, and those each of
    ``families`` adds with its ``benchmark_inputs``."""

    def __init__(self, batch, families, device="cuda"):
        self.batch = batch
        self.vocab = VOCAB
        self.device = device
        self.generator = torch.Generator(device).manual_seed(batch)
        self._variants = {}
        self.logits, self.pristine, self.restore = self.variant("flat", torch.float32)
        self.size = batch * VOCAB * 4
        self.mapping = torch.arange(batch, dtype=torch.int32, device=device)
        for family in families:
            declared = family.benchmark_inputs(self) if hasattr(family, "benchmark_inputs") else {}
            for name, tensor in declared.items():
                if hasattr(self, name):
                    raise ValueError(f"{family.__name__}.benchmark_inputs: the name {name!r} is "
                                     "taken")
                setattr(self, name, tensor)

    def variant(self, distribution, dtype):
        """(working copy, pristine logits, restore) for "flat" (randn) or "peaked" (randn x 4)
        logits of ``dtype``, made once per batch size."""
        key = (distribution, dtype)
        if key not in self._variants:
            if distribution == "flat" and dtype == torch.float32:
                pristine = torch.randn(self.batch, VOCAB, device=self.device,
                                       generator=self.generator)
            else:
                base = self.variant("flat", torch.float32)[1]
                pristine = (base * (4.0 if distribution == "peaked" else 1.0)).to(dtype)
            working = pristine.clone()
            self._variants[key] = (working, pristine, lambda: working.copy_(pristine))
        return self._variants[key]


def rows(batch, twins, device="cuda"):
    """name -> (ours, twin) Benchmark pairs over every family that declares benchmarks, their
    inputs on ``device`` (the CPU serves to gather the rows of a family whose benchmarks build
    their tensors on ``data.device``)."""
    declaring = [family for family in families().values() if hasattr(family, "benchmarks")]
    data = Inputs(batch, declaring, device)
    found = {}
    for family in declaring:
        module = importlib.import_module(family.CASES[0].module)
        ours = family.benchmarks(batch, module, data)
        theirs = family.benchmarks(batch, twins.setdefault(module.__name__, load_twin(module)),
                                   data)
        for name, row in ours.items():
            found[name] = (row, theirs[name])
    return found


def _launch_share(task):
    """Launch the rows of one share (``batch``, ``index`` of ``jobs``) once, ours and twin."""
    batch, index, jobs, only = task
    found = rows(batch, {})
    names = sorted(name for name in found if not only or name in only)
    for name in names[index::jobs]:
        for row in found[name]:
            if row.restore is not None:
                row.restore()
            row.run(check_values=False)
    torch.cuda.synchronize()
    return len(names[index::jobs])


def compile_in_parallel(jobs, only):
    """Launch every row once in ``jobs`` processes, each a share of the rows at each batch
    size, so that Triton's cache holds every kernel the timing launches."""
    started = time.monotonic()
    free, _ = torch.cuda.mem_get_info()
    fit = max(1, free // SHARE_BYTES)
    if jobs > fit:
        print(f"benchmark: {jobs} compile processes would need about "
              f"{jobs * SHARE_BYTES / 2**30:.0f} GiB of device memory, {free / 2**30:.0f} GiB is "
              f"free: using {fit}", file=sys.stderr, flush=True)
        jobs = fit
    print(f"benchmark: compiling in {jobs} processes", file=sys.stderr, flush=True)
    tasks = [(batch, index, jobs, only) for batch in BATCHES for index in range(jobs)]
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        launched = sum(pool.map(_launch_share, tasks, chunksize=1))
    print(f"benchmark: {launched} rows launched once in {time.monotonic() - started:.0f} s",
          file=sys.stderr, flush=True)


def copy_bandwidth(reps):
    """GB/s of a 2 GiB device-to-device copy (1 GiB read, 1 GiB written), median of ``reps``."""
    source = torch.empty(2**28, dtype=torch.float32, device="cuda")
    target = torch.empty_like(source)
    (elapsed, ) = median_us([lambda: target.copy_(source)], None, reps)
    return 2 * source.numel() * 4 / (elapsed * 1e-6) / 1e9


def _goals(ours, column, figures):
    """(name, µs) of every figure the row must not exceed at this batch size."""
    goals = []
    if ours.target_us:
        goals.append(("target", ours.target_us[column]))
    if ours.published_us:
        goals.append(("published", ours.published_us[column]))
    if figures["torch"] is not None:
        goals.append(("PyTorch", figures["torch"]))
    return goals


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the table as Markdown here")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--only", nargs="*", default=None, help="row names to time")
    parser.add_argument("--host", action="store_true",
                        help="also time per call and the range-checked call (host included)")
    parser.add_argument("--compile-jobs", type=int, default=min(8, os.cpu_count() or 1),
                        help="processes that compile the kernels before timing (0: none)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmark: needs a CUDA device; none visible")
        return 2
    if args.compile_jobs < 0:
        parser.error(f"--compile-jobs must be >= 0; got {args.compile_jobs}")
    if args.compile_jobs:
        compile_in_parallel(args.compile_jobs, args.only)
    bandwidth = copy_bandwidth(args.reps)
    header = ("| kernel | B | µs | PyTorch µs | published µs | target µs | goal | GB/s | % copy | "
              "int32 twin µs | int64/int32 |" + (" per call µs | checked call µs |" if args.host
                                                  else ""))
    lines = [f"GPU: {torch.cuda.get_device_name()}; V = {VOCAB}; median of {args.reps}; "
             f"device copy bandwidth {bandwidth:.0f} GB/s", "", header,
             "|---" * (header.count("|") - 1) + "|"]
    twins = {}
    misses = []
    ratios = []
    for column, batch in enumerate(BATCHES):
        timed = {}
        for name, (ours, twin) in rows(batch, twins).items():
            if args.only and name not in args.only:
                continue
            print(f"benchmark: B = {batch}, {name}", file=sys.stderr, flush=True)
            both_restore = None if ours.restore is None else \
                (lambda a=ours.restore, b=twin.restore: (a(), b()))
            mine, theirs = median_us(
                [lambda: ours.run(check_values=False), lambda: twin.run(check_values=False)],
                both_restore, args.reps)
            figures = {"us": mine, "twin": theirs, "torch": None, "host": ""}
            if ours.baseline:
                figures["torch"] = median_us([ours.baseline], ours.restore, args.reps)[0]
            if args.host:
                per_call, checked = median_us([lambda: ours.run(check_values=False), ours.run],
                                              ours.restore, args.reps, hide_host=False)
                figures["host"] = f" {per_call:.1f} | {checked:.1f} |"
            timed[name] = (ours, figures)
            if batch == BATCHES[-1]:
                ratios.append(mine / theirs)
        for name, (ours, figures) in timed.items():
            goals = _goals(ours, column, figures)
            related = [timed[other][1]["us"] for other in ours.no_slower_than if other in timed]
            if related:
                goals.append(("slowest of " + " / ".join(ours.no_slower_than), max(related)))
            target = (ours.target_us[column] if ours.target_us
                      else f"{max(related):.1f}" if related else "-")
            missed = [f"{what} {limit:.1f}" for what, limit in goals if figures["us"] > limit]
            if missed:
                misses.append(f"{name}, B = {batch}: {figures['us']:.1f} µs > " + ", ".join(missed))
            rate = ours.bytes_moved / (figures["us"] * 1e-6) / 1e9
            published = ours.published_us[column] if ours.published_us else "-"
            torch_us = "-" if figures["torch"] is None else f"{figures['torch']:.1f}"
            lines.append(
                f"| {name} | {batch} | {figures['us']:.1f} | {torch_us} | {published} | "
                f"{target} | {'MISSED' if missed else 'met'} | {rate:.0f} | "
                f"{100 * rate / bandwidth:.0f} | {figures['twin']:.1f} | "
                f"{figures['us'] / figures['twin']:.3f} |{figures['host']}")
            print(lines[-1], flush=True)
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
    lines += ["", f"int64/int32 at B = {BATCHES[-1]}, geometric mean over {len(ratios)} rows: "
              f"{geomean:.4f}", "", f"Goals missed: {len(misses)}"] + [f"- {m}" for m in misses]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
