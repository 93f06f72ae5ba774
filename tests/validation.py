"""The validation check every family's bad-argument tests share."""

import re

import pytest
import torch


def assert_rejected(launcher, arguments, name, change, message, device=None):
    """``launcher(**arguments)`` with ``arguments[name]`` replaced by ``change(...)`` raises
    ValueError naming ``name``, its text matching ``message``. With ``device``, a changed
    tensor is moved there first."""
    bad = change(arguments[name])
    if device is not None and isinstance(bad, torch.Tensor):
        bad = bad.to(device)
    with pytest.raises(ValueError, match=rf"\b{name}\b") as raised:
        launcher(**{**arguments, name: bad})
    assert re.search(message, str(raised.value)), raised.value
