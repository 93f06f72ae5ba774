"""``triton_overflow.philox`` replays Triton's ``tl.randint`` / ``tl.randint4x`` / ``tl.rand`` /
``tl.randn`` bit for bit, and keeps the values recorded from Triton once."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from triton_overflow import philox

pytestmark = pytest.mark.selftest
SEEDS = [0, 1, -3, 2**31 - 1, 2**31, 0x0123456789ABCDEF, 2**63 + 12345, 2**64 - 1, -2**63]
OFFSETS = {
    torch.int32: [0, 1, 2, 3, 1000, 2**31 - 1, -1, -2**31],
    torch.int64: [0, 1, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**32, 2**32 + 7, 2**40 + 5,
                  2**63 - 1, -1, -2**63],
}


@triton.jit
def _random_kernel(seed, offsets_ptr, words_ptr, uniform_ptr, normal_ptr, n,
                   N_ROUNDS: tl.constexpr, BLOCK: tl.constexpr):
    # words_ptr: [5, BLOCK] int32: tl.randint, then the four words of tl.randint4x
    index = tl.arange(0, BLOCK)
    mask = index < n
    offsets = tl.load(offsets_ptr + index, mask=mask)  # int32 or int64, as the tensor is
    w0, w1, w2, w3 = tl.randint4x(seed, offsets, N_ROUNDS)
    tl.store(words_ptr + index, tl.randint(seed, offsets, N_ROUNDS), mask=mask)
    tl.store(words_ptr + BLOCK + index, w0, mask=mask)
    tl.store(words_ptr + 2 * BLOCK + index, w1, mask=mask)
    tl.store(words_ptr + 3 * BLOCK + index, w2, mask=mask)
    tl.store(words_ptr + 4 * BLOCK + index, w3, mask=mask)
    tl.store(uniform_ptr + index, tl.rand(seed, offsets, N_ROUNDS), mask=mask)
    tl.store(normal_ptr + index, tl.randn(seed, offsets, N_ROUNDS), mask=mask)


@triton.jit
def _default_rounds_kernel(seed, offsets_ptr, uniform_ptr, BLOCK: tl.constexpr):
    index = tl.arange(0, BLOCK)
    tl.store(uniform_ptr + index, tl.rand(seed, tl.load(offsets_ptr + index)))


def run_triton(seed, offsets, n_rounds, device):
    """What the kernel's Triton calls return: (randint, randint4x words, rand, randn)."""
    n = offsets.numel()
    block = triton.next_power_of_2(n)
    words = torch.zeros(5, block, dtype=torch.int32, device=device)
    uniform = torch.zeros(n, device=device)
    normal = torch.zeros(n, device=device)
    _random_kernel[(1, )](seed, offsets.to(device), words, uniform, normal, n, N_ROUNDS=n_rounds,
                          BLOCK=block)
    words = words.cpu().numpy().view(np.uint32)[:, :n]
    return words[0], tuple(words[1:]), uniform.cpu().numpy(), normal.cpu().numpy()


