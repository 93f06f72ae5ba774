"""A kernel launch described in a few lines, sized by one symbol: its launch rows.

A description is a mapping (a TOML file, a dict in a generated test, or made from a recorded
launch by ``from_record``)::

    kernel = "vllm/v1/worker/gpu/metrics/logits.py:_num_nans_kernel"
    rows = 4                      # launch rows of the launch described
    grid = ["rows"]               # ints, "rows", or "rows/N" (N rows a program)
    [arguments]
    logits_ptr = {shape = ["rows", 151936], dtype = "float32"}
    logits_stride = 151936
    num_nans_ptr = {shape = ["rows"], dtype = "int32"}
    vocab_size = 151936
    BLOCK_SIZE = 8192

A tensor is ``{shape, dtype}``, with ``values`` (its elements, flat, at ``rows`` launch rows)
or ``fill`` (one value) where its contents matter; without either, floats are random and ints
zero. ``"rows"`` in a shape, the grid or an int argument is the number of launch rows, and
``"slots"`` the rows of a table that a loaded index selects (a request's row of a per-request
table: the tensor a finding's product addresses, and every table indexed by the same slot);
a reproduction sets both. Every other number is kept as described; the string "None" passes
None (TOML has no null).

Where the row is loaded, the table it is loaded from is filled with the slot checked (0 in
the launch that reads row 0); where that table holds offsets rather than the row itself (a
cumulative count of tokens per request, say), its ``values`` say where the slot goes:
``values = ["slot", "slot + 1"]`` puts the second request's tokens at the slot checked, a launch
of ``rows = 2`` requests. A table of addresses (``{pointers = ["lora_a"]}``, uint64) holds the
addresses of tensors the kernel reaches only through it, described under ``[pointees]``.
"""

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ROWS = "rows"
SLOTS = "slots"
SYMBOLS = (ROWS, SLOTS)



_GRID_ROWS = re.compile(r"rows(/[1-9][0-9]*)?")
_SLOT_VALUE = re.compile(r"slot(?:\s*([+-])\s*([0-9]+))?")


def per_program(axis: str) -> int:
    """N of a grid axis "rows/N" (1 for "rows")."""
    return int(axis.partition("/")[2] or 1)


class LaunchError(ValueError):
    """A launch description that cannot be used, with what is wrong in it."""


@dataclass(frozen=True)
class TensorArgument:
    shape: tuple[int | str, ...]
    dtype: torch.dtype
    values: tuple[float | str, ...] | None = None  # a str: "slot", "slot + N", "slot - N"
    fill: float | None = None
    pointers: tuple[str, ...] | None = None  # a table of the addresses of these pointees

    @property
    def places_slot(self) -> bool:
        """Whether the values say where the slot checked goes (a table of offsets)."""
        return any(isinstance(value, str) for value in self.values or ())

    def values_at(self, slot: int) -> list[float]:
        """The values, each "slot" expression evaluated at ``slot``."""
        evaluated = []
        for value in self.values or ():
            if isinstance(value, str):
                match = _SLOT_VALUE.fullmatch(value.strip())
                assert match, value  # parse checked it
                offset = int(match[2] or 0)
                value = slot - offset if match[1] == "-" else slot + offset
            evaluated.append(value)
        return evaluated

    def dim_of(self, symbol: str) -> int | None:
        """The dimension sized by ``symbol`` ("rows" or "slots"), or None."""
        return self.shape.index(symbol) if symbol in self.shape else None

    def sized(self, rows: int, slots: int) -> tuple[int, ...]:
        sizes = {ROWS: rows, SLOTS: slots}
        return tuple(sizes[dim] if dim in sizes else int(dim) for dim in self.shape)

    def nbytes(self, rows: int, slots: int) -> int:
        return math.prod(self.sized(rows, slots)) * self.dtype.itemsize


@dataclass(frozen=True)
class TritonDtype:
    """A constexpr that is a Triton dtype (``tl.float16``), by its name."""

    name: str

    def value(self) -> Any:
        import triton.language as tl
        return getattr(tl, self.name)


