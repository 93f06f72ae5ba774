"""triton_overflow: an int32 offset overflow suite for Triton kernels, for your own kernels.

* the static check: ``triton-overflow lint PATH`` (``triton_overflow.lint``);
* launch recording: ``triton-overflow record -o FILE -- COMMAND``
  (``triton_overflow.lint.record``);
* huge cases past 2**31 elements, on lazily allocated CPU memory in Triton's interpreter or on
  a GPU, each proven against the kernel's int32 twin: describe your kernel with ``RowsCase``,
  ``SlotTableCase`` or ``Case`` and list it on a subclass of ``OverflowTests``;
* benchmark rows beside the cases, timed on a GPU: ``Benchmark`` (``triton_overflow.bench``);
* reproductions of the static check's findings on the engine's own kernels: ``triton-overflow
  repro FILE:LINE`` (``triton_overflow.repro``);
* the pytest plugin (loaded by the ``pytest11`` entry point): markers, options, the report
  header and the kernel x detector report behind ``triton-overflow validate``.

The package in layers (CONTRIBUTING.md says what each module holds): this public face
(``cases``, ``compare``, ``bench``, ``philox``, ``cli``); ``plugin/``, the pytest side (hooks,
the generated tests, the detector report); ``engine/``, the huge-run engine (a case in a child
process, its memory, its devices); ``interp/``, Triton's interpreter made to run huge cases;
``lint/``, the static check; ``repro/``, reproductions; and the foundations they share
(``locations``, ``triton_versions``, ``twin``).
"""

from typing import TYPE_CHECKING

__version__ = "0.2.0"
__all__ = ["OVERFLOWS", "SAFE", "Benchmark", "Case", "CompileSpec", "HugeRun", "OverflowTests",
           "RowMismatch", "RowsCase", "SlotTableCase", "assert_rows_close", "assert_rows_equal"]

if TYPE_CHECKING:
    from triton_overflow.bench import Benchmark
    from triton_overflow.cases import (OVERFLOWS, SAFE, Case, CompileSpec, HugeRun, RowsCase,
                                       SlotTableCase)
    from triton_overflow.compare import RowMismatch, assert_rows_close, assert_rows_equal
    from triton_overflow.plugin.tiers import OverflowTests
else:
    # Imported on first use, so that importing the package (the pytest plugin does, before
    # torch is needed) stays cheap. Type checkers see the imports above instead, and no
    # module __getattr__ that would let a misspelt name through.
    _PUBLIC = {
        "Case": "triton_overflow.cases", "RowsCase": "triton_overflow.cases",
        "SlotTableCase": "triton_overflow.cases", "HugeRun": "triton_overflow.cases",
        "CompileSpec": "triton_overflow.cases", "SAFE": "triton_overflow.cases",
        "OVERFLOWS": "triton_overflow.cases", "OverflowTests": "triton_overflow.plugin.tiers",
        "assert_rows_equal": "triton_overflow.compare",
        "assert_rows_close": "triton_overflow.compare",
        "RowMismatch": "triton_overflow.compare", "Benchmark": "triton_overflow.bench",
    }

    def __getattr__(name: str) -> object:
        if name in _PUBLIC:
            import importlib
            return getattr(importlib.import_module(_PUBLIC[name]), name)
        raise AttributeError(f"module 'triton_overflow' has no attribute {name!r}")
