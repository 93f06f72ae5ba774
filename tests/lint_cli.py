"""The static check as a user runs it: ``python -m harness lint`` in a fresh process.

TTIR cannot be compiled with ``TRITON_INTERPRET=1`` set, which the CPU tier sets for itself, so
these processes run without it.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WITHOUT_INTERPRETER = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}


def run_python(*args):
    return subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, env=WITHOUT_INTERPRETER,
                          capture_output=True, text=True, timeout=300)


def run_lint(*args):
    return run_python("-m", "harness", "lint", *args)
