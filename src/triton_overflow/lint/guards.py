"""Flags a launcher sets from a size test: the int32 branch a kernel takes only while small.

Kernels that widen their indices only where they must take a constexpr flag that their
launcher computes from a size, in the kernel's own file::

    LONG_INDEXING=0 if n_elements <= INT32_SAFETY_BUFFER else 1
    USE_INT64=x.numel() > 2**31 - 1
    needs_int64 = n > MAX_INT32; kernel[grid](..., NEEDS_INT64=needs_int64)

In the variant of the flags the launcher takes only while that size is below 2**31, an int32
product that only this variant holds is guarded by the launcher's test: it is a ``warning``
whose reason names the test and the launch, not an ``error``. A product the other variant
holds too keeps that variant's level. Only a test of the int32 range guards: one whose limit
reads as a number from 2**30 to 2**31 (not a call, a name the file does not bind to one, or a
tuning threshold such as ``M <= 16``).
"""

import ast
import functools
from dataclasses import dataclass, replace

from triton_overflow.lint import arithmetic
from triton_overflow.lint.levels import ERROR, WARNING
from triton_overflow.lint.ranges import INT32_LIMIT
from triton_overflow.lint.syntax import segment, source_tree


@dataclass(frozen=True)
class Guard:
    flag: str  # the constexpr the launcher sets
    value: object  # its value while the size stays below the limit
    test: str  # the launcher's test, as written
    small_when_true: bool  # whether the test holds on the small side, or fails there
    line: int  # of the launch, in the kernel's file

    def holds_in(self, constexprs):
        """Whether a variant with ``constexprs`` is the one the launcher takes while small."""
        return self.flag in constexprs and constexprs[self.flag] == self.value and \
            isinstance(constexprs[self.flag], (bool, int))

    def reason(self):
        when = "only while" if self.small_when_true else "unless"
        return (f"but the launch at line {self.line} sets `{self.flag}={self.value!r}` {when} "
                f"`{self.test}`, below 2**31: this int32 branch is taken only then")


def launcher_guards(file, kernel_name, namespace=None):
    """The ``Guard``s of ``kernel_name``'s launches in ``file``: each keyword flag whose value
    is a size test (directly, through a conditional expression, or through a name the
    launcher assigns once)."""
    flags = _launch_keywords(file).get(kernel_name)
    if not flags:
        return []
    constants = _module_numbers(source_tree(file), namespace or {})
    guards = (_guard(flag, value, constants, file, line) for flag, value, line in flags)
    return [guard for guard in guards if guard is not None]


def guarded(findings, guards, constexprs):
    """``findings`` of one variant, each ``error`` a ``warning`` where a guard holds in it."""
    holding = [guard for guard in guards if guard.holds_in(constexprs)]
    if not holding:
        return findings
    return [replace(f, level=WARNING, why=f"{f.why}; {holding[0].reason()}")
            if f.level == ERROR else f for f in findings]


def launched_flags(file, kernel_name):
    """The constexprs every launch of ``kernel_name`` in ``file`` sets to a bool: ``True`` or
    ``False``, a comparison, a ``not``, or a parameter of the launcher annotated ``bool``
    (``OVERLAP=overlap`` in ``def launch(..., overlap: bool)``). Each is a flag, checked both
    ways, whatever arithmetic the kernel does with it (``(1 + OVERLAP) * RATIO``)."""
    launches = _launch_keywords(file).get(kernel_name, [])
    by_flag = {}
    for flag, value, _ in launches:
        by_flag.setdefault(flag, []).append(value)
    return {flag for flag, values in by_flag.items()
            if len(values) == len({line for _, _, line in launches}) and all(
                _is_bool(value) for value in values)}


def _is_bool(value):
    return isinstance(value, ast.Constant) and isinstance(value.value, bool) or \
        isinstance(value, ast.Compare) or \
        isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not) or \
        isinstance(value, _BoolParameter)


@dataclass(frozen=True)
class _BoolParameter:
    """A launcher's parameter annotated ``bool``, as a launch keyword's value."""
    name: str


