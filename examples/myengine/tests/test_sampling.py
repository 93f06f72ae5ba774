"""Every overflow tier for myengine's kernels, from the installed triton_overflow plugin."""

import pytest
import torch
from cases import SOFTCAP_CASE, TEMPERATURE_CASE

from myengine.sampling import apply_temperature
from triton_overflow import OverflowTests


class TestSamplingOverflow(OverflowTests):
    cases = [TEMPERATURE_CASE, SOFTCAP_CASE]


@pytest.mark.validation
@pytest.mark.covers(kernel="apply_temperature", detector="validation")
def test_temperature_rejects_a_wrong_shape(kernel_device):
    logits = torch.zeros(2, 8, device=kernel_device)
    with pytest.raises(ValueError, match="temperature must have shape"):
        apply_temperature(logits, torch.ones(3, device=kernel_device))
