"""Run one case in a child process, so that its fault can never reach another test.

After an illegal memory access the CUDA context of the process is dead, and a segfault in the
interpreter kills the process: either would fail every test after it. ``run_isolated`` runs
``module:function(**kwargs)`` in a new process with the parent's import path, working directory
and environment, in the requested execution mode (``triton_overflow.interp.execution_mode``),
and reports how it ended:

* ``passed``: it returned; ``value`` is what it returned (JSON);
* ``skipped``: it raised ``Skipped``: it did not run, for the reason in ``message``;
* ``failed``: it raised; ``error`` is the exception type, ``message`` its text, ``fields`` what
  the exception declared in its own ``fields`` (an int32 wrap's file and line, say);
* ``crashed``: the process died (a signal, or an exit without a result);
* ``timeout``: it ran past ``timeout`` seconds and was killed.

The new process is forked from a server process (``python -m triton_overflow.engine.isolation``,
started on first use), one per test process and per interpreter flag: it has imported torch,
numpy and Triton (with the flag of its mode set, as Triton decorates its own library functions
when it is imported) and nothing else, which spares each run the two seconds of importing
them. The server never initialises CUDA, compiles or runs a kernel, so each child starts as a
fresh interpreter in that mode would, and a fault in the child is the child's alone.
"""

import atexit
import gc
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from triton_overflow.interp.execution_mode import (COMPILE, INTERPRETER, child_environment,
                                                   configure, resolve)

ILLEGAL_ACCESS = ("illegal memory access", "misaligned address", "device-side assert",
                  "unspecified launch failure")
FAULT_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL}
WRONG_ROW_ERRORS = ("RowMismatch", "AssertionError")


class Skipped(Exception):
    """Raised in a child: what it was asked to run cannot run here, for the reason given (no
    room for the case, a layout the device cannot launch)."""


@dataclass
class Outcome:
    status: str
    seconds: float
    value: object = None
    error: str = ""
    message: str = ""
    output: str = ""
    returncode: int | None = None
    fields: dict = field(default_factory=dict)

    @property
    def passed(self):
        return self.status == "passed"

    @property
    def skipped(self):
        """It did not run, and ``message`` says why."""
        return self.status == "skipped"

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
        if self.status == "skipped":
            return f"skipped: {self.message}"
        if self.status == "failed":
            return f"failed: {self.error}: {self.message.strip().splitlines()[0] if self.message.strip() else ''}"
        if self.status == "crashed":
            return f"crashed: {self.message}"
        return f"timed out after {self.seconds:.0f} s"


PRELOADED = ("torch", "numpy", "triton", "triton.language")


def run_isolated(target, kwargs=None, *, mode, env=None, timeout=600):
    """Call ``target`` ("package.module:function") with ``kwargs`` in a child process that runs
    in ``mode`` (see ``triton_overflow.interp.execution_mode``); ``env`` adds variables."""
    child_env = child_environment(mode)
    child_env.update(env or {})
    child_env = _with_import_path(child_env)
    with tempfile.TemporaryDirectory(prefix="isolated-") as folder:
        result_path, output_path = Path(folder) / "result.json", Path(folder) / "output.txt"
        request = {"mode": mode, "target": target, "kwargs": json.dumps(kwargs or {}),
                   "result_path": str(result_path), "output_path": str(output_path),
                   "env": child_env, "cwd": os.getcwd(), "path": sys.path}
        start = time.monotonic()
        returncode = _SERVERS[resolve(mode) == INTERPRETER].run(request, timeout)
        seconds = time.monotonic() - start
        output = _tail(output_path, 4000)
        if returncode is None:
            return Outcome("timeout", seconds, output=output)
        if result_path.exists():
            result = json.loads(result_path.read_text())
            if result["ok"]:
                return Outcome("passed", seconds, value=result["value"], output=output,
                               returncode=returncode)
            if result["skipped"]:
                return Outcome("skipped", seconds, message=result["message"], output=output,
                               returncode=returncode)
            return Outcome("failed", seconds, error=result["error"], message=result["message"],
                           output=output + result["traceback"][-3000:], returncode=returncode,
                           fields=result["fields"])
        if returncode < 0:
            message = f"killed by {signal.Signals(-returncode).name}"
        else:
            message = f"exited with status {returncode} before reporting a result"
        return Outcome("crashed", seconds, message=message, output=output,
                       returncode=returncode)


class ForkServerError(RuntimeError):
    """The server could not be started or stopped answering (its log is in the message)."""


