"""What the processes of one test run share: values computed once, by whichever process asks
first, and read by the rest (pytest-xdist workers each ask for a module's static check).

A run is named when its controlling process starts (``devices.start_run`` sets
``TRITON_OVERFLOW_RUN``, which workers inherit); values live as JSON files in a folder of the
system's temp directory named after it, each written under a file lock (``filelock``) so that a
second process waits for the first instead of computing it again. Outside a run (no name),
``once`` just computes.
"""

import hashlib
import json
import os
import shutil

from triton_overflow.devices import owns_run, run_path

FOLDER = ".shared"


def clear():
    """Remove this run's shared values: in the process that started the run, as it ends."""
    folder = run_path(FOLDER)
    if folder is not None and owns_run():
        shutil.rmtree(folder, ignore_errors=True)


def once(key, compute):
    """``compute()`` (JSON), computed once per run for ``key`` (a JSON-able value)."""
    folder = run_path(FOLDER)
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
