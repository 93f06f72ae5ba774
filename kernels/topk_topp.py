"""Exact top-k and top-p (nucleus) masking of logits (fp32, fp16 or bf16), in place.

For each row of ``logits [B, V]``:

1. top-k (when ``k[row] < V``) keeps every entry >= the k-th largest value, so ties at the
   cutoff are all kept, as a sort-based reference does;
2. top-p (when ``p[row] < 1``) then keeps, among the survivors, the smallest set of largest
   probabilities whose mass reaches ``p`` (at least one token; ties at the cutoff kept);
3. every other entry becomes ``mask_value``.

The cutoffs are exact. Values are mapped to uint32 keys whose integer order is the float order.

Passes over the logits (each reads the row; only the last writes):

- top-k with k <= SCRATCH / 2 (with or without top-p): three reads and one write. One pass
  estimates a floor above which about (k + SCRATCH) / 2 entries of Gaussian-like logits lie
  (mean and spread), a second gathers those entries into a per-program scratch row, and the
  k-th largest key (a most-significant-digit radix select, 8-bit digits) and the top-p cutoff
  (a 4-bit-digit radix descent on probability mass) are found in registers from there; the
  last pass masks. Rows where the floor misses (fewer than k or more than SCRATCH entries
  above it: ties, -inf, skewed logits) take the general path.
- general top-k (large k, or a missed floor): the radix select streams the row once per 8-bit
  digit, at most four times, stopping once the kept count is exact.
- top-p over more than SCRATCH survivors (top-p alone, or after a large k): four reads and one
  write for Gaussian-like rows. The softmax statistics of the survivors (max, sum of
  exponentials, count, smallest) in one pass; a histogram of WINDOW_BINS equal value bins over a
  window that surely holds the cutoff (below it the survivors weigh less than half of what top-p
  drops) in a second; the bins whose bounded, or estimated, mass reaches p * total are gathered
  with the exact mass above them in a third, and the mass descent finishes in registers. When
  those bins hold more than SCRATCH survivors the window narrows to them and is histogrammed
  again (at most WINDOWS histograms); when the exact masses refute the bins (a bracket that
  holds too many ties), the streamed descent takes over: one pass per 4-bit digit of the mass
  descent, eight in all.
- every path ends with one pass that reads the row and writes mask_value below the cutoff.

Rows with no finite entry are left unchanged by top-p. NaN logits are not supported.

Products that can exceed 2**31: ``row * logits_stride``, where ``row`` is the persistent loop's
variable (rows up to B - 1), and ``pid * SCRATCH`` in the scratch buffer.
"""

import torch
import triton
import triton.language as tl

from kernels._launch import check_int, check_logits, check_real, check_table, persistent_programs

LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
SCRATCH = 1024  # entries gathered into registers for the exact cutoffs
_BLOCK = 8192  # vocab entries per loop step
_MASS_BLOCK = 512  # vocab entries per step of the streamed top-p descent
_WINDOW_BINS = 1024  # bins of the value histograms that bracket a top-p cutoff
_WINDOWS = 3  # value histograms before a top-p cutoff falls back to the streamed descent
_NUM_WARPS = 8


@triton.jit
def _order_key(x):
    # fp32 -> uint32 whose unsigned order is the float order; -0.0 is folded into +0.0 first.
    bits = (x + 0.0).to(tl.int32, bitcast=True)
    signed_key = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    return (signed_key ^ -2147483648).to(tl.uint32, bitcast=True)


@triton.jit
def _same_prefix(key, prefix, LOW_BITS: tl.constexpr):
    # Whether key agrees with prefix above its LOW_BITS lowest bits (always, for all 32).
    if LOW_BITS >= 32:
        return key == key
    else:
        return (key >> LOW_BITS) == (prefix >> LOW_BITS)


