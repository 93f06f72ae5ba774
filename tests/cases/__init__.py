"""Each family's huge cases, compile specs, streaming kernels and benchmark entries, beside each
other.

``tests/test_<family>.py`` lists a family's ``CASES`` and ``COMPILE_SPECS`` on its
``OverflowTests`` class; ``families()`` finds every family module for the checks that span them
(every launched kernel has a compile spec, the ``STREAMING`` kernels keep 16-byte accesses) and
for the benchmark (``benchmarks``, and ``benchmark_inputs`` for tensors shared with the twin).
``family_root`` lets a family kept outside this checkout join them all.
"""

import contextlib
import importlib
import pkgutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported for the annotation only: this package is imported before pytest
    from triton_overflow.cases import CompileSpec

# The packages a family's four files join: kernels/, reference/, tests/cases/ and tests/.
FAMILY_PACKAGES = ("kernels", "reference", "tests.cases", "tests")


@dataclass(frozen=True)
class Streaming:
    """A kernel that streams the logits: compiled as its ``CompileSpec`` says, with the
    ``aligned`` integer arguments taken as multiples of 16 (as launches with such vocab sizes
    and strides specialise them), it moves them in 16-byte global accesses on sm_90, with at
    most ``scalar_load_limit`` 4-byte loads (``tests/test_gpu_compile.py``)."""

    spec: "CompileSpec"
    aligned: tuple[str, ...]
    scalar_load_limit: int = 3


def families():
    """Every family module of this package, by name."""
    return {info.name: importlib.import_module(f"{__name__}.{info.name}")
            for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")}


@contextlib.contextmanager
def family_root(root):
    """While inside, the family files under ``root`` (laid out as this checkout: kernels/,
    reference/, tests/cases/, tests/) import as if they were in this checkout's folders, and
    ``families()`` finds them; on leaving, they are forgotten again."""
    folders = {importlib.import_module(name): str(Path(root, *name.split(".")))
               for name in FAMILY_PACKAGES}
    for package, folder in folders.items():
        package.__path__.append(folder)
    importlib.invalidate_caches()
    try:
        yield
    finally:
        for package, folder in folders.items():
            package.__path__.remove(folder)
        inside = str(Path(root)) + "/"
        for name in [name for name, module in sys.modules.items()
                     if str(getattr(module, "__file__", None) or "").startswith(inside)]:
            del sys.modules[name]
            parent, _, child = name.rpartition(".")
            if parent in sys.modules:
                vars(sys.modules[parent]).pop(child, None)