@dataclass(frozen=True)
class Launch:
    file: str  # as written: relative to the engine's root, or absolute
    kernel: str
    rows: int
    grid: tuple[int | str, ...]
    arguments: Mapping[str, Any]  # name -> TensorArgument, TritonDtype, int, float, bool, None
    slots: int = 0  # table rows of the launch described; 0: as many as its rows
    pointees: Mapping[str, TensorArgument] = dataclasses.field(default_factory=dict)

    @property
    def described_slots(self) -> int:
        return self.slots or self.rows

    @property
    def tensors(self) -> dict[str, TensorArgument]:
        return {name: value for name, value in self.arguments.items()
                if isinstance(value, TensorArgument)}

    def scalar(self, name: str, rows: int, slots: int) -> Any:
        value = self.arguments[name]
        if isinstance(value, TritonDtype):
            return value.value()
        return {ROWS: rows, SLOTS: slots}.get(value, value) if isinstance(value, str) else value

    def grid_for(self, rows: int) -> tuple[int, ...]:
        return tuple(-(-rows // per_program(axis)) if isinstance(axis, str) else int(axis)
                     for axis in self.grid)

    def rows_per_program(self, axis: int = 0) -> int:
        """Rows each program of grid axis ``axis`` takes: N for "rows/N", else 1."""
        entry = self.grid[axis] if axis < len(self.grid) else 1
        return per_program(entry) if isinstance(entry, str) else 1


def parse(description: Mapping[str, Any], where: str = "the launch") -> Launch:
    """A ``Launch`` from its description; ``LaunchError`` naming what is wrong."""
    kernel = description.get("kernel")
    if not isinstance(kernel, str) or ":" not in kernel:
        raise LaunchError(f"{where}: `kernel` must be \"path/to/file.py:kernel_name\"; got "
                          f"{kernel!r}")
    file, _, name = kernel.rpartition(":")
    rows = description.get("rows")
    if not isinstance(rows, int) or rows < 1:
        raise LaunchError(f"{where}: `rows` must be the launch's rows, a positive int; got "
                          f"{rows!r}")
    slots = description.get("slots", 0)
    if not isinstance(slots, int) or slots < 0:
        raise LaunchError(f"{where}: `slots` must be the rows of the tables a loaded index "
                          f"selects, a positive int; got {slots!r}")
    grid = description.get("grid")
    if not isinstance(grid, (list, tuple)) or not 1 <= len(grid) <= 3 or not all(
            _GRID_ROWS.fullmatch(axis) if isinstance(axis, str) else
            isinstance(axis, int) and axis > 0 for axis in grid):
        raise LaunchError(f"{where}: `grid` must be 1 to 3 positive ints, \"rows\" or "
                          f"\"rows/N\"; got {grid!r}")
    raw = description.get("arguments")
    if not isinstance(raw, Mapping) or not raw:
        raise LaunchError(f"{where}: `arguments` must map each kernel argument to its value")
    arguments = {str(key): _argument(value, f"{where}: argument `{key}`")
                 for key, value in raw.items()}
    if not any(isinstance(v, TensorArgument) for v in arguments.values()):
        raise LaunchError(f"{where}: no argument is a tensor ({{shape = [...], dtype = ...}})")
    raw_pointees = description.get("pointees", {})
    if not isinstance(raw_pointees, Mapping):
        raise LaunchError(f"{where}: `pointees` must map each tensor a table of addresses "
                          "points at to its description")
    pointees = {str(key): _argument(value, f"{where}: pointee `{key}`")
                for key, value in raw_pointees.items()}
    for key, value in pointees.items():
        if not isinstance(value, TensorArgument) or value.pointers or \
                set(value.shape) & set(SYMBOLS) or value.places_slot:
            raise LaunchError(f"{where}: pointee `{key}` must be a tensor of fixed shape")
    for key, value in arguments.items():
        unknown = [name for name in (getattr(value, "pointers", None) or ())
                   if name not in pointees]
        if unknown:
            raise LaunchError(f"{where}: argument `{key}` points at {', '.join(unknown)}, not "
                              f"described under `pointees` (described: "
                              f"{', '.join(pointees) or 'none'})")
    return Launch(file, name, rows, tuple(grid), arguments, slots, pointees)


def read(path: str | Path) -> Launch:
    """A ``Launch`` from a TOML file."""
    import tomllib
    try:
        description = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise LaunchError(f"{path}: {error}") from None
    return parse(description, str(path))


def described(launch: Launch) -> dict[str, Any]:
    """The description of ``launch``: what ``parse`` reads back."""
    arguments = {name: _described_value(value) for name, value in launch.arguments.items()}
    head = {"kernel": f"{launch.file}:{launch.kernel}", "rows": launch.rows}
    if launch.slots:
        head["slots"] = launch.slots
    pointees = {"pointees": {name: _described_value(value)
                             for name, value in launch.pointees.items()}} \
        if launch.pointees else {}
    return {**head, "grid": list(launch.grid), "arguments": arguments, **pointees}


def _described_value(value: Any) -> Any:
    if isinstance(value, TritonDtype):
        return {"dtype": value.name}
    if not isinstance(value, TensorArgument):
        return value
    entry: dict[str, Any] = {"dtype": str(value.dtype).removeprefix("torch.")}
    if value.pointers is not None:
        return {"pointers": list(value.pointers), **entry}
    entry = {"shape": list(value.shape), **entry}
    if value.values is not None:
        entry["values"] = list(value.values)
    if value.fill is not None:
        entry["fill"] = value.fill
    return entry


def _argument(value: Any, where: str) -> Any:
    if isinstance(value, Mapping) and "shape" not in value and set(value) == {"dtype"}:
        return TritonDtype(str(value["dtype"]))
    if isinstance(value, Mapping) and "pointers" in value:
        pointers = value["pointers"]
        if not isinstance(pointers, (list, tuple)) or not pointers or \
                not all(isinstance(name, str) for name in pointers) or \
                set(value) - {"pointers", "dtype"}:
            raise LaunchError(f"{where}: a table of addresses is {{pointers = [\"pointee\", "
                              f"...]}}, naming tensors under `pointees`; got {dict(value)!r}")
        dtype = {"uint64": torch.uint64, "int64": torch.int64}.get(value.get("dtype", "uint64"))
        if dtype is None:
            raise LaunchError(f"{where}: a table of addresses is uint64 or int64")
        return TensorArgument((len(pointers),), dtype, pointers=tuple(pointers))
    if isinstance(value, Mapping):
        shape = value.get("shape")
        if not isinstance(shape, (list, tuple)) or not all(
                dim in SYMBOLS or (isinstance(dim, int) and dim >= 0) for dim in shape):
            raise LaunchError(f"{where}: `shape` must be a list of ints, \"rows\" and \"slots\"; "
                              f"got {shape!r}")
        dtype = getattr(torch, str(value.get("dtype", "float32")), None)
        if not isinstance(dtype, torch.dtype):
            known = sorted(name for name, value in vars(torch).items()
                           if isinstance(value, torch.dtype) and not name.startswith("_"))
            raise LaunchError(f"{where}: unknown dtype {value.get('dtype')!r}; torch's are "
                              f"{', '.join(known)}")
        values = value.get("values")
        if values is not None:
            values = tuple(values)
            wrong = [each for each in values if isinstance(each, str) and
                     not _SLOT_VALUE.fullmatch(each.strip()) or
                     not isinstance(each, (str, int, float))]
            if wrong:
                raise LaunchError(f"{where}: a value is a number, or \"slot\", \"slot + N\" "
                                  f"or \"slot - N\" in a table of offsets; got {wrong[0]!r}")
            expected = math.prod(1 if dim in SYMBOLS else dim for dim in shape)
            if len(values) % max(expected, 1):
                raise LaunchError(f"{where}: {len(values)} values do not fill shape {shape}")
        return TensorArgument(tuple(shape), dtype, values, value.get("fill"))
    if value == "None":  # TOML has no null: an argument passed as None
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise LaunchError(f"{where}: a value must be a tensor description, a number, a bool, a "
                      f"string or none; got {value!r}")


def from_record(record: Mapping[str, Any], huge: str, loaded: bool,
                rows_axis: int = 0) -> Launch:
    """The launch of ``record`` (a kernel specialisation written by ``triton-overflow record``)
    that reaches furthest into tensor ``huge``, described in launch rows.

    ``loaded``: the product's row is an index loaded per launch row: the launch rows are the
    programs of grid axis 0, and ``huge``'s rows are slots (``with_slots``). Otherwise the
    rows are ``huge``'s rows (a program id, possibly times a block, or a loop over them):
    every int argument and first tensor dimension of as many is ``"rows"``, and grid axis
    ``rows_axis`` is ``"rows"`` when it has as many programs, ``"rows/N"`` when a constexpr N
    divides them so."""
    launches = [launch for launch in record.get("launches", [])
                if huge in launch.get("tensors", {})]
    if not launches:
        raise LaunchError(f"no recorded launch of {record.get('kernel')} has its tensors "
                          f"(`{huge}` among them): record it again with this version")
    if loaded:
        launch = max(launches, key=lambda each: each["grid"][0])
        rows = launch["grid"][0]
    else:
        launch = max(launches, key=lambda each: each["tensors"][huge]["shape"][:1] or [0])
        rows = (launch["tensors"][huge]["shape"] or [0])[0]
    if rows < 2:
        raise LaunchError(f"the recorded launches of {record['kernel']} have one row: record a "
                          "launch of at least 2 rows (an odd number, 3 or 5, tells rows from "
                          "other sizes best)")
    grid = [_grid_axis(axis, rows, record["constexprs"]) if index == rows_axis else axis
            for index, axis in enumerate(launch["grid"])]
    while len(grid) > 1 and grid[-1] == 1:
        grid.pop()
    arguments: dict[str, Any] = {}
    for name, kind in record["signature"].items():
        if name in launch["tensors"]:
            tensor = launch["tensors"][name]
            shape = [ROWS if index == 0 and dim == rows else dim
                     for index, dim in enumerate(tensor["shape"])]
            arguments[name] = TensorArgument(tuple(shape), getattr(torch, tensor["dtype"]),
                                             _tuple(tensor.get("values")))
        elif name in launch["ints"]:
            value = launch["ints"][name]
            arguments[name] = ROWS if value == rows else value
        elif kind == "constexpr":
            value = record["constexprs"].get(name)
            arguments[name] = TritonDtype(value["dtype"]) if isinstance(value, dict) and \
                "dtype" in value else value
        elif kind == "fp32":
            arguments[name] = 1.0
        elif kind == "i1":
            arguments[name] = False
    described = Launch(record["file"], record["kernel"], rows, tuple(grid), arguments)
    return with_slots(described, huge) if loaded else described


def _grid_axis(programs: int, rows: int, constexprs: Mapping[str, Any]) -> int | str:
    if programs == rows:
        return ROWS
    for value in constexprs.values():
        if isinstance(value, int) and not isinstance(value, bool) and value > 1 and \
                -(-rows // value) == programs:
            return f"{ROWS}/{value}"
    return programs


def _tuple(values: Any) -> tuple[Any, ...] | None:
    return None if values is None else tuple(values)


def with_slots(launch: Launch, huge: str) -> Launch:
    """``launch`` with the rows of tensor ``huge`` named ``"slots"``, and the first dimension
    of every other tensor of as many rows (tables indexed by the same slot)."""
    tensor = launch.tensors[huge]
    first = tensor.shape[0] if tensor.shape else None
    if not isinstance(first, int):
        return launch
    arguments = dict(launch.arguments)
    for name, argument in launch.tensors.items():
        if argument.shape and argument.shape[0] == first and argument.pointers is None:
            arguments[name] = dataclasses.replace(argument, shape=(SLOTS, *argument.shape[1:]))
    return dataclasses.replace(launch, arguments=arguments, slots=first)


def check_arguments(launch: Launch, parameters: list[tuple[str, bool]]) -> None:
    """``LaunchError`` where ``launch`` names an argument the kernel does not take, or leaves
    out one without a default; ``parameters``: the kernel's (name, has a default)."""
    names = [name for name, _ in parameters]
    unknown = [name for name in launch.arguments if name not in names]
    missing = [name for name, has_default in parameters
               if not has_default and name not in launch.arguments]
    problems = ([f"names no argument of {launch.kernel}: {', '.join(unknown)}"] if unknown else []) \
        + ([f"leaves out {', '.join(missing)}"] if missing else [])
    if problems:
        raise LaunchError(f"the launch of {launch.kernel} " + "; and ".join(problems)
                          + f" (its arguments: {', '.join(names)})")
