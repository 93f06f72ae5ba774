"""This repository's own test defaults; the machinery is the installed triton_overflow plugin.

The ``dev`` hypothesis profile by default, ``ci`` when CI is set; ``--hypothesis-profile``
chooses another.
"""

import os

import pytest
from hypothesis import settings

settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def device(kernel_device):
    """Where kernels run in this process (the plugin's ``kernel_device``)."""
    return kernel_device