def assert_normals_match(actual, expected, device):
    """Bit for bit where ``randn``'s float32 log, sqrt and cos are numpy's (the interpreter);
    a GPU's approximations of them are within a few ulp."""
    if device.type == "cpu":
        assert np.array_equal(actual, expected), (actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", list(OFFSETS), ids=str)
@pytest.mark.parametrize("seed", SEEDS, ids=hex)
def test_replay_matches_triton(seed, dtype, device):
    """For seeds of every width (negative, 2**31 and up, 64-bit) and int32 and int64 offsets
    (past 2**31 and 2**32, negative), every word and every uniform is Triton's."""
    offsets = torch.tensor(OFFSETS[dtype], dtype=dtype)
    bits, words, uniform, normal = run_triton(seed, offsets, 10, device)
    replay = offsets.numpy()
    assert np.array_equal(bits, philox.randint(seed, replay))
    for index, (got, want) in enumerate(zip(words, philox.randint4x(seed, replay))):
        assert np.array_equal(got, want), f"randint4x word {index}"
    assert uniform.dtype == philox.rand(seed, replay).dtype == np.float32
    assert np.array_equal(uniform, philox.rand(seed, replay))
    assert_normals_match(normal, philox.randn(seed, replay), device)


@pytest.mark.parametrize("n_rounds", [1, 7, 12])
def test_replay_matches_triton_for_other_round_counts(n_rounds, device):
    """``n_rounds`` is the number of Philox rounds on both sides."""
    seed, offsets = 0x0123456789ABCDEF, torch.tensor(OFFSETS[torch.int64])
    bits, words, uniform, normal = run_triton(seed, offsets, n_rounds, device)
    replay = offsets.numpy()
    assert np.array_equal(bits, philox.randint(seed, replay, n_rounds))
    assert all(map(np.array_equal, words, philox.randint4x(seed, replay, n_rounds)))
    assert np.array_equal(uniform, philox.rand(seed, replay, n_rounds))
    assert_normals_match(normal, philox.randn(seed, replay, n_rounds), device)


def test_default_round_count_is_tritons(device):
    """Without ``n_rounds``, both sides run the same number of rounds (Triton's default, 10)."""
    offsets = torch.arange(2**31 - 8, 2**31 + 8, dtype=torch.int64)
    uniform = torch.zeros(offsets.numel(), device=device)
    _default_rounds_kernel[(1, )](2**40 + 3, offsets.to(device), uniform, BLOCK=offsets.numel())
    assert np.array_equal(uniform.cpu().numpy(), philox.rand(2**40 + 3, offsets.numpy()))
    assert np.array_equal(philox.rand(2**40 + 3, offsets.numpy()),
                          philox.rand(2**40 + 3, offsets.numpy(), n_rounds=10))


# Recorded once from Triton 3.6's interpreter (tl.randint4x, tl.rand, tl.randn).
KNOWN = [
    (0x0123456789ABCDEF, np.array([0, 1, 2**31, 2**32 + 7, -1], dtype=np.int64),
     [(0xb850222e, 0xadca1466, 0xf88bcdab, 0x1ac64c5a, 0x6e31b035),
      (0xc58cb04b, 0x523e0d85, 0x4c541ee0, 0xf635a398, 0x36a95fcb),
      (0x14a7a020, 0x65401425, 0x68254bb9, 0xdb80f217, 0x9d22ca15),
      (0x7a84fff9, 0xb299da3f, 0xb3e56bc8, 0x339c0261, 0x16df4072)],
     [0.5600544810295105, 0.6422704458236694, 0.058233533054590225, 0.20917657017707825,
      0.8608912825584412],
     [-1.0370672941207886, -0.5882709622383118, -1.961143136024475, 1.5685608386993408,
      -0.49082863330841064]),
    (-3, np.array([0, 5, 2**31 - 1, -1], dtype=np.int32),
     [(0xdfa2406f, 0xfe024337, 0x969b80e8, 0xba8d4554),
      (0x87f19db1, 0x9b80594d, 0xf25c2f1b, 0x8c74eb25),
      (0x88b33b44, 0x63a59d25, 0xa5f79de7, 0x50a09ea8),
      (0x39ef467b, 0x62a5d189, 0xe55581ae, 0x369b4bb3)],
     [0.2528609335422516, 0.015555950812995434, 0.8233793377876282, 0.5425636768341064],
     [1.5337783098220825, 0.6320473551750183, 0.4888404309749603, 0.9054753184318542]),
]


@pytest.mark.parametrize("seed, offsets, words, uniform, normal", KNOWN, ids=["int64", "int32"])
def test_known_answers_from_triton(seed, offsets, words, uniform, normal):
    """The replay still gives the words and uniforms Triton gave (exactly) and its normals
    (to float32 rounding: numpy's log and cos may differ by an ulp between CPUs)."""
    got = philox.randint4x(seed, offsets)
    assert [tuple(int(w) for w in word) for word in got] == words
    assert np.array_equal(philox.randint(seed, offsets), got[0])
    assert np.array_equal(philox.rand(seed, offsets), np.array(uniform, dtype=np.float32))
    np.testing.assert_allclose(philox.randn(seed, offsets), np.array(normal, dtype=np.float32),
                               rtol=1e-6)


# Random123's published answers for Philox4x32-10 (its kat_vectors): key, counter, result.
RANDOM123 = [
    ((0, 0), (0, 0, 0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff, 0xffffffff), (0xffffffff,) * 4, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0xa4093822, 0x299f31d0), (0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
]


@pytest.mark.parametrize("key, counter, expected", RANDOM123, ids=["zeros", "ones", "pi"])
def test_philox_is_philox4x32_10(key, counter, expected):
    """The core is the published Philox4x32-10: the seed's low word is the first key word."""
    seed = key[1] << 32 | key[0]
    assert tuple(int(word) for word in philox.philox(seed, *counter)) == expected


def test_bad_seeds_and_offsets_are_refused():
    """A seed wider than 64 bits or float offsets raise ``ValueError``, as Triton refuses them."""
    with pytest.raises(ValueError, match="seed"):
        philox.rand(2**64, np.arange(4))
    with pytest.raises(ValueError, match="offsets"):
        philox.rand(0, np.arange(4.0))
