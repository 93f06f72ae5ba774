"""Each family's huge cases, compile specs and benchmark entries, beside each other.

``tests/test_<family>.py`` lists a family's ``CASES`` and ``COMPILE_SPECS`` on its
``OverflowTests`` class; ``families()`` finds every family module for the checks that span them
(every launched kernel has a compile spec) and for the benchmark.
"""

import importlib
import pkgutil


def families():
    """Every family module of this package, by name."""
    return {info.name: importlib.import_module(f"{__name__}.{info.name}")
            for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")}
