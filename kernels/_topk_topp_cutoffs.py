"""The cutoff helpers of ``kernels.topk_topp``: order keys, streamed blocks, the gathers into
scratch, the radix selects, the top-p sorts, value histograms and brackets, the floor model and
the masking pass. Every function here is inlined into the family's kernels, none is launched,
and none computes a row offset: each takes its row's pointer (or its scratch rows) already
offset, so the family's int64 widenings all sit in ``kernels/topk_topp.py``.
"""

import triton
import triton.language as tl


@triton.jit
def _order_key(x):
    # fp32 -> uint32 whose unsigned order is the float order; -0.0 is folded into +0.0 first.
    bits = (x + 0.0).to(tl.int32, bitcast=True)
    signed_key = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    return (signed_key ^ -2147483648).to(tl.uint32, bitcast=True)


@triton.jit
def _key_value(key):
    # The fp32 value whose _order_key is `key` (key 0: -inf), so that streaming passes compare
    # floats, x >= _key_value(key) exactly when _order_key(x) >= key, instead of keying every
    # entry. Exact for the keys of non-NaN values, which every cutoff is.
    signed_key = key.to(tl.int32, bitcast=True) ^ -2147483648
    bits = signed_key ^ ((signed_key >> 31) & 0x7FFFFFFF)
    return tl.where(key == 0, float("-inf"), bits.to(tl.float32, bitcast=True))


@triton.jit
def _digit_at(key, shift, DIGIT_BITS: tl.constexpr):
    # The DIGIT_BITS-bit digit of key at bit `shift`.
    return ((key >> tl.cast(shift, tl.uint32)) & ((1 << DIGIT_BITS) - 1)).to(tl.int32)


@triton.jit
def _digit_mask(shift, DIGIT_BITS: tl.constexpr):
    # The bits of the digit at `shift`, as a uint32 mask.
    return tl.full((), (1 << DIGIT_BITS) - 1, tl.uint32) << tl.cast(shift, tl.uint32)


@triton.jit
def _block(row_ptr, start, vocab_size, BLOCK: tl.constexpr):
    # Entries [start, start + BLOCK) of the row as stored (-inf past its end). Each streaming
    # loop loads the next block before it works on this one, so the load's latency overlaps
    # that work.
    offs = start + tl.arange(0, BLOCK)
    return tl.load(row_ptr + offs, mask=offs < vocab_size, other=float("-inf"))


@triton.jit
def _survivors(block, start, vocab_size, cutoff, BLOCK: tl.constexpr):
    # The block at `start` in fp32, which of its entries survive (inside the row, with key >=
    # cutoff; cutoff 0: all of them), and their vocab ids.
    offs = start + tl.arange(0, BLOCK)
    x = block.to(tl.float32)
    return x, (offs < vocab_size) & (x >= _key_value(cutoff)), offs


@triton.jit
def _start_gather(counter_ptr):
    # Empty the scratch rows: their counter goes back to 0 before any entry is appended.
    tl.debug_barrier()
    tl.atomic_xchg(counter_ptr, 0, sem="relaxed")
    tl.debug_barrier()


@triton.jit
def _append(scratch_ptr, ids_ptr, counter_ptr, x, offs, take, SCRATCH: tl.constexpr):
    # Store the entries of x where `take`, and their vocab ids, into the scratch rows (only
    # into their SCRATCH slots). Each takes the next slot from the counter, so the order of
    # the slots is not the vocab order; the counter may pass SCRATCH. Much cheaper than a
    # prefix sum over every entry, as few entries are taken.
    slot = tl.atomic_add(counter_ptr + tl.zeros_like(offs), 1, mask=take, sem="relaxed")
    stored = take & (slot < SCRATCH)
    tl.store(scratch_ptr + slot, x, mask=stored)
    tl.store(ids_ptr + slot, offs, mask=stored)


