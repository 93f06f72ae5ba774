"""A reproduction: one finding of the static check, run past 2**31 on the engine's own kernel.

A generated test defines a subclass of ``Reproduction`` with the finding (file, line, product,
the tensor it addresses, where its row comes from, the argument that is its row stride, the
fix) and a launch (``launch``), and lists two objects of it: the kernel as shipped and the
kernel with the fix written in (``widened=True``). The suite's huge-case machinery does the rest:
the tensor the product addresses becomes a huge one (lazily allocated in the interpreter,
aliased virtual memory on a GPU) with its highest rows planted as copies of row 0, and

* a program-id row (``rows_from = "program_id(0)"``, or ``pid * BLOCK + tl.arange(...)``
  with grid ``"rows/BLOCK"``) or a loop over the rows (``rows_from = "loop:num_rows"``, a
  persistent kernel's grid-stride loop): one launch over every row of the huge tensor, every
  per-row input a copy of row 0's; the interpreter runs only the programs of the planted rows;
* an index loaded from a table (``rows_from = "load:idx_mapping"``, a request slot, a token,
  a page): one launch of one row per checked row, the table holding that row, on fresh copies
  of every other tensor; tables indexed by the same slot (``"slots"`` in their shape) hold
  row 0's entries in every row;

and the oracle needs no reference: whatever the kernel writes for a checked row (its row of
every per-row output, or every output of its launch, and the huge tensor's own row) must be
what it writes for row 0. In the interpreter the wrap check names the line where an i32
product wraps; on a GPU a wrap faults (an offset below the tensor, whose 2**31 elements below
stay unmapped) or reads or writes a poisoned row.

The kernel is loaded from the engine's own file (``source``, relative to ``root`` or
``$TRITON_OVERFLOW_ENGINE_ROOT``), imported when the engine is importable and otherwise loaded
as the static check loads it; it is never copied.
"""

import math
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import torch

from triton_overflow.cases import CannotRun, Case, HugeRun
from triton_overflow.compare import assert_rows_equal
from triton_overflow.engine.huge import HugeLayout
from triton_overflow.engine.memory import BACKENDS
from triton_overflow.repro.launch import ROWS, SLOTS, Launch, TensorArgument, parse

ENGINE_ROOT = "TRITON_OVERFLOW_ENGINE_ROOT"
PROGRAM_ID = re.compile(r"program_id\(([012])\)")
LOADED = "load:"
LOOP = "loop:"
INPUT_SEED = 4049


