"""What the processes of one pytest session share: values computed once, by whichever process
asks first, and read by the rest (pytest-xdist workers each ask for a module's static check).

A session is named when its controlling process starts (``devices.start_run`` sets
``TRITON_OVERFLOW_SESSION``, which workers inherit; a pytest started inside a test shares the
run's device budget but not its values, which its code may have changed); values live as JSON
files in a folder of the system's temp directory named after the run and the session, each
written under a file lock (``filelock``) so that a second process waits for the first instead
of computing it again. Outside a run (no name), ``once`` just computes.
"""

import hashlib
import json
import os
import shutil

from triton_overflow.engine.devices import owns_session, run_path, session

FOLDER = ".shared"


def _folder():
    return run_path(f"{FOLDER}-{session()}")


def clear():
    """Remove this session's shared values: in the process that controls it, as it ends."""
    folder = _folder()
    if folder is not None and owns_session():
        shutil.rmtree(folder, ignore_errors=True)


def once(key, compute):
    """``compute()`` (JSON), computed once per session for ``key`` (a JSON-able value)."""
    folder = _folder()
    if folder is None:
        return compute()
    from filelock import FileLock
    folder.mkdir(exist_ok=True)
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    path = folder / f"{name}.json"
    with FileLock(str(path) + ".lock"):
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        value = compute()
        written = path.with_suffix(f".{os.getpid()}.tmp")
        written.write_text(json.dumps(value))
        written.replace(path)
        return value
