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
    return ((key >> shift.to(tl.uint32)) & ((1 << DIGIT_BITS) - 1)).to(tl.int32)


@triton.jit
def _digit_mask(shift, DIGIT_BITS: tl.constexpr):
    # The bits of the digit at `shift`, as a uint32 mask.
    return tl.full((), (1 << DIGIT_BITS) - 1, tl.uint32) << shift.to(tl.uint32)


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
            prefix = prefix | (digit.to(tl.uint32) << shift.to(tl.uint32))
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
    prefix = prefix | (tl.maximum(digit, 0).to(tl.uint32) << shift.to(tl.uint32))
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
        prefix = prefix | (digit.to(tl.uint32) << shift.to(tl.uint32))
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
