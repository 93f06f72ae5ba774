"""Case descriptions: per kernel, which rows a huge case plants, poisons and compares.

``harness.runner`` drives them; how the memory is obtained is the backend's business.
"""

import importlib
import pkgutil


def all_cases():
    """Every case object defined in this package, by "module:ATTRIBUTE" name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for attribute, value in vars(module).items():
            if attribute.isupper() and hasattr(value, "launch") and hasattr(value, "programs"):
                found[f"{module.__name__}:{attribute}"] = value
    return found
