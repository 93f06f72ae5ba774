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
POINTER = "<pointer>"  # in a variant: the parameter stays a pointer (not None)


@dataclass
class Plan:
    """How to compile a kernel: types, constexpr variants, and fallbacks for the pointers."""

    types: dict  # parameter -> Triton type string ("*fp32", "i32", "constexpr", ...)
    constexpr_variants: list  # [{parameter: value}], the first is the default
    pointer_fallbacks: list = field(default_factory=list)  # other {parameter: type} to try
    notes: list = field(default_factory=list)  # what was assumed, one line each


def plan(jit_function, configs=None):
    """The ``Plan`` of a ``JITFunction``; ``configs`` are autotune configs (``.kwargs``)."""
    tree = function_tree(jit_function)
    params = [p.name for p in jit_function.params]
    usage = Usage(tree, params, jit_function.fn.__globals__)
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
        elif name in usage.pointers:
            types[name] = ("*i64" if name in usage.address_tables else
                           "*i32" if name in usage.int_pointers else
                           "*i1" if name in usage.bool_pointers else "*fp32")
            if None in usage.compared.get(name, ()):
                choices[name] = [POINTER, None]  # launched with None too: analyse both
        elif name in usage.floats:
            types[name] = "fp32"
        else:
            types[name] = "i32"
    variants = _combinations(constexprs, choices)
    for first, second in sorted(usage.pairs):
        if first in guesses and second in guesses:
            variants += _pair_variants(variants[0], first, second)
            notes.append(f"`{first}` and `{second}` are compared and neither has a default: "
                         f"checked with {first} == {second} and {first} != {second}")
    return Plan(types=types, constexpr_variants=_dedup(variants),
                pointer_fallbacks=_fallbacks(types, usage), notes=notes)


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
    signature = inspect.signature(jit_function.fn)
    return {name: p.default for name, p in signature.parameters.items()
            if p.default is not inspect.Parameter.empty}


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
    elif name in usage.dtypes:
        value = tl.float32
    elif name in usage.keyword_defaults:
        value = usage.keyword_defaults[name]
    elif name in usage.blocks:
        value = BLOCK_DEFAULT
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
    for name in usage.ambiguous:
        options.append({name: "i32"})
    options.append({n: "*i32" for n in pointers})
    options.append({n: "*fp32" for n in pointers})
    options += [{n: ("*fp32" if types[n] == "*i32" else "*i32")} for n in pointers]
    options.append({n: "fp32" for n in usage.maybe_floats if types.get(n) == "i32"})
    return [o for o in options if o]
