"""Exact top-k and top-p (nucleus) masking of logits (fp32, fp16 or bf16), in place.

For each row of ``logits [B, V]``:

1. top-k (when ``k[row] < V``) keeps every entry >= the k-th largest value, so ties at the
   cutoff are all kept, as a sort-based reference does;
2. top-p (when ``p[row] < 1``) then keeps, among the survivors, the smallest set of largest
   probabilities whose mass reaches ``p`` (at least one token; ties at the cutoff kept);
3. every other entry becomes ``mask_value``.

The cutoffs are exact. Values are mapped to uint32 keys whose integer order is the float order.

Passes over the logits (each streaming loop loads its next block before working on this one):

- top-k with k <= SCRATCH / 2 (with or without top-p): one read and one write, plus a sample.
  The mean and spread of FLOOR_CHUNKS runs of FLOOR_CHUNK entries spread over the row (about
  5% of a 151936-entry row, read in one load) give a floor above which about (k + SCRATCH) / 2
  entries of Gaussian-like logits lie; one pass gathers the entries above it, with their vocab
  ids, into a per-program scratch row; the k-th largest key (a most-significant-digit radix
  select, 8-bit digits) is found in registers from there, and the top-p cutoff by sorting the
  survivors' keys, largest first, and summing their probabilities in that order, as the
  sort-based reference does. Since scratch then holds every survivor, the last pass writes
  mask_value over the row without reading it and the survivors are stored back. Rows where the
  floor misses (fewer than k or more than SCRATCH entries above it: ties, -inf, skewed logits)
  take the general path.
- general top-k (large k, or a missed floor): the radix select streams the row once per 8-bit
  digit, at most four times, stopping once the kept count is exact. When at most SCRATCH
  entries survive and top-p follows, they are gathered and finished as above.
- top-p over more than SCRATCH survivors (top-p alone, or after a large k): a sample, then one
  pass takes the softmax statistics of the survivors (max, sum of exponentials, count,
  smallest) and gathers those above a floor (about 3/4 of TOP_P_SCRATCH of them) with their
  mass. On peaked rows that mass reaches p * total: the cutoff comes from sorting them, and
  the row is filled and restored as for top-k: one read and one write in all. On flat rows,
  where a Gaussian model of the sample puts the top-p set far below the floor, nothing is
  gathered (blocks with no entry above the floor skip the gather); instead the same pass
  histograms WINDOW_BINS equal value bins over the window around the model's cutoff that it
  fills with about GUESS_ENTRIES entries, with the exact mass above that window. When the
  bins' least masses show that the window holds the cutoff (normal-like rows), the bins
  whose bounded, or estimated, mass reaches p * total are gathered with the exact mass above
  them and sorted in registers: with the last pass, three reads and a write in all (where the
  sure window below took two more reads). Otherwise (the model misjudges
  the row) a window that surely holds the cutoff (below it the survivors weigh less than
  half of what top-p drops) is histogrammed in a pass of its own, one more read each time,
  WINDOWS histograms in all at most: while the bracketing bins hold more than SCRATCH
  survivors, the window narrows to them and is histogrammed again (a histogram's cost per
  entry grows with bins * log2(bins), so a few narrow ones are cheaper than one fine one).
  When the exact masses refute the bins (a bracket that holds too many ties), the streamed
  descent takes over: one pass per 4-bit digit of a radix descent on probability mass, eight
  in all. The last pass reads the row and writes mask_value below the cutoff.

Top-p alone on few rows (the split path: by default with no k table and at most half as many
rows as multiprocessors) cuts each row into parts, one program each, so that a small batch
fills the device: four launches over (row, part) or row. (1) The sample, then the softmax
statistics of the part with the gather above the floor (into a scratch row of its row's) and
the histogram of the guessed window (added to its row's). (2) Each program combines its row's
statistics; where the gathered entries do not already hold the top-p set and the guessed
window surely brackets the cutoff in at most SCRATCH survivors, it gathers those of its part,
with the mass above them. (3) One program a row sorts what its row gathered and checks the
cutoff as above. (4) Each part is masked as in the last pass above. The persistent kernel then
takes the rows the split path did not settle (a misjudged window, ties, a gather that misses),
from the start: one read more than on its own (three when a gathered bracket fails its
check). Flat rows: three reads and a write; peaked rows: one read and a write (the gather of
step 2 finds nothing to do).

Programs are persistent over the rows, one row at a time. When there are more programs than
multiprocessors, the launch caps the registers per thread (128, or 64 from three programs per
multiprocessor) and shortens the loop step (4096 or 2048 entries), so that two or four programs
run on each multiprocessor at once (8 warps each). While each program has one to itself, it
runs 16 warps, which leaves each thread 128 registers: the extra warps hide more of the
latency of the streaming loops than the resulting spills cost.

Rows with no finite entry are left unchanged by top-p. NaN logits are not supported.

Products that can exceed 2**31: ``row * logits_stride``, where ``row`` is the persistent loop's
variable (rows up to B - 1) or the split path's program id, and ``pid * TOP_P_SCRATCH`` in the
scratch buffers; in the split path, every per-row offset (the row is the program id).
"""

