"""Reproductions: a finding of the static check as a test that takes its product past 2**31 on
the engine's own kernel (``triton-overflow repro``).

``launch`` describes a launch in a few lines; ``case`` runs it past 2**31 (``Reproduction``);
``tests`` makes the tests (``ReproductionTests``); ``write`` writes the test file and the report.
"""

from triton_overflow.repro.case import Reproduction
from triton_overflow.repro.tests import ReproductionTests

__all__ = ["Reproduction", "ReproductionTests"]