@triton.jit
def _survivors(row_ptr, start, vocab_size, cutoff, BLOCK: tl.constexpr):
    # Entries [start, start + BLOCK) of the row in fp32 (-inf past its end), and which of them
    # survive: inside the row, with key >= cutoff (cutoff 0: all of them).
    offs = start + tl.arange(0, BLOCK)
    in_row = offs < vocab_size
    x = tl.load(row_ptr + offs, mask=in_row, other=float("-inf")).to(tl.float32)
    return x, in_row & (_order_key(x) >= cutoff)


@triton.jit
def _append(scratch_ptr, count, x, take, SCRATCH: tl.constexpr):
    # Store the entries of x where `take`, in order, after the first `count` of scratch (only
    # into its SCRATCH slots); return the new count, which may exceed SCRATCH.
    slot = count + tl.cumsum(take.to(tl.int32), 0) - 1
    tl.store(scratch_ptr + slot, x, mask=take & (slot < SCRATCH))
    return count + tl.sum(take.to(tl.int32), 0)


@triton.jit
def _pick_digit(hist, above, target):
    # Largest digit d with above + sum(hist[d:]) >= target, and the totals at d.
    digits = tl.arange(0, hist.shape[0])
    at_or_above = above + tl.cumsum(hist, 0, reverse=True)
    reaches = at_or_above >= target
    digit = tl.max(tl.where(reaches, digits, -1), 0)
    kept = tl.sum(tl.where(digits == digit, at_or_above, 0), 0)
    in_bucket = tl.sum(tl.where(digits == digit, hist, 0), 0)
    return digit, kept, in_bucket, tl.max(reaches.to(tl.int32), 0)


@triton.jit
def _top_k_cutoff(row_ptr, vocab_size, k, BLOCK: tl.constexpr):
    # Radix select of the k-th largest key, 8 bits a pass; returns the smallest kept key and
    # how many entries are kept (k plus the ties at the cutoff).
    prefix = tl.zeros((), dtype=tl.uint32)
    above = tl.zeros((), dtype=tl.int32)
    kept = tl.zeros((), dtype=tl.int32)
    exact = tl.zeros((), dtype=tl.int32)
    for level in tl.static_range(4):
        # Digit `level` sits at bits [24 - 8 * level, 32 - 8 * level); constexpr expressions stay
        # inline (a constexpr assigned inside a static loop is not constant-folded).
        if exact == 0:
            hist = tl.zeros((256, ), dtype=tl.int32)
            for start in range(0, vocab_size, BLOCK):
                x, in_row = _survivors(row_ptr, start, vocab_size, 0, BLOCK)
                key = _order_key(x)
                match = in_row & _same_prefix(key, prefix, 32 - 8 * level)
                digit = ((key >> (24 - 8 * level)) & 255).to(tl.int32)
                hist += tl.histogram(digit, 256, mask=match)
            digit, kept, in_bucket, _ = _pick_digit(hist, above, k)
            prefix = prefix | (digit.to(tl.uint32) << (24 - 8 * level))
            # Every key of this bucket is kept and none below it: the kept set is exact already.
            exact = (kept == k).to(tl.int32)
            above = kept - in_bucket
    return prefix, kept


@triton.jit
def _mass_histogram(x, key, match, top, SHIFT: tl.constexpr):
    # Probability mass (relative to exp(top)) of the matching entries, per 4-bit digit at SHIFT.
    bins = tl.arange(0, 16)
    weight = tl.where(match & (x > float("-inf")), tl.exp(x - top), 0.0)
    digit = ((key >> SHIFT) & 15).to(tl.int32)
    return tl.sum(tl.where(digit[:, None] == bins[None, :], weight[:, None], 0.0), 0)


@triton.jit
def _mass_step(hist, above, target, prefix, reached, SHIFT: tl.constexpr):
    # One level of the mass descent: fix the digit at SHIFT; a level that cannot reach the
    # target (rounding) clears `reached`.
    digit, kept, in_bucket, found = _pick_digit(hist, above, target)
    prefix = prefix | (tl.maximum(digit, 0).to(tl.uint32) << SHIFT)
    return prefix, kept - in_bucket, reached & found


