"""The argument types and constexpr values a kernel is compiled with for the static check.

Without a recorded launch the types are read from the kernel itself, not from names:

* annotations are honoured (``tl.int64``, ``tl.int32``, ``"*fp32"``, ``tl.constexpr``);
* a parameter is a pointer when it is the base of an address: the leftmost term of what a
  ``tl.load`` / ``tl.store`` / ``tl.atomic_*`` / ``tl.make_block_ptr`` / a helper's pointer
  parameter receives, directly or through local variables;
* a pointer's elements are int32 when what is loaded through it is used as an integer: in
  another address, as a loop bound, in bitwise or integer-division arithmetic, as a random
  seed, or widened to int64 (a narrowing ``.to(tl.int32)`` is often of a float: no evidence);
  int64 when what is loaded becomes a pointer (a table of raw addresses); otherwise fp32;
* every branch that can pick an address (a ternary, ``tl.where``, an ``if`` assigning it)
  makes its base a pointer;
* every other int parameter is i32, as Triton types any int argument below 2**31, so a product
  that would wrap at run time is an i32 multiply here; a parameter passed to float math is fp32.

Constexpr parameters take their default, the first autotune config's value, or a value their
use suggests (a block size for ``tl.arange``, ``tl.float32`` for a dtype, the default of the
keyword they are passed as), and every guess is noted. A flag (a bool constexpr, or one tested
by ``if``) is analysed with every value it can take, and an int constexpr compared with literals
(here or in a helper it is passed to) with each of them: a product behind ``if FLAG:`` whose
default is False is seen all the same. Two guessed constexprs compared with each other are
analysed equal and unequal, so no guess decides a branch.
"""

import ast
import inspect
import itertools
import textwrap
from dataclasses import dataclass, field

_ATOMICS = {"atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
            "atomic_xchg", "atomic_cas"}
# Calls whose value is what their pointer held: a load, or an atomic's old value (a slot taken
# from a counter indexes like a loaded index).
_LOADS = {"load"} | _ATOMICS
_POINTER_CALLS = {"load", "store", "make_block_ptr", "make_tensor_descriptor",
                  "prefetch"} | _ATOMICS
_FLOAT_CALLS = {"exp", "exp2", "log", "log2", "log1p", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos",
                "sigmoid", "tanh", "erf", "div_rn", "fdiv", "softmax", "pow", "fma"}
_INT_BINOPS = (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift, ast.Mod, ast.FloorDiv)
_INT_CALLS = {"histogram", "rand", "randint", "randn", "randint4x", "rand4x", "randn4x",
              "philox", "umulhi", "cdiv"}
_INT_TYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
_WIDE_INT_TYPES = {"int64", "uint64"}
MAX_COMBINATIONS = 16
BLOCK_DEFAULT = 128
POINTER = "<pointer>"  # in a variant: the parameter stays a pointer (not None)


class _Element(ast.expr):
    """The ``index``-th value of ``value`` (a call returning a tuple) where a tuple assignment
    unpacks it; walked as ``value`` itself by code that does not look for it."""

    _fields = ("value", )

    def __init__(self, value, index):
        super().__init__(value=value)
        self.index = index


@dataclass
class Plan:
    """How to compile a kernel: types, constexpr variants, and fallbacks for the pointers."""

    types: dict  # parameter -> Triton type string ("*fp32", "i32", "constexpr", ...)
    constexpr_variants: list  # [{parameter: value}], the first is the default
    pointer_fallbacks: list = field(default_factory=list)  # other {parameter: type} to try
    notes: list = field(default_factory=list)  # what was assumed, one line each


def plan(jit_function, configs=None):
    """The ``Plan`` of a ``JITFunction``; ``configs`` are autotune configs (``.kwargs``)."""
    tree = _function_tree(jit_function)
    params = [p.name for p in jit_function.params]
    usage = _Usage(tree, params, jit_function.fn.__globals__)
    defaults = _defaults(jit_function)
    config_values = dict(getattr(configs[0], "kwargs", {}) or {}) if configs else {}
    types, constexprs, choices = {}, {}, {}
    guesses = []
    notes = list(usage.notes)
    for param in jit_function.params:
        name = param.name
        annotation = param.annotation or ""
        if "constexpr" in annotation or name in config_values:
            types[name] = "constexpr"
            value, options, guessed = _constexpr_values(
                name, defaults.get(name, _NO_DEFAULT), config_values, usage)
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


