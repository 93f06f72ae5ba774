"""Time every kernel on the GPU against PyTorch and against its own int32 twin.

    python ci/benchmark.py [--out benchmark.md] [--reps 50]

Each timing is the median of ``--reps`` launches measured with CUDA events, each after the L2
cache was flushed (a 256 MiB write) and, for in-place kernels, after the logits were restored:
flush and restore lie outside the timed region. Launchers run with ``check_values=False`` (the
range checks read values back to the host); the last column times the default, checked call.
Targets are the fastest figure measured for vLLM's kernels or PyTorch on an H200.
"""

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kernels.logprob as logprob  # noqa: E402
import kernels.topk_topp as topk_topp  # noqa: E402
from harness.twin import load_twin  # noqa: E402

VOCAB = 151936
BATCHES = (64, 256, 1024)
TARGET_US = {
    "top-k (k=50)": (236, 516, 2049),
    "top-k + top-p 0.9": (252, 542, 2149),
    "token logprobs (6 ids)": (73, 169, 317),
    "ranks": (98, 104, 159),
}


def median_us(run, restore=None, reps=50, warmup=5):
    flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
    times = []
    for index in range(warmup + reps):
        if restore is not None:
            restore()
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        if index >= warmup:
            times.append(start.elapsed_time(end) * 1000)
    return statistics.median(times)


def torch_top_k(logits, k, p):
    kth = torch.topk(logits, int(k.max()), dim=-1).values.gather(1, (k.long() - 1)[:, None])
    logits.masked_fill_(logits < kth, float("-inf"))
    if p is not None:
        ordered, order = logits.sort(dim=-1, descending=False)
        cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
        drop = cumulative <= 1 - p[:, None]
        drop[:, -1] = False
        logits.scatter_(1, order, ordered.masked_fill(drop, float("-inf")))
    return logits


def cases(batch, module):
    generator = torch.Generator("cuda").manual_seed(batch)
    pristine = torch.randn(batch, VOCAB, device="cuda", generator=generator)
    logits = pristine.clone()
    k = torch.full((batch, ), 50, dtype=torch.int32, device="cuda")
    p = torch.full((batch, ), 0.9, device="cuda")
    ids = torch.randint(0, VOCAB, (batch, 6), device="cuda", generator=generator)
    ranks_ids = ids[:, 0].contiguous()

    def restore():
        logits.copy_(pristine)

    return {
        "top-k (k=50)": (lambda **kw: module[0].apply_top_k_top_p(logits, k, None, **kw),
                         lambda: torch_top_k(logits, k, None), restore, 2),
        "top-k + top-p 0.9": (lambda **kw: module[0].apply_top_k_top_p(logits, k, p, **kw),
                              lambda: torch_top_k(logits, k, p), restore, 2),
        "token logprobs (6 ids)": (
            lambda **kw: module[1].compute_token_logprobs(pristine, ids, **kw),
            lambda: torch.log_softmax(pristine, dim=-1).gather(1, ids), None, 1),
        "ranks": (lambda **kw: module[1].compute_token_ranks(pristine, ranks_ids, **kw),
                  lambda: (pristine >= pristine.gather(1, ranks_ids[:, None])).sum(-1), None, 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the table as Markdown here")
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmark: needs a CUDA device; none visible")
        return 2
    fixed = (topk_topp, logprob)
    twins = (load_twin(topk_topp), load_twin(logprob))
    header = ("| kernel | B | ours µs | GB/s | PyTorch µs | ours/PyTorch | int32 twin µs | "
              "int64/int32 | target µs | meets target | checked call µs |")
    lines = [f"GPU: {torch.cuda.get_device_name()}; V = {VOCAB}, fp32, median of {args.reps}",
             "", header, "|---" * 11 + "|"]
    for column, batch in enumerate(BATCHES):
        ours, twin = cases(batch, fixed), cases(batch, twins)
        for name, (run, baseline, restore, passes) in ours.items():
            unchecked = median_us(lambda: run(check_values=False), restore, args.reps)
            checked = median_us(run, restore, args.reps)
            reference = median_us(baseline, restore, args.reps)
            twin_run = twin[name][0]
            twin_us = median_us(lambda: twin_run(check_values=False), twin[name][2], args.reps)
            gbps = passes * batch * VOCAB * 4 / (unchecked * 1e-6) / 1e9
            target = TARGET_US[name][column]
            lines.append(
                f"| {name} | {batch} | {unchecked:.1f} | {gbps:.0f} | {reference:.1f} | "
                f"{unchecked / reference:.2f} | {twin_us:.1f} | {unchecked / twin_us:.3f} | "
                f"{target} | {'yes' if unchecked <= target else 'NO'} | {checked:.1f} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