class Reproduction(Case):
    """One finding's product taken past 2**31 on the engine's kernel. Class attributes, as a
    generated test writes them: ``source`` (the kernel's file, relative to ``root``),
    ``kernel``, ``line``, ``product``, ``huge`` (the tensor argument the product addresses),
    ``rows_from`` (``"program_id(0)"`` or ``"load:TABLE"``), ``stride`` (the int argument that
    is the huge tensor's row stride, or None: its width), ``fix`` (``{"line", "replace",
    "with"}``) and ``launch`` (a description, ``triton_overflow.repro.launch``)."""

    root: ClassVar[str] = "."
    source: ClassVar[str]
    kernel: ClassVar[str]
    line_in: ClassVar[str | None] = None  # the file of ``line`` and ``fix``, if not ``source``
    line: ClassVar[int]
    product: ClassVar[str]
    huge: ClassVar[str]
    rows_from: ClassVar[str]
    stride: ClassVar[str | None] = None
    fix: ClassVar[dict[str, Any]]
    # The fixes of the kernel's other products of the same row, written in with ``fix``.
    also_fix: ClassVar[list[dict[str, Any]]] = []
    launch_description: ClassVar[dict[str, Any]]
    # Planted float rows hold this share of NaNs, for a kernel whose output counts them.
    nan_fraction: ClassVar[float] = 0.0
    # The slowest test of each tier ("interpreter", "gpu"), in seconds, where it was written
    # (``triton-overflow repro --run``): its skip reasons state it.
    seconds: ClassVar[dict[str, float]] = {}

    def __init__(self, widened: bool = False) -> None:
        self.widened = widened
        self.launched = parse(self.launch_description, f"the launch of {type(self).__name__}")
        huge = self.launched.tensors.get(self.huge)
        if huge is None:
            raise ValueError(f"{type(self).__name__}: `huge` names {self.huge!r}, which is not a "
                             "tensor argument of its launch")
        self.name = (f"{self.kernel}-{Path(self.line_in or self.source).name}:{self.line}"
                     f"-{'widened' if widened else 'as-shipped'}")
        self.module = str(self.source_path())
        self.dtype = huge.dtype
        self.width = _width(huge)
        stride = self.launched.scalar(self.stride, 1, 1) if self.stride else self.width
        if not isinstance(stride, int) or stride < self.width:
            raise ValueError(f"{type(self).__name__}: the row stride `{self.stride}` is {stride!r}, "
                             f"not an int of at least the huge tensor's row ({self.width})")
        self.row_stride = stride
        program = PROGRAM_ID.fullmatch(self.rows_from)
        if not (program or self.rows_from.startswith((LOADED, LOOP))):
            raise ValueError(f"{type(self).__name__}: rows_from must be 'program_id(AXIS)', "
                             f"'loop:ARGUMENT' or 'load:TABLE'; got {self.rows_from!r}")
        self.programs_axis = int(program[1]) if program else 0

    # --- where the kernel comes from -----------------------------------------------------

    def source_path(self, source: str | None = None) -> Path:
        """The kernel's file (or ``source``) under ``$TRITON_OVERFLOW_ENGINE_ROOT``, else under
        ``root`` taken from the folder of the file that defines this class."""
        root = os.environ.get(ENGINE_ROOT)
        if not root:
            defined_in = getattr(sys.modules.get(type(self).__module__), "__file__", None)
            root = str(Path(defined_in).parent / self.root) if defined_in else self.root
        return (Path(root) / (source or self.source)).resolve()

    def unavailable(self) -> str | None:
        path = self.source_path()
        if path.is_file():
            return None
        return (f"the engine's source at {path} (the kernel's file {self.source}, under the "
                f"engine's root {self.root}; set ${ENGINE_ROOT} to the root of a checkout)")

    def kernels(self) -> ModuleType:
        """The kernel's module, as shipped or with the fix written into the kernel."""
        from triton_overflow.lint.discover import load_module
        path = self.source_path()
        root = str(path.parents[len(Path(self.source).parts) - 1])
        if root not in sys.path:
            sys.path.insert(0, root)
        module, note = load_module(path)
        if module is None:
            raise RuntimeError(f"{self.source}: cannot load the kernel: {note}")
        module = _with_jit_functions_bound(module)
        if self.widened:
            fixed = self.source_path(self.line_in) if self.line_in else path
            module = _with_fix(module, path, self.kernel, [self.fix, *self.also_fix], fixed)
        _drop_stand_ins(module)
        return module

    def random_row(self, generator: torch.Generator, width: int) -> torch.Tensor:
        row = super().random_row(generator, width)
        if self.nan_fraction and row.is_floating_point():
            nans = torch.rand(width, generator=generator, device=generator.device)
            row[nans < self.nan_fraction] = float("nan")
        return row

    # --- the run ---------------------------------------------------------------------------

    @property
    def by_program(self) -> bool:
        """Whether the launch runs every row of the huge tensor (a program-id row, or a loop
        over the rows), rather than one loaded row at a time."""
        return not self.rows_from.startswith(LOADED)

    @property
    def table(self) -> str:
        return self.rows_from.removeprefix(LOADED)

    @property
    def offsets_table(self) -> bool:
        """Whether the row's table holds offsets whose values place the slot (a cumulative
        count of tokens per request), rather than the row itself."""
        table = self.launched.tensors.get(self.table)
        return not self.by_program and table is not None and table.places_slot

    def launch_rows(self, run: HugeRun) -> int:
        """Launch rows: one per huge row for a program-id row (the grid's "rows" axis says
        how they split into programs); the described ones for a table of offsets (the slot
        checked is a later request's); else one."""
        if self.by_program:
            return run.rows
        return self.launched.rows if self.offsets_table else 1

    def checked_slots(self, run: HugeRun) -> list[int]:
        """Row 0, then each checked row (a copy of row 0)."""
        return [0, *run.check_rows]

    @property
    def rows_per_program(self) -> int:
        """Rows one program takes on its grid axis: a loop's program visits rows one by one."""
        if self.rows_from.startswith(LOOP):
            return 1
        return self.launched.rows_per_program(self.programs_axis)

    def programs_rows(self, run: HugeRun) -> list[int]:
        """The rows the interpreter's programs touch: the planted rows, and the other rows of
        their programs' blocks."""
        if not self.by_program:
            return [0]
        per = self.rows_per_program
        return sorted({row for program in {r // per for r in run.planted_rows}
                       for row in range(program * per, min((program + 1) * per, run.rows))})

    def programs(self, run: HugeRun) -> list[int] | dict[str, list[int]]:
        """Programs the interpreter runs on the rows' grid axis: those of the planted rows (a
        row's program is the row over the rows a program takes; in a loop over the rows, the
        interpreter maps each row to the program whose grid-stride loop visits it), or, for a
        loaded row, every program of its small launches (no kernel named: each runs whole)."""
        if not self.by_program:
            return {}
        return sorted({row // self.rows_per_program for row in run.planted_rows})

    def extra_bytes(self, run: HugeRun) -> int:
        """The other tensors; one filled only where programs run costs, in the interpreter,
        only those rows."""
        rows, copies = self.launch_rows(run), 1 if self.by_program else 2
        touched = self.programs_rows(run)
        total = 0
        sparse = _sparse_capable(run)
        for name, tensor in self.launched.tensors.items():
            if name == self.huge:
                continue
            nbytes = tensor.nbytes(rows, run.rows)
            if _filled_where_programs_run(tensor, rows, run.rows):
                if run.interpreted:
                    nbytes = nbytes * len(touched) // rows
                elif sparse and tensor.dim_of(ROWS) == 0:
                    nbytes = BACKENDS[run.backend].estimate(
                        _rows_layout(tensor, rows, run.rows), tensor.dtype, touched)
            total += copies * nbytes
        pointees = sum(tensor.nbytes(rows, run.rows) for tensor in self.launched.pointees.values())
        return total + pointees + 2**20

    def prepare(self, huge: torch.Tensor, run: HugeRun) -> dict[str, Any]:
        """Every argument: the huge tensor, the row stride, and the rest as described, each
        tensor's rows and slots copies of its first."""
        rows = self.launch_rows(run)
        touched = self.programs_rows(run)
        generator = torch.Generator().manual_seed(INPUT_SEED)
        pointees = {name: _tensor(argument, self.launched, rows, run, generator, touched)
                    for name, argument in self.launched.pointees.items()}
        values: dict[str, Any] = {}
        for name, argument in self.launched.arguments.items():
            if name == self.huge:
                values[name] = huge
            elif isinstance(argument, TensorArgument) and argument.pointers is not None:
                values[name] = _addresses(argument, pointees, run.device)
            elif isinstance(argument, TensorArgument):
                values[name] = _tensor(argument, self.launched, rows, run, generator, touched)
            elif name == self.stride:
                values[name] = run.row_stride
            else:
                values[name] = self.launched.scalar(name, rows, run.rows)
        if not self.by_program:
            table = values.get(self.table)
            if not isinstance(table, torch.Tensor) or table.is_floating_point():
                raise ValueError(f"{self.name}: rows_from {self.rows_from!r} must name an int "
                                 "tensor argument, the table the row is loaded from")
        return values

    def launch(self, kernels: ModuleType, huge: torch.Tensor, run: HugeRun, /,
               *args: Any, **values: Any) -> list[tuple[int, dict[str, Any]]]:
        """A program-id row: one launch of every huge row. A loaded row: one launch of one
        row per checked slot, row 0's first, each on fresh copies of the other tensors."""
        jit = _launchable(getattr(kernels, self.kernel, None))
        if jit is None:
            raise RuntimeError(f"{self.source} defines no jit function {self.kernel!r}")
        grid = self.launched.grid_for(self.launch_rows(run))
        if not run.interpreted:
            _check_device_grid(grid)
        if self.by_program:
            jit[grid](**values)
            return [(0, values)]
        launched = []
        for slot in self.checked_slots(run):
            arguments = {name: value.clone() if isinstance(value, torch.Tensor) and
                         name != self.huge else value for name, value in values.items()}
            table = arguments[self.table]
            if self.offsets_table:
                placed = self.launched.tensors[self.table].values_at(slot)
                table.copy_(torch.tensor(placed).reshape(table.shape))
            else:
                table.fill_(slot)
            jit[grid](**arguments)
            launched.append((slot, arguments))
        return launched

    def check(self, produced: Any, huge: torch.Tensor, run: HugeRun,
              planted: dict[int, torch.Tensor], /, *args: Any, **values: Any) -> None:
        """What the kernel wrote for each checked row is what it wrote for row 0: in the huge
        tensor's own row, and in every other tensor (its row, for a program-id row; whole,
        for a launch of one loaded row)."""
        for slot in self.checked_slots(run)[1:]:
            assert_rows_equal(huge[slot], huge[0], f"row {slot} of `{self.huge}` (a copy of row "
                              "0) against row 0, after the launch", slot, run.row_stride)
        if self.by_program:
            for name, argument in self.launched.tensors.items():
                dim = argument.dim_of(ROWS)
                if name == self.huge or dim is None:
                    continue
                for row in run.check_rows:
                    tensor = produced[0][1][name]
                    assert_rows_equal(tensor.select(dim, row), tensor.select(dim, 0),
                                      f"`{name}` of program {row}, which reads row {row} of "
                                      f"`{self.huge}` (a copy of row 0), against program 0",
                                      row, run.row_stride)
            return
        _, first = produced[0]
        for slot, arguments in produced[1:]:
            for name, argument in self.launched.tensors.items():
                if name in (self.huge, self.table):
                    continue
                actual, expected = arguments[name], first[name]
                dim = argument.dim_of(SLOTS)
                if dim is not None:  # a per-slot table: its row of the slot read
                    actual, expected = actual.select(dim, slot), expected.select(dim, 0)
                assert_rows_equal(actual, expected,
                                  f"`{name}` after a launch whose row reads row {slot} of "
                                  f"`{self.huge}` (a copy of row 0), against the launch that "
                                  "reads row 0", slot, run.row_stride)


def _with_jit_functions_bound(module: ModuleType) -> ModuleType:
    """The module's namespace with each jit function the load defined beside it bound to its
    name: where an engine imported whole hands out placeholders for Triton (no GPU platform
    detected), the kernels are defined with Triton's own decorator beside the placeholders."""
    from triton_overflow.lint.loader import EXTRA
    extra = vars(module).get(EXTRA) or []
    if not extra:
        return module
    bound = ModuleType(module.__name__)
    vars(bound).update(vars(module))
    for name, wrapper in extra:
        if _launchable(vars(bound).get(name)) is None:
            setattr(bound, name, wrapper)
    return bound


class _NotLoaded:
    """An engine value the load could not compute, as a reproduction's kernels see it: every
    attribute of it is itself, and it is not callable (Triton's compiler refuses a kernel whose
    source, a parameter's default say, names a callable it does not know). The launch gives
    every argument, so no default made of it is used."""

    def __getattr__(self, name: str) -> "_NotLoaded":
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> "_NotLoaded":
        return self

    def __repr__(self) -> str:
        return "<an engine value not loaded>"


def _drop_stand_ins(module: ModuleType) -> None:
    """Replace every name that the load bound to a stand-in (an engine value it could not
    compute), in the module and in the globals of each of its jit functions, by
    ``_NotLoaded``."""
    from triton_overflow.lint.standins import StandIn
    namespaces = [vars(module)] + [jit.fn.__globals__ for jit in map(_launchable,
                                                                       list(vars(module).values()))
                                   if jit is not None and hasattr(jit.fn, "__globals__")]
    for namespace in namespaces:
        for name, value in list(namespace.items()):
            if isinstance(value, StandIn):
                namespace[name] = _NotLoaded()


def _launchable(value: Any) -> Any:
    """The jit function under autotune / heuristics wrappers: launched with every argument
    the description gives, constexprs included, it runs as the recorded launch ran."""
    from triton.runtime.jit import JITFunction, KernelInterface
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every supported version has it
        InterpretedFunction = JITFunction
    for _ in range(8):
        if isinstance(value, (JITFunction, InterpretedFunction)) or value is None:
            return value
        if not isinstance(value, KernelInterface):  # an engine's object: its attributes may
            return None                              # raise anything (a platform's do)
        value = getattr(value, "fn", None)
    return None


def _width(huge: TensorArgument) -> int:
    if huge.dim_of(ROWS) not in (0, None) or huge.dim_of(SLOTS) not in (0, None):
        raise ValueError("the huge tensor's rows must be its first dimension")
    return max(math.prod(huge.sized(1, 1)[1:]), 1)


LAZY_BYTES = 2**26  # per-row inputs larger than this are filled only where programs run


def _filled_where_programs_run(argument: TensorArgument, rows: int, slots: int) -> bool:
    """Whether a per-row input is as large as to be filled only at the rows programs touch."""
    return argument.dim_of(ROWS) is not None and argument.nbytes(rows, slots) > LAZY_BYTES


GRID_LIMITS = (2**31 - 1, 65_535, 65_535)  # programs a CUDA launch allows on each axis


def _check_device_grid(grid: tuple[int, ...]) -> None:
    """``CannotRun`` where the grid has more programs on an axis than CUDA launches."""
    for axis, (programs, limit) in enumerate(zip(grid, GRID_LIMITS)):
        if programs > limit:
            raise CannotRun(f"at this layout grid axis {axis} needs {programs:,} programs and "
                            f"a CUDA launch allows {limit:,}: the engine could not launch it "
                            "either (the interpreter's test of this layout stands)")


def _sparse_capable(run: HugeRun) -> bool:
    backend = BACKENDS.get(run.backend)
    return not run.interpreted and backend is not None and backend.sparse_rows


def _rows_layout(argument: TensorArgument, rows: int, slots: int) -> HugeLayout:
    """A per-row tensor as a ``[rows, width]`` layout (its rows its first dimension)."""
    sized = argument.sized(rows, slots)
    width = max(math.prod(sized[1:]), 1)
    return HugeLayout("sparse", sized[0], width, width, (), ())


def _tensor(argument: TensorArgument, launch: Launch, rows: int, run: HugeRun,
            generator: torch.Generator, touched: list[int]) -> torch.Tensor:
    """The tensor at ``rows`` launch rows and ``run.rows`` table rows, on ``run.device``, each
    row a copy of the first. One as large as the huge tensor (a second operand of a GEMM, say)
    is filled only at the ``touched`` rows: on the CPU the rest is never mapped (the
    interpreter runs only the programs of those rows), on a device it shares a little memory
    where the backend can (virtual memory), else it is zeros."""
    slots, device = run.rows, run.device
    shape = argument.sized(launch.rows, launch.described_slots)
    if argument.values is not None:
        tensor = torch.tensor(argument.values_at(0), dtype=torch.float64).reshape(shape).to(
            argument.dtype)
    elif argument.fill is not None:
        tensor = torch.full(shape, argument.fill, dtype=argument.dtype)
    elif argument.dtype.is_floating_point:
        tensor = torch.randn(shape, generator=generator).to(argument.dtype)
    else:
        tensor = torch.zeros(shape, dtype=argument.dtype)
    sized = argument.sized(rows, slots)
    for symbol in (ROWS, SLOTS):
        dim = argument.dim_of(symbol)
        if dim is not None and tensor.shape[dim] != sized[dim]:  # resized: copies of the first
            tensor = tensor.narrow(dim, 0, 1)
    if not _filled_where_programs_run(argument, rows, slots):
        return tensor.expand(sized).contiguous().to(device)
    rows_dim = argument.dim_of(ROWS)
    if device.type == "cpu":
        full = torch.empty(sized, dtype=argument.dtype)  # fresh pages: mapped when touched
    elif rows_dim == 0 and run.allocator is not None and run.allocator.sparse_rows:
        full = run.allocator.sparse(_rows_layout(argument, rows, slots), argument.dtype,
                                    touched).view(sized)
    else:
        full = torch.zeros(sized, dtype=argument.dtype, device=device)
    first = tensor.to(device)
    for row in touched:
        full.narrow(rows_dim, row, 1).copy_(first.narrow(rows_dim, 0, 1).expand_as(
            full.narrow(rows_dim, row, 1)))
    return full


def _addresses(table: TensorArgument, pointees: dict[str, torch.Tensor],
               device: torch.device) -> torch.Tensor:
    """A table of the addresses of its pointees, which it keeps alive."""
    kept = [pointees[name] for name in table.pointers or ()]
    addresses = torch.tensor([tensor.data_ptr() for tensor in kept], dtype=table.dtype,
                             device=device)
    addresses.pointees = kept  # type: ignore[attr-defined]
    return addresses


def _with_fix(module: ModuleType, path: Path, kernel: str, fixes: list[dict[str, Any]],
              fixed: Path) -> ModuleType:
    """The kernel's module with the kernel rebuilt from its file with ``fixes`` (the finding's
    own first) written into ``fixed``: the kernel's own file, or the file of a jit helper it
    calls (then the helper is rebuilt with them, and the kernel from its own text around
    it)."""
    from triton_overflow.lint.discover import load_module
    from triton_overflow.lint.verify import edited_text, rebuilt
    edited = fixed.read_text()
    lines = []
    for fix in fixes:
        line = _fix_line(edited, fix)
        if line is None:  # the product is gone (fixed upstream): nothing to write
            continue
        edited = edited_text(edited, line, fix["replace"], fix["with"])
        assert edited is not None  # _fix_line found it there
        lines.append(line)
    if not lines:  # the kernel as found is the widened one
        return module
    widened = ModuleType(f"{module.__name__}_widened")
    vars(widened).update(vars(module))
    if fixed != path:
        helper_module, note = load_module(fixed)
        if helper_module is None:
            raise RuntimeError(f"{fixed}: cannot load the helper to fix: {note}")
        helper_module = _with_jit_functions_bound(helper_module)
        helper = _function_at(edited, lines[0])
        new_helper = rebuilt(helper_module, fixed, helper, edited, f"{fixed} (widened)")
        for attribute, value in vars(module).items():
            old = _launchable(value)
            if old is not None and getattr(old.fn, "__name__", None) == helper and \
                    Path(old.fn.__code__.co_filename).resolve() == fixed:
                setattr(widened, attribute, new_helper)
        edited, fixed = path.read_text(), path
    setattr(widened, kernel, rebuilt(widened, path, kernel, edited, f"{fixed} (widened)"))
    return widened


def _fix_line(text: str, fix: dict[str, Any]) -> int | None:
    """The line to write ``fix`` on: its own, or, in a file edited since the test was written,
    the one line that still holds its source; None where no line does (the product was
    rewritten: an engine that fixed it upstream). ``RuntimeError`` where several do."""
    from triton_overflow.lint.verify import locate
    if locate(text, fix["line"], fix["replace"]) is not None:
        return int(fix["line"])
    holding = [number for number in range(1, text.count("\n") + 2)
               if locate(text, number, fix["replace"]) is not None]
    if not holding:
        return None
    if len(holding) > 1:
        raise RuntimeError(f"the fix's source `{fix['replace']}` moved from line {fix['line']} "
                           f"and is now on lines {', '.join(map(str, holding))}: write the "
                           "reproduction again")
    return holding[0]


def _function_at(text: str, line: int) -> str:
    """The name of the module-level function whose definition spans ``line``."""
    import ast
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and \
                node.lineno <= line <= (node.end_lineno or node.lineno):
            return node.name
    raise RuntimeError(f"no function spans line {line} of the fixed file")