@functools.lru_cache(maxsize=256)
def _launch_keywords(file):
    """{kernel name: [(keyword, its value, line of the launch)]} of every ``kernel[grid](...)``
    or ``module.kernel[grid](...)`` inside a function of ``file`` (and of each kernel a local
    it launches was set to: ``kernel = _attn_kernel if ... else _mla_kernel``), a keyword given
    by a name the function assigns once read as that assignment's value, by a parameter
    annotated ``bool`` as such: one walk per file, for all of its kernels."""
    tree = source_tree(file)
    launches = {}
    for function in ast.walk(tree) if tree is not None else ():
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        assigned = _assigned_once(function)
        dispatched = _names_assigned_to(function)
        bools = {a.arg for a in function.args.args + function.args.kwonlyargs
                 if isinstance(a.annotation, ast.Name) and a.annotation.id == "bool"}
        for call in ast.walk(function):
            name = _launched_name(call)
            if name is None:
                continue
            for keyword in call.keywords:
                if keyword.arg is None:
                    continue
                value = keyword.value
                if isinstance(value, ast.Name) and value.id in assigned:
                    value = assigned[value.id]
                elif isinstance(value, ast.Name) and value.id in bools:
                    value = _BoolParameter(value.id)
                for launched in {name} | dispatched.get(name, set()):
                    launches.setdefault(launched, []).append((keyword.arg, value, call.lineno))
    return launches


def _names_assigned_to(function):
    """{local: the names it is set to} for the locals ``function`` sets to a name or to either
    name of a conditional expression, however many times (``kernel = _a_kernel`` in one branch,
    ``kernel = _b_kernel`` in another)."""
    names = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            values = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) \
                else [node.value]
            names.setdefault(node.targets[0].id, set()).update(
                v.id for v in values if isinstance(v, ast.Name))
    return names


def _launched_name(call):
    """``kernel`` of ``kernel[grid](...)`` or ``module.kernel[grid](...)``, else None."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript)):
        return None
    named = call.func.value
    return named.id if isinstance(named, ast.Name) else \
        named.attr if isinstance(named, ast.Attribute) else None


def _assigned_once(function):
    """{name: value} of the names ``function`` assigns exactly once."""
    values, counts = {}, {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            values[name] = node.value
            counts[name] = counts.get(name, 0) + 1
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and \
                isinstance(node.target, ast.Name):
            counts[node.target.id] = counts.get(node.target.id, 0) + 2
    return {name: value for name, value in values.items() if counts[name] == 1}


def _guard(flag, value, constants, file, line):
    if isinstance(value, ast.IfExp) and isinstance(value.test, ast.Compare):
        small_when_true = _small_when_true(value.test, constants)
        branch = value.body if small_when_true else value.orelse
        if small_when_true is None or not isinstance(branch, ast.Constant):
            return None
        return Guard(flag, branch.value, _written(file, value.test), small_when_true, line)
    if isinstance(value, ast.Compare):
        small_when_true = _small_when_true(value, constants)
        if small_when_true is None:
            return None
        return Guard(flag, small_when_true, _written(file, value), small_when_true, line)
    return None


def _small_when_true(compare, constants):
    """For ``size < limit`` or ``size <= limit``: True (the test holds while small); for
    ``size > limit`` or ``size >= limit``: False; None where the test is not one comparison
    or not a test of the int32 range: its limit a number from 2**30 up to 2**31 (a tuning
    threshold, ``M <= 16``, bounds one size, not the tensors a branch indexes)."""
    if len(compare.ops) != 1:
        return None
    limit = arithmetic.value(compare.comparators[0], constants)
    if limit is None:
        return None
    op = type(compare.ops[0])
    # The largest size that passes as small, each way the test is written.
    largest = {ast.Lt: limit - 1, ast.LtE: limit, ast.Gt: limit, ast.GtE: limit - 1}.get(op)
    if largest is None or not INT32_LIMIT // 2 <= largest < INT32_LIMIT:
        return None
    return op in (ast.Lt, ast.LtE)


def _module_numbers(tree, namespace):
    """{name: int} of the module's names bound to a number: by the file's own top-level
    assignments, else by the loaded module's namespace."""
    numbers = {name: value for name, value in namespace.items()
               if isinstance(value, int) and not isinstance(value, bool)}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            number = arithmetic.value(node.value, numbers)
            if number is not None:
                numbers[node.targets[0].id] = number
    return numbers


def _written(file, node):
    return " ".join((segment(file, node) or "").split())
