"""Every overflow tier on vLLM's sampling kernels: the copy before PR #46560 (each case known
to overflow) and the copy after it (fixed, or still overflowing where the fix left a product in
int32). ``-k before`` / ``-k after`` picks one copy."""

from cases import AFTER_CASES, BEFORE_CASES
from triton_overflow import OverflowTests


class TestVllmSamplersBefore(OverflowTests):
    cases = BEFORE_CASES


class TestVllmSamplersAfter(OverflowTests):
    cases = AFTER_CASES
