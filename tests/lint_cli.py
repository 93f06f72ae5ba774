"""The static check as a user runs it: ``python -m triton_overflow lint`` in a fresh process.

The CPU tier runs kernels in the interpreter; the lint command switches it off for itself, and
these processes run without it as well, as a user's shell would.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WITHOUT_INTERPRETER = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
# The reports the lint keeps between runs go to a folder of this test process, not the user's.
WITHOUT_INTERPRETER.setdefault("TRITON_OVERFLOW_CACHE",
                               tempfile.mkdtemp(prefix="triton-overflow-test-cache-"))


def run_python(*args, env=None, cwd=ROOT):
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd,
                          env=WITHOUT_INTERPRETER if env is None else env,
                          capture_output=True, text=True, timeout=300)


def run_lint(*args, env=None, cwd=ROOT):
    return run_python("-m", "triton_overflow", "lint", *args, env=env, cwd=cwd)
