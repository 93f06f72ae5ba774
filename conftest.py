"""The suite's pytest plugin: execution mode, markers, hypothesis profiles, report header.

A plain run picks what the machine can do. Without a CUDA device the kernels run in Triton's
CPU interpreter (``TRITON_INTERPRET=1`` is set here, before any kernel module is imported) and
the ``gpu`` tests skip saying so; with one, they run natively and every tier runs. Huge cases
always run in child processes (``harness.isolation``), so a fault never reaches another test.
"""

import json
import os
from collections import defaultdict

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

from hypothesis import HealthCheck, settings  # noqa: E402

PROFILE_VARIABLE = "OVERFLOW_HYPOTHESIS_PROFILE"
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("dev", max_examples=15, deadline=None, suppress_health_check=_SLOW_OK)
settings.register_profile("ci", max_examples=12, deadline=None, derandomize=True,
                          print_blob=True, suppress_health_check=_SLOW_OK)
settings.register_profile("nightly", max_examples=300, deadline=None, print_blob=True,
                          suppress_health_check=_SLOW_OK)
PROFILE = os.environ.get(PROFILE_VARIABLE) or ("ci" if os.environ.get("CI") else "dev")
settings.load_profile(PROFILE)


def pytest_addoption(parser):
    group = parser.getgroup("overflow", "int32 overflow suite")
    group.addoption("--detector-report", metavar="PATH", default=None,
                    help="write the kernel x detector outcomes of this run as JSON to PATH")


def pytest_report_header(config):
    from harness.environment import describe

    facts = describe()
    versions = ", ".join(f"{name} {facts[name]}" for name in ("torch", "triton", "hypothesis", "python"))
    gpu_note = "" if HAS_CUDA else "; gpu tests skip"
    return [f"GPU: {facts['GPU']}{gpu_note}", f"versions: {versions}",
            f"kernels: {facts['kernels']}; hypothesis profile: {PROFILE} (set {PROFILE_VARIABLE})"]


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; none visible here (run on a GPU runner)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


_cells = defaultdict(list)
_CELL = "overflow-cell"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cells = []
    for mark in item.iter_markers("covers"):
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            reason = ""
            if report.skipped and isinstance(report.longrepr, tuple):
                reason = report.longrepr[2].removeprefix("Skipped: ")
            elif report.failed:
                reason = str(report.longrepr).strip().splitlines()[-1][:300]
            cells.append((_CELL, {"kernel": mark.kwargs["kernel"],
                                  "detector": mark.kwargs["detector"],
                                  "role": mark.kwargs.get("role", "fixed"),
                                  "outcome": report.outcome, "reason": reason,
                                  "test": item.nodeid}))
    if cells:
        # Carried on the report, so that with pytest-xdist the outcomes reach the controller.
        report.user_properties = [*report.user_properties, *cells]


def pytest_runtest_logreport(report):
    for name, cell in report.user_properties:
        if name == _CELL:
            cell = dict(cell)
            _cells[(cell.pop("kernel"), cell.pop("detector"))].append(cell)


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--detector-report")
    if path and not hasattr(session.config, "workerinput"):
        rows = [{"kernel": kernel, "detector": detector, "results": results}
                for (kernel, detector), results in sorted(_cells.items())]
        with open(path, "w") as handle:
            json.dump({"exitstatus": int(exitstatus), "cells": rows}, handle, indent=1)


@pytest.fixture(scope="session")
def device():
    """Where kernels run in this process: the GPU natively, else the CPU interpreter."""
    return torch.device("cuda" if HAS_CUDA and not INTERPRETED else "cpu")
