"""Streaming kernels with the two access patterns that once cost the min_p and penalties
kernels a third to a half of their time; the 16-byte access check must flag both."""

import triton
import triton.language as tl


@triton.jit
def value_masked_store_kernel(x_ptr, stride, vocab_size, threshold, BLOCK: tl.constexpr = 8192):
    # The store mask depends on the loaded values: one 4-byte store per entry.
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # overflow-lint: bounded by vocab_size
    x = tl.load(x_ptr + row * stride + offs, mask=offs < vocab_size, other=0.0)
    tl.store(x_ptr + row * stride + offs, tl.full((BLOCK, ), float("-inf"), tl.float32),
             mask=(offs < vocab_size) & (x < threshold))


@triton.jit
def per_entry_word_gather_kernel(x_ptr, stride, words_ptr, vocab_size, BLOCK: tl.constexpr = 8192):
    # Each entry loads its bitset word: 32 lanes gather the same word one by one.
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # overflow-lint: bounded by vocab_size
    words = tl.load(words_ptr + offs // 32, mask=offs < vocab_size, other=0)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < vocab_size, other=0.0)
    x = tl.where(((words >> (offs % 32)) & 1) != 0, x * 0.5, x)
    tl.store(x_ptr + row * stride + offs, x, mask=offs < vocab_size)
