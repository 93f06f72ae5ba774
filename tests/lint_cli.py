"""The command line as a user runs it: ``python -m triton_overflow ...`` in a process of its own.

``run_module`` (``run_cli`` for the suite's own command) forks that process from the suite's
server (``triton_overflow.engine.isolation``), which has imported torch, numpy and Triton and
nothing else: the process is the one a new interpreter would be (its own working directory,
environment and import path, nothing of the test process), without the seconds a new
interpreter spends importing them. ``run_python`` starts a new interpreter, for the tests whose
subject is the new process itself (what it imports first, its parent, its site hooks).

The CPU tier runs kernels in the interpreter; the lint command switches it off for itself, and
these processes run without it as well, as a user's shell would.
"""

import functools
import json
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


def run_module(module, *args, env=None, cwd=ROOT, timeout=600):
    """``python -m MODULE ARGS`` run in ``cwd`` with ``env`` (this process's, without the
    interpreter flag, by default), as a ``subprocess.CompletedProcess``. The process is forked
    from the server of the mode ``env`` asks for (``TRITON_INTERPRET``), as Triton decorates
    its own library for that mode when it is imported."""
    from triton_overflow.engine.isolation import run_isolated
    from triton_overflow.interp.execution_mode import COMPILE, INTERPRETER
    env = dict(WITHOUT_INTERPRETER if env is None else env)
    mode = INTERPRETER if env.get("TRITON_INTERPRET") == "1" else COMPILE
    argv = [str(arg) for arg in args]
    with tempfile.TemporaryDirectory(prefix="cli-") as folder:
        stdout, stderr = Path(folder) / "stdout", Path(folder) / "stderr"
        outcome = run_isolated("tests.cli_child:main", {
            "module": module, "argv": argv, "env": env, "cwd": str(cwd),
            "path": _new_interpreters_path(), "stdout": str(stdout), "stderr": str(stderr)},
            mode=mode, timeout=timeout)
        if not outcome.passed:
            raise AssertionError(f"`python -m {module} {' '.join(argv)}` did not finish: "
                                 f"{outcome.summary()}\n{outcome.output}")
        return subprocess.CompletedProcess([module, *argv], outcome.value, stdout.read_text(),
                                           stderr.read_text())


def run_cli(*args, env=None, cwd=ROOT):
    """``python -m triton_overflow ARGS``: the suite's command."""
    return run_module("triton_overflow", *args, env=env, cwd=cwd)


def run_lint(*args, env=None, cwd=ROOT, shape_alone=True):
    """The lint's command line. With ``shape_alone`` and no envelope among ``args``, the
    levels are the shape's (``--envelope none``): what most tests check; without it, the
    lint chooses the envelope as a user's run does."""
    args = [str(arg) for arg in args]
    if shape_alone and "--envelope" not in args and "--no-envelope" not in args:
        args += ["--envelope", "none"]
    return run_cli("lint", *args, env=env, cwd=cwd)


@functools.cache
def _new_interpreters_path():
    """The import path of a new interpreter of this Python, past its script folder and
    ``PYTHONPATH``: the standard library and the installed packages."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "import json, sys; print(json.dumps(sys.path[1:]))"
    done = subprocess.run([sys.executable, "-c", code], cwd=tempfile.gettempdir(), env=env,
                          capture_output=True, text=True, check=True, timeout=60)
    return json.loads(done.stdout)