@triton.jit
def _end_gather(counter_ptr):
    # How many entries were appended since _start_gather (it may exceed SCRATCH).
    tl.debug_barrier()
    count = tl.atomic_add(counter_ptr, 0, sem="relaxed")
    tl.debug_barrier()
    return count


@triton.jit
def _load_gathered(scratch_ptr, ids_ptr, count, SCRATCH: tl.constexpr):
    # The first `count` entries of the scratch rows (-inf in the other lanes), their ids, and
    # which lanes hold one.
    lanes = tl.arange(0, SCRATCH)
    valid = lanes < count
    x = tl.load(scratch_ptr + lanes, mask=valid, other=float("-inf"))
    return x, tl.load(ids_ptr + lanes, mask=valid, other=0), valid


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
    # `fixed` holds the bits of the digits chosen so far, `prefix` their values. A loop at run
    # time, not a static one: each copy of the streaming loop costs compile time.
    prefix = tl.zeros((), dtype=tl.uint32)
    fixed = tl.zeros((), dtype=tl.uint32)
    above = tl.zeros((), dtype=tl.int32)
    kept = tl.zeros((), dtype=tl.int32)
    exact = tl.zeros((), dtype=tl.int32)
    for shift in range(24, -8, -8):
        if exact == 0:
            hist = tl.zeros((256, ), dtype=tl.int32)
            following = _block(row_ptr, 0, vocab_size, BLOCK)
            for start in range(0, vocab_size, BLOCK):
                block = following
                following = _block(row_ptr, start + BLOCK, vocab_size, BLOCK)
                x, in_row, _ = _survivors(block, start, vocab_size, prefix & 0, BLOCK)
                key = _order_key(x)
                match = in_row & ((key & fixed) == prefix)
                hist += tl.histogram(_digit_at(key, shift, 8), 256, mask=match)
            digit, kept, in_bucket, _ = _pick_digit(hist, above, k)
            prefix = prefix | (digit.to(tl.uint32) << tl.cast(shift, tl.uint32))
            fixed = fixed | _digit_mask(shift, 8)
            # Every key of this bucket is kept and none below it: the kept set is exact already.
            exact = (kept == k).to(tl.int32)
            above = kept - in_bucket
    return prefix, kept


@triton.jit
def _mass_histogram(x, key, match, top, shift):
    # Probability mass (relative to exp(top)) of the matching entries, per 4-bit digit at
    # `shift`.
    bins = tl.arange(0, 16)
    weight = tl.where(match & (x > float("-inf")), tl.exp(x - top), 0.0)
    digit = _digit_at(key, shift, 4)
    return tl.sum(tl.where(digit[:, None] == bins[None, :], weight[:, None], 0.0), 0)


@triton.jit
def _mass_step(hist, above, target, prefix, reached, shift):
    # One level of the mass descent: fix the digit at `shift`; a level that cannot reach the
    # target (rounding) clears `reached`.
    digit, kept, in_bucket, found = _pick_digit(hist, above, target)
    prefix = prefix | (tl.maximum(digit, 0).to(tl.uint32) << tl.cast(shift, tl.uint32))
    return prefix, kept - in_bucket, reached & found


@triton.jit
def _settle_cutoff(prefix, cutoff, reached, top):
    # Rounding can leave the whole mass a hair under p * total, and a row may have no finite
    # entry: keep every survivor then.
    return tl.where((reached != 0) & (top > float("-inf")), tl.maximum(prefix, cutoff), cutoff)


@triton.jit
def _gather(row_ptr, scratch_ptr, ids_ptr, counter_ptr, vocab_size, lowest, BLOCK: tl.constexpr,
            SCRATCH: tl.constexpr):
    # Copy the entries with key >= lowest, and their vocab ids, into scratch (SCRATCH of them
    # at most) and return how many there are, which may exceed SCRATCH.
    _start_gather(counter_ptr)
    following = _block(row_ptr, 0, vocab_size, BLOCK)
    for start in range(0, vocab_size, BLOCK):
        block = following
        following = _block(row_ptr, start + BLOCK, vocab_size, BLOCK)
        x, keep, offs = _survivors(block, start, vocab_size, lowest, BLOCK)
        _append(scratch_ptr, ids_ptr, counter_ptr, x, offs, keep, SCRATCH)
    return _end_gather(counter_ptr)


