"""Time every kernel on the GPU against PyTorch and against its own int32 twin.

    python ci/benchmark.py [--out benchmark.md] [--reps 50] [--only NAME ...]

Each timing is the median of ``--reps`` launches measured with CUDA events, each after the L2
cache was flushed (a 256 MiB write) and, for in-place kernels, after the inputs were restored:
flush and restore lie outside the timed region.

"GPU µs" is device time: the device first waits (a ~2 ms spin) while the host queues the whole
call, so the events bracket the kernels and the gaps between them, not Python's launch cost.
"per call µs" is the same call timed without that wait: where the host takes longer to queue
the call than the flush takes to run, the host's time shows. Both run the launchers with
``check_values=False``; "checked call µs" times the default call, whose range checks read
values back to the host. Ours and the int32 twin are timed in alternating launches, so that
clock drift falls on both alike.
V = 151936, fp32. B is the number of logits rows; the rejection sampler gets B / 4 requests of
K = 3 drafts and a bonus row. Targets are the fastest figure measured for vLLM's kernels or
PyTorch on an H200.
"""

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.twin import load_twin  # noqa: E402

VOCAB = 151936
BATCHES = (64, 256, 1024)
STEPS = 3
MODULES = ("topk_topp", "logprob", "min_p", "gumbel", "penalties", "logit_bias", "bad_words",
           "rejection")
TARGET_US = {
    "top-k (k=50)": (236, 516, 2049),
    "top-k + top-p 0.9": (252, 542, 2149),
    "token logprobs (6 ids)": (73, 169, 317),
    "ranks": (98, 104, 159),
    "min_p": (74, 226, 481),
    "temperature": (25, 85, 324),
    "gumbel sample fp32": (73, 248, 948),
    "penalties": (46, 141, 569),
    "rejection_sample, draft logits, K=3": (55, 152, 522),
    "logit bias": (10, 10, 10),
    "bad words": (10, 10, 10),
}


HOST_COVER_CYCLES = 4_000_000  # ~2 ms at 1.98 GHz: longer than any launcher takes to queue


def _time_once(run, restore, flush, hide_host):
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
    return start.elapsed_time(end) * 1000


def median_us(runs, restore=None, reps=50, warmup=5, hide_host=True):
    """Median µs of each callable in ``runs``, timed in alternating order rep after rep."""
    flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
    times = [[] for _ in runs]
    for index in range(warmup + reps):
        order = list(range(len(runs)))
        if index % 2:
            order.reverse()
        for which in order:
            elapsed = _time_once(runs[which], restore, flush, hide_host)
            if index >= warmup:
                times[which].append(elapsed)
    return [statistics.median(each) for each in times]


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