import torch
import triton
import triton.language as tl

from kernels._launch import (check_flag, check_int, check_logits, check_real, check_table,
                             multiprocessors, persistent_programs)
from kernels._topk_topp_cutoffs import (_floor_value, _gather, _gather_bins, _load_gathered,
                                       _mask_below, _order_key, _pick_bracket, _sample_moments,
                                       _surely_holds_cutoff, _survivor_softmax, _top_k_cutoff,
                                       _top_k_cutoff_gathered, _top_p_cutoff_bracketed,
                                       _top_p_cutoff_gathered, _top_p_cutoff_in_scratch,
                                       _top_p_floor)

LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
SCRATCH = 1024  # entries gathered into registers for the exact cutoffs
TOP_P_SCRATCH = 2048  # entries the top entries' gather of top-p may hold
_BLOCK = 8192  # vocab entries per loop step
_MASS_BLOCK = 512  # vocab entries per step of the streamed top-p descent
_WINDOW_BINS = 128  # bins of the value histograms that bracket a top-p cutoff
_WINDOWS = 5  # value histograms before a top-p cutoff falls back to the streamed descent
_GUESS_ENTRIES = 16384  # entries the first histogram of a flat row's top-p cutoff spans
_NUM_WARPS = 8  # when programs share multiprocessors
_UNSHARED_NUM_WARPS = 16  # when each program has one to itself: more warps hide more latency
# When programs share multiprocessors, a register cap (at some spilling; uncapped at 8 warps
# the in-register selects take 255 registers a thread, one program per multiprocessor) and
# smaller loop steps let two or four run on each at once:
# (programs per multiprocessor at least, loop step, registers per thread).
_SHARED_LAUNCHES = ((3, 2048, 64), (2, 4096, 128))
# The split top-p path: loop step and warps of its streaming kernels, warps of its sorts, and
# how many programs a multiprocessor it cuts rows for.
_SPLIT_BLOCK = 1024
_SPLIT_NUM_WARPS = 4
_SPLIT_SORT_NUM_WARPS = 8
_SPLIT_PROGRAMS_PER_MULTIPROCESSOR = 8


