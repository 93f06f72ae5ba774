"""Finds the copies of vLLM's sampler files that ``fetch.py`` writes.

They are found on the import path (``PYTHONPATH=OUT/before:OUT/after``), or in the folder given
by ``--vllm-samplers OUT`` (or ``VLLM_SAMPLERS=OUT``), which puts ``OUT/before`` and
``OUT/after`` on this run's import path (the suite's child processes inherit it).
"""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

PACKAGES = {"before": "vllm_sampler_before", "after": "vllm_sampler_after"}


def pytest_addoption(parser):
    parser.addoption("--vllm-samplers", default=os.environ.get("VLLM_SAMPLERS"),
                     help="the folder fetch.py wrote (OUT/before, OUT/after); default: "
                          "$VLLM_SAMPLERS, else the import path")


def pytest_configure(config):
    root = config.getoption("--vllm-samplers")
    if root:
        for side in PACKAGES:
            path = str(Path(root, side).resolve())
            if path not in sys.path:
                sys.path.insert(0, path)
    missing = [name for name in PACKAGES.values() if importlib.util.find_spec(name) is None]
    if missing:
        raise pytest.UsageError(
            f"{', '.join(missing)} not importable: write the copies with `python "
            f"ci/real_samplers/fetch.py --clone VLLM_CLONE --out OUT`, then pass "
            f"--vllm-samplers OUT (or PYTHONPATH=OUT/before:OUT/after)")
