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
    from triton_overflow.record import FORMAT_VERSION, deserialise
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read launches file {path}: {error}") from None
    if data.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: launches file version {data.get('version')}, expected "
                         f"{FORMAT_VERSION}")
    records = []
    for item in data["launches"]:
        facts = [LaunchFacts(grid=tuple(launch["grid"]), ints=launch["ints"],
                             tables={k: tuple(v) for k, v in launch["tables"].items()},
                             where=_where(launch))
                 for launch in item["launches"]]
        records.append(LaunchRecord(
            kernel=item["kernel"], file=item["file"], signature=item["signature"],
            constexprs={k: deserialise(v) for k, v in item["constexprs"].items()},
            launches=facts, count=sum(launch["count"] for launch in item["launches"])))
    return records


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
    wanted = {Path(p).resolve() for p in discover.find(narrow_to).files} if narrow_to else None
    modules = {}
    for record in records:
        file = Path(record.file)
        origin = twin_origin(file)
        if wanted is not None and file.resolve() not in wanted and \
                (origin is None or Path(origin).resolve() not in wanted):
            continue
        where = f"{record.file}"
        if file not in modules:
            modules[file] = discover.load_module(file) if file.exists() else \
                (None, "the kernel's file no longer exists")
        module, note = modules[file]
        kernel = _kernel_named(module, file, record.kernel) if module is not None else None
        if kernel is None:
            report.problems.append(discover.Problem(where, note or "not found in its module",
                                                    kernel=record.kernel))
            continue
        try:
            result = check_launch(kernel, record)
        except Exception as error:  # noqa: BLE001 - one line, and the run goes on
            report.problems.append(discover.Problem(kernel.where, describe_error(error),
                                                    kernel=record.kernel))
            continue
        if origin:
            from dataclasses import replace
            result.twin_of = origin
            result.file = origin
            result.findings = [replace(f, file=origin, twin_of=origin)
                               if twin_origin(f.file) else replace(f, twin_of=origin)
                               for f in result.findings]
        report.results.append(result)
    return report


def _kernel_named(module, file, name):
    kernels, _ = discover._kernels_of(module, Path(file).resolve())
    for kernel in kernels:
        if kernel.name == name:
            return kernel
    from triton_overflow.compat import jit_function_of
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