def cases(batch, m):
    """name -> (ours(**kw), PyTorch or None, restore or None, bytes moved) for module set ``m``."""
    cuda = "cuda"
    generator = torch.Generator(cuda).manual_seed(batch)
    pristine = torch.randn(batch, VOCAB, device=cuda, generator=generator)
    logits = pristine.clone()
    size = batch * VOCAB * 4

    def restore():
        logits.copy_(pristine)

    k = torch.full((batch, ), 50, dtype=torch.int32, device=cuda)
    p = torch.full((batch, ), 0.9, device=cuda)
    ids = torch.randint(0, VOCAB, (batch, 6), device=cuda, generator=generator)
    rank_ids = ids[:, 0].contiguous()
    slots = batch
    mapping = torch.arange(batch, dtype=torch.int32, device=cuda)
    min_p = torch.full((slots, ), 0.05, device=cuda)
    temperature = torch.full((slots, ), 0.7, device=cuda)
    seed = torch.arange(slots, dtype=torch.int64, device=cuda)
    pos = torch.arange(batch, dtype=torch.int64, device=cuda)
    counts = torch.randint(0, 3, (slots, VOCAB), dtype=torch.int32, device=cuda, generator=generator)
    prompt_mask = torch.randint(-2**31, 2**31 - 1, (slots, VOCAB // 32), dtype=torch.int32,
                                device=cuda, generator=generator)
    penalty = [torch.full((slots, ), v, device=cuda) for v in (1.2, 0.3, 0.2)]
    zeros = torch.zeros(batch, dtype=torch.int32, device=cuda)
    table = torch.randint(0, VOCAB, (slots, 8), dtype=torch.int32, device=cuda, generator=generator)
    count8 = torch.full((slots, ), 8, dtype=torch.int32, device=cuda)
    bias_args = (mapping, pos, zeros[:slots], table, count8, table, torch.randn(slots, 8, device=cuda),
                 torch.full((slots, ), 2**30, dtype=torch.int32, device=cuda), count8, table)
    words = torch.randint(0, 4, (slots, 12), dtype=torch.int32, device=cuda, generator=generator)
    offsets = torch.arange(0, 13, 3, dtype=torch.int32, device=cuda).expand(slots, -1).contiguous()
    history = torch.randint(0, 4, (slots, 64), dtype=torch.int32, device=cuda, generator=generator)
    bad_args = dict(expanded_idx_mapping=mapping, bad_word_token_ids=words, bad_word_offsets=offsets,
                    num_bad_words=torch.full((slots, ), 4, dtype=torch.int32, device=cuda),
                    all_token_ids=history, prompt_len=torch.full((slots, ), 8, dtype=torch.int32, device=cuda),
                    total_len=torch.full((slots, ), 64, dtype=torch.int32, device=cuda),
                    input_ids=zeros, expanded_local_pos=zeros, max_num_bad_words=4)
    requests = batch // (STEPS + 1)
    request_slots = torch.arange(requests, dtype=torch.int32, device=cuda)
    draft_logits = torch.randn(requests, STEPS, VOCAB, device=cuda, generator=generator)
    rejection_args = dict(
        target_logits=pristine, draft_logits=draft_logits,
        draft_sampled=torch.randint(0, VOCAB, (batch, ), device=cuda, generator=generator),
        cu_num_logits=torch.arange(0, batch + 1, STEPS + 1, dtype=torch.int32, device=cuda),
        pos=pos, idx_mapping=request_slots,
        expanded_idx_mapping=request_slots.repeat_interleave(STEPS + 1),
        expanded_local_pos=(torch.arange(batch, device=cuda) % (STEPS + 1)).int(),
        temperature=torch.full((requests, ), 0.7, device=cuda),
        seed=torch.arange(requests, dtype=torch.int64, device=cuda), num_speculative_steps=STEPS)
    gumbel_noise = lambda: -torch.log(-torch.log(torch.rand_like(pristine)))  # noqa: E731
    return {
        "top-k (k=50)": (lambda **kw: m["topk_topp"].apply_top_k_top_p(logits, k, None, **kw),
                         lambda: torch_top_k(logits, k, None), restore, 2 * size),
        "top-k + top-p 0.9": (lambda **kw: m["topk_topp"].apply_top_k_top_p(logits, k, p, **kw),
                              lambda: torch_top_k(logits, k, p), restore, 2 * size),
        "token logprobs (6 ids)": (
            lambda **kw: m["logprob"].compute_token_logprobs(pristine, ids, **kw),
            lambda: torch.log_softmax(pristine, dim=-1).gather(1, ids), None, size),
        "ranks": (lambda **kw: m["logprob"].compute_token_ranks(pristine, rank_ids, **kw),
                  lambda: (pristine >= pristine.gather(1, rank_ids[:, None])).sum(-1), None, size),
        "min_p": (lambda **kw: m["min_p"].apply_min_p(logits, mapping, min_p, **kw),
                  lambda: logits.masked_fill_(
                      logits < logits.amax(-1, keepdim=True) + min_p[mapping.long()].log()[:, None],
                      float("-inf")), restore, 3 * size),
        "temperature": (lambda **kw: m["gumbel"].apply_temperature(logits, mapping, temperature, **kw),
                        lambda: logits.div_(temperature[mapping.long()][:, None]), restore, 2 * size),
        "gumbel sample fp32": (
            lambda **kw: m["gumbel"].gumbel_sample(pristine, mapping, temperature, seed, pos, True, **kw),
            lambda: (pristine / temperature[mapping.long()][:, None] + gumbel_noise()).argmax(-1),
            None, size),
        "penalties": (
            lambda **kw: m["penalties"].apply_penalties(logits, mapping, zeros, zeros, *penalty,
                                                        prompt_mask, counts, **kw),
            lambda: logits.sub_(0.3 * counts[mapping.long()] + 0.2 * (counts[mapping.long()] > 0)),
            restore, 3 * size),
        "rejection_sample, draft logits, K=3": (
            lambda **kw: m["rejection"].rejection_sample(**rejection_args, **kw), None, None,
            size + requests * STEPS * VOCAB * 4),
        "logit bias": (lambda **kw: m["logit_bias"].apply_logit_bias(logits, *bias_args, **kw),
                       lambda: logits.scatter_add_(1, table[mapping.long()].long(),
                                                   bias_args[6][mapping.long()]),
                       restore, batch * 8 * 16),
        "bad words": (lambda **kw: m["bad_words"].apply_bad_words(logits, **bad_args, **kw), None,
                      restore, batch * 64 * 4),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the table as Markdown here")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--only", nargs="*", default=None, help="kernel names to time")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmark: needs a CUDA device; none visible")
        return 2
    import importlib
    fixed = {name: importlib.import_module(f"kernels.{name}") for name in MODULES}
    twins = {name: load_twin(module) for name, module in fixed.items()}
    header = ("| kernel | B | GPU µs | GB/s | PyTorch GPU µs | ours/PyTorch | int32 twin GPU µs | "
              "int64/int32 | target µs | meets target | per call µs | checked call µs |")
    lines = [f"GPU: {torch.cuda.get_device_name()}; V = {VOCAB}, fp32, median of {args.reps}",
             "", header, "|---" * 12 + "|"]
    for column, batch in enumerate(BATCHES):
        ours, twin = cases(batch, fixed), cases(batch, twins)
        for name, (run, baseline, restore, moved) in ours.items():
            if args.only and name not in args.only:
                continue
            twin_run, _, twin_restore, _ = twin[name]
            both_restore = None if restore is None else lambda: (restore(), twin_restore())
            unchecked, twin_us = median_us(
                [lambda: run(check_values=False), lambda: twin_run(check_values=False)],
                both_restore, args.reps)
            reference = median_us([baseline], restore, args.reps)[0] if baseline else None
            per_call, checked = median_us([lambda: run(check_values=False), run], restore,
                                          args.reps, hide_host=False)
            target = TARGET_US[name][column]
            torch_cells = (f"{reference:.1f} | {unchecked / reference:.2f}" if reference
                           else "- | -")
            lines.append(
                f"| {name} | {batch} | {unchecked:.1f} | {moved / (unchecked * 1e-6) / 1e9:.0f} | "
                f"{torch_cells} | {twin_us:.1f} | {unchecked / twin_us:.3f} | {target} | "
                f"{'yes' if unchecked <= target else 'NO'} | {per_call:.1f} | {checked:.1f} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