@triton.jit
def _top_k_cutoff_gathered(key, valid, k):
    # The radix select of _top_k_cutoff on a block held in registers (4 digits, no early exit).
    prefix = tl.zeros((), dtype=tl.uint32)
    fixed = tl.zeros((), dtype=tl.uint32)
    above = tl.zeros((), dtype=tl.int32)
    kept = tl.zeros((), dtype=tl.int32)
    for shift in range(24, -8, -8):
        match = valid & ((key & fixed) == prefix)
        hist = tl.histogram(_digit_at(key, shift, 8), 256, mask=match)
        digit, kept, in_bucket, _ = _pick_digit(hist, above, k)
        prefix = prefix | (digit.to(tl.uint32) << tl.cast(shift, tl.uint32))
        fixed = fixed | _digit_mask(shift, 8)
        above = kept - in_bucket
    return prefix, kept


@triton.jit
def _in_descending_order(x, valid):
    # The keys of the valid lanes, largest first (key 0, below every value's, in the others).
    return tl.sort(tl.where(valid, _order_key(x), 0), 0, descending=True)


@triton.jit
def _top_p_cutoff_sorted(keys, top, above, target):
    # Over keys in descending order (0: no entry): the largest key whose mass (relative to
    # exp(top)) from the top down, plus `above`, reaches target, summed largest first as the
    # sort-based reference does; and whether the whole mass reaches it (rounding can leave it a
    # hair under). Equal keys weigh the same, so the order among ties does not change the sums.
    # Only lanes that hold an entry count: a parallel scan can round the running sum at the
    # empty lanes past the last entry up to a target that the last entry's sum misses.
    lanes = tl.arange(0, keys.shape[0])
    x = _key_value(keys)
    mass = above + tl.cumsum(tl.where(x > float("-inf"), tl.exp(x - top), 0.0), 0)
    first = tl.min(tl.where((mass >= target) & (keys > 0), lanes, keys.shape[0]), 0)
    cutoff = tl.max(tl.where(lanes == first, keys, 0), 0)
    return cutoff, (first < keys.shape[0]).to(tl.int32)


@triton.jit
def _top_p_cutoff_in_scratch(scratch_ptr, ids_ptr, count, top, above, target,
                             LANES: tl.constexpr):
    # _top_p_cutoff_sorted over the first `count` entries of the scratch rows.
    x, _, valid = _load_gathered(scratch_ptr, ids_ptr, count, LANES)
    return _top_p_cutoff_sorted(_in_descending_order(x, valid), top, above, target)


@triton.jit
def _top_p_cutoff_gathered(x, valid, cutoff, p):
    # Top-p over the survivors (key >= cutoff) of the gathered entries in registers.
    keys = _in_descending_order(x, valid & (_order_key(x) >= cutoff))
    top = _key_value(tl.max(keys, 0))
    values = _key_value(keys)
    total = tl.sum(tl.where(values > float("-inf"), tl.exp(values - top), 0.0), 0)
    prefix, reached = _top_p_cutoff_sorted(keys, top, tl.zeros((), dtype=tl.float32), p * total)
    return _settle_cutoff(prefix, cutoff, reached, top)


