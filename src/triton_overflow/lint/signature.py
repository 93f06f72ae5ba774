"""The argument types and constexpr values a kernel is compiled with for the static check.

Without a recorded launch the types are read from the kernel itself, not from names: an
annotation is honoured (``tl.int64``, ``tl.int32``, ``"*fp32"``, ``tl.constexpr``); otherwise
what its body does with a parameter decides (``usage``: a pointer, and to what, or a float).
Every other int parameter is i32, as Triton types any int argument below 2**31, so a product
that would wrap at run time is an i32 multiply here.

Constexpr parameters take their default, the first autotune config's value, or a value their
use suggests (a block size for ``tl.arange``, ``tl.float32`` for a dtype, the default of the
keyword they are passed as), and every guess is noted. A flag (a bool constexpr, or one tested
by ``if``) is analysed with every value it can take, and an int constexpr compared with literals
(here or in a helper it is passed to) with each of them: a product behind ``if FLAG:`` whose
default is False is seen all the same. Two guessed constexprs compared with each other are
analysed equal and unequal, so no guess decides a branch.
"""

import inspect
import itertools
from dataclasses import dataclass, field

from triton_overflow.lint.syntax import function_tree
from triton_overflow.lint.usage import NO_DEFAULT, Usage

MAX_COMBINATIONS = 16
BLOCK_DEFAULT = 128
# Where the guessed sizes break the kernel's own rules (a power-of-two tl.arange of a sum, a
# tl.static_assert, Triton's limit on a tile's elements), every guessed size is tried at these.
GUESS_FALLBACKS = (16, 32, 64, 8, 256, 4, 2, 1)
# The most elements Triton takes in one tile (``tl.arange``'s range, a block's numel).
MAX_TILE = 2**20
POINTER = "<pointer>"  # in a variant: the parameter stays a pointer (not None)


@dataclass
class Plan:
    """How to compile a kernel: types, constexpr variants, and fallbacks for the pointers."""

    types: dict  # parameter -> Triton type string ("*fp32", "i32", "constexpr", ...)
    constexpr_variants: list  # [{parameter: value}], the first is the default
    pointer_fallbacks: list = field(default_factory=list)  # other {parameter: type} to try
    constexpr_fallbacks: list = field(default_factory=list)  # other guessed values to try
    choices: dict = field(default_factory=dict)  # constexpr -> every value worth analysing
    pair_variants: list = field(default_factory=list)  # two guesses equal, and unequal
    co_guarding: list = field(default_factory=list)  # (a, b): choices tested together, nested
    notes: list = field(default_factory=list)  # what was assumed, one line each


class VariantSearch:
    """Which constexpr variants of a plan to compile, in two rounds: the default and each
    choice alone (with the pair variants); then every combination of the choices that changed
    the kernel's products alone. A flag that guards no product needs no second compile, and
    the cost grows with the flags that matter, not as 2**flags."""

    def __init__(self, kernel_plan):
        self.base = kernel_plan.constexpr_variants[0]
        self.choices = kernel_plan.choices
        first = [self.base]
        self.toggled = {}  # index in the first round -> the choice it toggles
        for name in sorted(self.choices):
            for option in self.choices[name]:
                if option == self.base.get(name):
                    continue
                variant = {**self.base, name: option}
                if variant not in first:
                    self.toggled[len(first)] = name
                    first.append(variant)
        self.first_round = _dedup(first + list(kernel_plan.pair_variants))
        self.co_guarding = [(a, b) for a, b in kernel_plan.co_guarding
                            if a in self.choices and b in self.choices]

    def second_round(self, outcomes):
        """The combinations still to compile, given ``outcomes`` of the first round (by index:
        the products a variant has, or None where it did not compile): every combination of
        the choices that changed the products alone, and each pair of choices tested together
        (``if A and B:``, ``if A:`` around ``if B:``), which neither changes alone."""
        base = outcomes.get(0)
        if base is None:  # the default does not compile: nothing to compare with, so all
            return [variant for variant in _combinations(self.base, self.choices)
                    if variant not in self.first_round]
        mattering = sorted({name for index, name in self.toggled.items()
                            if outcomes.get(index) != base})
        grid = _combinations(self.base, {n: self.choices[n] for n in mattering}) \
            if len(mattering) >= 2 else []
        for first, second in self.co_guarding:
            for one in self.choices[first]:
                for other in self.choices[second]:
                    if one != self.base.get(first) and other != self.base.get(second):
                        grid.append({**self.base, first: one, second: other})
        return _dedup([variant for variant in grid if variant not in self.first_round])