@triton.jit
def _settle_cutoff(prefix, cutoff, reached, top):
    # Rounding can leave the whole mass a hair under p * total, and a row may have no finite
    # entry: keep every survivor then.
    return tl.where((reached != 0) & (top > float("-inf")), tl.maximum(prefix, cutoff), cutoff)


@triton.jit
def _gather(row_ptr, scratch_ptr, vocab_size, lowest, BLOCK: tl.constexpr, SCRATCH: tl.constexpr):
    # Copy the entries with key >= lowest into scratch (the first SCRATCH of them) and return
    # how many there are, which may exceed SCRATCH.
    tl.debug_barrier()
    count = tl.zeros((), dtype=tl.int32)
    for start in range(0, vocab_size, BLOCK):
        x, keep = _survivors(row_ptr, start, vocab_size, lowest, BLOCK)
        count = _append(scratch_ptr, count, x, keep, SCRATCH)
    tl.debug_barrier()
    return count


@triton.jit
def _top_k_cutoff_gathered(key, valid, k):
    # The radix select of _top_k_cutoff on a block held in registers (4 digits, no early exit).
    prefix = tl.zeros((), dtype=tl.uint32)
    above = tl.zeros((), dtype=tl.int32)
    kept = tl.zeros((), dtype=tl.int32)
    for level in tl.static_range(4):
        match = valid & _same_prefix(key, prefix, 32 - 8 * level)
        digit = ((key >> (24 - 8 * level)) & 255).to(tl.int32)
        hist = tl.histogram(digit, 256, mask=match)
        digit, kept, in_bucket, _ = _pick_digit(hist, above, k)
        prefix = prefix | (digit.to(tl.uint32) << (24 - 8 * level))
        above = kept - in_bucket
    return prefix, kept


@triton.jit
def _mass_descent(x, key, survivor, top, above, target):
    # Mass radix descent, 4 bits a level, over the survivors of a block in registers: the
    # largest key whose mass (relative to exp(top)), plus `above`, reaches target. Also whether
    # every level could reach it (rounding can leave the whole mass a hair under).
    prefix = tl.zeros((), dtype=tl.uint32)
    reached = tl.full((), 1, tl.int32)
    for level in tl.static_range(8):
        match = survivor & _same_prefix(key, prefix, 32 - 4 * level)
        hist = _mass_histogram(x, key, match, top, 28 - 4 * level)
        prefix, above, reached = _mass_step(hist, above, target, prefix, reached, 28 - 4 * level)
    return prefix, reached


@triton.jit
def _top_p_cutoff_gathered(x, key, valid, cutoff, p):
    # Top-p over the survivors (key >= cutoff) of a block in registers.
    survivor = valid & (key >= cutoff)
    top = tl.max(tl.where(survivor, x, float("-inf")), 0)
    total = tl.sum(tl.where(survivor & (x > float("-inf")), tl.exp(x - top), 0.0), 0)
    prefix, reached = _mass_descent(x, key, survivor, top, tl.zeros((), dtype=tl.float32),
                                    p * total)
    return _settle_cutoff(prefix, cutoff, reached, top)


@triton.jit
def _top_p_cutoff_streamed(row_ptr, vocab_size, cutoff, top, target, BLOCK: tl.constexpr):
    # The mass descent over the survivors (key >= cutoff, mass relative to exp(top)), streaming
    # the row once per 4-bit digit: for rows whose cutoff no gathered bracket settles.
    prefix = tl.zeros((), dtype=tl.uint32)
    above = tl.zeros((), dtype=tl.float32)
    reached = tl.full((), 1, tl.int32)
    for level in tl.static_range(8):
        hist = tl.zeros((16, ), dtype=tl.float32)
        for start in range(0, vocab_size, BLOCK):
            x, keep = _survivors(row_ptr, start, vocab_size, cutoff, BLOCK)
            key = _order_key(x)
            match = keep & _same_prefix(key, prefix, 32 - 4 * level)
            hist += _mass_histogram(x, key, match, top, 28 - 4 * level)
        prefix, above, reached = _mass_step(hist, above, target, prefix, reached, 28 - 4 * level)
    return _settle_cutoff(prefix, cutoff, reached, top)


