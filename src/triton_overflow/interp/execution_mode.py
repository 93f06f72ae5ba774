"""Where kernels run: Triton's CPU interpreter or the device. The one owner of TRITON_INTERPRET.

``triton.jit`` reads the interpreter flag when a kernel is decorated, so the mode is chosen
before any kernel module is imported: the pytest plugin calls ``configure`` when pytest starts,
and every child process (``isolation``) calls it with the mode its parent asked for.

* ``interpreter``: kernels run in Triton's CPU interpreter, with int32 loop variables;
* ``device``: kernels are compiled for and launched on the CUDA device;
* ``compile``: the interpreter is off and nothing is launched (the static check and the sm_90
  compile build TTIR, which cannot be built under the interpreter).
"""

import os

INTERPRETER = "interpreter"
DEVICE = "device"
COMPILE = "compile"
MODES = (INTERPRETER, DEVICE, COMPILE)
_VARIABLE = "TRITON_INTERPRET"


def cuda_available():
    import torch
    return torch.cuda.is_available()


def resolve(requested):
    """``auto`` becomes ``device`` with a CUDA device, else ``interpreter``."""
    if requested == "auto":
        return DEVICE if cuda_available() else INTERPRETER
    if requested not in MODES:
        raise ValueError(f"mode must be auto, {', '.join(MODES)}; got {requested!r}")
    return requested


def configure(requested="auto"):
    """Put this process in ``requested`` mode; return the mode chosen."""
    chosen = resolve(requested)
    if chosen == INTERPRETER:
        os.environ[_VARIABLE] = "1"
    else:
        os.environ.pop(_VARIABLE, None)
    from triton_overflow import triton_versions
    from triton_overflow.interp import libdevice, runtime
    triton_versions.set_interpret(chosen == INTERPRETER)
    if chosen == INTERPRETER and triton_versions.interpreter_problem() is None:
        runtime.install_int32_loop_ranges()
        runtime.install_vectorised_xor_reductions()
        libdevice.install()
    return chosen


def interpreted():
    """Whether kernels decorated in this process run in the interpreter."""
    return os.environ.get(_VARIABLE) == "1"


def child_environment(mode, base=None):
    """The environment of a child process that runs in ``mode``."""
    env = dict(os.environ if base is None else base)
    if resolve(mode) == INTERPRETER:
        env[_VARIABLE] = "1"
    else:
        env.pop(_VARIABLE, None)
    return env