@triton.jit
def _top_k_top_p_kernel(
    logits_ptr,  # [n_rows, vocab_size] fp32 / fp16 / bf16, masked in place
    logits_stride,  # elements between rows
    k_ptr,  # [n_rows] int32; read only when TOPK_ENABLED
    p_ptr,  # [n_rows] fp32; read only when TOPP_ENABLED
    scratch_ptr,  # [num_programs, TOP_P_SCRATCH] fp32 per-program workspace: gathered values
    ids_ptr,  # [num_programs, TOP_P_SCRATCH] int32 per-program workspace: their vocab ids
    counter_ptr,  # [num_programs] int32 per-program workspace: how many were gathered
    n_rows,
    vocab_size,
    mask_value,  # fp32 written over the dropped entries
    BLOCK: tl.constexpr = 8192,
    MASS_BLOCK: tl.constexpr = 512,
    SCRATCH: tl.constexpr = 1024,
    TOP_P_SCRATCH: tl.constexpr = 2048,
    WINDOW_BINS: tl.constexpr = 128,
    WINDOWS: tl.constexpr = 5,
    GUESS_ENTRIES: tl.constexpr = 16384,
    FLOOR_CHUNKS: tl.constexpr = 8,
    FLOOR_CHUNK: tl.constexpr = 1024,
    TOPK_ENABLED: tl.constexpr = True,
    TOPP_ENABLED: tl.constexpr = True,
):
    pid = tl.program_id(0)
    # Widened: a program's scratch rows start at pid * TOP_P_SCRATCH.
    program_scratch = scratch_ptr + pid.to(tl.int64) * TOP_P_SCRATCH  # overflow-lint: pid * TOP_P_SCRATCH bounded by num_programs * TOP_P_SCRATCH
    program_ids = ids_ptr + pid.to(tl.int64) * TOP_P_SCRATCH  # overflow-lint: pid * TOP_P_SCRATCH bounded by num_programs * TOP_P_SCRATCH
    program_counter = counter_ptr + pid
    for row in tl.range(pid, n_rows, tl.num_programs(0)):
        # Widened: row * logits_stride passes 2**31 once B * V does.
        row_ptr = logits_ptr + tl.cast(row, tl.int64) * logits_stride
        k = vocab_size + 0 * row
        p = 1.0 + 0.0 * row
        if TOPK_ENABLED:
            k = tl.load(k_ptr + row)
        if TOPP_ENABLED:
            p = tl.load(p_ptr + row)
        cutoff = tl.zeros((), dtype=tl.uint32)
        gathered = tl.zeros((), dtype=tl.int32)
        # Whether scratch holds entries above a floor, whose k-th largest is still to select.
        select_gathered = gathered > 0
        # The constexpr flags leave out what a launch without k or p never runs.
        if TOPK_ENABLED:
            # 1. Small k: gather the entries above an estimated floor and select in registers.
            if k <= SCRATCH // 2:
                floor = tl.zeros((), dtype=tl.uint32)
                if vocab_size > SCRATCH:
                    mean, spread, finite = _sample_moments(row_ptr, vocab_size, FLOOR_CHUNKS,
                                                           FLOOR_CHUNK)
                    floor = _order_key(_floor_value(mean, spread, finite, (k + SCRATCH) // 2))
                gathered = _gather(row_ptr, program_scratch, program_ids, program_counter,
                                   vocab_size, floor, BLOCK, SCRATCH)
                if (gathered < k) | (gathered > SCRATCH):
                    gathered = gathered * 0
                select_gathered = gathered > 0
        if gathered == 0:
            # 2. Otherwise radix select over the row; with top-p, at most SCRATCH survivors (at
            # least one) are gathered.
            survivors = tl.zeros((), dtype=tl.int32) + vocab_size
            if TOPK_ENABLED:
                if k < vocab_size:
                    cutoff, survivors = _top_k_cutoff(row_ptr, vocab_size, k, BLOCK)
            if TOPP_ENABLED:
                if (p < 1.0) & (survivors <= SCRATCH):
                    gathered = _gather(row_ptr, program_scratch, program_ids, program_counter,
                                       vocab_size, cutoff, BLOCK, SCRATCH)
        # One call site each for the selects in registers: every inlined copy of one costs
        # compile time.
        if gathered > 0:
            x, _, valid = _load_gathered(program_scratch, program_ids, gathered, SCRATCH)
            if TOPK_ENABLED:
                if select_gathered:
                    cutoff, survivors = _top_k_cutoff_gathered(_order_key(x), valid, k)
            if TOPP_ENABLED:
                if p < 1.0:
                    cutoff = _top_p_cutoff_gathered(x, valid, cutoff, p)
        elif TOPP_ENABLED:
            if p < 1.0:
                # Top-p over more than SCRATCH survivors.
                mean, spread, finite = _sample_moments(row_ptr, vocab_size, FLOOR_CHUNKS,
                                                       FLOOR_CHUNK)
                floor, guess_low, guess_width = _top_p_floor(
                    mean, spread, finite, p, 3 * TOP_P_SCRATCH // 4, GUESS_ENTRIES)
                cutoff, gathered = _top_p_cutoff_bracketed(
                    row_ptr, program_scratch, program_ids, program_counter, vocab_size, cutoff,
                    floor, guess_low, guess_width, p, BLOCK, MASS_BLOCK, SCRATCH, TOP_P_SCRATCH,
                    WINDOW_BINS, WINDOWS)
        # 3. Mask everything below the cutoff.
        if cutoff > 0:
            _mask_below(row_ptr, program_scratch, program_ids, 0, vocab_size, cutoff, gathered,
                        mask_value, BLOCK, SCRATCH)


# What the split top-p statistics pass stores for each part of a row (fp32), at these offsets.
_PART_TOP = tl.constexpr(0)  # the largest survivor
_PART_TOTAL = tl.constexpr(1)  # the mass of the survivors, relative to exp(top)
_PART_ABOVE_FLOOR = tl.constexpr(2)  # that of the survivors at or above the floor
_PART_ABOVE_WINDOW = tl.constexpr(3)  # that of the survivors above the guessed window
_PART_FIELDS = tl.constexpr(4)
# How the split path settles a row (see _split_top_p_plan).
_UNSETTLED = tl.constexpr(0)
_IN_SCRATCH = tl.constexpr(1)
_BRACKETED = tl.constexpr(2)


@triton.jit
def _split_top_p_row(k_ptr, p_ptr, row, vocab_size, TOPK_ENABLED: tl.constexpr):
    # The row's p, and whether the split top-p path takes the row: top-p alone (p < 1, no k
    # below the vocabulary).
    p = tl.load(p_ptr + row)
    taken = p < 1.0
    if TOPK_ENABLED:
        taken &= tl.load(k_ptr + row) >= vocab_size
    return p, taken


@triton.jit
def _split_top_p_totals(statistics_ptr, row, parts, PARTS: tl.constexpr):
    # The split statistics pass's results for the row, combined over its parts: its top, and
    # the masses (relative to exp(top)) of its survivors, of those at or above the floor and of
    # those above the guessed window.
    lanes = tl.arange(0, PARTS)
    in_row = lanes < parts
    part_stats = statistics_ptr + (row * parts + lanes) * _PART_FIELDS
    tops = tl.load(part_stats + _PART_TOP, mask=in_row, other=float("-inf"))
    top = tl.max(tops, 0)
    rescale = tl.where(tops > float("-inf"), tl.exp(tops - top), 0.0)
    total = tl.sum(tl.load(part_stats + _PART_TOTAL, mask=in_row, other=0.0) * rescale, 0)
    above_floor = tl.sum(
        tl.load(part_stats + _PART_ABOVE_FLOOR, mask=in_row, other=0.0) * rescale, 0)
    above_window = tl.sum(
        tl.load(part_stats + _PART_ABOVE_WINDOW, mask=in_row, other=0.0) * rescale, 0)
    return top, total, above_floor, above_window


@triton.jit
def _split_top_p_plan(statistics_ptr, window_ptr, hist_ptr, counter_ptr, row, parts, p,
                      SCRATCH: tl.constexpr, TOP_P_SCRATCH: tl.constexpr, BINS: tl.constexpr,
                      PARTS: tl.constexpr):
    # How the split path settles the row: _IN_SCRATCH when the entries its statistics pass
    # gathered above the floor hold the top-p mass; else _BRACKETED when the guessed window
    # surely holds the cutoff in bins [first, last] that hold at most SCRATCH survivors (with
    # the window's low and scale); else _UNSETTLED. Every program of one launch computes the
    # same plan (sums in another launch's layout may round differently: it reads this one's).
    top, total, above_floor, above_window = _split_top_p_totals(statistics_ptr, row, parts, PARTS)
    target = p * total
    finite = top > float("-inf")
    in_scratch = finite & (tl.load(counter_ptr + 2 * row) <= TOP_P_SCRATCH) & (
        above_floor >= target)
    low = tl.load(window_ptr + 2 * row)
    width = tl.load(window_ptr + 2 * row + 1)
    scale = tl.where(width > 0.0, BINS / tl.maximum(width, 1e-30), 0.0)
    first = tl.zeros((), dtype=tl.int32)
    last = tl.zeros((), dtype=tl.int32)
    plan = tl.where(in_scratch, _IN_SCRATCH, _UNSETTLED)
    if finite & ~in_scratch & (width > 0.0):
        hist = tl.load(hist_ptr + row * BINS + tl.arange(0, BINS))
        step = width / BINS
        if _surely_holds_cutoff(hist, above_window, low, step, top, target, BINS):
            first, last, held = _pick_bracket(hist, above_window, low, step, top, target, SCRATCH,
                                              BINS)
            plan = tl.where(held <= SCRATCH, _BRACKETED, _UNSETTLED)
    return plan, top, low, scale, first, last


@triton.jit
def _split_part(logits_ptr, logits_stride, scratch_ptr, ids_ptr, vocab_size, part_length,
                TOP_P_SCRATCH: tl.constexpr):
    # This program's row of the split path (program id 0) and its part (program id 1): the
    # row, its logits, its scratch rows of values and ids, and the part's entries [begin, end).
    # Widened: every per-row offset; row * logits_stride passes 2**31 once B * V does.
    row = tl.program_id(0).to(tl.int64)
    begin = tl.program_id(1) * part_length  # overflow-lint: tl.program_id(1) * part_length bounded by vocab_size + part_length
    return (row, logits_ptr + row * logits_stride, scratch_ptr + row * TOP_P_SCRATCH,
            ids_ptr + row * TOP_P_SCRATCH, begin, tl.minimum(begin + part_length, vocab_size))


@triton.jit
def _split_top_p_statistics_kernel(
    logits_ptr,  # [n_rows, vocab_size] fp32 / fp16 / bf16
    logits_stride,
    k_ptr,  # [n_rows] int32; read only when TOPK_ENABLED
    p_ptr,  # [n_rows] fp32
    statistics_ptr,  # [n_rows, parts, _PART_FIELDS] fp32: written
    window_ptr,  # [n_rows, 2] fp32: the guessed window's low and width, written
    hist_ptr,  # [n_rows, WINDOW_BINS] int32, zeroed: the window's counts, added to
    scratch_ptr,  # [n_rows, TOP_P_SCRATCH] fp32: gathered values
    ids_ptr,  # [n_rows, TOP_P_SCRATCH] int32: their vocab ids
    counter_ptr,  # [n_rows, 2] int32, zeroed: how many were gathered (here, and by the bins)
    vocab_size,
    part_length,  # vocab entries of each part (the last one's may be fewer)
    BLOCK: tl.constexpr = _SPLIT_BLOCK,
    TOP_P_SCRATCH: tl.constexpr = 2048,
    WINDOW_BINS: tl.constexpr = 128,
    GUESS_ENTRIES: tl.constexpr = 16384,
    FLOOR_CHUNKS: tl.constexpr = 8,
    FLOOR_CHUNK: tl.constexpr = 1024,
    TOPK_ENABLED: tl.constexpr = False,
):
    row, row_ptr, row_scratch, row_ids, begin, end = _split_part(
        logits_ptr, logits_stride, scratch_ptr, ids_ptr, vocab_size, part_length, TOP_P_SCRATCH)
    part = tl.program_id(1)
    parts = tl.num_programs(1)
    p, taken = _split_top_p_row(k_ptr, p_ptr, row, vocab_size, TOPK_ENABLED)
    if taken:
        mean, spread, finite = _sample_moments(row_ptr, vocab_size, FLOOR_CHUNKS, FLOOR_CHUNK)
        floor, low, width = _top_p_floor(mean, spread, finite, p, 3 * TOP_P_SCRATCH // 4,
                                         GUESS_ENTRIES)
        scale = tl.where(width > 0.0, WINDOW_BINS / tl.maximum(width, 1e-30), 0.0)
        top, total, above_floor, _, _, hist, above_window = _survivor_softmax(
            row_ptr, row_scratch, row_ids, counter_ptr + 2 * row, begin, end,
            tl.zeros((), dtype=tl.uint32), floor, low, scale, BLOCK, TOP_P_SCRATCH, WINDOW_BINS)
        part_stats = statistics_ptr + (row * parts + part) * _PART_FIELDS
        tl.store(part_stats + _PART_TOP, top)
        tl.store(part_stats + _PART_TOTAL, total)
        tl.store(part_stats + _PART_ABOVE_FLOOR, above_floor)
        tl.store(part_stats + _PART_ABOVE_WINDOW, above_window)
        if scale > 0.0:
            tl.atomic_add(hist_ptr + row * WINDOW_BINS + tl.arange(0, WINDOW_BINS), hist,
                          sem="relaxed")
        if part == 0:
            tl.store(window_ptr + 2 * row, low)
            tl.store(window_ptr + 2 * row + 1, width)


@triton.jit
def _split_top_p_gather_kernel(
    logits_ptr, logits_stride, k_ptr, p_ptr, statistics_ptr, window_ptr, hist_ptr, scratch_ptr,
    ids_ptr, counter_ptr,
    above_ptr,  # [n_rows, parts] fp32: the mass above the gathered bins, written
    plan_ptr,  # [n_rows] int32: the row's plan, written
    vocab_size,
    part_length,
    BLOCK: tl.constexpr = _SPLIT_BLOCK,
    SCRATCH: tl.constexpr = 1024,
    TOP_P_SCRATCH: tl.constexpr = 2048,
    WINDOW_BINS: tl.constexpr = 128,
    PARTS: tl.constexpr = 128,
    TOPK_ENABLED: tl.constexpr = False,
):
    # For the rows whose guessed window brackets the cutoff: the survivors of the bracketing
    # bins in this part of the row into the row's scratch, and the mass above them.
    row, row_ptr, row_scratch, row_ids, begin, end = _split_part(
        logits_ptr, logits_stride, scratch_ptr, ids_ptr, vocab_size, part_length, TOP_P_SCRATCH)
    part = tl.program_id(1)
    parts = tl.num_programs(1)
    p, taken = _split_top_p_row(k_ptr, p_ptr, row, vocab_size, TOPK_ENABLED)
    if taken:
        plan, top, low, scale, first, last = _split_top_p_plan(
            statistics_ptr, window_ptr, hist_ptr, counter_ptr, row, parts, p, SCRATCH,
            TOP_P_SCRATCH, WINDOW_BINS, PARTS)
        if part == 0:
            tl.store(plan_ptr + row, plan)
        if plan == _BRACKETED:
            above = _gather_bins(row_ptr, row_scratch, row_ids, counter_ptr + 2 * row + 1, begin,
                                 end, tl.zeros((), dtype=tl.uint32), low, scale, first, last, top,
                                 BLOCK, SCRATCH, WINDOW_BINS)
            tl.store(above_ptr + row * parts + part, above)


@triton.jit
def _split_top_p_cutoff_kernel(
    k_ptr, p_ptr, statistics_ptr, scratch_ptr, ids_ptr, counter_ptr, above_ptr,
    plan_ptr,
    cutoff_ptr,  # [n_rows] int32: the cutoff key (0: the row is not settled here), written
    kept_ptr,  # [n_rows] int32: survivors scratch holds when it holds all of them, else 0
    rest_p_ptr,  # [n_rows] fp32: p for the rows left to the persistent kernel, 1 for the others
    vocab_size,
    parts,
    SCRATCH: tl.constexpr = 1024,
    TOP_P_SCRATCH: tl.constexpr = 2048,
    PARTS: tl.constexpr = 128,
    TOPK_ENABLED: tl.constexpr = False,
):
    # One program a row: the cutoff by a sort of what the row's scratch gathered, checked as
    # the persistent kernel checks it. Rows it does not settle keep their p in rest_p.
    # Widened: every offset below is per row, the largest row * TOP_P_SCRATCH. It passes 2**31
    # only past 2**20 rows, which no huge case holds: the marker exempts this widening from the
    # mutant test, not the product from the static check.
    row = tl.program_id(0).to(tl.int64)  # overflow-lint: row * TOP_P_SCRATCH bounded by n_rows * TOP_P_SCRATCH, below 2**31 up to 2**20 rows
    p, taken = _split_top_p_row(k_ptr, p_ptr, row, vocab_size, TOPK_ENABLED)
    cutoff = tl.zeros((), dtype=tl.uint32)
    kept = tl.zeros((), dtype=tl.int32)
    if taken:
        top, total, _, _ = _split_top_p_totals(statistics_ptr, row, parts, PARTS)
        target = p * total
        plan = tl.load(plan_ptr + row)
        row_scratch = scratch_ptr + row * TOP_P_SCRATCH
        row_ids = ids_ptr + row * TOP_P_SCRATCH
        if plan == _IN_SCRATCH:
            gathered = tl.load(counter_ptr + 2 * row)
            prefix, reached = _top_p_cutoff_in_scratch(row_scratch, row_ids, gathered, top,
                                                       tl.zeros((), dtype=tl.float32), target,
                                                       TOP_P_SCRATCH)
            if reached != 0:
                cutoff = prefix
                kept = gathered
        if plan == _BRACKETED:
            in_bins = tl.load(counter_ptr + 2 * row + 1)
            lanes = tl.arange(0, PARTS)
            above = tl.sum(tl.load(above_ptr + row * parts + lanes, mask=lanes < parts, other=0.0),
                           0)
            prefix, reached = _top_p_cutoff_in_scratch(row_scratch, row_ids, in_bins, top, above,
                                                       target, SCRATCH)
            if (reached != 0) & (above < target) & (in_bins <= SCRATCH):
                cutoff = prefix
    tl.store(cutoff_ptr + row, cutoff.to(tl.int32, bitcast=True))
    tl.store(kept_ptr + row, kept)
    tl.store(rest_p_ptr + row, tl.where(cutoff > 0, 1.0, p))


@triton.jit
def _split_top_p_mask_kernel(
    logits_ptr, logits_stride, scratch_ptr, ids_ptr, cutoff_ptr, kept_ptr,
    vocab_size,
    part_length,
    mask_value,
    BLOCK: tl.constexpr = _SPLIT_BLOCK,
    TOP_P_SCRATCH: tl.constexpr = 2048,
):
    # This part of each settled row masked below its cutoff.
    row, row_ptr, row_scratch, row_ids, begin, end = _split_part(
        logits_ptr, logits_stride, scratch_ptr, ids_ptr, vocab_size, part_length, TOP_P_SCRATCH)
    cutoff = tl.load(cutoff_ptr + row).to(tl.uint32, bitcast=True)
    if cutoff > 0:
        _mask_below(row_ptr, row_scratch, row_ids, begin, end, cutoff, tl.load(kept_ptr + row),
                    mask_value, BLOCK, TOP_P_SCRATCH)


def apply_top_k_top_p(
    logits: torch.Tensor,
    k: torch.Tensor | None,
    p: torch.Tensor | None,
    mask_value: float = float("-inf"),
    *,
    num_programs: int | None = None,
    split_rows: bool | None = None,
    check_values: bool = True,
) -> torch.Tensor:
    """Mask ``logits [B, V]`` in place to the per-row top-k, then top-p, and return it.

    ``logits``: fp32, fp16 or bf16 (the cutoffs are computed in fp32).

    ``k``: int32 ``[B]`` (>= 1; ``k >= V`` keeps the whole row) or None. ``p``: fp32 ``[B]`` in
    ``(0, 1]`` (1 keeps the whole row) or None. ``num_programs`` sets the persistent grid;
    by default it fills the device. ``split_rows`` says whether rows with top-p alone take
    the split path (their rows cut into parts, each its own program); by default they do
    when ``k`` is None and the rows are too few to fill the device (at least twice as many
    multiprocessors as rows; in the interpreter, up to two rows). Pass True for a batch
    with a ``k`` table whose rows mostly have top-p alone. Rows of at most SCRATCH entries
    never split: top-p gathers them whole. ``check_values=False`` skips the range checks of k and
    p, which read them back to the host (a synchronisation); out-of-range values can then
    give wrong masks but never an out-of-bounds access.
    """
    check_logits(logits, "logits", dtypes=LOGITS_DTYPES)
    n_rows, vocab_size = logits.shape
    check_real(mask_value, "mask_value")
    if num_programs is not None:
        check_int(num_programs, "num_programs", 1)
    if split_rows is not None:
        check_flag(split_rows, "split_rows")
    if k is not None:
        check_table(k, "k", n_rows, logits.device, (torch.int32, ))
        if check_values and n_rows and bool((k < 1).any()):
            raise ValueError(f"k must be >= 1 in every row; got min(k) = {int(k.min())}")
    if p is not None:
        check_table(p, "p", n_rows, logits.device, (torch.float32, ))
        if check_values and n_rows and bool(((p <= 0) | (p > 1) | p.isnan()).any()):
            bad = p[(p <= 0) | (p > 1) | p.isnan()][0].item()
            raise ValueError(f"p must lie in (0, 1] in every row; got {bad}")
    if n_rows == 0 or vocab_size == 0 or (k is None and p is None):
        return logits
    if _splits_rows(logits.device, n_rows, vocab_size, k, p, split_rows):
        p = _split_top_p(logits, k, p, float(mask_value))
    programs = persistent_programs(logits.device, n_rows, num_programs)
    launch = {"BLOCK": _BLOCK, "num_warps": _UNSHARED_NUM_WARPS}
    if logits.device.type == "cuda":
        sharing = triton.cdiv(programs, multiprocessors(logits.device))
        for least, block, registers in _SHARED_LAUNCHES:
            if sharing >= least:
                launch = {"BLOCK": block, "num_warps": _NUM_WARPS, "maxnreg": registers}
                break
    scratch = torch.empty((programs, TOP_P_SCRATCH), dtype=torch.float32, device=logits.device)
    ids = torch.empty((programs, TOP_P_SCRATCH), dtype=torch.int32, device=logits.device)
    counters = torch.empty((programs, ), dtype=torch.int32, device=logits.device)
    _top_k_top_p_kernel[(programs, )](
        logits,
        logits.stride(0),
        k if k is not None else scratch,
        p if p is not None else scratch,
        scratch,
        ids,
        counters,
        n_rows,
        vocab_size,
        float(mask_value),
        MASS_BLOCK=_MASS_BLOCK,
        SCRATCH=SCRATCH,
        TOP_P_SCRATCH=TOP_P_SCRATCH,
        WINDOW_BINS=_WINDOW_BINS,
        WINDOWS=_WINDOWS,
        GUESS_ENTRIES=_GUESS_ENTRIES,
        TOPK_ENABLED=k is not None,
        TOPP_ENABLED=p is not None,
        **launch,
    )
    return logits


def _splits_rows(device, n_rows, vocab_size, k, p, requested):
    """Whether the top-p-alone rows take the split path: asked for, or left to the default;
    never where top-p gathers whole rows (V <= SCRATCH)."""
    if p is None or vocab_size <= SCRATCH:
        return False
    if requested is not None:
        return requested
    if k is not None:
        return False  # its launches would cost rows that top-k settles more than they gain
    if device.type == "cuda":
        return 2 * n_rows <= multiprocessors(device)
    return n_rows <= 2


def _split_parts(device, n_rows, vocab_size):
    """Parts each row of the split top-p path is cut into, and their length (whole blocks)."""
    blocks = triton.cdiv(vocab_size, _SPLIT_BLOCK)
    if device.type == "cuda":
        wanted = triton.cdiv(_SPLIT_PROGRAMS_PER_MULTIPROCESSOR * multiprocessors(device), n_rows)
    else:
        wanted = 4  # the interpreter: a few parts, so that short rows split too
    length = triton.cdiv(blocks, min(max(wanted, 1), blocks)) * _SPLIT_BLOCK
    return triton.cdiv(vocab_size, length), length



def _split_top_p(logits, k, p, mask_value):
    """Settle the top-p-alone rows (k absent or >= V) by the split path; return the p that the
    persistent kernel still applies: 1 where the split path masked the row, p elsewhere."""
    n_rows, vocab_size = logits.shape
    device = logits.device
    parts, length = _split_parts(device, n_rows, vocab_size)
    # Lanes for the most parts a row of this vocabulary can have, so that one compile serves
    # every batch size.
    padded_parts = triton.next_power_of_2(triton.cdiv(vocab_size, _SPLIT_BLOCK))
    statistics = torch.empty((n_rows, parts, int(_PART_FIELDS)), dtype=torch.float32,
                             device=device)
    window = torch.empty((n_rows, 2), dtype=torch.float32, device=device)
    hist = torch.zeros((n_rows, _WINDOW_BINS), dtype=torch.int32, device=device)
    scratch = torch.empty((n_rows, TOP_P_SCRATCH), dtype=torch.float32, device=device)
    ids = torch.empty((n_rows, TOP_P_SCRATCH), dtype=torch.int32, device=device)
    counters = torch.zeros((n_rows, 2), dtype=torch.int32, device=device)
    above = torch.empty((n_rows, parts), dtype=torch.float32, device=device)
    plans = torch.empty((n_rows, ), dtype=torch.int32, device=device)
    cutoffs = torch.empty((n_rows, ), dtype=torch.int32, device=device)
    kept = torch.empty((n_rows, ), dtype=torch.int32, device=device)
    rest_p = torch.empty_like(p)
    k_table = k if k is not None else p
    split = {"BLOCK": _SPLIT_BLOCK, "num_warps": _SPLIT_NUM_WARPS}
    _split_top_p_statistics_kernel[(n_rows, parts)](
        logits, logits.stride(0), k_table, p, statistics, window, hist, scratch, ids, counters,
        vocab_size, length, TOP_P_SCRATCH=TOP_P_SCRATCH, WINDOW_BINS=_WINDOW_BINS,
        GUESS_ENTRIES=_GUESS_ENTRIES, FLOOR_CHUNKS=8, FLOOR_CHUNK=1024,
        TOPK_ENABLED=k is not None, **split)
    _split_top_p_gather_kernel[(n_rows, parts)](
        logits, logits.stride(0), k_table, p, statistics, window, hist, scratch, ids, counters,
        above, plans, vocab_size, length, SCRATCH=SCRATCH, TOP_P_SCRATCH=TOP_P_SCRATCH,
        WINDOW_BINS=_WINDOW_BINS, PARTS=padded_parts, TOPK_ENABLED=k is not None, **split)
    _split_top_p_cutoff_kernel[(n_rows, )](
        k_table, p, statistics, scratch, ids, counters, above, plans, cutoffs, kept, rest_p,
        vocab_size, parts, SCRATCH=SCRATCH, TOP_P_SCRATCH=TOP_P_SCRATCH, PARTS=padded_parts,
        TOPK_ENABLED=k is not None,
        num_warps=_SPLIT_SORT_NUM_WARPS)
    _split_top_p_mask_kernel[(n_rows, parts)](
        logits, logits.stride(0), scratch, ids, cutoffs, kept, vocab_size, length, mask_value,
        TOP_P_SCRATCH=TOP_P_SCRATCH, **split)
    return rest_p