def plan(jit_function, configs=None, pointee=None, heuristics=None, flags=()):
    """The ``Plan`` of a ``JITFunction``; ``configs`` are autotune configs (``.kwargs``);
    ``pointee(name)`` gives the element type a deployment states for a pointer, or None;
    ``heuristics`` (``@triton.heuristics``' functions by constexpr) give the sizes tried first
    where the guessed ones do not compile; ``flags`` are the constexprs its launches set to a
    bool (``guards.launched_flags``)."""
    tree = function_tree(jit_function)
    params = [p.name for p in jit_function.params]
    usage = Usage(tree, params, jit_function.fn.__globals__)
    usage.flags |= set(flags) & set(params)
    defaults = _defaults(jit_function)
    config_values = dict(getattr(configs[0], "kwargs", {}) or {}) if configs else {}
    types, constexprs, choices = {}, {}, {}
    guesses = []
    notes = []
    for param in jit_function.params:
        name = param.name
        annotation = param.annotation or ""
        if "constexpr" in annotation or name in config_values:
            types[name] = "constexpr"
            value, options, guessed = _constexpr_values(
                name, defaults.get(name, NO_DEFAULT), config_values, usage)
            if guessed:
                guesses.append(name)
                shown = ", ".join(_shown(o) for o in options)
                notes.append(f"`{name}` has no default or autotune config: checked as "
                             f"{name} = {shown}" if len(options) > 1 else
                             f"`{name}` has no default or autotune config: checked as "
                             f"{name} = {_shown(value)}")
            constexprs[name] = value
            if len(options) > 1:
                choices[name] = options
        elif _annotated_type(annotation):
            types[name] = _annotated_type(annotation)
        elif name in usage.pointers and pointee is not None and pointee(name):
            types[name] = "*" + pointee(name)
            notes.append(f"`{name}` holds {pointee(name)}, as the envelope says")
        elif name in usage.pointers:
            bitcast = _BITCAST_POINTEES.get(usage.bitcast_widths.get(name))
            dot = usage.dot_pointees.get(name)
            types[name] = ("*i64" if name in usage.address_tables else
                           bitcast if bitcast else
                           "*" + dot if dot and name not in usage.int_pointers else
                           "*i32" if name in usage.int_pointers else
                           "*i1" if name in usage.bool_pointers else "*fp32")
            if None in usage.compared.get(name, ()):
                choices[name] = [POINTER, None]  # launched with None too: analyse both
        elif name in usage.addresses_as_ints:
            types[name] = "i64"  # a raw address, cast to a pointer in the kernel
        elif name in usage.floats:
            types[name] = "fp32"
        else:
            types[name] = "i32"
    variants = _combinations(constexprs, choices)
    pair_variants = []
    for first, second in sorted(usage.pairs):
        if first in guesses and second in guesses:
            pair_variants += _pair_variants(variants[0], first, second)
            notes.append(f"`{first}` and `{second}` are compared and neither has a default: "
                         f"checked with {first} == {second} and {first} != {second}")
    numbers = [name for name in guesses if type(constexprs[name]) is int]
    return Plan(types=types, constexpr_variants=_dedup(variants + pair_variants),
                pointer_fallbacks=_fallbacks(types, usage), notes=notes,
                choices=choices, pair_variants=pair_variants,
                co_guarding=_co_guarding(tree, set(choices)),
                constexpr_fallbacks=_heuristic_sizes(heuristics, constexprs, numbers, types)
                + _size_fallbacks(numbers, usage))


# What a heuristic reads for a launch's int argument (``next_power_of_2(args["head_dim"])``):
# a small size, so that sizes it multiplies together stay a tile Triton takes.
HEURISTIC_INT = 16