@triton.jit
def _survivor_softmax(row_ptr, vocab_size, cutoff, BLOCK: tl.constexpr):
    # One pass over the survivors (key >= cutoff): their largest value `top`, their mass
    # sum(exp(x - top)) (rescaled as `top` grows), how many are finite and the smallest of those.
    top = tl.full((), float("-inf"), tl.float32)
    total = tl.zeros((), dtype=tl.float32)
    count = tl.zeros((), dtype=tl.int32)
    lowest = tl.full((), float("inf"), tl.float32)
    for start in range(0, vocab_size, BLOCK):
        x, keep = _survivors(row_ptr, start, vocab_size, cutoff, BLOCK)
        keep &= x > float("-inf")
        new_top = tl.maximum(top, tl.max(tl.where(keep, x, float("-inf")), 0))
        shift = tl.where(new_top > float("-inf"), new_top, 0.0)
        total = total * tl.exp(top - shift) + tl.sum(tl.where(keep, tl.exp(x - shift), 0.0), 0)
        top = new_top
        count += tl.sum(keep.to(tl.int32), 0)
        lowest = tl.minimum(lowest, tl.min(tl.where(keep, x, float("inf")), 0))
    return top, total, count, lowest


@triton.jit
def _value_bin(x, low, scale, BINS: tl.constexpr):
    # Bin of x among BINS equal bins from `low` up (scale = BINS / their width): -1 below them,
    # BINS above. Monotone in x, so every run of bins holds an interval of values.
    position = tl.minimum(tl.maximum((x - low) * scale, -1.0), BINS * 1.0)
    return tl.floor(position).to(tl.int32)


@triton.jit
def _window_histogram(row_ptr, vocab_size, cutoff, low, scale, top, BLOCK: tl.constexpr,
                      BINS: tl.constexpr):
    # One pass: the number of survivors in each bin, and the exact mass (relative to exp(top))
    # of the survivors above the bins.
    hist = tl.zeros((BINS, ), dtype=tl.int32)
    above = tl.zeros((), dtype=tl.float32)
    for start in range(0, vocab_size, BLOCK):
        x, keep = _survivors(row_ptr, start, vocab_size, cutoff, BLOCK)
        bin = _value_bin(x, low, scale, BINS)
        inside = keep & (bin >= 0) & (bin < BINS)
        hist += tl.histogram(tl.minimum(tl.maximum(bin, 0), BINS - 1), BINS, mask=inside)
        above += tl.sum(tl.where(keep & (bin >= BINS), tl.exp(x - top), 0.0), 0)
    return hist, above


@triton.jit
def _pick_bracket(hist, above, low, step, top, target, SCRATCH: tl.constexpr,
                  BINS: tl.constexpr):
    # Bins [first, last] that hold the top-p cutoff, and how many survivors they hold. Each
    # bin's mass lies between its count times exp of its edges, which bounds the bins that
    # can hold the cutoff; when those hold more than SCRATCH survivors, the bins where an
    # estimate of the mass reaches the target (checked after gathering).
    bins = tl.arange(0, BINS)
    edges = low + bins.to(tl.float32) * step - top
    counts = hist.to(tl.float32)
    surely_reaches = above + tl.cumsum(counts * tl.exp(edges - 0.01 * step), 0,
                                       reverse=True) >= target * (1.0 + 1e-5)
    may_reach = above + tl.cumsum(counts * tl.exp(edges + 1.01 * step), 0,
                                  reverse=True) >= target * (1.0 - 1e-5)
    first = tl.maximum(tl.max(tl.where(surely_reaches, bins, -1), 0), 0)
    last = tl.max(tl.where(may_reach, bins, -1), 0)
    held = tl.sum(tl.where((bins >= first) & (bins <= last), hist, 0), 0)
    if held > SCRATCH:
        # A bin's mass is about count * exp(centre). Its error is taken as that of one offset
        # shared by all its entries (ties, as fp16 and bf16 logits have, move together), spread
        # evenly over the bin: count * exp(centre) * step / sqrt(12). Keep the bins whose
        # estimated masses reach the target within four such standard deviations.
        centre_mass = counts * tl.exp(edges + 0.5 * step) * (1.0 + step * step / 24.0)
        variance = centre_mass * centre_mass * (step * step / 12.0)
        reached_at = above + tl.cumsum(centre_mass, 0, reverse=True)
        margin = 4.0 * tl.sqrt(tl.cumsum(variance, 0, reverse=True)) + 1e-5 * target
        candidate = (reached_at + margin >= target) & (reached_at - centre_mass - margin < target)
        first = tl.maximum(tl.min(tl.where(candidate, bins, BINS), 0), first)
        last = tl.minimum(tl.max(tl.where(candidate, bins, -1), 0), last)
        held = tl.sum(tl.where((bins >= first) & (bins <= last), hist, 0), 0)
    return first, last, held