@triton.jit
def _top_p_cutoff_streamed(row_ptr, vocab_size, cutoff, top, target, BLOCK: tl.constexpr):
    # The mass descent over the survivors (key >= cutoff, mass relative to exp(top)), streaming
    # the row once per 4-bit digit: for rows whose cutoff no gathered bracket settles.
    prefix = tl.zeros((), dtype=tl.uint32)
    fixed = tl.zeros((), dtype=tl.uint32)
    above = tl.zeros((), dtype=tl.float32)
    reached = tl.full((), 1, tl.int32)
    for shift in range(28, -4, -4):
        hist = tl.zeros((16, ), dtype=tl.float32)
        following = _block(row_ptr, 0, vocab_size, BLOCK)
        for start in range(0, vocab_size, BLOCK):
            block = following
            following = _block(row_ptr, start + BLOCK, vocab_size, BLOCK)
            x, keep, _ = _survivors(block, start, vocab_size, cutoff, BLOCK)
            key = _order_key(x)
            hist += _mass_histogram(x, key, keep & ((key & fixed) == prefix), top, shift)
        prefix, above, reached = _mass_step(hist, above, target, prefix, reached, shift)
        fixed = fixed | _digit_mask(shift, 4)
    return _settle_cutoff(prefix, cutoff, reached, top)


@triton.jit
def _value_bin(x, low, scale, BINS: tl.constexpr):
    # Bin of x among BINS equal bins from `low` up (scale = BINS / their width): -1 below them,
    # BINS above. Monotone in x, so every run of bins holds an interval of values.
    position = tl.minimum(tl.maximum((x - low) * scale, -1.0), BINS * 1.0)
    return tl.floor(position).to(tl.int32)


@triton.jit
def _window_counts(x, keep, weight, low, scale, BINS: tl.constexpr):
    # Of one block: how many kept entries fall in each of BINS bins from `low` up, and the sum
    # of `weight` over the kept entries above the bins.
    bin = _value_bin(x, low, scale, BINS)
    inside = keep & (bin >= 0) & (bin < BINS)
    counts = tl.histogram(tl.minimum(tl.maximum(bin, 0), BINS - 1), BINS, mask=inside)
    return counts, tl.sum(tl.where(keep & (bin >= BINS), weight, 0.0), 0)


@triton.jit
def _survivor_softmax(row_ptr, scratch_ptr, ids_ptr, counter_ptr, begin, end, cutoff, floor,
                      guess_low, guess_scale, BLOCK: tl.constexpr, SCRATCH: tl.constexpr,
                      BINS: tl.constexpr):
    # One pass over the survivors (key >= cutoff) among entries [begin, end) of the row: their
    # largest value `top`, their mass sum(exp(x - top)) and that of those with key >= floor
    # (rescaled as `top` grows), how many are finite and the smallest of those. The finite
    # survivors with key >= floor, and their vocab ids, are appended to scratch (SCRATCH of
    # them at most). With guess_scale > 0, also the _window_counts of the window of BINS bins
    # from guess_low (the mass above it rescaled as `top` grows).
    top = tl.full((), float("-inf"), tl.float32)
    total = tl.zeros((), dtype=tl.float32)
    total_above_floor = tl.zeros((), dtype=tl.float32)
    count = tl.zeros((), dtype=tl.int32)
    lowest = tl.full((), float("inf"), tl.float32)
    hist = tl.zeros((BINS, ), dtype=tl.int32)
    above_window = tl.zeros((), dtype=tl.float32)
    following = _block(row_ptr, begin, end, BLOCK)
    for start in range(begin, end, BLOCK):
        block = following
        following = _block(row_ptr, start + BLOCK, end, BLOCK)
        x, keep, offs = _survivors(block, start, end, cutoff, BLOCK)
        keep &= x > float("-inf")
        # Joined pairs halve the block reductions (each meets at a barrier): top and -least,
        # mass and count.
        block_top, block_least = tl.split(tl.max(tl.join(tl.where(keep, x, float("-inf")),
                                                         tl.where(keep, -x, float("-inf"))), 0))
        new_top = tl.maximum(top, block_top)
        shift = tl.where(new_top > float("-inf"), new_top, 0.0)
        rescale = tl.exp(top - shift)
        weight = tl.where(keep, tl.exp(x - shift), 0.0)
        block_total, block_count = tl.split(tl.sum(tl.join(weight, keep.to(tl.float32)), 0))
        total = total * rescale + block_total
        total_above_floor = total_above_floor * rescale
        above_window = above_window * rescale
        # Most blocks of flat rows hold nothing at or above the floor: skip the gather there.
        if block_top >= _key_value(floor):
            above_floor = keep & (x >= _key_value(floor))
            _append(scratch_ptr, ids_ptr, counter_ptr, x, offs, above_floor, SCRATCH)
            total_above_floor += tl.sum(tl.where(above_floor, weight, 0.0), 0)
        if guess_scale > 0.0:
            counts, mass_above = _window_counts(x, keep, weight, guess_low, guess_scale, BINS)
            hist += counts
            above_window += mass_above
        top = new_top
        count += block_count.to(tl.int32)
        lowest = tl.minimum(lowest, -block_least)
    return top, total, total_above_floor, count, lowest, hist, above_window


