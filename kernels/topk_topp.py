"""Exact top-k and top-p (nucleus) masking of fp32 logits, in place.

For each row of ``logits [B, V]``:

1. top-k (when ``k[row] < V``) keeps every entry >= the k-th largest value, so ties at the
   cutoff are all kept, as a sort-based reference does;
2. top-p (when ``p[row] < 1``) then keeps, among the survivors, the smallest set of largest
   probabilities whose mass reaches ``p`` (at least one token; ties at the cutoff kept);
3. every other entry becomes ``mask_value``.

The cutoffs are exact. Values are mapped to int32 keys whose integer order is the float order,
and the k-th largest key is found by a most-significant-digit radix select (8-bit digits, one
histogram pass per digit, stopping early once the kept count is exact). For top-p the survivors
are gathered into a per-program scratch row when there are at most ``SCRATCH`` of them, and a
4-bit-digit radix descent on probability mass finds the cutoff among them in registers; with
more survivors the same descent streams the row once per digit.

Rows with no finite entry are left unchanged by top-p. NaN logits are not supported.

Products that can exceed 2**31: ``row * logits_stride``, where ``row`` is the persistent loop's
variable (rows up to B - 1), and ``pid * SCRATCH`` in the scratch buffer.
"""

import torch
import triton
import triton.language as tl

from kernels._launch import (
    check_logits,
    check_row_vector,
    persistent_programs,
)

SCRATCH = 2048  # survivors gathered into registers for the top-p cutoff
_BLOCK = 4096  # vocab entries per loop step
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
def _top_p_cutoff_gathered(row_ptr, scratch_ptr, vocab_size, cutoff, p, BLOCK: tl.constexpr,
                           SCRATCH: tl.constexpr):
    # Gather the survivors (at most SCRATCH) into scratch, then run the mass descent on them in
    # registers: no further passes over the row.
    tl.debug_barrier()
    count = tl.zeros((), dtype=tl.int32)
    for start in range(0, vocab_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        in_row = offs < vocab_size
        x = tl.load(row_ptr + offs, mask=in_row, other=0.0)
        keep = in_row & (_order_key(x) >= cutoff)
        slot = count + tl.cumsum(keep.to(tl.int32), 0) - 1
        tl.store(scratch_ptr + slot, x, mask=keep)
        count += tl.sum(keep.to(tl.int32), 0)
    tl.debug_barrier()
    lanes = tl.arange(0, SCRATCH)
    gathered = lanes < count
    x = tl.load(scratch_ptr + lanes, mask=gathered, other=float("-inf"))
    key = _order_key(x)
    top = tl.max(x, 0)
    total = tl.sum(tl.where(x > float("-inf"), tl.exp(x - top), 0.0), 0)
    prefix = tl.zeros((), dtype=tl.uint32)
    above = tl.zeros((), dtype=tl.float32)
    reached = tl.full((), 1, tl.int32)
    for level in tl.static_range(8):
        match = gathered & _same_prefix(key, prefix, 32 - 4 * level)
        hist = _mass_histogram(x, key, match, top, 28 - 4 * level)
        digit, kept, in_bucket, found = _pick_digit(hist, above, p * total)
        reached = reached & found
        prefix = prefix | (tl.maximum(digit, 0).to(tl.uint32) << (28 - 4 * level))
        above = kept - in_bucket
    return _settle_cutoff(prefix, cutoff, reached, top)


@triton.jit
def _settle_cutoff(prefix, cutoff, reached, top):
    # Rounding can leave the whole mass a hair under p * total, and a row may have no finite
    # entry: keep every survivor then.
    return tl.where((reached != 0) & (top > float("-inf")), tl.maximum(prefix, cutoff), cutoff)


@triton.jit
def _top_p_cutoff_streamed(row_ptr, vocab_size, cutoff, p, BLOCK: tl.constexpr):
    # The same mass descent, streaming the row once per digit, for rows with many survivors.
    top = tl.full((), float("-inf"), tl.float32)
    for start in range(0, vocab_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        in_row = offs < vocab_size
        x = tl.load(row_ptr + offs, mask=in_row, other=float("-inf"))
        keep = in_row & (_order_key(x) >= cutoff)
        top = tl.maximum(top, tl.max(tl.where(keep, x, float("-inf")), 0))
    total = tl.zeros((), dtype=tl.float32)
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
        digit, kept, in_bucket, found = _pick_digit(hist, above, p * total)
        reached = reached & found
        prefix = prefix | (tl.maximum(digit, 0).to(tl.uint32) << (28 - 4 * level))
        above = kept - in_bucket
    return _settle_cutoff(prefix, cutoff, reached, top)


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
    BLOCK: tl.constexpr = 4096,
    SCRATCH: tl.constexpr = 2048,
    TOPK_ENABLED: tl.constexpr = True,
    TOPP_ENABLED: tl.constexpr = True,
):
    pid = tl.program_id(0)
    # Widened: a program's scratch row starts at pid * SCRATCH.
    program_scratch = scratch_ptr + pid.to(tl.int64) * SCRATCH
    for row in tl.range(pid, n_rows, tl.num_programs(0)):
        # Widened: row * logits_stride passes 2**31 once B * V does.
        row_ptr = logits_ptr + tl.cast(row, tl.int64) * logits_stride
        cutoff = tl.zeros((), dtype=tl.uint32)
        survivors = tl.zeros((), dtype=tl.int32) + vocab_size
        if TOPK_ENABLED:
            k = tl.load(k_ptr + row)
            if k < vocab_size:
                cutoff, survivors = _top_k_cutoff(row_ptr, vocab_size, k, BLOCK)
        if TOPP_ENABLED:
            p = tl.load(p_ptr + row)
            if p < 1.0:
                if survivors <= SCRATCH:
                    cutoff = _top_p_cutoff_gathered(row_ptr, program_scratch, vocab_size, cutoff,
                                                    p, BLOCK, SCRATCH)
                else:
                    cutoff = _top_p_cutoff_streamed(row_ptr, vocab_size, cutoff, p, BLOCK)
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
    if k is not None:
        check_row_vector(k, "k", n_rows, logits.device, (torch.int32, ))
        if check_values and n_rows and bool((k < 1).any()):
            raise ValueError(f"k must be >= 1 in every row; got min(k) = {int(k.min())}")
    if p is not None:
        check_row_vector(p, "p", n_rows, logits.device, (torch.float32, ))
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
        SCRATCH=SCRATCH,
        TOPK_ENABLED=k is not None,
        TOPP_ENABLED=p is not None,
        num_warps=_NUM_WARPS,
    )
    return logits