class ForkServer:
    """The parent's handle on a server: one request at a time, a line of JSON each way, read
    from the pipe itself (a buffered reader would hide a second line from ``select``)."""

    START_SECONDS = 300  # to import torch and Triton on a loaded machine
    STOP_SECONDS = 30

    def __init__(self, interpreted):
        self.interpreted = interpreted
        self._process = None
        self._owner = None
        self._pending = b""
        self._log = None
        self._lock = threading.Lock()

    def run(self, request, timeout):
        """Fork a child for ``request``; its exit code (negative: the signal that killed it),
        or None when it ran past ``timeout`` seconds and was killed."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    return self._run(request, timeout)
                except (OSError, EOFError, ValueError, KeyError) as error:
                    log = self._log_tail()
                    self.close()  # the server died or lost the thread; one restart
                    if attempt == 2:
                        raise ForkServerError(f"the fork server failed ({error!r}); its log:\n"
                                              f"{log}") from error

    def _run(self, request, timeout):
        process = self._started()
        data = memoryview((json.dumps(request) + "\n").encode())
        while data:
            data = data[os.write(process.stdin.fileno(), data):]
        pid = self._reply("pid", self.START_SECONDS)
        if pid is None:
            raise EOFError("the fork server did not fork in time")
        code = self._reply("exit", timeout)
        if code is None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it ended as the time ran out; the server reaps it either way
            self._reply("exit", None)
        return code

    def _reply(self, key, timeout):
        """The value of the next reply line, which must carry ``key``; None past ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self._process.stdout.fileno()
        while b"\n" not in self._pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            data = os.read(fd, 65536)
            if not data:
                raise EOFError("the fork server exited")
            self._pending += data
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)[key]

    def _started(self):
        if self._owner != os.getpid():  # a forked copy of this process must not share its pipes
            self._process, self._pending = None, b""
        if self._process is None or self._process.poll() is not None:
            env = _with_import_path(child_environment(INTERPRETER if self.interpreted
                                                      else COMPILE))
            self._log = tempfile.TemporaryFile()
            self._process = subprocess.Popen(
                [sys.executable, "-m", "triton_overflow.engine.isolation"], env=env, bufsize=0,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log)
            self._owner, self._pending = os.getpid(), b""
        return self._process

    def _log_tail(self):
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read()[-3000:].decode(errors="replace")

    def close(self):
        if self._process is not None and self._owner == os.getpid():
            self._process.kill()
            self._process.wait()
        self._process, self._pending = None, b""

    def shut_down(self):
        """End the server's loop and wait for it (killed after ``STOP_SECONDS``), so that its
        children's CPU time counts in this process's, as ``time`` and ``getrusage`` report it."""
        if self._process is None or self._owner != os.getpid():
            return
        self._process.stdin.close()
        try:
            self._process.wait(timeout=self.STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.close()
        self._process, self._pending = None, b""


_SERVERS = {interpreted: ForkServer(interpreted) for interpreted in (False, True)}


@atexit.register
def shut_down_servers():
    for server in _SERVERS.values():
        server.shut_down()


def _with_import_path(env):
    """``env`` with this process's import path first on ``PYTHONPATH``: the server, and what a
    child itself starts, import what this process can."""
    inherited = [str(Path(p).resolve()) for p in sys.path if p]
    env["PYTHONPATH"] = os.pathsep.join(
        inherited + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _die_with_parent():
    """Linux: be killed when the process that started this one ends (no orphan keeps running
    a case, or holding device memory, after its test process was killed)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _tail(path, size):
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - size))
            return handle.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def _serve():
    """The server: preload, then fork a child per request line and report its exit."""
    import importlib
    _die_with_parent()
    for name in PRELOADED:
        importlib.import_module(name)
    sys.modules["torch"].set_num_threads(_cpu_threads_per_child())
    # What is loaded now lives as long as every child: out of the collector's sight, its pages
    # are not dirtied by every collection (copy-on-write) nor walked by every full one.
    gc.freeze()
    requests, replies = sys.stdin, sys.stdout
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                _die_with_parent()
                os.close(0)
                os.close(1)
                os.chdir(request["cwd"])
                sys.path[:] = request["path"]
                os.environ.clear()
                os.environ.update(request["env"])
                _child(request["mode"], request["target"], request["kwargs"],
                       request["result_path"], request["output_path"])
            except BaseException:  # noqa: BLE001 - before _child could report it
                traceback.print_exc()
            finally:
                os._exit(70)  # never back into the server's loop
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"exit": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


def _cpu_threads_per_child():
    """Torch's CPU threads in each child: this machine's CPUs shared among the test processes.
    Each would otherwise start one a CPU: ten workers' children, 160 threads on 16 CPUs."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    return max(1, len(os.sched_getaffinity(0)) // workers)


def _is_skip(error):
    """Whether ``error`` is this module's ``Skipped``, compared by name: the server runs this
    module as ``__main__``, so the class a child's function raises (imported from
    ``triton_overflow.engine.isolation``) is not the one defined here."""
    kind = type(error)
    return (kind.__module__, kind.__qualname__) == ("triton_overflow.engine.isolation", "Skipped")


def _child(mode, target, kwargs_json, result_path, output_path):
    with open(output_path, "wb") as output:
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
    # Triton reads a few variables once, when it is imported (TRITON_DEBUG, which turns on its
    # sanitizer): read them again from this child's environment.
    refresh = getattr(getattr(sys.modules.get("triton"), "knobs", None), "refresh_knobs", None)
    if refresh is not None:
        refresh()
    module_name, _, function_name = target.partition(":")
    try:
        import importlib
        configure(mode)
        function = getattr(importlib.import_module(module_name), function_name)
        value = function(**json.loads(kwargs_json))
        result = {"ok": True, "value": value}
    except BaseException as error:  # noqa: BLE001 - every ending is reported to the parent
        result = {"ok": False, "error": type(error).__name__, "message": str(error),
                  "skipped": _is_skip(error),
                  "traceback": traceback.format_exc(),
                  "fields": getattr(error, "fields", {})}
    Path(result_path).write_text(json.dumps(result, default=str))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a dead CUDA context can hang or crash it.
    os._exit(0)


if __name__ == "__main__":
    _serve()
