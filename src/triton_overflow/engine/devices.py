"""Which GPU a huge case runs on, and a budget of each GPU's memory shared by every process.

Under pytest-xdist several workers start huge cases at once; checking free memory and then
allocating is not atomic, so two cases could both pass the check and the second run out of
memory. Instead, when a test run starts (``start_run``, in pytest's controlling process) the
free memory of every visible GPU is measured once, in a short child process so that the
controller holds no CUDA context, and written to a budget file. Each huge case then
``reserve``s its bytes under a file lock (``filelock``) on the device with the most room, waits
while the others hold too much, and is skipped with the reason when it can never fit. Its child
process runs on that device (``CUDA_VISIBLE_DEVICES``); with several GPUs the cases spread over
all of them, and each xdist worker's own in-process tests run on one GPU by worker number. The
file counts what each device ran.
"""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

RUN_VARIABLE = "TRITON_OVERFLOW_RUN"
SESSION_VARIABLE = "TRITON_OVERFLOW_SESSION"  # the pid of a pytest session's controller
GPUS_VARIABLE = "TRITON_OVERFLOW_GPUS"
CONTEXT_BYTES = 768 * 2**20  # a child's CUDA context and Triton's modules, beyond the case
WAIT_SECONDS = 1800
WORKER_BYTES = 2**30
WORKERS_PER_GPU = 10
_SURVEY = ("import json, torch\n"
           "print(json.dumps([[torch.cuda.get_device_name(i), *torch.cuda.mem_get_info(i)]\n"
           "                  for i in range(torch.cuda.device_count())]))\n")


class NeverFits(Exception):
    """The bytes asked for exceed what any device had free when the run started."""


def visible_gpus():
    """The ids in ``CUDA_VISIBLE_DEVICES`` order (or 0..n-1) of the GPUs this run may use."""
    listed = os.environ.get(GPUS_VARIABLE)
    if listed is not None:
        return [g for g in listed.split(",") if g]
    return []


def survey():
    """[(name, free, total)] per visible GPU, measured in a child process; [] without one."""
    done = subprocess.run([sys.executable, "-c", _SURVEY], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        return []
    return [tuple(item) for item in json.loads(done.stdout.strip().splitlines()[-1])]


def start_run():
    """In the controlling process: measure the GPUs and open the run's budget (idempotent: a
    pytest inside a test shares the run's budget, but its session is its own)."""
    os.environ[SESSION_VARIABLE] = str(os.getpid())
    if os.environ.get(RUN_VARIABLE):
        return _read(_budget_path())
    from triton_overflow.interp import execution_mode
    gpus = survey() if execution_mode.cuda_available() else []
    outer = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    ids = outer[:len(gpus)] if outer else [str(i) for i in range(len(gpus))]
    os.environ[RUN_VARIABLE] = uuid.uuid4().hex[:12]
    os.environ[GPUS_VARIABLE] = ",".join(ids)
    budget = {"devices": {gid: {"name": name, "capacity": free, "total": total}
                          for gid, (name, free, total) in zip(ids, gpus)},
              "reservations": {}, "ran": {gid: 0 for gid in ids}}
    _write(_budget_path(), budget)
    return budget


def auto_workers():
    """The worker count for ``pytest -n auto``: one per CPU this process may use; with GPUs,
    no more than their free memory holds at ``WORKER_BYTES`` a worker (its own CUDA context and
    a huge case's child), and at most ``WORKERS_PER_GPU`` a device, past which the workers wait
    on one another's compiles and the memory budget instead of running."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    path = _budget_path()
    gpus = _read(path)["devices"].values() if path is not None and path.exists() else []
    if not gpus:
        return max(1, cpus or 1)
    fitting = sum(min(WORKERS_PER_GPU, max(1, d["capacity"] // WORKER_BYTES)) for d in gpus)
    return max(1, min(cpus or 1, fitting))


def session():
    """This pytest session's name (its controlling process), shared by its xdist workers; ""
    outside one."""
    return os.environ.get(SESSION_VARIABLE, "")


def owns_session():
    """Whether this process controls its pytest session."""
    return session() == str(os.getpid())


def pin_worker(worker):
    """In an xdist worker, before CUDA starts: run this worker's own tests on one GPU."""
    gpus = visible_gpus()
    if len(gpus) > 1 and worker.startswith("gw"):
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[int(worker[2:]) % len(gpus)]


def described():
    """The GPUs of this run as the budget measured them, for the report header."""
    path = _budget_path()
    if path is None or not path.exists():
        return []
    return [(gid, d["name"], d["capacity"], d["total"]) for gid, d in _read(path)["devices"].items()]


@contextlib.contextmanager
def reserve(nbytes, what):
    """Hold ``nbytes`` (plus a child's CUDA context) of one GPU; yield its id for
    ``CUDA_VISIBLE_DEVICES``. Raise ``NeverFits`` when no device could ever hold it."""
    path = _budget_path()
    if path is None or not path.exists():
        yield None  # no budget for this run: the child checks free memory itself
        return
    from filelock import FileLock
    needed = nbytes + CONTEXT_BYTES
    token = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + WAIT_SECONDS
    lock = FileLock(str(path) + ".lock")
    chosen = None
    while chosen is None:
        with lock:
            budget = _read(path)
            _drop_dead(budget)
            devices = budget["devices"]
            if not devices or needed > max(d["capacity"] for d in devices.values()):
                largest = max(devices.values(), key=lambda d: d["capacity"], default=None)
                where = (f"{largest['capacity'] / 2**30:.1f} GiB free on {largest['name']} when "
                         "the run started" if largest else "no GPU")
                raise NeverFits(f"needs {needed / 2**30:.1f} GiB (with its CUDA context), {where}")
            room = {gid: d["capacity"] - sum(r["bytes"] for r in budget["reservations"].values()
                                             if r["device"] == gid)
                    for gid, d in devices.items()}
            fits = [gid for gid in room if room[gid] >= needed]
            if fits:
                chosen = max(fits, key=lambda gid: room[gid])
                budget["reservations"][token] = {"device": chosen, "bytes": needed,
                                                 "pid": os.getpid(), "what": what}
                budget["ran"][chosen] = budget["ran"].get(chosen, 0) + 1
                _write(path, budget)
        if chosen is None:
            if time.monotonic() > deadline:
                raise NeverFits(f"waited {WAIT_SECONDS} s for {needed / 2**30:.1f} GiB of device "
                                "memory held by other cases")
            time.sleep(0.5)
    try:
        yield chosen
    finally:
        with lock:
            budget = _read(path)
            budget["reservations"].pop(token, None)
            _write(path, budget)


def ran_per_device():
    """{gpu id: huge cases started there} for this run."""
    path = _budget_path()
    if path is None or not path.exists():
        return {}
    budget = _read(path)
    return {f"{gid} ({budget['devices'][gid]['name']})": count
            for gid, count in budget["ran"].items()}


def run_path(suffix, run=None):
    """Where this run's (or ``run``'s) file with ``suffix`` lives; None outside a run."""
    run = run or os.environ.get(RUN_VARIABLE)
    return Path(tempfile.gettempdir()) / f"triton-overflow-{run}{suffix}" if run else None


def _budget_path():
    return run_path(".json")


def _read(path):
    return json.loads(Path(path).read_text())


def _write(path, data):
    temporary = Path(f"{path}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data))
    temporary.replace(path)


def _drop_dead(budget):
    for token, reservation in list(budget["reservations"].items()):
        try:
            os.kill(reservation["pid"], 0)
        except ProcessLookupError:
            del budget["reservations"][token]
        except PermissionError:
            pass
