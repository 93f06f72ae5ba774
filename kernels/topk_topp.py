"""Exact top-k and top-p (nucleus) masking of fp32 logits, in place.

For each row of ``logits [B, V]``:

1. top-k (when ``k[row] < V``) keeps every entry >= the k-th largest value, so ties at the
   cutoff are all kept, as a sort-based reference does;
2. top-p (when ``p[row] < 1``) then keeps, among the survivors, the smallest set of largest
   probabilities whose mass reaches ``p`` (at least one token; ties at the cutoff kept);
3. every other entry becomes ``mask_value``.

The cutoffs are exact. Values are mapped to uint32 keys whose integer order is the float order.
For k <= SCRATCH / 2 one pass estimates a floor above which about (k + SCRATCH) / 2 entries of
Gaussian-like logits lie, a second gathers those entries into a per-program scratch row, and a
most-significant-digit radix select (8-bit digits) on them in registers gives the k-th largest
key; top-p then runs a 4-bit-digit radix descent on probability mass over the same registers.
Rows where the floor misses (fewer than k or more than SCRATCH entries above it: ties, -inf,
skewed logits, large k) take the general path: the radix select streams the row once per digit
(stopping early once the kept count is exact), and top-p gathers the survivors when at most
SCRATCH remain, or else streams the row once per digit of its descent. Either way a last pass
writes mask_value below the cutoff.

Rows with no finite entry are left unchanged by top-p. NaN logits are not supported.

Products that can exceed 2**31: ``row * logits_stride``, where ``row`` is the persistent loop's
variable (rows up to B - 1), and ``pid * SCRATCH`` in the scratch buffer.
"""

import torch
import triton
import triton.language as tl

from kernels._launch import check_int, check_logits, check_real, check_table, persistent_programs

SCRATCH = 1024  # entries gathered into registers for the exact cutoffs
_BLOCK = 8192  # vocab entries per loop step
_MASS_BLOCK = 512  # vocab entries per step of the streamed top-p descent
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
                offs = start + tl.arange(0, BLOCK)
                in_row = offs < vocab_size
                key = _order_key(tl.load(row_ptr + offs, mask=in_row, other=0.0))
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
        offs = start + tl.arange(0, BLOCK)
        in_row = offs < vocab_size
        x = tl.load(row_ptr + offs, mask=in_row, other=0.0)
        keep = in_row & (_order_key(x) >= lowest)
        slot = count + tl.cumsum(keep.to(tl.int32), 0) - 1
        tl.store(scratch_ptr + slot, x, mask=keep & (slot < SCRATCH))
        count += tl.sum(keep.to(tl.int32), 0)
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
def _top_p_cutoff_gathered(x, key, valid, cutoff, p):
    # Mass radix descent, 4 bits a level, over the survivors (key >= cutoff) of a block in
    # registers.
    survivor = valid & (key >= cutoff)
    top = tl.max(tl.where(survivor, x, float("-inf")), 0)
    total = tl.sum(tl.where(survivor & (x > float("-inf")), tl.exp(x - top), 0.0), 0)
    prefix = tl.zeros((), dtype=tl.uint32)
    above = tl.zeros((), dtype=tl.float32)
    reached = tl.full((), 1, tl.int32)
    for level in tl.static_range(8):
        match = survivor & _same_prefix(key, prefix, 32 - 4 * level)
        hist = _mass_histogram(x, key, match, top, 28 - 4 * level)
        prefix, above, reached = _mass_step(hist, above, p * total, prefix, reached,
                                            28 - 4 * level)
    return _settle_cutoff(prefix, cutoff, reached, top)


@triton.jit
def _top_p_cutoff_streamed(row_ptr, vocab_size, cutoff, p, BLOCK: tl.constexpr):
    # The same mass descent, streaming the row once per digit, for rows with many survivors.
    top = tl.full((), float("-inf"), tl.float32)
    total = tl.zeros((), dtype=tl.float32)
    for start in range(0, vocab_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        in_row = offs < vocab_size
        x = tl.load(row_ptr + offs, mask=in_row, other=float("-inf"))
        keep = in_row & (_order_key(x) >= cutoff)
        top = tl.maximum(top, tl.max(tl.where(keep, x, float("-inf")), 0))
    for start in range(0, vocab_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        in_row = offs < vocab_size
        x = tl.load(row_ptr + offs, mask=in_row, other=float("-inf"))
        keep = in_row & (_order_key(x) >= cutoff) & (x > float("-inf"))
        total += tl.sum(tl.where(keep, tl.exp(x - top), 0.0), 0)
    prefix = tl.zeros((), dtype=tl.uint32)
    above = tl.zeros((), dtype=tl.float32)
    reached = tl.full((), 1, tl.int32)
    for level in tl.static_range(8):
        hist = tl.zeros((16, ), dtype=tl.float32)
        for start in range(0, vocab_size, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            in_row = offs < vocab_size
            x = tl.load(row_ptr + offs, mask=in_row, other=float("-inf"))
            key = _order_key(x)
            match = in_row & (key >= cutoff) & _same_prefix(key, prefix, 32 - 4 * level)
            hist += _mass_histogram(x, key, match, top, 28 - 4 * level)
        prefix, above, reached = _mass_step(hist, above, p * total, prefix, reached,
                                            28 - 4 * level)
    return _settle_cutoff(prefix, cutoff, reached, top)


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
        x = tl.load(row_ptr + offs, mask=offs < vocab_size, other=float("-inf"))
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
    logits_ptr,  # [n_rows, vocab_size] fp32, masked in place
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
                    cutoff = _top_p_cutoff_streamed(row_ptr, vocab_size, cutoff, p, MASS_BLOCK)
        # 3. Mask everything below the cutoff.
        if cutoff > 0:
            for start in range(0, vocab_size, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                in_row = offs < vocab_size
                key = _order_key(tl.load(row_ptr + offs, mask=in_row, other=0.0))
                tl.store(row_ptr + offs, tl.full((BLOCK, ), mask_value, tl.float32),
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
    """Mask ``logits [B, V]`` (fp32) in place to the per-row top-k, then top-p, and return it.

    ``k``: int32 ``[B]`` (>= 1; ``k >= V`` keeps the whole row) or None. ``p``: fp32 ``[B]`` in
    ``(0, 1]`` (1 keeps the whole row) or None. ``num_programs`` sets the persistent grid;
    by default it fills the device. ``check_values=False`` skips the range checks of k and p,
    which read them back to the host (a synchronisation); out-of-range values can then give
    wrong masks but never an out-of-bounds access.
    """
    check_logits(logits, "logits", dtypes=(torch.float32, ))
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
        TOPK_ENABLED=k is not None,
        TOPP_ENABLED=p is not None,
        num_warps=_NUM_WARPS,
    )
    return logits
