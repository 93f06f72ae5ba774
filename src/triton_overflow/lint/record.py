"""Record every Triton kernel launch of any command: ``triton-overflow record -o FILE -- CMD``.

The command runs with a ``sitecustomize`` shim first on its ``PYTHONPATH``, so every Python
process it starts (pytest, its xdist workers, the suite's child processes) records its launches
once Triton is imported. Each launch is seen on both launch paths, ``JITFunction.run`` (GPU) and
the interpreter's (``triton_versions.observe_launches`` knows where that is on each version).
Triton's own ``launch_enter_hook`` is not used because it carries neither the arguments nor the
grid, and the interpreter never calls it.

A record is one kernel compiled one way (argument types and constexpr values, as Triton
specialises them: ints in int32 range are ``i32``, 1 is a constexpr) and the distinct launches
of it: the grid, the int arguments, each tensor's shape, strides and dtype (and the elements of
a small int tensor), and the smallest and largest entry of each int table (up to
``DISTINCT_LAUNCHES`` of them; further launches are folded into the last by taking maxima).
``lint --launches FILE`` compiles each record exactly so and reports each finding's headroom at
the launch that comes closest to 2**31.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

VARIABLE = "TRITON_OVERFLOW_RECORD"
TABLE_RANGES_VARIABLE = "TRITON_OVERFLOW_RECORD_TABLES"
TABLE_SCAN_LIMIT = 2**24  # int tables larger than this are not read (a huge case's own tensor)
TENSOR_VALUES_LIMIT = 4096  # int tensors up to this many elements are recorded whole
DISTINCT_LAUNCHES = 64
FORMAT_VERSION = 3
READABLE_VERSIONS = (2, 3)  # version 3 added the tensors of each launch


def main(output, command, table_ranges=True):
    """Run ``command`` with launches recorded; write them to ``output``; exit as it did."""
    with tempfile.TemporaryDirectory(prefix="overflow-record-") as folder:
        shim = Path(folder) / "shim"
        shim.mkdir()
        (shim / "sitecustomize.py").write_text(_SHIM)
        env = dict(os.environ)
        env[VARIABLE] = folder
        env[TABLE_RANGES_VARIABLE] = "1" if table_ranges else "0"
        env["PYTHONPATH"] = os.pathsep.join([str(shim)] + [p for p in
                                            env.get("PYTHONPATH", "").split(os.pathsep) if p])
        print(f"record: running {' '.join(command)}", flush=True)
        try:
            status = subprocess.call(command, env=env)
        except FileNotFoundError as error:
            print(f"record: cannot run the command: {error}", file=sys.stderr)
            return 2
        records = merge(Path(folder).glob("*.jsonl"))
    Path(output).write_text(json.dumps({"version": FORMAT_VERSION, "launches": records},
                                       indent=1) + "\n")
    launches = sum(launch["count"] for r in records for launch in r["launches"])
    print(f"record: {len(records)} kernel specialisations, {launches} launches -> {output}; "
          f"the command exited {status}")
    if not records:
        print("record: no Triton kernel launch was recorded", file=sys.stderr)
        return status or 2
    return status


def merge(files):
    """One record per kernel specialisation, with the launches of every process."""
    latest = {}
    for file in files:
        for line in Path(file).read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a process killed mid-write
            latest[(_key(record), record.get("pid"))] = record  # a process's last line is fullest
    combined = {}
    for (key, _), record in latest.items():
        if key not in combined:
            combined[key] = {k: v for k, v in record.items() if k != "pid"}
        else:
            for launch in record["launches"]:
                add_launch(combined[key], launch)
    return sorted(combined.values(), key=lambda r: (r["file"], r["kernel"]))


def _key(record):
    return (record["file"], record["kernel"], json.dumps(record["signature"], sort_keys=True),
            json.dumps(record["constexprs"], sort_keys=True, default=str))


def add_launch(record, launch):
    """Add ``launch`` to ``record``; True when that changed what the record knows."""
    for known in record["launches"]:
        if all(known[k] == launch[k] for k in ("grid", "ints", "tables")):
            known["count"] += launch["count"]
            return False
    if len(record["launches"]) < DISTINCT_LAUNCHES:
        record["launches"].append(dict(launch))
        return True
    last = record["launches"][-1]
    last["count"] += launch["count"]
    last["grid"] = [max(a, b) for a, b in zip(last["grid"], launch["grid"])]
    for name, value in launch["ints"].items():
        last["ints"][name] = max(last["ints"].get(name, value), value)
    for name, (low, high) in launch["tables"].items():
        old = last["tables"].get(name, [low, high])
        last["tables"][name] = [min(old[0], low), max(old[1], high)]
    last["folded"] = True
    return True


# --- inside a recorded process ----------------------------------------------------------------

_SHIM = '''"""Written by triton-overflow record: record Triton launches, then the usual sitecustomize."""
import os
import sys


class _AfterTritonImport:
    """Installs the recorder right after `import triton` completes in this process. Nothing of
    triton_overflow is imported before that (pytest wants to import its plugin itself)."""

    def find_spec(self, name, path, target=None):
        if name != "triton":
            return None
        import importlib.util
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            try:
                from triton_overflow.lint.record import install
                install()
            except Exception as error:  # the recorded command must run all the same
                print(f"triton-overflow record: not recording in this process: {error}",
                      file=sys.stderr)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("TRITON_OVERFLOW_RECORD") and "triton" not in sys.modules:
    sys.meta_path.insert(0, _AfterTritonImport())


def _run_the_environments_own():
    """Run the sitecustomize this shim hides, if there is one; it stays out of sys.modules
    (this module is "sitecustomize" there while site imports it)."""
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_run_the_environments_own()
'''


_installed = False
_lock = threading.Lock()
_records = {}


def install():
    """Observe every launch of this process, on both launch paths (idempotent)."""
    global _installed
    if _installed:
        return
    from triton_overflow import triton_versions
    triton_versions.observe_launches(_observe_safely)
    _installed = True


def recorded():
    """This process's records so far (after ``install``), one per kernel specialisation."""
    with _lock:
        return [dict(record) for record in _records.values()]


