"""Run one case in a child process, so that its fault can never reach another test.

After an illegal memory access the CUDA context of the process is dead, and a segfault in the
interpreter kills the process: either would fail every test after it. ``run_isolated`` starts a
fresh Python (``python -m triton_overflow.isolation``) with the parent's import path and working
directory, puts it in the requested execution mode (``triton_overflow.mode``), calls
``module:function(**kwargs)`` there, and reports how it ended:

* ``passed``: it returned; ``value`` is what it returned (JSON);
* ``failed``: it raised; ``error`` is the exception type, ``message`` its text;
* ``crashed``: the process died (a signal, or an exit without a result);
* ``timeout``: it ran past ``timeout`` seconds and was killed.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from triton_overflow.mode import child_environment, configure

ILLEGAL_ACCESS = ("illegal memory access", "misaligned address", "device-side assert",
                  "unspecified launch failure")
FAULT_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL}
WRONG_ROW_ERRORS = ("RowMismatch", "AssertionError")


@dataclass
class Outcome:
    status: str
    seconds: float
    value: object = None
    error: str = ""
    message: str = ""
    output: str = ""
    returncode: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def device_fault(self):
        text = f"{self.error} {self.message} {self.output}".lower()
        return any(marker in text for marker in ILLEGAL_ACCESS)

    @property
    def faulted(self):
        """A memory fault: a fault signal killed the process, or the device reported an
        illegal access. Never an out-of-memory kill or a timeout."""
        if self.status == "crashed":
            code = self.returncode
            return code is not None and code < 0 and signal.Signals(-code) in FAULT_SIGNALS
        return self.status == "failed" and self.device_fault

    @property
    def wrong_row(self):
        """The case's check found a row that is not what the reference says."""
        return self.status == "failed" and self.error in WRONG_ROW_ERRORS

    @property
    def wrapped(self):
        """The interpreter's wrap check stopped at an int32 operation that left its range."""
        return self.status == "failed" and self.error == "Int32WrapError"

    def summary(self):
        if self.status == "passed":
            return f"passed in {self.seconds:.1f} s"
        if self.status == "failed":
            return f"failed: {self.error}: {self.message.strip().splitlines()[0] if self.message.strip() else ''}"
        if self.status == "crashed":
            return f"crashed: {self.message}"
        return f"timed out after {self.seconds:.0f} s"


def run_isolated(target, kwargs=None, *, mode, env=None, timeout=600):
    """Call ``target`` ("package.module:function") with ``kwargs`` in a child process that runs
    in ``mode`` (see ``triton_overflow.mode``); ``env`` adds variables."""
    child_env = child_environment(mode)
    child_env.update(env or {})
    # The child imports what this process can: the test run's import path, then its own.
    inherited = [str(Path(p).resolve()) for p in sys.path if p]
    child_env["PYTHONPATH"] = os.pathsep.join(
        inherited + [p for p in child_env.get("PYTHONPATH", "").split(os.pathsep) if p])
    with tempfile.TemporaryDirectory(prefix="isolated-") as folder:
        result_path = Path(folder) / "result.json"
        command = [sys.executable, "-m", "triton_overflow.isolation", mode, target,
                   json.dumps(kwargs or {}), str(result_path)]
        start = time.monotonic()
        try:
            done = subprocess.run(command, env=child_env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as expired:
            output = (expired.stdout or b"")[-4000:]
            return Outcome("timeout", time.monotonic() - start,
                           output=output.decode(errors="replace") if isinstance(output, bytes) else output)
        seconds = time.monotonic() - start
        output = (done.stdout + done.stderr)[-4000:]
        if result_path.exists():
            result = json.loads(result_path.read_text())
            if result["ok"]:
                return Outcome("passed", seconds, value=result["value"], output=output,
                               returncode=done.returncode)
            return Outcome("failed", seconds, error=result["error"], message=result["message"],
                           output=output + result["traceback"][-3000:], returncode=done.returncode,
                           extra=result.get("extra", {}))
        if done.returncode < 0:
            name = signal.Signals(-done.returncode).name
            message = f"killed by {name}"
        else:
            message = f"exited with status {done.returncode} before reporting a result"
        return Outcome("crashed", seconds, message=message, output=output,
                       returncode=done.returncode)


def _child(mode, target, kwargs_json, result_path):
    module_name, _, function_name = target.partition(":")
    try:
        import importlib
        configure(mode)
        function = getattr(importlib.import_module(module_name), function_name)
        value = function(**json.loads(kwargs_json))
        result = {"ok": True, "value": value}
    except BaseException as error:  # noqa: BLE001 - every ending is reported to the parent
        result = {"ok": False, "error": type(error).__name__, "message": str(error),
                  "traceback": traceback.format_exc(),
                  "extra": getattr(error, "report", {})}
    Path(result_path).write_text(json.dumps(result, default=str))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a dead CUDA context can hang or crash it.
    os._exit(0)


if __name__ == "__main__":
    _child(*sys.argv[1:5])