@triton.jit
def _gather_bins(row_ptr, scratch_ptr, vocab_size, cutoff, low, scale, first, last, top,
                 BLOCK: tl.constexpr, SCRATCH: tl.constexpr, BINS: tl.constexpr):
    # Copy the survivors in bins [first, last] into scratch (the first SCRATCH of them); return
    # how many there are and the exact mass of the survivors above those bins.
    tl.debug_barrier()
    count = tl.zeros((), dtype=tl.int32)
    above = tl.zeros((), dtype=tl.float32)
    for start in range(0, vocab_size, BLOCK):
        x, keep = _survivors(row_ptr, start, vocab_size, cutoff, BLOCK)
        bin = _value_bin(x, low, scale, BINS)
        count = _append(scratch_ptr, count, x, keep & (bin >= first) & (bin <= last), SCRATCH)
        above += tl.sum(tl.where(keep & (bin > last), tl.exp(x - top), 0.0), 0)
    tl.debug_barrier()
    return count, above


@triton.jit
def _top_p_cutoff_bracketed(row_ptr, scratch_ptr, vocab_size, cutoff, p, BLOCK: tl.constexpr,
                            MASS_BLOCK: tl.constexpr, SCRATCH: tl.constexpr,
                            BINS: tl.constexpr, WINDOWS: tl.constexpr):
    # Top-p over many survivors (key >= cutoff) in a few streamed passes: their softmax
    # statistics; a histogram of a value window that surely holds the cutoff (narrowed and
    # repeated while the bracketing bins hold more than SCRATCH survivors, at most WINDOWS
    # times); a gather of those bins with the exact mass above them; the mass descent in
    # registers. A bracket the exact masses refute falls back to the streamed descent.
    top, total, count, lowest = _survivor_softmax(row_ptr, vocab_size, cutoff, BLOCK)
    result = cutoff
    if top > float("-inf"):
        target = p * total
        # Below `low` lie at most `count` survivors of mass < exp(low - top) each: half of what
        # top-p may drop at most, so the cutoff is not below low.
        low = tl.maximum(lowest, top + tl.log(0.5 * (1.0 - p) * total / count.to(tl.float32)))
        # Half a bin of headroom keeps `top` itself in the last bin.
        width = tl.maximum(top - low, 1e-30) * (BINS / (BINS - 0.5))
        scale = BINS / width
        first = tl.zeros((), dtype=tl.int32)
        last = tl.zeros((), dtype=tl.int32)
        held = tl.zeros((), dtype=tl.int32) + SCRATCH + 1
        for _ in range(0, WINDOWS):
            if held > SCRATCH:
                step = width / BINS
                scale = BINS / width
                hist, above = _window_histogram(row_ptr, vocab_size, cutoff, low, scale, top,
                                                BLOCK, BINS)
                first, last, held = _pick_bracket(hist, above, low, step, top, target, SCRATCH,
                                                  BINS)
                if held > SCRATCH:
                    # Half a bin of margin each side covers the rounding of the bin edges.
                    low = low + (first.to(tl.float32) - 0.5) * step
                    width = tl.maximum((last - first + 2).to(tl.float32) * step, 1e-30)
        settled = tl.zeros((), dtype=tl.int32)
        if held <= SCRATCH:
            gathered, above = _gather_bins(row_ptr, scratch_ptr, vocab_size, cutoff, low, scale,
                                           first, last, top, BLOCK, SCRATCH, BINS)
            lanes = tl.arange(0, SCRATCH)
            valid = lanes < gathered
            x = tl.load(scratch_ptr + lanes, mask=valid, other=float("-inf"))
            prefix, reached = _mass_descent(x, _order_key(x), valid, top, above, target)
            if (reached != 0) & (above < target) & (gathered <= SCRATCH):
                result = tl.maximum(prefix, cutoff)
                settled = settled + 1
        if settled == 0:
            result = _top_p_cutoff_streamed(row_ptr, vocab_size, cutoff, top, target, MASS_BLOCK)
    return result


