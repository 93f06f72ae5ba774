"""This repository's own test defaults; the machinery is the installed triton_overflow plugin.

The ``dev`` hypothesis profile by default, ``ci`` when CI is set; ``--hypothesis-profile``
chooses another.
"""

import os

import pytest
import triton
from hypothesis import settings

settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def device(kernel_device):
    """Where kernels run in this process (the plugin's ``kernel_device``)."""
    return kernel_device


@pytest.fixture
def no_launch(monkeypatch):
    """Any Triton kernel launch fails the test: a bad argument must stop on the host."""

    def launch(kernel, grid):
        raise AssertionError(f"{getattr(kernel, '__name__', kernel)} was launched with grid "
                             f"{grid} before the bad argument was rejected")

    monkeypatch.setattr(triton.runtime.jit.KernelInterface, "__getitem__", launch)
