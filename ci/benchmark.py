"""Time every family's kernels on the GPU against PyTorch and against their own int32 twins.

    python ci/benchmark.py [--out benchmark.md] [--reps 50] [--only NAME ...]

The rows come from the families: each ``tests/cases/<family>.py`` declares
``benchmarks(batch, kernels, data)``, returning ``triton_overflow.bench.Benchmark`` rows for its
launchers (``kernels`` is the family's module or its int32 twin). Timing method: see
``triton_overflow.bench``. "GPU µs" is device time, the host's queueing hidden; "per call µs"
the same call timed without that wait; "checked call µs" the default call, whose range checks
read values back to the host. V = 151936, fp32. B is the number of logits rows. Targets are
the fastest figure measured for vLLM's kernels or PyTorch on an H200.
"""

import argparse
import importlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.cases import families  # noqa: E402
from triton_overflow.bench import median_us  # noqa: E402
from triton_overflow.twin import load_twin  # noqa: E402

VOCAB = 151936
BATCHES = (64, 256, 1024)


class Inputs:
    """Logits and the tensors every family's rows share, at one batch size."""

    def __init__(self, batch):
        self.generator = torch.Generator("cuda").manual_seed(batch)
        self.pristine = torch.randn(batch, VOCAB, device="cuda", generator=self.generator)
        self.logits = self.pristine.clone()
        self.size = batch * VOCAB * 4
        self.k = torch.full((batch, ), 50, dtype=torch.int32, device="cuda")
        self.p = torch.full((batch, ), 0.9, device="cuda")
        self.ids = torch.randint(0, VOCAB, (batch, 6), device="cuda", generator=self.generator)
        self.mapping = torch.arange(batch, dtype=torch.int32, device="cuda")

    def restore(self):
        self.logits.copy_(self.pristine)


def rows(batch, which):
    """name -> (ours, twin) Benchmark pairs over every family that declares benchmarks."""
    data = Inputs(batch)
    found = {}
    for family in families().values():
        declare = getattr(family, "benchmarks", None)
        if declare is None:
            continue
        module = importlib.import_module(family.CASES[0].module)
        ours = declare(batch, module, data)
        twins = declare(batch, which.setdefault(module.__name__, load_twin(module)), data)
        for name, row in ours.items():
            found[name] = (row, twins[name])
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the table as Markdown here")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--only", nargs="*", default=None, help="row names to time")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmark: needs a CUDA device; none visible")
        return 2
    header = ("| kernel | B | GPU µs | GB/s | PyTorch GPU µs | ours/PyTorch | int32 twin GPU µs | "
              "int64/int32 | target µs | meets target | per call µs | checked call µs |")
    lines = [f"GPU: {torch.cuda.get_device_name()}; V = {VOCAB}, fp32, median of {args.reps}",
             "", header, "|---" * 12 + "|"]
    twins = {}
    for column, batch in enumerate(BATCHES):
        for name, (ours, twin) in rows(batch, twins).items():
            if args.only and name not in args.only:
                continue
            both_restore = None if ours.restore is None else \
                (lambda a=ours.restore, b=twin.restore: (a(), b()))
            unchecked, twin_us = median_us(
                [lambda: ours.run(check_values=False), lambda: twin.run(check_values=False)],
                both_restore, args.reps)
            reference = (median_us([ours.baseline], ours.restore, args.reps)[0]
                         if ours.baseline else None)
            per_call, checked = median_us([lambda: ours.run(check_values=False), ours.run],
                                          ours.restore, args.reps, hide_host=False)
            target = ours.target_us[column] if ours.target_us else None
            torch_cells = (f"{reference:.1f} | {unchecked / reference:.2f}" if reference
                           else "- | -")
            meets = "-" if target is None else ("yes" if unchecked <= target else "NO")
            lines.append(
                f"| {name} | {batch} | {unchecked:.1f} | "
                f"{ours.bytes_moved / (unchecked * 1e-6) / 1e9:.0f} | {torch_cells} | "
                f"{twin_us:.1f} | {unchecked / twin_us:.3f} | {target or '-'} | {meets} | "
                f"{per_call:.1f} | {checked:.1f} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