@triton.jit
def _gather_floor(row_ptr, vocab_size, k, SCRATCH: tl.constexpr, BLOCK: tl.constexpr):
    # A key below which, for Gaussian-like logits, about (k + SCRATCH) / 2 entries lie: the
    # mean plus z standard deviations of the finite entries, with z the normal upper quantile
    # (Abramowitz and Stegun 26.2.23). Rows it misjudges fall back to the radix path.
    count = tl.zeros((), dtype=tl.float32)
    total = tl.zeros((), dtype=tl.float32)
    squares = tl.zeros((), dtype=tl.float32)
    for start in range(0, vocab_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + offs, mask=offs < vocab_size,
                    other=float("-inf")).to(tl.float32)
        finite = (x > float("-inf")) & (x < float("inf"))
        count += tl.sum(finite.to(tl.float32), 0)
        total += tl.sum(tl.where(finite, x, 0.0), 0)
        squares += tl.sum(tl.where(finite, x * x, 0.0), 0)
    mean = total / tl.maximum(count, 1.0)
    spread = tl.sqrt(tl.maximum(squares / tl.maximum(count, 1.0) - mean * mean, 0.0))
    tail = tl.minimum(((k + SCRATCH) // 2).to(tl.float32) / tl.maximum(count, 1.0), 0.5)
    t = tl.sqrt(-2.0 * tl.log(tail))
    z = t - (2.515517 + t * (0.802853 + t * 0.010328)) / (
        1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308)))
    return _order_key(mean + z * spread)


