"""The public case API: how to describe a huge case for your own kernel.

A huge case puts a tensor of just past 2**31 elements (the logits, or a per-request table) in
front of a kernel and checks the rows whose offsets cross 2**31. The suite decides the geometry
(``triton_overflow.engine.huge``), obtains the memory (lazily on the CPU, densely or through virtual
memory on a GPU), plants the rows, runs only the programs that touch them in the interpreter, and
runs the same case against the kernel's int32 twin. A case says only what is specific to its
kernel:

* ``RowsCase``: the huge tensor is ``[rows, width]`` logits, one kernel row per logits row.
  Write ``launch`` (call your launcher) and ``expected_row`` (the float64 reference on one row
  alone); ``inputs`` gives side inputs sized for ``run.rows`` rows.
* ``SlotTableCase``: the huge tensor is a per-request table ``[slots, width]`` reached through
  an index loaded from memory; the launch has one row per planted slot (``run.slots``). Write
  ``inputs``, ``launch`` and ``expected_row`` (the output row of a launch row that reads that
  table row).
* ``Case``: anything else; write ``prepare``, ``launch`` and ``check`` yourself.

Every method gets ``run`` (a ``HugeRun``: the layout, the device, whether the interpreter
runs) and the inputs as keyword arguments. A case declares ``expect = SAFE`` (the default) or
``expect = OVERFLOWS`` for a kernel known to overflow: then the report reads "overflows at
file:line", the run stays green, and it turns red the day the kernel stops overflowing.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, ClassVar

import torch

from triton_overflow.compare import assert_rows_close, assert_rows_equal
from triton_overflow.engine.huge import HugeLayout

SAFE = "safe"
OVERFLOWS = "overflows"


class CannotRun(Exception):
    """Raised by a case that cannot run this layout where it is (a grid past the device's
    limits, say): the test is skipped with the message."""


@dataclass(frozen=True)
class HugeRun:
    """What a case method is told about the run: the layout and where it runs."""

    layout: HugeLayout
    device: torch.device
    interpreted: bool
    run_poison_slots: bool = True
    backend: str = ""  # the memory backend's key, where known
    # In the run: the memory backend holding the huge tensor (its ``sparse`` makes a second
    # tensor as large where it can); None in a plan.
    allocator: Any = field(default=None, compare=False, repr=False)

    @property
    def rows(self) -> int:
        """Rows of the huge tensor (logits rows, or request slots of a table)."""
        return self.layout.rows

    @property
    def width(self) -> int:
        return self.layout.vocab

    @property
    def row_stride(self) -> int:
        return self.layout.row_stride

    @property
    def check_rows(self) -> tuple[int, ...]:
        """Rows whose offsets cross the boundary; planted as copies of row 0."""
        return self.layout.check_rows

    @property
    def poison_rows(self) -> tuple[int, ...]:
        """Rows a wrap from a checked row lands on; planted with other data."""
        return self.layout.poison_rows

    @property
    def planted_rows(self) -> tuple[int, ...]:
        """Row 0, the poison rows and the checked rows: every row the case plants."""
        return (0, ) + self.layout.poison_rows + self.layout.check_rows

    @property
    def slots(self) -> tuple[int, ...]:
        """For a table case: the table rows the launch reads, one launch row each."""
        poison = self.layout.poison_rows if self.run_poison_slots else ()
        return (0, ) + poison + self.layout.check_rows


class Case:
    """Base of every huge case. Subclass ``RowsCase`` or ``SlotTableCase`` when they fit.

    Class attributes: ``name`` (unique; the report's row), ``module`` (the dotted name of the
    module whose launcher the case calls: its int32 twin is derived from its source),
    ``width`` and ``dtype`` of a row of the huge tensor, ``row_stride`` (None: ``width``),
    ``expect`` (``SAFE`` or ``OVERFLOWS``). In the interpreter the launcher sees the GPU
    ``interpreted_gpu`` (a key of ``device_view.GPU_MODELS``) and autotuned kernels run their
    ``autotune_configs`` ("first" or "each") without benchmarks. ``limits`` states the
    envelope the static tier judges the case's kernels at (``{"num_reqs": 4096}``: an
    argument's largest value; ``rows``/``grid0``: programs of axis 0), as ``lint --limits``.
    """

    name: ClassVar[str]
    module: ClassVar[str]
    width: ClassVar[int] = 2**17
    dtype: ClassVar[torch.dtype] = torch.float32
    row_stride: ClassVar[int | None] = None
    expect: ClassVar[str] = SAFE
    run_poison_slots: ClassVar[bool] = True
    interpreted_gpu: ClassVar[str] = "H100"
    autotune_configs: ClassVar[str] = "first"
    limits: ClassVar[dict[str, int]] = {}
    programs_axis: ClassVar[int] = 0  # the grid axis whose program ids ``programs`` lists

    def kernels(self) -> ModuleType:
        """The module whose launcher ``launch`` calls: ``module``, imported."""
        import importlib
        return importlib.import_module(self.module)

    def unavailable(self) -> str | None:
        """Why ``kernels`` cannot load here, or None."""
        if _importable(self.module):
            return None
        return (f"a `module` that can be imported (no module {self.module!r} on this run's "
                "import path: the dotted name of the module whose launcher `launch` calls)")

    def random_row(self, generator: torch.Generator, width: int) -> torch.Tensor:
        """Planted data for one row: normal floats, or small ints for an int table."""
        if self.dtype.is_floating_point:
            return torch.randn(width, generator=generator, device=generator.device)
        return torch.randint(0, 2, (width, ), generator=generator, dtype=self.dtype,
                             device=generator.device)

    def programs(self, run: HugeRun) -> list[int] | dict[str, list[int]]:
        """Axis-0 program ids that touch the planted rows (the interpreter runs only these):
        a list for every kernel, or a dict from kernel name to list."""
        return list(run.planted_rows)

    def extra_bytes(self, run: HugeRun) -> int:
        """Device memory the side inputs take, beyond the huge tensor."""
        return run.rows * 64

    def prepare(self, huge: torch.Tensor, run: HugeRun) -> dict[str, Any]:
        """The launch's inputs, as a dict of keyword arguments for ``launch`` and ``check``."""
        return {}

    # The inputs come as keyword arguments, which an override may name (``*, temperature``):
    # ``*args: Any, **inputs: Any`` is how a type checker is told that any are accepted.
    def launch(self, kernels: ModuleType, huge: torch.Tensor, run: HugeRun, /,
               *args: Any, **inputs: Any) -> Any:
        """Call the launcher of ``kernels`` (the module, or its int32 twin); return the output."""
        raise NotImplementedError

    def check(self, produced: Any, huge: torch.Tensor, run: HugeRun,
              planted: dict[int, torch.Tensor], /, *args: Any, **inputs: Any) -> None:
        """Raise (``RowMismatch``, ``AssertionError``) on any wrong row. ``planted`` maps each
        planted row to a CPU copy of what was planted there."""
        raise NotImplementedError

    def compare(self, actual: torch.Tensor, expected: torch.Tensor, what: str,
                row: int | None = None) -> None:
        """Equal for ids and masks; close within the tolerance of ``tolerance_dtype`` (the
        case's dtype when it is a float) for floats."""
        stride = self.row_stride or self.width
        if expected.is_floating_point():
            assert_rows_close(actual, expected, what, self.tolerance_dtype(), row, stride)
        else:
            assert_rows_equal(actual, expected, what, row, stride)

    def tolerance_dtype(self) -> torch.dtype:
        """The precision outputs are compared in: the case's float dtype, else fp32."""
        return self.dtype if self.dtype.is_floating_point else torch.float32