@triton.jit
def _window_histogram(row_ptr, vocab_size, cutoff, low, scale, top, BLOCK: tl.constexpr,
                      BINS: tl.constexpr):
    # One pass: the number of survivors in each bin, and the exact mass (relative to exp(top))
    # of the survivors above the bins.
    hist = tl.zeros((BINS, ), dtype=tl.int32)
    above = tl.zeros((), dtype=tl.float32)
    following = _block(row_ptr, 0, vocab_size, BLOCK)
    for start in range(0, vocab_size, BLOCK):
        block = following
        following = _block(row_ptr, start + BLOCK, vocab_size, BLOCK)
        x, keep, _ = _survivors(block, start, vocab_size, cutoff, BLOCK)
        counts, mass_above = _window_counts(x, keep, tl.exp(x - top), low, scale, BINS)
        hist += counts
        above += mass_above
    return hist, above


@triton.jit
def _least_bin_masses(hist, low, step, top, BINS: tl.constexpr):
    # The least mass (relative to exp(top)) each histogrammed bin can hold: its count times exp
    # of its lower edge, less a hundredth of a bin for the rounding of the edges.
    edges = low + tl.arange(0, BINS).to(tl.float32) * step - top
    return hist.to(tl.float32) * tl.exp(edges - 0.01 * step)


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
    surely_reaches = above + tl.cumsum(_least_bin_masses(hist, low, step, top, BINS), 0,
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
def _gather_bins(row_ptr, scratch_ptr, ids_ptr, counter_ptr, begin, end, cutoff, low, scale,
                 first, last, top, BLOCK: tl.constexpr, SCRATCH: tl.constexpr,
                 BINS: tl.constexpr):
    # Append the survivors in bins [first, last] among entries [begin, end) of the row, and
    # their vocab ids, to scratch (SCRATCH of them at most); return the exact mass of the
    # survivors above those bins.
    above = tl.zeros((), dtype=tl.float32)
    following = _block(row_ptr, begin, end, BLOCK)
    for start in range(begin, end, BLOCK):
        block = following
        following = _block(row_ptr, start + BLOCK, end, BLOCK)
        x, keep, offs = _survivors(block, start, end, cutoff, BLOCK)
        bin = _value_bin(x, low, scale, BINS)
        _append(scratch_ptr, ids_ptr, counter_ptr, x, offs, keep & (bin >= first) & (bin <= last),
                SCRATCH)
        above += tl.sum(tl.where(keep & (bin > last), tl.exp(x - top), 0.0), 0)
    return above


@triton.jit
def _surely_holds_cutoff(hist, above, low, step, top, target, BINS: tl.constexpr):
    # Whether a histogrammed window surely holds the top-p cutoff: the mass above it falls short
    # of the target, and the least mass its bins can hold (the bound _pick_bracket takes) makes
    # up the rest.
    least = tl.sum(_least_bin_masses(hist, low, step, top, BINS), 0)
    return (above < target) & (above + least >= target * (1.0 + 1e-5))


@triton.jit
def _gather_bracket(row_ptr, scratch_ptr, ids_ptr, counter_ptr, vocab_size, cutoff, lowest, count,
                    total, hist, above, guess_low, guess_width, guess_scale, top, target, p,
                    BLOCK: tl.constexpr, SCRATCH: tl.constexpr, BINS: tl.constexpr,
                    WINDOWS: tl.constexpr):
    # A value window that holds the top-p cutoff (the guessed one, histogrammed as `hist` and
    # `above`, when it surely does), narrowed and histogrammed again while the bracketing bins
    # hold more than SCRATCH survivors (WINDOWS histograms in all at most); then a gather of
    # those bins. Returns how many entries scratch holds for the sort (0: no bracket of at most
    # SCRATCH) and the exact mass above them.
    # Below `low` lie at most `count` survivors of mass < exp(low - top) each: half of what
    # top-p may drop at most, so the cutoff is not below low.
    low = tl.maximum(lowest, top + tl.log(0.5 * (1.0 - p) * total / count.to(tl.float32)))
    # Half a bin of headroom keeps `top` itself in the last bin.
    width = tl.maximum(top - low, 1e-30) * (BINS / (BINS - 0.5))
    histogrammed = ((guess_scale > 0.0) & _surely_holds_cutoff(
        hist, above, guess_low, guess_width / BINS, top, target, BINS)).to(tl.int32)
    if histogrammed != 0:
        low = guess_low
        width = guess_width
    scale = BINS / width
    first = tl.zeros((), dtype=tl.int32)
    last = tl.zeros((), dtype=tl.int32)
    held = tl.zeros((), dtype=tl.int32) + SCRATCH + 1
    for _window in range(0, WINDOWS):
        if held > SCRATCH:
            step = width / BINS
            scale = BINS / width
            if histogrammed == 0:
                hist, above = _window_histogram(row_ptr, vocab_size, cutoff, low, scale, top,
                                                BLOCK, BINS)
            histogrammed = histogrammed * 0
            first, last, held = _pick_bracket(hist, above, low, step, top, target, SCRATCH,
                                              BINS)
            if held > SCRATCH:
                # Half a bin of margin each side covers the rounding of the bin edges.
                low = low + (first.to(tl.float32) - 0.5) * step
                width = tl.maximum((last - first + 2).to(tl.float32) * step, 1e-30)
    gathered = tl.zeros((), dtype=tl.int32)
    if held <= SCRATCH:
        _start_gather(counter_ptr)
        above = _gather_bins(row_ptr, scratch_ptr, ids_ptr, counter_ptr, 0, vocab_size, cutoff,
                             low, scale, first, last, top, BLOCK, SCRATCH, BINS)
        gathered = _end_gather(counter_ptr)
    return tl.where(gathered <= SCRATCH, gathered, 0), above


@triton.jit
def _top_p_cutoff_bracketed(row_ptr, scratch_ptr, ids_ptr, counter_ptr, vocab_size, cutoff, floor,
                            guess_low, guess_width, p, BLOCK: tl.constexpr,
                            MASS_BLOCK: tl.constexpr, SCRATCH: tl.constexpr,
                            TOP_P_SCRATCH: tl.constexpr, BINS: tl.constexpr,
                            WINDOWS: tl.constexpr):
    # Top-p over many survivors (key >= cutoff) in a few streamed passes. The first takes their
    # softmax statistics and gathers those at or above `floor` (TOP_P_SCRATCH of them at most);
    # when their mass reaches the target, a sort of them settles the cutoff and scratch holds
    # every entry it keeps: the returned count, else 0. The same pass histograms the guessed
    # window [guess_low, guess_low + guess_width) (none when guess_width is 0). Otherwise:
    # a histogram of a value window that holds the cutoff (the guessed one when it surely
    # does; narrowed and repeated while the bracketing bins hold more than SCRATCH survivors,
    # at most WINDOWS histograms in all); a gather of those bins with the exact mass above
    # them; a sort of them in registers. A bracket the exact masses refute falls back to the
    # streamed descent.
    floor = tl.maximum(floor, cutoff)
    guess_scale = tl.where(guess_width > 0.0, BINS / tl.maximum(guess_width, 1e-30), 0.0)
    _start_gather(counter_ptr)
    top, total, total_above_floor, count, lowest, hist, above = _survivor_softmax(
        row_ptr, scratch_ptr, ids_ptr, counter_ptr, 0, vocab_size, cutoff, floor, guess_low,
        guess_scale, BLOCK, TOP_P_SCRATCH, BINS)
    gathered = _end_gather(counter_ptr)
    result = cutoff
    kept_in_scratch = tl.zeros((), dtype=tl.int32)
    target = p * total
    settled = tl.zeros((), dtype=tl.int32)
    # Two tries, the gather above the floor and then that of the bracketing bins, through one
    # sort in registers: each inlined copy of a sort costs compile time.
    sorted_count = tl.where((top > float("-inf")) & (gathered <= TOP_P_SCRATCH)
                            & (total_above_floor >= target), gathered, 0)
    sorted_above = tl.zeros((), dtype=tl.float32)
    for attempt in range(0, 2):
        if (attempt == 1) & (top > float("-inf")) & (settled == 0):
            sorted_count, sorted_above = _gather_bracket(
                row_ptr, scratch_ptr, ids_ptr, counter_ptr, vocab_size, cutoff, lowest, count,
                total, hist, above, guess_low, guess_width, guess_scale, top, target, p, BLOCK,
                SCRATCH, BINS, WINDOWS)
        if sorted_count > 0:
            # Both tries sort TOP_P_SCRATCH lanes (the bins' gather fills at most SCRATCH).
            prefix, reached = _top_p_cutoff_in_scratch(scratch_ptr, ids_ptr, sorted_count, top,
                                                       sorted_above, target, TOP_P_SCRATCH)
            if attempt == 0:
                if reached != 0:
                    # Every gathered key is >= floor, so the cutoff is too.
                    result = tl.maximum(prefix, floor)
                    kept_in_scratch = gathered
                    settled = settled + 1
            elif (reached != 0) & (sorted_above < target):
                result = tl.maximum(prefix, cutoff)
                settled = settled + 1
        sorted_count = sorted_count * 0
    if (top > float("-inf")) & (settled == 0):
        result = _top_p_cutoff_streamed(row_ptr, vocab_size, cutoff, top, target, MASS_BLOCK)
    return result, kept_in_scratch


@triton.jit
def _sample_moments(row_ptr, vocab_size, CHUNKS: tl.constexpr, CHUNK: tl.constexpr):
    # Mean and spread of the finite entries in CHUNKS runs of CHUNK entries spread evenly over
    # the row (all of it when shorter), and how many finite entries the row holds by them. One
    # load of all the runs, so that their latencies overlap.
    spacing = tl.maximum(vocab_size // CHUNKS, CHUNK)
    chunks = tl.arange(0, CHUNKS)[:, None]
    offs = chunks * spacing + tl.arange(0, CHUNK)[None, :]  # overflow-lint: chunks * spacing bounded by max(vocab_size, CHUNKS * CHUNK)
    in_row = offs < vocab_size
    x = tl.load(row_ptr + offs, mask=in_row, other=float("-inf")).to(tl.float32)
    finite = (x > float("-inf")) & (x < float("inf"))
    seen = tl.sum(tl.sum(in_row.to(tl.float32), 1), 0)
    count = tl.sum(tl.sum(finite.to(tl.float32), 1), 0)
    total = tl.sum(tl.sum(tl.where(finite, x, 0.0), 1), 0)
    squares = tl.sum(tl.sum(tl.where(finite, x * x, 0.0), 1), 0)
    mean = total / tl.maximum(count, 1.0)
    spread = tl.sqrt(tl.maximum(squares / tl.maximum(count, 1.0) - mean * mean, 0.0))
    return mean, spread, count * (vocab_size / tl.maximum(seen, 1.0))


@triton.jit
def _normal_quantile(tail):
    # z with P(Z > z) = tail for a standard normal Z, tail in (0, 1) (Abramowitz and Stegun
    # 26.2.23, error < 4.5e-4).
    t = tl.sqrt(-2.0 * tl.log(tl.minimum(tail, 1.0 - tail)))
    z = t - (2.515517 + t * (0.802853 + t * 0.010328)) / (
        1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308)))
    return tl.where(tail <= 0.5, z, -z)