class _LaunchArguments(dict):
    """The ``args`` a heuristic is given: the constexprs' values, a stand-in pointer for a
    pointer argument (not None), ``HEURISTIC_INT`` for an int one."""

    def __init__(self, constexprs, types):
        super().__init__(constexprs)
        self.types = types

    def __missing__(self, name):
        kind = self.types.get(name, "")
        if kind.startswith("*"):
            return object()
        if kind.startswith(("i", "u")):
            return HEURISTIC_INT
        raise KeyError(name)


def _heuristic_sizes(heuristics, constexprs, numbers, types):
    """The guessed sizes (``numbers``) as the kernel's own heuristics compute them from the
    other guesses (``BLOCK_QH = BLOCK_Q * next_power_of_2(group)``), as one fallback: [] where
    none computes a size."""
    if not heuristics:
        return []
    args = _LaunchArguments(constexprs, types)
    computed = {}
    for name, function in heuristics.items():
        try:
            value = function(args)
        except Exception:  # noqa: BLE001 - a heuristic that needs what is not known here
            continue
        if name in numbers and type(value) is int and 0 < value <= MAX_TILE:
            args[name] = computed[name] = value
    return [computed] if computed else []


def _size_fallbacks(numbers, usage):
    """Other values for the guessed sizes ``numbers``: block sizes large and the other sizes
    small (``BLOCK_M // SLICE_FACTOR`` must stay a tile ``tl.dot`` takes), then every one
    alike, each value of ``GUESS_FALLBACKS`` in turn."""
    if not numbers:
        return []
    blocks = [name for name in numbers if name in usage.blocks or "BLOCK" in name.upper()]
    mixed = [{name: BLOCK_DEFAULT if name in blocks else 2 for name in numbers}] \
        if blocks and len(blocks) < len(numbers) else []
    return mixed + [{name: value for name in numbers} for value in GUESS_FALLBACKS]


def _co_guarding(tree, names):
    """Pairs of ``names`` tested in one condition or in nested ones: a product behind both is
    seen only with both changed."""
    import ast
    pairs = set()

    def tested(test):
        return {n.id for n in ast.walk(test) if isinstance(n, ast.Name) and n.id in names}

    def visit(node, outer):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            here = tested(node.test)
            pairs.update(tuple(sorted((a, b))) for a in outer | here for b in here if a != b)
            inside = outer | here
            for child in ast.iter_child_nodes(node):
                if child is not node.test:
                    visit(child, inside)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, outer)

    visit(tree, set())
    return sorted(pairs)


def _pair_variants(default, first, second):
    """Variants in which two guessed constexprs are equal, and differ."""
    equal, different = dict(default), dict(default)
    equal[second] = default[first]
    if default[first] == default[second]:
        value = default[second]
        different[second] = value * 2 if isinstance(value, int) and value else 1
    return [equal, different]


def _dedup(variants):
    unique = []
    for variant in variants:
        if variant not in unique:
            unique.append(variant)
    return unique


def _shown(value):
    import triton.language as tl
    if isinstance(value, tl.dtype):
        return f"tl.{value}"
    return repr(value)


# The element type of a pointer whose loaded values are bitcast to so many bits (32 bits: the
# int or float guess stands, as either bitcasts).
_BITCAST_POINTEES = {8: "*u8", 16: "*i16", 64: "*i64"}


# Triton's own names of argument types, as a parameter's annotation gives them.
_ANNOTATION_TYPES = {"int": "i32", "float": "fp32", "bool": "i1"}


def _annotated_type(annotation):
    """The Triton type an annotation states, or "" where it states none (``tl.tensor``)."""
    if not annotation:
        return ""
    if annotation.startswith("*"):
        return annotation
    if annotation in _ANNOTATION_TYPES:
        return _ANNOTATION_TYPES[annotation]
    from triton._utils import type_canonicalisation_dict
    return annotation if annotation in set(type_canonicalisation_dict.values()) else ""