_NO_DEFAULT = object()


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
    elif default is not _NO_DEFAULT:
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
    guessed = name not in config_values and default is _NO_DEFAULT
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


def _function_tree(jit_function):
    source = textwrap.dedent(inspect.getsource(jit_function.fn))
    module = ast.parse(source)
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    raise ValueError(f"no function definition in the source of {jit_function.fn.__name__}")


class _Usage:
    """What the body of a jit function does with each parameter and local variable."""

    def __init__(self, tree, params, namespace, depth=0):
        self.params = list(params)
        self.namespace = namespace
        self.depth = depth
        self.assigned = {}  # local name -> [value expressions]
        self.pointers, self.int_pointers, self.ambiguous = set(), set(), set()
        self.bool_pointers = set()
        self._bool_uses = set()
        self._atomic_targets = set()  # atomics take no i1 pointer, whatever their value is used as
        self.floats, self.maybe_floats = set(), set()
        self.flags, self.blocks, self.dtypes, self.compared = set(), set(), set(), {}
        self.ordered = {}  # constexpr -> literals it is ordered against (<, >, ...)
        self.pairs = set()  # (a, b): two parameters compared with each other
        self.keyword_defaults = {}  # constexpr passed as a keyword -> that keyword's default
        self.address_tables = set()  # pointers whose loaded values are cast to pointers
        self.notes = []
        self.tree = tree
        self._helpers = {}
        self._int_uses = set()  # names used as integers
        self._loaded = {}  # local name -> pointer parameters its value was loaded from
        self._collect_assignments(tree)
        self._read(tree)

    # --- local variables ------------------------------------------------------------------

    def _collect_assignments(self, tree):
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._assign(target, node.value)
            elif isinstance(node, ast.AugAssign):
                # ``p += step`` makes p ``p + step``: still based on what p was.
                current = ast.Name(id=node.target.id, ctx=ast.Load()) \
                    if isinstance(node.target, ast.Name) else node.target
                self._assign(node.target, ast.copy_location(
                    ast.BinOp(left=current, op=node.op, right=node.value), node))
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                self._assign(node.target, node.value)
            elif isinstance(node, ast.For):
                self._assign(node.target, node.iter)
            elif isinstance(node, ast.NamedExpr):
                self._assign(node.target, node.value)

    def _assign(self, target, value):
        if isinstance(target, ast.Name):
            self.assigned.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for index, element in enumerate(target.elts):
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                    self._assign(element, value.elts[index])
                else:
                    self._assign(element, _Element(value, index))

    def bases(self, expression, seen=None):
        """Parameters that can be the base of ``expression`` used as an address."""
        seen = set() if seen is None else seen
        node = expression
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            left = self.bases(node.left, seen)
            return left if left else (self.bases(node.right, seen)
                                      if isinstance(node.op, ast.Add) else set())
        if isinstance(node, ast.Name):
            if node.id in self.params:
                return {node.id}
            if node.id in seen or node.id not in self.assigned:
                return set()
            seen.add(node.id)
            found = set()
            for value in self.assigned[node.id]:
                found |= self.bases(value, seen)
            return found
        if isinstance(node, ast.Subscript):
            return self.bases(node.value, seen)
        if isinstance(node, _Element):
            helper = self._helper(node.value) if isinstance(node.value, ast.Call) else None
            if helper is not None:
                return self._helper_return_bases(node.value, helper, seen, node.index)
            return self.bases(node.value, seen)
        if isinstance(node, (ast.Tuple, ast.List)):
            return set().union(*(self.bases(element, seen) for element in node.elts))
        if isinstance(node, ast.IfExp):
            return self.bases(node.body, seen) | self.bases(node.orelse, seen)
        if isinstance(node, ast.Call):
            helper = self._helper(node)
            if helper is not None:
                return self._helper_return_bases(node, helper, seen)
        if isinstance(node, ast.Call) and _call_name(node) in ("multiple_of", "max_contiguous",
                                                             "max_constancy", "where",
                                                             "advance"):
            args = node.args[1:] if _call_name(node) == "where" else node.args[:1]
            found = set()
            for arg in args:
                found |= self.bases(arg, seen)
            return found
        return set()

    def _loaded_from(self, expression, seen=None):
        """Pointer parameters whose loaded values flow into ``expression``. A load's value comes
        from its pointer, or from what ``other`` or an atomic's operands put there; what its
        address or mask loads does not flow into it."""
        seen = set() if seen is None else seen
        found = set()
        pending = [expression]
        while pending:
            node = pending.pop()
            if isinstance(node, ast.Call) and _call_name(node) in _LOADS and node.args:
                found |= self.bases(node.args[0])
                pending.extend(_value_operands(node))
                continue
            if isinstance(node, ast.Name) and node.id in self.assigned and node.id not in seen:
                seen.add(node.id)
                pending.extend(self.assigned[node.id])
            pending.extend(ast.iter_child_nodes(node))
        return found

    # --- reading the body ---------------------------------------------------------------

    def _read(self, tree):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                self._read_call(node)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, _INT_BINOPS):
                self._mark_int(node.left)
                self._mark_int(node.right)
            elif isinstance(node, ast.If) or isinstance(node, ast.IfExp) or \
                    isinstance(node, ast.While):
                self._read_condition(node.test)
            elif isinstance(node, ast.BoolOp):
                for value in node.values:
                    self._read_condition(value)
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                self._read_condition(node.operand)
            elif isinstance(node, ast.Compare):
                self._read_compare(node)
            elif isinstance(node, ast.For):
                if isinstance(node.iter, ast.Call):
                    for arg in node.iter.args:
                        self._mark_int(arg)
        for name in self.params:
            if name in self._int_uses:
                self.floats.discard(name)
        self.int_pointers = {p for p in self.pointers if self._int_loaded(p)}
        self.bool_pointers = {p for p in self.pointers - self.int_pointers - self._atomic_targets
                              if self._loaded_as(p, self._bool_uses)}

    def _read_call(self, node):
        name = _call_name(node)
        if name in _POINTER_CALLS:
            target = _argument(node, 0, "pointer" if name != "make_block_ptr" else "base")
            if name in ("make_tensor_descriptor", ) and target is None:
                target = _argument(node, 0, "base")
            if target is not None:
                self._pointer_expression(target)
                if name in _ATOMICS:
                    self._atomic_targets |= self.bases(target)
            if name == "make_block_ptr":
                for keyword in ("shape", "strides", "offsets"):
                    value = _argument(node, {"shape": 1, "strides": 2, "offsets": 3}[keyword],
                                      keyword)
                    if value is not None:
                        self._mark_int(value)
        elif name in ("range", "static_range", "arange"):
            for arg in node.args:
                self._mark_int(arg)
                if name == "arange":
                    self.blocks |= _names(arg) & set(self.params)
        elif name in _INT_CALLS:
            for arg in node.args:
                self._mark_int(arg)
        elif name == "where" and node.args and isinstance(node.args[0], ast.Name):
            self._bool_uses.add(node.args[0].id)
        elif name in _FLOAT_CALLS:
            for arg in node.args:
                self.maybe_floats |= {n for n in _names(arg) if n in self.params}
                if isinstance(arg, ast.Name) and arg.id in self.params:
                    self.floats.add(arg.id)
        elif name in ("to", "cast") and node.args:
            target = node.args[0] if name == "to" else _argument(node, 1, "dtype")
            owner = node.func.value if name == "to" and isinstance(node.func, ast.Attribute) \
                else node.args[0]
            dtype = _dtype_name(target) if target is not None else None
            if dtype in _WIDE_INT_TYPES and owner is not None:
                self._mark_int(owner)  # widened as an index; a narrowing may convert a float
            if isinstance(target, ast.Call) and _call_name(target) == "pointer_type":
                self.address_tables |= self._loaded_from(owner)
            if target is not None and name == "to":
                self.dtypes |= _names(target) & set(self.params)
        elif name in ("zeros", "full", "empty"):
            if node.args:
                self.blocks |= _names(node.args[0]) & set(self.params)
            dtype = _argument(node, 1 if name != "full" else 2, "dtype")
            if dtype is not None:
                self.dtypes |= _names(dtype) & set(self.params)
        helper = self._helper(node)
        if helper is not None:
            self._read_helper_call(node, helper)
        for keyword in node.keywords:
            if keyword.arg == "dtype":
                self.dtypes |= _names(keyword.value) & set(self.params)
            elif isinstance(keyword.value, ast.Name) and keyword.value.id in self.params:
                default = _keyword_default(name, keyword.arg)
                if default is not _NO_DEFAULT:
                    self.keyword_defaults.setdefault(keyword.value.id, default)
            if keyword.arg == "num_stages":
                self.blocks.discard(getattr(keyword.value, "id", None))

    def _helper(self, node):
        if self.depth > 4 or not isinstance(node.func, ast.Name):
            return None
        from triton_overflow.compat import jit_function_of
        if node.func.id in self._helpers:
            return self._helpers[node.func.id]
        target = self.namespace.get(node.func.id)
        helper = jit_function_of(target) if target is not None else None
        found = None
        if helper is not None:
            try:
                found = helper, _Usage(_function_tree(helper), [p.name for p in helper.params],
                                       helper.fn.__globals__, self.depth + 1)
            except (OSError, TypeError, ValueError):
                found = None
        self._helpers[node.func.id] = found
        return found

    def returned_bases(self, index=None):
        """Parameters that can be the base of what this function returns (of its ``index``-th
        value, where it returns a tuple and one element is asked for)."""
        found = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Return) and node.value is not None:
                value = node.value
                if (index is not None and isinstance(value, (ast.Tuple, ast.List))
                        and index < len(value.elts)):
                    value = value.elts[index]
                found |= self.bases(value)
        return found

    def _helper_return_bases(self, node, helper, seen, index=None):
        jit_helper, usage = helper
        names = [p.name for p in jit_helper.params]
        arguments = dict(zip(names, node.args))
        arguments.update({k.arg: k.value for k in node.keywords if k.arg in names})
        found = set()
        for name in usage.returned_bases(index):
            if name in arguments:
                found |= self.bases(arguments[name], seen)
        return found

    def _read_helper_call(self, node, helper):
        jit_helper, usage = helper
        names = [p.name for p in jit_helper.params]
        for index, arg in enumerate(node.args):
            if index >= len(names):
                break
            self._apply_helper_role(arg, names[index], usage)
        for keyword in node.keywords:
            if keyword.arg in names:
                self._apply_helper_role(keyword.value, keyword.arg, usage)

    def _apply_helper_role(self, arg, helper_param, usage):
        if helper_param in usage.pointers:
            self._pointer_expression(arg)
            if helper_param in usage.int_pointers:
                self.int_pointers |= self.bases(arg)
                self._forced_int_pointers = getattr(self, "_forced_int_pointers", set()) | \
                    self.bases(arg)
        if helper_param in usage._int_uses:
            self._mark_int(arg)
        if isinstance(arg, ast.Name) and arg.id in self.params:
            # A constexpr passed on to a helper that branches on it: its values matter here.
            if helper_param in usage.compared:
                self.compared.setdefault(arg.id, set()).update(usage.compared[helper_param])
            if helper_param in usage.flags:
                self.flags.add(arg.id)
            for literal in usage.ordered.get(helper_param, ()):
                self.ordered.setdefault(arg.id, set()).add(literal)
        if helper_param in usage.floats:
            self.floats |= {n for n in _names(arg) if n in self.params}

    def _pointer_expression(self, expression):
        for alternative in self._alternatives(expression, set()):
            bases = self.bases(alternative)
            if len(bases) > 1:
                chosen = self._leftmost(alternative, bases)
                self.ambiguous |= bases - {chosen}
                bases = {chosen}
            self.pointers |= bases
            self._mark_offsets(alternative, bases)

    def _alternatives(self, expression, seen):
        """The addresses ``expression`` can be, one per branch: both sides of a ternary or a
        ``tl.where``, each assignment of a local variable set in several branches."""
        if isinstance(expression, ast.IfExp):
            return (self._alternatives(expression.body, seen)
                    + self._alternatives(expression.orelse, seen))
        if isinstance(expression, ast.Call) and _call_name(expression) == "where" and \
                len(expression.args) == 3:
            return (self._alternatives(expression.args[1], seen)
                    + self._alternatives(expression.args[2], seen))
        if isinstance(expression, ast.Name) and expression.id not in self.params and \
                self.assigned.get(expression.id) and expression.id not in seen:
            seen.add(expression.id)
            found = []
            for value in self.assigned[expression.id]:
                found += self._alternatives(value, seen)
            return found
        return [expression]

    def _leftmost(self, expression, bases):
        node = expression
        while True:
            if isinstance(node, ast.BinOp):
                node = node.left
            elif isinstance(node, ast.Subscript):
                node = node.value
            elif isinstance(node, ast.Name):
                if node.id in bases:
                    return node.id
                values = self.assigned.get(node.id, [])
                if not values:
                    return sorted(bases)[0]
                node = values[0]
            else:
                return sorted(bases)[0]

    def _mark_offsets(self, expression, bases):
        """Everything in an address but its base is an integer offset."""
        for node in ast.walk(expression):
            if isinstance(node, ast.Name) and node.id not in bases and \
                    not self.bases(node) & bases:
                self._mark_int(node)
            elif isinstance(node, ast.Call) and _call_name(node) in _LOADS:
                self._mark_int(node)

    def _mark_int(self, expression):
        for node in ast.walk(expression):
            if isinstance(node, ast.Name):
                self._int_uses.add(node.id)
            elif isinstance(node, ast.Call) and _call_name(node) in _LOADS and node.args:
                for base in self.bases(node.args[0]):
                    self._int_uses.add(f"loaded:{base}")

    def _int_loaded(self, pointer):
        if pointer in getattr(self, "_forced_int_pointers", set()):
            return True
        if f"loaded:{pointer}" in self._int_uses:
            return True
        for name in self._int_uses:
            if name in self.assigned and pointer in self._loaded_from(ast.Name(id=name)):
                if self._directly_int(name, pointer):
                    return True
        return False

    def _directly_int(self, name, pointer):
        """Some value of ``name`` is loaded from ``pointer`` and not converted on the way (a
        later reassignment may convert it: ``k = (k >> 4) & 15`` then ``k.to(q.dtype)``)."""
        for value in self.assigned.get(name, []):
            if pointer in self._loaded_from(value) and not _converts(value):
                return True
        return False

    def _read_condition(self, test):
        """Names tested for truth directly (``if x``, ``not x``, ``x and y``) are flags."""
        direct = [test]
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            direct = [test.operand]
        elif isinstance(test, ast.BoolOp):
            direct = list(test.values)
        for node in direct:
            if isinstance(node, ast.Name):
                self._bool_uses.add(node.id)
                if node.id in self.params:
                    self.flags.add(node.id)

    def _loaded_as(self, pointer, uses):
        """A variable loaded from ``pointer`` (and not converted on the way) has one of ``uses``."""
        for name in uses:
            if name in self.assigned and pointer in self._loaded_from(ast.Name(id=name)) and \
                    self._directly_int(name, pointer):
                return True
        return False

    def _read_compare(self, node):
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            if isinstance(left, ast.Name) and isinstance(right, ast.Name) and \
                    {left.id, right.id} <= set(self.params) and left.id != right.id:
                self.pairs.add(tuple(sorted((left.id, right.id))))
            if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
                for name_side, literal_side in ((left, right), (right, left)):
                    if isinstance(name_side, ast.Name) and name_side.id in self.params and \
                            isinstance(literal_side, ast.Constant) and \
                            type(literal_side.value) is int:
                        self.ordered.setdefault(name_side.id, set()).add(literal_side.value)
            if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
                for name_side, literal_side in ((left, right), (right, left)):
                    if isinstance(name_side, ast.Name) and name_side.id in self.params and \
                            isinstance(literal_side, ast.Constant):
                        self.compared.setdefault(name_side.id, set()).add(literal_side.value)
            left = right