@triton.jit
def _floor_value(mean, spread, finite_in_row, wanted):
    # A value above which about `wanted` entries of Gaussian-like logits with these moments lie.
    # Rows it misjudges fall back to a slower path.
    tail = tl.minimum(wanted * 1.0 / tl.maximum(finite_in_row, 1.0), 0.5)
    return mean + _normal_quantile(tail) * spread


@triton.jit
def _top_p_floor(mean, spread, finite_in_row, p, wanted, GUESS_ENTRIES: tl.constexpr):
    # The floor of the top-p gather: about `wanted` entries lie above it. For logits drawn from
    # N(mean, spread^2), the probability mass is distributed as N(mean + spread^2, spread^2),
    # so the top-p set starts near mean + spread^2 - spread * z(1 - p). When that lies well
    # below the floor (flat logits keep most of the row) the gather is skipped: the floor is
    # then the key of +inf, and the guessed window (low, width) is the one around that start
    # where the model puts about GUESS_ENTRIES entries (width 0 for no guess).
    floor = _floor_value(mean, spread, finite_in_row, wanted)
    start = mean + spread * spread - spread * _normal_quantile(tl.maximum(1.0 - p, 1e-7))
    peaked = start >= floor - spread
    z = (start - mean) / tl.maximum(spread, 1e-30)
    density = finite_in_row * tl.exp(-0.5 * z * z) / (spread * 2.5066282746)
    width = tl.where(peaked, 0.0, tl.where(density > 0.0, GUESS_ENTRIES / density, 0.0))
    return _order_key(tl.where(peaked, floor, float("inf"))), start - 0.5 * width, width