def _defaults(jit_function):
    """The parameters' defaults that are values: one computed from what could not be loaded
    (a stand-in) counts as no default, and is guessed from its use."""
    from triton_overflow.lint.standins import StandIn
    signature = inspect.signature(jit_function.fn)
    return {name: p.default for name, p in signature.parameters.items()
            if p.default is not inspect.Parameter.empty and not isinstance(p.default, StandIn)}


def _constexpr_values(name, default, config_values, usage):
    """(the value to compile with, every value worth analysing, whether that value is a
    guessed block size)."""
    import triton.language as tl
    if name in config_values:
        value = config_values[name]
    elif default is not NO_DEFAULT:
        value = default
    elif name in usage.flags:
        value = True
    elif name in usage.compared:
        value = sorted(usage.compared[name], key=repr)[0]
    elif name in usage.dtypes or name.lower().endswith("dtype"):
        value = tl.float32  # a dtype by its use, or by its name where a call takes it as is
    elif name in usage.blocks:  # before a keyword's default: ``tl.range(..., step=BLOCK)``
        value = BLOCK_DEFAULT
    elif name in usage.keyword_defaults:
        value = usage.keyword_defaults[name]
    else:
        value = 16
    guessed = name not in config_values and default is NO_DEFAULT
    options = [value]
    if isinstance(value, bool) or name in usage.flags:
        options += [not bool(value)]
    for literal in sorted(usage.compared.get(name, ()), key=repr):
        if literal not in options:
            options.append(literal)
    literals = usage.compared.get(name, set())
    if guessed and literals and all(option in literals for option in options):
        # ``if X != 0:`` with X guessed as 0: a value equal to none of the literals too.
        numbers = [v for v in literals if type(v) is int]
        other = BLOCK_DEFAULT if name in usage.blocks else (max(numbers) + 1 if numbers else 16)
        while other in literals:
            other *= 2
        options.append(other)
    if guessed:
        # An ordering against a literal (``if BLOCK > 64:``) is analysed on both sides.
        for literal in sorted(usage.ordered.get(name, ())):
            for option in (literal, literal * 2 if literal > 0 else literal + 1):
                if option not in options:
                    options.append(option)
    return value, options, guessed


def _combinations(constexprs, choices):
    names = sorted(choices)
    variants = [dict(constexprs)]
    if not names:
        return variants
    grid = list(itertools.product(*(choices[n] for n in names)))
    if len(grid) > MAX_COMBINATIONS:
        grid = [tuple(choices[n][0] for n in names)]
        for index, name in enumerate(names):
            for option in choices[name][1:]:
                values = list(grid[0])
                values[index] = option
                grid.append(tuple(values))
        grid.append(tuple(choices[n][-1] for n in names))
    for values in grid:
        variant = dict(constexprs)
        variant.update(zip(names, values))
        if variant not in variants:
            variants.append(variant)
    return variants


def _fallbacks(types, usage):
    """Other pointer typings to try when the inferred one does not compile."""
    pointers = [n for n, t in types.items() if t.startswith("*") and n in usage.pointers]
    options = []
    # What a bitcast's width or a tl.dot partner made of a pointer, undone: either may have
    # been read off the wrong load.
    options.append({n: "*i32" if n in usage.int_pointers else "*fp32" for n in pointers
                    if n in usage.bitcast_widths or n in usage.dot_pointees})
    for name in usage.ambiguous:
        options.append({name: "i32"})
    options.append({n: "*i32" for n in pointers})
    options.append({n: "*fp32" for n in pointers})
    options += [{n: ("*fp32" if types[n] == "*i32" else "*i32")} for n in pointers]
    options.append({n: "fp32" for n in usage.maybe_floats if types.get(n) == "i32"})
    floats = [n for n in pointers if types[n] == "*fp32"]
    # Data of another width, read through bitcasts or by tl.dot_scaled: fp8 and packed bytes,
    # half precision, then each float pointer alone as bytes.
    for pointee in ("*fp8e4nv", "*u8", "*bf16", "*fp16", "*i16"):
        options.append({n: pointee for n in floats})
    options += [{n: "*u8"} for n in floats]
    return [o for o in options if o]