def _converts(expression):
    """Whether ``expression`` converts its value with ``.to`` (to anything but a wide int: a
    narrowing may convert a float)."""
    for node in ast.walk(expression):
        if isinstance(node, ast.Call) and _call_name(node) == "to" and node.args and \
                _dtype_name(node.args[0]) not in _WIDE_INT_TYPES | {None}:
            return True
    return False


def _keyword_default(function, keyword):
    """The default of ``keyword`` in Triton's ``tl.<function>`` (or tensor method), for a
    constexpr passed there with no default of its own (``input_precision=PRECISION``)."""
    import triton.language as tl
    for owner in (tl, tl.tensor):
        target = getattr(owner, function or "", None)
        target = getattr(target, "fn", target)  # builtins may be wrapped
        try:
            parameter = inspect.signature(target).parameters.get(keyword)
        except (TypeError, ValueError):
            continue
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            return parameter.default
    return _NO_DEFAULT


def _call_name(node):
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _value_operands(call):
    """The arguments of a load-like call whose values can become its result: a load's
    ``other``, an atomic's ``val`` (and ``cmp``)."""
    name = _call_name(call)
    if name == "load":
        operands = [_argument(call, 2, "other")]
    elif name == "atomic_cas":
        operands = [_argument(call, 1, "cmp"), _argument(call, 2, "val")]
    else:
        operands = [_argument(call, 1, "val")]
    return [operand for operand in operands if operand is not None]


def _argument(node, position, keyword):
    for item in node.keywords:
        if item.arg == keyword:
            return item.value
    return node.args[position] if len(node.args) > position else None


def _names(expression):
    return {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)}


def _dtype_name(node):
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None