@triton.jit
def _top_k_top_p_kernel(
    logits_ptr,  # [n_rows, vocab_size] fp32 / fp16 / bf16, masked in place
    logits_stride,  # elements between rows
    k_ptr,  # [n_rows] int32; read only when TOPK_ENABLED
    p_ptr,  # [n_rows] fp32; read only when TOPP_ENABLED
    scratch_ptr,  # [num_programs, SCRATCH] fp32 per-program workspace
    n_rows,
    vocab_size,
    mask_value,  # fp32 written over the dropped entries
    BLOCK: tl.constexpr = 8192,
    MASS_BLOCK: tl.constexpr = 512,
    SCRATCH: tl.constexpr = 1024,
    WINDOW_BINS: tl.constexpr = 1024,
    WINDOWS: tl.constexpr = 3,
    TOPK_ENABLED: tl.constexpr = True,
    TOPP_ENABLED: tl.constexpr = True,
):
    pid = tl.program_id(0)
    # Widened: a program's scratch row starts at pid * SCRATCH.
    program_scratch = scratch_ptr + pid.to(tl.int64) * SCRATCH  # overflow-lint: pid * SCRATCH bounded by num_programs * SCRATCH
    lanes = tl.arange(0, SCRATCH)
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
        # 1. Small k: gather the entries above an estimated floor and select in registers.
        if k <= SCRATCH // 2:
            floor = tl.zeros((), dtype=tl.uint32)
            if vocab_size > SCRATCH:
                floor = _gather_floor(row_ptr, vocab_size, k, SCRATCH, BLOCK)
            gathered = _gather(row_ptr, program_scratch, vocab_size, floor, BLOCK, SCRATCH)
            if (gathered < k) | (gathered > SCRATCH):
                gathered = gathered * 0
        if gathered > 0:
            valid = lanes < gathered
            x = tl.load(program_scratch + lanes, mask=valid, other=float("-inf"))
            key = _order_key(x)
            cutoff, survivors = _top_k_cutoff_gathered(key, valid, k)
            if p < 1.0:
                cutoff = _top_p_cutoff_gathered(x, key, valid, cutoff, p)
        else:
            # 2. Otherwise radix select over the row, then top-p on the survivors.
            survivors = tl.zeros((), dtype=tl.int32) + vocab_size
            if k < vocab_size:
                cutoff, survivors = _top_k_cutoff(row_ptr, vocab_size, k, BLOCK)
            if p < 1.0:
                if survivors <= SCRATCH:
                    gathered = _gather(row_ptr, program_scratch, vocab_size, cutoff, BLOCK,
                                       SCRATCH)
                    valid = lanes < gathered
                    x = tl.load(program_scratch + lanes, mask=valid, other=float("-inf"))
                    cutoff = _top_p_cutoff_gathered(x, _order_key(x), valid, cutoff, p)
                else:
                    cutoff = _top_p_cutoff_bracketed(row_ptr, program_scratch, vocab_size, cutoff,
                                                     p, BLOCK, MASS_BLOCK, SCRATCH, WINDOW_BINS,
                                                     WINDOWS)
        # 3. Mask everything below the cutoff.
        if cutoff > 0:
            for start in range(0, vocab_size, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                in_row = offs < vocab_size
                key = _order_key(tl.load(row_ptr + offs, mask=in_row, other=0.0).to(tl.float32))
                tl.store(row_ptr + offs,
                         tl.full((BLOCK, ), mask_value, tl.float32).to(row_ptr.dtype.element_ty),
                         mask=in_row & (key < cutoff))


def apply_top_k_top_p(
    logits: torch.Tensor,
    k: torch.Tensor | None,
    p: torch.Tensor | None,
    mask_value: float = float("-inf"),
    *,
    num_programs: int | None = None,
    check_values: bool = True,
) -> torch.Tensor:
    """Mask ``logits [B, V]`` in place to the per-row top-k, then top-p, and return it.

    ``logits``: fp32, fp16 or bf16 (the cutoffs are computed in fp32).

    ``k``: int32 ``[B]`` (>= 1; ``k >= V`` keeps the whole row) or None. ``p``: fp32 ``[B]`` in
    ``(0, 1]`` (1 keeps the whole row) or None. ``num_programs`` sets the persistent grid;
    by default it fills the device. ``check_values=False`` skips the range checks of k and p,
    which read them back to the host (a synchronisation); out-of-range values can then give
    wrong masks but never an out-of-bounds access.
    """
    check_logits(logits, "logits", dtypes=LOGITS_DTYPES)
    n_rows, vocab_size = logits.shape
    check_real(mask_value, "mask_value")
    if num_programs is not None:
        check_int(num_programs, "num_programs", 1)
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
    programs = persistent_programs(logits.device, n_rows, num_programs)
    scratch = torch.empty((programs, SCRATCH), dtype=torch.float32, device=logits.device)
    _top_k_top_p_kernel[(programs, )](
        logits,
        logits.stride(0),
        k if k is not None else scratch,
        p if p is not None else scratch,
        scratch,
        n_rows,
        vocab_size,
        float(mask_value),
        BLOCK=_BLOCK,
        MASS_BLOCK=_MASS_BLOCK,
        SCRATCH=SCRATCH,
        WINDOW_BINS=_WINDOW_BINS,
        WINDOWS=_WINDOWS,
        TOPK_ENABLED=k is not None,
        TOPP_ENABLED=p is not None,
        num_warps=_NUM_WARPS,
    )
    return logits
