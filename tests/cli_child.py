"""The child side of ``tests.lint_cli.run_module``: become the process a user's shell would
start for ``python -m MODULE ARGS`` (the suite's command, or pytest), run it, and say how it
exited.

Kept free of the suite's test modules: the child is forked from a server that has imported
torch, numpy and Triton and nothing of the tests, and this is all it adds.
"""

import os
import runpy
import sys
import traceback


def main(module, argv, env, cwd, path, stdout, stderr):
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    python_path = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:] = [cwd, *python_path, *path]
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, file in ((1, stdout), (2, stderr)):
        os.dup2(os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    sys.argv = [module, *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit_:
        code = exit_.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - as the interpreter would: a traceback, exit 1
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code