@triton.jit
def _mask_below(row_ptr, scratch_ptr, ids_ptr, begin, end, cutoff, gathered, mask_value,
                BLOCK: tl.constexpr, SCRATCH: tl.constexpr):
    # Write mask_value over the entries [begin, end) of the row with key < cutoff. When scratch
    # holds every survivor (`gathered` of them, else 0), fill those entries without reading
    # them and put the survivors among them back.
    masked = tl.full((BLOCK, ), mask_value, tl.float32).to(row_ptr.dtype.element_ty)
    if gathered > 0:
        for start in range(begin, end, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            tl.store(row_ptr + offs, masked, mask=offs < end)
        tl.debug_barrier()
        for first in range(0, gathered, SCRATCH):
            x, ids, valid = _load_gathered(scratch_ptr + first, ids_ptr + first, gathered - first,
                                           SCRATCH)
            tl.store(row_ptr + ids, x.to(row_ptr.dtype.element_ty),
                     mask=valid & (ids >= begin) & (ids < end) & (_order_key(x) >= cutoff))
    else:
        following = _block(row_ptr, begin, end, BLOCK)
        for start in range(begin, end, BLOCK):
            block = following
            following = _block(row_ptr, start + BLOCK, end, BLOCK)
            offs = start + tl.arange(0, BLOCK)
            tl.store(row_ptr + offs, masked,
                     mask=(offs < end) & (block.to(tl.float32) < _key_value(cutoff)))
