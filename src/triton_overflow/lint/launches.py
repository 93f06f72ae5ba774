"""Launch facts for the static check: a recorded launches file, or a stated envelope.

``lint --launches FILE`` compiles each recorded kernel exactly as it was launched (its argument
types and constexpr values) and gives each finding its headroom at those launches.
``lint --limits rows=16384,logits_stride=151936`` says, for each finding, whether a deployment
envelope reaches 2**31: names are kernel arguments (a pointer argument's value is the largest
entry of its int table), ``grid0``..``grid2`` (programs per axis) or ``rows`` (``grid0``).
"""

import json
from dataclasses import dataclass
from pathlib import Path

from triton_overflow.lint import Report, check_launch, describe_error, discover
from triton_overflow.lint.ranges import LaunchFacts


@dataclass
class LaunchRecord:
    kernel: str
    file: str
    signature: dict
    constexprs: dict
    launches: list  # [LaunchFacts], one per distinct launch
    count: int

    @property
    def label(self):
        return (f"{self.count} launch{'es' if self.count != 1 else ''}, "
                f"{len(self.launches)} distinct")


def load(path):
    from triton_overflow.lint.record import FORMAT_VERSION, READABLE_VERSIONS
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read launches file {path}: {error}") from None
    if data.get("version") not in READABLE_VERSIONS:
        raise ValueError(f"{path}: launches file version {data.get('version')}, expected "
                         f"{FORMAT_VERSION}")
    return [from_dict(item) for item in data["launches"]]


def from_dict(item, facts=None):
    """A ``LaunchRecord`` from one record of a launches file; with ``facts`` (``LaunchFacts``,
    or ``[]`` for none), judged at those instead of at the recorded launches."""
    from triton_overflow.lint.record import deserialise
    recorded = [LaunchFacts(grid=tuple(launch["grid"]), ints=launch["ints"],
                            tables={k: tuple(v) for k, v in launch["tables"].items()},
                            where=_where(launch))
                for launch in item["launches"]]
    return LaunchRecord(
        kernel=item["kernel"], file=item["file"], signature=item["signature"],
        constexprs={k: deserialise(v) for k, v in item["constexprs"].items()},
        launches=recorded if facts is None else list(facts),
        count=sum(launch["count"] for launch in item["launches"]))


def _where(launch):
    grid = "x".join(str(g) for g in launch["grid"])
    folded = ", the largest of several" if launch.get("folded") else ""
    return f"at the recorded launch (grid {grid}{folded})"


def lint_launches(path, narrow_to=()):
    """The ``Report`` of every recorded launch (under ``narrow_to`` paths, if any)."""
    from triton_overflow.twin import twin_origin
    report = Report(label="recorded kernel launches")
    try:
        records = load(path)
    except ValueError as error:
        report.problems.append(discover.Problem(str(path), str(error)))
        return report
    if narrow_to:
        wanted = {Path(p).resolve() for p in discover.find(narrow_to).files}
        origins = {r.file: twin_origin(r.file) for r in records}
        records = [r for r in records if Path(r.file).resolve() in wanted or
                   (origins[r.file] is not None and Path(origins[r.file]).resolve() in wanted)]
    return check_records(records, report)


def check_records(records, report, small_ints_are_i32=False):
    """Add to ``report`` each ``LaunchRecord``'s kernel compiled as it was launched; with
    ``small_ints_are_i32``, an int argument specialised as the constexpr 1 is an i32 again."""
    from dataclasses import replace

    from triton_overflow.twin import twin_origin
    modules = {}
    for record in records:
        file = Path(record.file)
        origin = twin_origin(file)
        if file not in modules:
            modules[file] = discover.load_module(file) if file.exists() else \
                (None, "the kernel's file no longer exists")
        module, note = modules[file]
        kernel = _kernel_named(module, file, record.kernel) if module is not None else None
        if kernel is None:
            report.problems.append(discover.Problem(record.file, note or "not found in its module",
                                                    kernel=record.kernel))
            continue
        if small_ints_are_i32:
            record = _unspecialised(record, kernel.jit)
        try:
            result = check_launch(kernel, record)
        except Exception as error:  # noqa: BLE001 - one line, and the run goes on
            report.problems.append(discover.Problem(kernel.where, describe_error(error),
                                                    kernel=record.kernel))
            continue
        if origin:
            result.twin_of = origin
            result.file = origin
            result.findings = [replace(f, file=origin, twin_of=origin)
                               if twin_origin(f.file) else replace(f, twin_of=origin)
                               for f in result.findings]
        report.results.append(result)
    return report


def _unspecialised(record, jit):
    from dataclasses import replace
    signature, constexprs = dict(record.signature), dict(record.constexprs)
    for parameter in jit.params:
        name = parameter.name
        if not parameter.is_constexpr and signature.get(name) == "constexpr" and \
                constexprs.get(name) == 1:
            signature[name] = "i32"
            del constexprs[name]
    return replace(record, signature=signature, constexprs=constexprs)


def _kernel_named(module, file, name):
    kernels, _ = discover._kernels_of(module, Path(file).resolve())
    for kernel in kernels:
        if kernel.name == name:
            return kernel
    from triton_overflow.triton_versions import jit_function_of
    for value in vars(module).values():
        jit = jit_function_of(value)
        if jit is not None and jit.fn.__name__ == name:
            return discover.Kernel(jit=jit, name=name, file=str(file),
                                   line=jit.fn.__code__.co_firstlineno, module=module)
    return None


def parse_limits(text):
    """``LaunchFacts`` from ``name=value,...``."""
    facts = LaunchFacts(grid=None, where="within the limits")
    grid = [None, None, None]
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--limits wants NAME=VALUE pairs; got {item!r}")
        try:
            number = int(value.replace("_", ""))
        except ValueError:
            raise ValueError(f"--limits: {name} must be an integer; got {value!r}") from None
        name = name.strip()
        facts.names.append(name)
        if name in ("rows", "grid0"):
            grid[0] = number
            if name == "rows":  # a kernel argument named rows, too
                facts.ints[name] = number
        elif name in ("grid1", "grid2"):
            grid[int(name[-1])] = number
        else:
            facts.ints[name] = number
            facts.tables[name] = (0, number)
    if any(g is not None for g in grid):
        facts.grid = tuple(grid)
    return facts
