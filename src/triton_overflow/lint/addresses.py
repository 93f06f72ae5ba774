"""Where the values in a jit function's source come from: what each local variable is assigned,
which parameters can be the base of an address, which pointers a value was loaded from.

Addresses are followed through arithmetic (the leftmost term of a sum is its base), local
variables (every value they are assigned), tuples, ternaries, ``tl.where``, hints like
``tl.multiple_of``, and the jit helpers a kernel calls (what a helper returns is based on the
arguments it was given).
"""

import ast

from triton_overflow.lint import ops, syntax


class Element(ast.expr):
    """The ``index``-th value of ``value`` (a call returning a tuple) where a tuple assignment
    unpacks it; walked as ``value`` itself by code that does not look for it."""

    _fields = ("value", )

    def __init__(self, value, index):
        super().__init__(value=value)
        self.index = index


class Addresses:
    """The values of one jit function's local variables, and where addresses and loaded values
    come from; ``type(self)`` reads the jit helpers it calls."""

    def __init__(self, tree, params, namespace, depth=0):
        self.params = list(params)
        self.namespace = namespace
        self.depth = depth
        self.tree = tree
        self.assigned = {}  # local name -> [value expressions]
        self._helpers = {}
        self._collect_assignments(tree)

    # --- local variables and addresses ----------------------------------------------------

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
                    self._assign(element, Element(value, index))

    def bases(self, expression, seen=None):
        """Parameters that can be the base of ``expression`` used as an address."""
        seen = set() if seen is None else seen
        node = expression
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            left = self.bases(node.left, seen)
            if left or self._made_pointer(node.left, set()):
                return left  # a pointer made from an address: the rest are offsets
            return self.bases(node.right, seen) if isinstance(node.op, ast.Add) else set()
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
        if isinstance(node, Element):
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
        if isinstance(node, ast.Call) and syntax.call_name(node) in ops.SAME_BASE_CALLS:
            args = node.args[1:] if syntax.call_name(node) == "where" else node.args[:1]
            found = set()
            for arg in args:
                found |= self.bases(arg, seen)
            return found
        return set()

    def _made_pointer(self, expression, seen):
        """Whether ``expression`` is a pointer made by a cast (``tl.load(table + i).to(
        tl.pointer_type(tl.uint32))``), plus offsets, through local variables."""
        node = expression
        while isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            node = node.left
        if isinstance(node, ast.Name) and node.id not in self.params and \
                node.id not in seen and node.id in self.assigned:
            seen.add(node.id)
            return any(self._made_pointer(value, seen) for value in self.assigned[node.id])
        if isinstance(node, ast.Call) and syntax.call_name(node) in ("to", "cast"):
            target = node.args[0] if syntax.call_name(node) == "to" and node.args else \
                syntax.argument(node, 1, "dtype")
            return isinstance(target, ast.Call) and syntax.call_name(target) == "pointer_type"
        return False

    def _loaded_from(self, expression, seen=None, through_tests=True):
        """Pointer parameters whose loaded values flow into ``expression``. A load's value comes
        from its pointer, or from what ``other`` or an atomic's operands put there; what its
        address or mask loads does not flow into it. Without ``through_tests``, what a
        comparison reads does not either: its result is a bool, whatever was loaded."""
        seen = set() if seen is None else seen
        found = set()
        pending = [expression]
        while pending:
            node = pending.pop()
            if not through_tests and isinstance(node, ast.Compare):
                continue
            if isinstance(node, ast.Call) and syntax.call_name(node) in ops.LOADS and node.args:
                found |= self.bases(node.args[0])
                pending.extend(_value_operands(node))
                continue
            element = node.index if isinstance(node, Element) else None
            call = node.value if isinstance(node, Element) else node
            helper = self._helper(call) if isinstance(call, ast.Call) else None
            if helper is not None:  # a helper that returns what it loads: ``_get_lora_id(...)``
                arguments = _helper_arguments(call, helper[0])
                for name in helper[1].returned_loads(element):
                    if name in arguments:
                        found |= self.bases(arguments[name])
                if element is not None:  # one value of the tuple: not the call's others
                    pending.extend(ast.iter_child_nodes(call))
                    continue
            if isinstance(node, ast.Name) and node.id in self.assigned and node.id not in seen:
                seen.add(node.id)
                pending.extend(self.assigned[node.id])
            pending.extend(ast.iter_child_nodes(node))
        return found

    def _alternatives(self, expression, seen):
        """The addresses ``expression`` can be, one per branch: both sides of a ternary or a
        ``tl.where``, each assignment of a local variable set in several branches."""
        if isinstance(expression, ast.IfExp):
            return (self._alternatives(expression.body, seen)
                    + self._alternatives(expression.orelse, seen))
        if isinstance(expression, ast.Call) and syntax.call_name(expression) == "where" and \
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
        if isinstance(expression, ast.BinOp) and isinstance(expression.op, (ast.Add, ast.Sub)):
            # ``prev + offs`` where ``prev`` was set in each branch from another base: an
            # address per branch, each base a pointer.
            lefts = self._alternatives(expression.left, seen)
            if len(lefts) > 1:
                return [ast.BinOp(left=left, op=expression.op, right=expression.right)
                        for left in lefts]
        if isinstance(expression, ast.Subscript):  # ``ptrs[:, None]``, ``ptrs`` set per branch
            values = self._alternatives(expression.value, seen)
            if len(values) > 1:
                return [ast.Subscript(value=value, slice=expression.slice, ctx=expression.ctx)
                        for value in values]
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

    # --- the jit helpers it calls ---------------------------------------------------------

    def _helper(self, node):
        if self.depth > 4 or not isinstance(node.func, ast.Name):
            return None
        from triton_overflow.triton_versions import jit_function_of
        if node.func.id in self._helpers:
            return self._helpers[node.func.id]
        target = self.namespace.get(node.func.id)
        helper = jit_function_of(target) if target is not None else None
        found = None
        if helper is not None:
            try:
                found = helper, type(self)(syntax.function_tree(helper),
                                           [p.name for p in helper.params],
                                           helper.fn.__globals__, self.depth + 1)
            except (OSError, TypeError, ValueError):
                found = None
        self._helpers[node.func.id] = found
        return found

    def returned_loads(self, index=None):
        """Parameters whose loaded values this function returns (its ``index``-th value, where
        it returns a tuple and one element is asked for) as they are or offset and scaled
        (``return tl.load(table + i)``, ``start = tl.load(starts + i) + pid * BLOCK``); a value
        only computed from loads, an argmax over them say, is not one."""
        found = set()
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            values = [node.value]
            if isinstance(node.value, (ast.Tuple, ast.List)):
                values = node.value.elts if index is None else node.value.elts[index:index + 1]
            for value in values:
                found |= self._loads_kept(value, set())
        return found

    def _loads_kept(self, value, seen):
        """Parameters whose loaded values ``value`` is, offset, scaled or clamped."""
        if isinstance(value, ast.Call) and syntax.call_name(value) in ops.LOADS and value.args:
            return self.bases(value.args[0]) & set(self.params)
        if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Sub, ast.Mult)):
            return self._loads_kept(value.left, seen) | self._loads_kept(value.right, seen)
        if isinstance(value, ast.Call) and syntax.call_name(value) in _CLAMPS:
            return set().union(*(self._loads_kept(arg, seen) for arg in value.args))
        if isinstance(value, ast.Name) and value.id in self.assigned and value.id not in seen:
            seen.add(value.id)
            return set().union(*(self._loads_kept(v, seen) for v in self.assigned[value.id]))
        return set()

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
        arguments = _helper_arguments(node, jit_helper)
        found = set()
        for name in usage.returned_bases(index):
            if name in arguments:
                found |= self.bases(arguments[name], seen)
        return found

    # --- loaded values --------------------------------------------------------------------

    def _directly_int(self, name, pointer):
        """Some value of ``name`` is loaded from ``pointer`` and not converted on the way (a
        later reassignment may convert it: ``k = (k >> 4) & 15`` then ``k.to(q.dtype)``; a
        test of it, ``dead = m == float("-inf")``, is a bool whatever was loaded)."""
        for value in self.assigned.get(name, []):
            if pointer in self._loaded_from(value, through_tests=False) and \
                    not _converts(value):
                return True
        return False

    def _loaded_as(self, pointer, uses):
        """A variable loaded from ``pointer`` (and not converted on the way) has one of ``uses``."""
        for name in uses:
            if name in self.assigned and pointer in self._loaded_from(ast.Name(id=name)) and \
                    self._directly_int(name, pointer):
                return True
        return False