class RowsCase(Case):
    """The huge tensor is the logits ``[rows, width]``; launch row r reads logits row r.

    Checked: every planted row against ``expected_row`` on its own planted data, and every
    checked row exactly equal to row 0 (a copy of it).
    """

    def inputs(self, run: HugeRun) -> dict[str, Any]:
        """Side inputs for ``run.rows`` logits rows, on ``run.device``. The checked rows are
        copies of row 0 and must give row 0's output, so a per-row input (a seed, a position,
        a token) must hold row 0's value at ``run.check_rows``."""
        return {}

    def prepare(self, logits: torch.Tensor, run: HugeRun) -> dict[str, Any]:
        return self.inputs(run)

    def expected_row(self, values: torch.Tensor, row: int, /, *args: Any,
                     **inputs: Any) -> torch.Tensor:
        """The expected output row for logits row ``row`` holding ``values`` (a CPU tensor)."""
        raise NotImplementedError

    def check_row(self, actual: torch.Tensor, values: torch.Tensor, row: int, what: str, /,
                  *args: Any, **inputs: Any) -> None:
        """Raise when ``actual`` is not the right output for logits ``values`` at ``row``."""
        self.compare(actual, self.expected_row(values, row, **inputs), what, row)

    def check(self, produced: Any, logits: torch.Tensor, run: HugeRun,
              planted: dict[int, torch.Tensor], /, *args: Any, **inputs: Any) -> None:
        for row in run.planted_rows:
            self.check_row(produced[row], planted[row], row,
                           f"row {row} against the reference on its own input", **inputs)
        for row in run.check_rows:
            assert_rows_equal(produced[row], produced[0], f"row {row} against row 0 (a copy of "
                              "row 0: its side inputs must be row 0's too)", row, run.row_stride)


