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


def arguments_covered(bad_arguments, *also):
    """The launcher arguments a family's bad-argument table (``{case: (name, change,
    message)}``) covers, and those ``also`` names (covered by tests of their own)."""
    return {name for name, _, _ in bad_arguments.values()} | set(also)
