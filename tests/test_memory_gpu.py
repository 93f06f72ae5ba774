"""The virtual-memory backend on a GPU: aliasing, dedicated planted rows, the guard below the
tensor, no leak over a thousand cycles, and Triton's sanitizer naming a twin's line."""

import re

import pytest

from tests.cases.logprob import TOKEN_RANKS
from triton_overflow.engine.isolation import run_isolated
from triton_overflow.engine.runner import sanitizer_report
from triton_overflow.interp import execution_mode

pytestmark = [pytest.mark.gpu, pytest.mark.selftest]


def _probe(function, **kwargs):
    return run_isolated(f"tests.vmm_probe:{function}", kwargs, mode=execution_mode.DEVICE,
                        timeout=600)


def test_unplanted_rows_alias_and_planted_rows_have_their_own_pages():
    outcome = _probe("aliasing")
    assert outcome.status == "passed", outcome.summary() + "\n" + outcome.output
    seen = outcome.value
    assert seen["chunk"] == 1.0 and seen["block"] == 4.0 and seen["apart"], seen
    assert seen["planted"] == [2.0, 16384.0, 16447.0], seen
    assert seen["background"] == [3.0, 3.0], seen
    assert seen["peak_mib"] < 64, f"a {seen['elements'] * 4 / 2**30:.1f} GiB tensor took {seen}"


def test_a_negative_offset_faults_in_the_guard():
    outcome = _probe("guard_fault")
    assert outcome.status in ("failed", "crashed") and (
        outcome.device_fault or outcome.status == "crashed"), outcome.summary()


def test_a_thousand_create_and_release_cycles_leak_nothing():
    outcome = _probe("leak_cycles", cycles=1000)
    assert outcome.status == "passed", outcome.summary() + "\n" + outcome.output
    lost = outcome.value["lost"]
    assert lost < 2**21, f"{lost / 2**20:.1f} MiB lost over 1000 cycles: {outcome.value}"


def test_a_second_sparse_tensor_is_zeros_its_own_where_planted_and_released_with_the_first():
    outcome = _probe("sparse_rows", cycles=50)
    assert outcome.status == "passed", outcome.summary() + "\n" + outcome.output
    seen = outcome.value
    assert seen["zeros"] == [0.0, 0.0, 0.0] and seen["own"] == [7.0, 5.0], seen
    assert seen["shared"] == 3.0, seen  # an unplanted row a block away reads the same memory
    assert seen["peak_mib"] < 96, f"a 4 GiB sparse tensor took {seen}"
    assert seen["lost"] is None or seen["lost"] < 2**21, seen


def test_the_sanitizer_names_the_kernel_line_and_operation_of_a_twin():
    """Triton's overflow sanitizer (TRITON_DEBUG=1) on the int32 twin in a virtual-memory case."""
    report = sanitizer_report(TOKEN_RANKS, "negative", "aliased-device", twin=True)
    assert re.search(r"kernels/logprob\.py:\d+: _token_ranks_kernel: int32 overflow detected for "
                     r"operation mul .*\[int32 twin\]", report), report
