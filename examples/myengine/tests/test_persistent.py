"""Every overflow tier for myengine's persistent kernels: an autotuned row kernel and a
device-sized grid over a request-slot table, each fixed and with its widening switched off."""

from cases import (COUNT_PENALTY_CASE, COUNT_PENALTY_ROWS_CASE, COUNT_PENALTY_UNWIDENED_CASE,
                   LOG_SOFTMAX_CASE, LOG_SOFTMAX_UNWIDENED_CASE)

from triton_overflow import OverflowTests


class TestPersistentOverflow(OverflowTests):
    cases = [LOG_SOFTMAX_CASE, LOG_SOFTMAX_UNWIDENED_CASE, COUNT_PENALTY_CASE,
             COUNT_PENALTY_ROWS_CASE, COUNT_PENALTY_UNWIDENED_CASE]