class SlotTableCase(Case):
    """The huge tensor is a per-request table ``[slots, width]``; launch row i reads table
    row ``run.slots[i]`` through an index loaded from memory.

    Checked: the output of every launch row against ``expected_row`` on the table row it read.
    """

    dtype: ClassVar[torch.dtype] = torch.int32
    # Planted table entries are ints drawn from [low, high); poison rows hold them plus one, so
    # a table of token ids wants high = vocab - 1.
    id_range: ClassVar[tuple[int, int]] = (0, 2)

    def random_row(self, generator: torch.Generator, width: int) -> torch.Tensor:
        if self.dtype.is_floating_point:
            return super().random_row(generator, width)
        return torch.randint(*self.id_range, (width, ), generator=generator, dtype=self.dtype,
                             device=generator.device)

    def programs(self, run: HugeRun) -> list[int] | dict[str, list[int]]:
        return list(range(len(run.slots)))

    def inputs(self, table: torch.Tensor, run: HugeRun) -> dict[str, Any]:
        """Side inputs: one launch row per entry of ``run.slots``."""
        return {}

    def prepare(self, table: torch.Tensor, run: HugeRun) -> dict[str, Any]:
        return self.inputs(table, run)

    def expected_row(self, table_row: torch.Tensor, slot: int, /,
                     *args: Any, **inputs: Any) -> torch.Tensor:
        """The expected output of the launch row that reads ``table_row`` (a CPU tensor)."""
        raise NotImplementedError

    def check_row(self, actual: torch.Tensor, table_row: torch.Tensor, slot: int, what: str,
                  /, *args: Any, **inputs: Any) -> None:
        self.compare(actual, self.expected_row(table_row, slot, **inputs), what, slot)

    def check(self, produced: Any, table: torch.Tensor, run: HugeRun,
              planted: dict[int, torch.Tensor], /, *args: Any, **inputs: Any) -> None:
        for index, slot in enumerate(run.slots):
            self.check_row(produced[index], planted[slot], slot,
                           f"launch row {index}, which reads table row {slot}", **inputs)


@dataclass(frozen=True)
class CompileSpec:
    """How to compile one kernel for sm_90 on the CPU: argument types that differ from the
    defaults (pointers ``*fp32``, ints ``i32``), constexpr values, and the warp count."""

    kernel: str  # "package.module:kernel_name"
    types: Mapping[str, str] = field(default_factory=dict)
    constants: Mapping[str, object] = field(default_factory=dict)
    num_warps: int = 4
    label: str = ""

    @property
    def id(self) -> str:
        return self.label or self.kernel.rpartition(":")[2]


def case_reference(case: Case) -> str:
    """``module:attribute`` by which a child process finds ``case``."""
    module = type(case).__module__
    import sys
    namespace = vars(sys.modules[module])
    for attribute, value in namespace.items():
        if value is case:
            return f"{module}:{attribute}"
    qualname = type(case).__qualname__
    if "<" not in qualname and namespace.get(qualname) is type(case):
        try:
            type(case)()
        except TypeError:
            pass
        else:
            return f"{module}:{qualname}()"
    raise ValueError(f"case {getattr(case, 'name', case)!r} must be a module-level object (or "
                     f"an instance of a module-level class that takes no arguments) so that "
                     f"child processes can import it")


def resolve_case(reference: str) -> Case:
    """The case object named by ``case_reference``."""
    import importlib
    module_name, _, attribute = reference.partition(":")
    module = importlib.import_module(module_name)
    found = getattr(module, attribute.removesuffix("()"))
    case: Case = found() if attribute.endswith("()") else found
    return case


def _importable(module: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


# (case name glob, SAFE or OVERFLOWS), from the run's options
_expectation_rules: list[tuple[str, str]] = []


def set_expectations(rules: Iterable[str]) -> None:
    """Override cases' ``expect`` for this run: ``["GLOB=overflows", "GLOB=safe", ...]`` (the
    first glob that matches a case's name wins). Raises ``ValueError`` on a malformed rule."""
    parsed = []
    for rule in rules:
        glob, sep, value = rule.rpartition("=")
        value = value.strip().lower()
        if not sep or not glob.strip() or value not in (SAFE, OVERFLOWS):
            raise ValueError(f"an expectation is CASE_GLOB=safe or CASE_GLOB=overflows; got "
                             f"{rule!r}")
        parsed.append((glob.strip(), value))
    _expectation_rules[:] = parsed


def expectation(case: Case) -> str:
    """``SAFE`` or ``OVERFLOWS``: the run's rule for the case's name, else its ``expect``."""
    from fnmatch import fnmatchcase
    for glob, value in _expectation_rules:
        if fnmatchcase(case.name, glob):
            return value
    return case.expect


def validate_case(case: object) -> None:
    """Raise ``TypeError`` naming what a case object lacks."""
    problems = []
    for attribute in ("name", "module"):
        if not isinstance(getattr(case, attribute, None), str):
            problems.append(f"a str `{attribute}`")
    expect = getattr(case, "expect", SAFE)
    if expect not in (SAFE, OVERFLOWS):
        problems.append(f"`expect` SAFE or OVERFLOWS (got {expect!r})")
    if not isinstance(case, Case):
        problems.append("to subclass triton_overflow.Case (or RowsCase / SlotTableCase)")
    if isinstance(case, Case) and isinstance(getattr(case, "module", None), str):
        missing = case.unavailable()
        if missing:
            problems.append(missing)
    if problems:
        raise TypeError(f"case {case!r} needs " + ", ".join(problems))