# Calls that keep one of their operands: a clamped load is still what was loaded.
_CLAMPS = {"min", "max", "minimum", "maximum", "where"}


def _helper_arguments(call, jit_helper):
    """{parameter of the helper: the expression ``call`` passes it}."""
    names = [p.name for p in jit_helper.params]
    arguments = dict(zip(names, call.args))
    arguments.update({k.arg: k.value for k in call.keywords if k.arg in names})
    return arguments


def _converts(expression):
    """Whether ``expression`` converts its value with ``.to`` (to anything but a wide int: a
    narrowing may convert a float)."""
    for node in ast.walk(expression):
        if isinstance(node, ast.Call) and syntax.call_name(node) == "to" and node.args and \
                syntax.dtype_name(node.args[0]) not in ops.WIDE_INT_TYPES | {None}:
            return True
    return False


def _value_operands(call):
    """The arguments of a load-like call whose values can become its result: a load's
    ``other``, an atomic's ``val`` (and ``cmp``)."""
    name = syntax.call_name(call)
    if name == "load":
        operands = [syntax.argument(call, 2, "other")]
    elif name == "atomic_cas":
        operands = [syntax.argument(call, 1, "cmp"), syntax.argument(call, 2, "val")]
    else:
        operands = [syntax.argument(call, 1, "val")]
    return [operand for operand in operands if operand is not None]