def _observe_safely(kernel, args, kwargs, grid):
    try:
        _observe(kernel, args, kwargs, grid)
    except Exception as error:  # noqa: BLE001 - recording must never break a launch
        print(f"triton-overflow record: a launch was not recorded: {error}", file=sys.stderr)


def _observe(kernel, args, kwargs, grid):
    import inspect

    from triton_overflow import triton_versions
    function = kernel.fn
    signature = inspect.signature(function)
    bound = dict(zip(signature.parameters, args))
    bound.update({k: v for k, v in kwargs.items() if k in signature.parameters})
    for name, parameter in signature.parameters.items():
        if name not in bound and parameter.default is not inspect.Parameter.empty:
            bound[name] = parameter.default
    no_specialize = _do_not_specialize(kernel, list(signature.parameters))
    types, constexprs, ints, tables, tensors = {}, {}, {}, {}, {}
    for name, parameter in signature.parameters.items():
        value = bound.get(name)
        annotation = str(parameter.annotation)
        if "constexpr" in annotation:
            types[name] = "constexpr"
            constexprs[name] = _serialise(value)
        elif value is None:
            types[name] = "constexpr"
            constexprs[name] = None
        elif isinstance(value, bool):
            types[name] = "i1"
        elif isinstance(value, int):
            if value == 1 and name not in no_specialize:
                types[name] = "constexpr"
                constexprs[name] = 1
            else:
                types[name] = _int_type(annotation, value)
                ints[name] = value
        elif isinstance(value, float):
            types[name] = "fp32"
        elif hasattr(value, "data_ptr") and hasattr(value, "dtype"):
            types[name] = triton_versions.argument_type(value)
            tensors[name] = _tensor(value)
            table = _table_range(value)
            if table is not None:
                tables[name] = table
        else:
            types[name] = "constexpr"
            constexprs[name] = _serialise(value)
    if callable(grid):
        grid = grid(dict(bound, **kwargs))
    grid = [int(g) for g in tuple(grid) + (1, ) * (3 - len(tuple(grid)))]
    file = function.__code__.co_filename
    key = (file, function.__name__, json.dumps(types, sort_keys=True),
           json.dumps(constexprs, sort_keys=True, default=str))
    with _lock:
        record = _records.get(key)
        if record is None:
            record = _records[key] = {
                "kernel": function.__name__, "file": file,
                "line": function.__code__.co_firstlineno, "module": function.__module__,
                "signature": types, "constexprs": constexprs, "launches": [],
                "pid": os.getpid()}
        changed = add_launch(record, {"grid": grid, "ints": ints, "tables": tables,
                                      "tensors": tensors, "count": 1})
        total = sum(launch["count"] for launch in record["launches"])
        if changed or total in (2, 10, 100, 1000):
            _write(record)


def _do_not_specialize(kernel, names):
    found = set()
    for item in getattr(kernel, "do_not_specialize", None) or []:
        found.add(names[item] if isinstance(item, int) and item < len(names) else item)
    return found


def _int_type(annotation, value):
    if "int64" in annotation or "i64" in annotation:
        return "i64"
    if "int32" in annotation or "i32" in annotation:
        return "i32"
    if -2**31 <= value < 2**31:
        return "i32"
    return "u64" if value >= 2**63 else "i64"


def _table_range(tensor):
    if os.environ.get(TABLE_RANGES_VARIABLE, "1") != "1":
        return None
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == _bool():
        return None
    if tensor.numel() == 0 or tensor.numel() > TABLE_SCAN_LIMIT:
        return None
    low, high = tensor.min().item(), tensor.max().item()
    return [int(low), int(high)]


def _tensor(tensor):
    """Shape, strides and dtype of a tensor argument, and its elements when it is a small int
    table (what a reproduction of the launch needs)."""
    described = {"shape": list(tensor.shape), "strides": list(tensor.stride()),
                 "dtype": str(tensor.dtype).removeprefix("torch.")}
    integral = not (tensor.dtype.is_floating_point or tensor.dtype.is_complex)
    if integral and 0 < tensor.numel() <= TENSOR_VALUES_LIMIT:
        described["values"] = [int(v) for v in tensor.detach().reshape(-1).cpu().tolist()]
    return described


def _bool():
    import torch
    return torch.bool


def _serialise(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    name = getattr(value, "name", None)
    if name is not None and type(value).__module__.startswith("triton"):
        return {"dtype": name}
    return {"repr": repr(value)}


def deserialise(value):
    """A constexpr value from a launches file."""
    if isinstance(value, dict) and "dtype" in value:
        import triton.language as tl
        return getattr(tl, value["dtype"])
    if isinstance(value, dict) and "repr" in value:
        raise ValueError(f"constexpr {value['repr']} cannot be rebuilt")
    return value


def _write(record):
    folder = os.environ.get(VARIABLE)
    if not folder:
        return
    with open(Path(folder) / f"{os.getpid()}.jsonl", "a") as handle:
        handle.write(json.dumps(record, default=str) + "\n")
