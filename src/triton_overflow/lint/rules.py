"""The static check's rules, each one class: its id, name, help, default level and message.

A finding names its rule (``Finding.rule``); the text, JSON and SARIF reports read the rule's
message and description from here, and SARIF's ``rules`` table lists ``RULES``. The level of an
``i32-offset-product`` finding is judged by ``levels.Levels`` (what each side of the product is
made of, and what it can reach); a new rule brings its own judgement beside its class here.
"""

from typing import ClassVar


class Rule:
    """A kind of finding. Subclasses declare their fields and, where findings carry one,
    ``message``."""

    id: ClassVar[str]  # SARIF's ruleId, and how docs and baselines name the rule
    name: ClassVar[str]  # SARIF's rule name, CamelCase
    summary: ClassVar[str]  # one line
    help: ClassVar[str]  # what it means and how to fix it
    default_level: ClassVar[str]

    @classmethod
    def sarif(cls):
        """The rule's entry in a SARIF run's ``tool.driver.rules``."""
        return {"id": cls.id, "name": cls.name, "shortDescription": {"text": cls.summary},
                "fullDescription": {"text": cls.help}, "help": {"text": cls.help},
                "defaultConfiguration": {"level": cls.default_level}}


class OffsetProduct(Rule):
    """An int32 multiply whose result reaches a pointer offset."""

    id = "i32-offset-product"
    name = "Int32OffsetProduct"
    summary = "i32 multiply feeds a pointer offset"
    help = ("An int32 index (a program id, a loop variable or a value loaded from an int32 table) "
            "times an int32 stride wraps once the product passes 2**31 - 1: an illegal memory "
            "access or silently wrong rows. Widen an operand before the multiply: "
            "`tl.cast(row, tl.int64) * stride` (a cast around the product, "
            "`tl.cast(row * stride, tl.int64)`, comes after the wrap), or widen a loaded index "
            "where it is loaded.")
    default_level = "error"

    @staticmethod
    def message(finding):
        operands = " * ".join(finding.operands)
        kind = "u32" if finding.unsigned else "i32"
        text = f"{kind} multiply feeds a pointer offset: `{finding.product}` ({operands})"
        if finding.cast_after:
            text += "; widened to int64 only after the multiply, which has already wrapped"
        text += f"; {finding.headroom}" if finding.headroom else ""
        text += f" [{finding.why}]" if finding.why else ""
        if finding.stand_ins:
            names = ", ".join(f"`{name}`" for name in finding.stand_ins)
            text += f" (depends on {names}, which could not be loaded: a stand-in was used)"
        return text


class KernelNotChecked(Rule):
    """A kernel or file the check could not compile or import (a ``could not check`` line)."""

    id = "kernel-not-checked"
    name = "KernelNotChecked"
    summary = "a kernel could not be checked"
    help = "The kernel could not be compiled or imported for the static check; it was not analysed."
    default_level = "warning"


RULES = (OffsetProduct, KernelNotChecked)
