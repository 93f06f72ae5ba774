"""How a jit function uses each parameter, read from its body: the evidence its types rest on.

* a parameter is a pointer when it is the base of an address: the leftmost term of what a
  ``tl.load`` / ``tl.store`` / ``tl.atomic_*`` / ``tl.make_block_ptr`` / a helper's pointer
  parameter receives, directly or through local variables (``addresses``);
* a pointer's elements are int32 when what is loaded through it is used as an integer: in
  another address, as a loop bound, in bitwise or integer-division arithmetic, as a random
  seed, or widened to int64 (a narrowing ``.to(tl.int32)`` is often of a float: no evidence);
  int64 when what is loaded becomes a pointer (a table of raw addresses); bool when it is only
  tested for truth or picks a ``tl.where``;
* a pointer's elements have the width of what a ``bitcast`` turns its loaded values into
  (``x.to(tl.float8e4nv, bitcast=True)`` reads bytes): the data is packed or quantised;
* every branch that can pick an address (a ternary, ``tl.where``, an ``if`` assigning it)
  makes its base a pointer;
* a parameter passed to float math is a float; one used as a block size, a dtype, a flag, or
  compared with literals or another parameter is recorded for the constexpr values to analyse.
"""

import ast
import inspect

from triton_overflow.lint import ops, syntax
from triton_overflow.lint.addresses import Addresses

_INT_BINOPS = (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift, ast.Mod, ast.FloorDiv)
NO_DEFAULT = object()  # a parameter or keyword that has no default value


class Usage(Addresses):
    """What the body of a jit function does with each parameter and local variable."""

    def __init__(self, tree, params, namespace, depth=0):
        super().__init__(tree, params, namespace, depth)
        self.pointers, self.int_pointers, self.ambiguous = set(), set(), set()
        self.bool_pointers = set()
        self._bool_uses = set()
        self._atomic_targets = set()  # atomics take no i1 pointer, whatever their value is used as
        self._forced_int_pointers = set()  # a helper loads integers through them
        self.floats, self.maybe_floats = set(), set()
        self.flags, self.blocks, self.dtypes, self.compared = set(), set(), set(), {}
        self.ordered = {}  # constexpr -> literals it is ordered against (<, >, ...)
        self.pairs = set()  # (a, b): two parameters compared with each other
        self.keyword_defaults = {}  # constexpr passed as a keyword -> that keyword's default
        self.address_tables = set()  # pointers whose loaded values are cast to pointers
        self.addresses_as_ints = set()  # int parameters cast to pointers: raw addresses
        self._cast_to_type_of = []  # (expression, name): cast to the type of name
        self.bitcast_widths = {}  # pointer -> bits of what its loaded values are bitcast to
        self._dtype_names = set()  # names used as a dtype, locals too
        self.dot_pointees = {}  # pointer -> the float type its tl.dot partner is converted to
        self._int_uses = set()  # names used as integers
        self._read(tree)

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
        self.dtypes = self._aliased_params(self._dtype_names)
        for owner, name in self._cast_to_type_of:
            if name in self.pointers or self.bases(ast.Name(id=name)) & self.pointers:
                self.address_tables |= self._loaded_from(owner)
        self.int_pointers = {p for p in self.pointers if self._int_loaded(p)}
        self.bool_pointers = {p for p in self.pointers - self.int_pointers - self._atomic_targets
                              if self._loaded_as(p, self._bool_uses)}

    def _read_call(self, node):
        name = syntax.call_name(node)
        if name in ops.POINTER_CALLS:
            target = syntax.argument(node, 0, "pointer" if name != "make_block_ptr" else "base")
            if name in ("make_tensor_descriptor", ) and target is None:
                target = syntax.argument(node, 0, "base")
            if target is not None:
                self._pointer_expression(target)
                if name in ops.ATOMICS:
                    self._atomic_targets |= self.bases(target)
            if name == "make_block_ptr":
                for keyword in ("shape", "strides", "offsets"):
                    value = syntax.argument(
                        node, {"shape": 1, "strides": 2, "offsets": 3}[keyword], keyword)
                    if value is not None:
                        self._mark_int(value)
        elif name in ("range", "static_range", "arange"):
            for arg in node.args:
                self._mark_int(arg)
                if name == "arange":
                    self.blocks |= syntax.names(arg) & set(self.params)
        elif name in ops.INT_CALLS:
            for arg in node.args:
                self._mark_int(arg)
        elif name == "where" and node.args and isinstance(node.args[0], ast.Name):
            self._bool_uses.add(node.args[0].id)
        elif name in ops.FLOAT_CALLS:
            for arg in node.args:
                self.maybe_floats |= {n for n in syntax.names(arg) if n in self.params}
                if isinstance(arg, ast.Name) and arg.id in self.params:
                    self.floats.add(arg.id)
        elif name == "dot" and len(node.args) >= 2:
            self._read_dot(node.args[0], node.args[1])
        elif name in ("to", "cast") and node.args:
            target = node.args[0] if name == "to" else syntax.argument(node, 1, "dtype")
            owner = node.func.value if name == "to" and isinstance(node.func, ast.Attribute) \
                else node.args[0]
            dtype = syntax.dtype_name(target) if target is not None else None
            if dtype in ops.WIDE_INT_TYPES and owner is not None:
                self._mark_int(owner)  # widened as an index; a narrowing may convert a float
            bitcast_to = _triton_dtype(dtype) if owner is not None and _bitcast(node) else None
            for pointer in self._loaded_unconverted(owner) if bitcast_to is not None else ():
                self.bitcast_widths.setdefault(pointer, bitcast_to.primitive_bitwidth)
            if isinstance(target, ast.Call) and syntax.call_name(target) == "pointer_type":
                self.address_tables |= self._loaded_from(owner)
                self.addresses_as_ints |= syntax.names(owner) & set(self.params)
            elif isinstance(target, ast.Attribute) and target.attr == "dtype" and \
                    isinstance(target.value, ast.Name) and owner is not None:
                # ``tl.cast(loaded, other_ptr.dtype)``: a pointer's type, if it is a pointer.
                self._cast_to_type_of.append((owner, target.value.id))
            if target is not None and name == "to":
                self._dtype_names |= _named_dtypes(target)
        elif name in ("zeros", "full", "empty"):
            if node.args:
                self.blocks |= syntax.names(node.args[0]) & set(self.params)
            dtype = syntax.argument(node, 1 if name != "full" else 2, "dtype")
            if dtype is not None:
                self._dtype_names |= _named_dtypes(dtype)
        helper = self._helper(node)
        if helper is not None:
            self._read_helper_call(node, helper)
        for keyword in node.keywords:
            if keyword.arg == "dtype":
                self._dtype_names |= _named_dtypes(keyword.value)
            elif isinstance(keyword.value, ast.Name) and keyword.value.id in self.params:
                default = _keyword_default(name, keyword.arg)
                if default is not NO_DEFAULT:
                    self.keyword_defaults.setdefault(keyword.value.id, default)
            if keyword.arg == "num_stages":
                self.blocks.discard(getattr(keyword.value, "id", None))

    def _read_dot(self, left, right):
        """``tl.dot(a, b)`` takes two operands of one dtype: where one is converted to a float
        type, a pointer the other is loaded from as is holds that type."""
        for converted, loaded in ((left, right), (right, left)):
            dtype = self._converted_to(converted, set())
            for pointer in self._loaded_unconverted(loaded) if dtype else ():
                self.dot_pointees.setdefault(pointer, dtype)

    def _converted_to(self, expression, seen):
        """The name of the float dtype ``expression`` is converted to (through reshapes and
        local names), or None."""
        if isinstance(expression, ast.Name) and expression.id in self.assigned and \
                expression.id not in seen:
            seen.add(expression.id)
            found = {self._converted_to(value, seen) for value in self.assigned[expression.id]}
            return found.pop() if len(found) == 1 else None
        if not isinstance(expression, ast.Call):
            return None
        name = syntax.call_name(expression)
        if name in _SHAPE_CALLS and expression.args:
            return self._converted_to(expression.args[0], seen)
        if name == "to" and expression.args and not _bitcast(expression):
            dtype = _triton_dtype(syntax.dtype_name(expression.args[0]))
            return dtype.name if dtype is not None and dtype.is_floating() else None
        return None

    def _aliased_params(self, names):
        """The parameters among ``names``, and those a local name of them is set to
        (``out_dtype = OUT_DTYPE``)."""
        found, pending, seen = set(), list(names), set()
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in self.params:
                found.add(name)
            pending += [value.id for value in self.assigned.get(name, ())
                        if isinstance(value, ast.Name)]
        return found

    def _loaded_unconverted(self, expression):
        """Pointer parameters whose loaded values are ``expression`` as loaded, unconverted."""
        if isinstance(expression, ast.Call) and syntax.call_name(expression) in ops.LOADS and \
                expression.args:
            return self.bases(expression.args[0])
        if isinstance(expression, ast.Name) and expression.id in self.assigned:
            return {pointer for pointer in self._loaded_from(expression)
                    if self._directly_int(expression.id, pointer)}
        return set()

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
        if helper_param in usage.address_tables:
            self.address_tables |= self.bases(arg)
        if helper_param in usage.addresses_as_ints:
            self.addresses_as_ints |= syntax.names(arg) & set(self.params)
        if helper_param in usage.pointers:
            self._pointer_expression(arg)
            if helper_param in usage.int_pointers:
                self.int_pointers |= self.bases(arg)
                self._forced_int_pointers |= self.bases(arg)
        if helper_param in usage._int_uses:
            self._mark_int(arg)
        for mine, helpers in ((self.bitcast_widths, usage.bitcast_widths),
                              (self.dot_pointees, usage.dot_pointees)):
            for pointer in self.bases(arg) if helper_param in helpers else ():
                mine.setdefault(pointer, helpers[helper_param])
        if helper_param in usage.dtypes:
            self._dtype_names |= _named_dtypes(arg)
        if isinstance(arg, ast.Name) and arg.id in self.params:
            # A constexpr passed on to a helper that branches on it: its values matter here.
            if helper_param in usage.compared:
                self.compared.setdefault(arg.id, set()).update(usage.compared[helper_param])
            if helper_param in usage.flags:
                self.flags.add(arg.id)
            for literal in usage.ordered.get(helper_param, ()):
                self.ordered.setdefault(arg.id, set()).add(literal)
        if helper_param in usage.floats:
            self.floats |= {n for n in syntax.names(arg) if n in self.params}

    def _pointer_expression(self, expression):
        for alternative in self._alternatives(expression, set()):
            bases = self.bases(alternative)
            if len(bases) > 1:
                chosen = self._leftmost(alternative, bases)
                self.ambiguous |= bases - {chosen}
                bases = {chosen}
            self.pointers |= bases
            self._mark_offsets(alternative, bases)

    def _mark_offsets(self, expression, bases, seen=None):
        """Everything in an address but its base is an integer offset, in the address and in
        the local pointers it is built from (``rows = table + start`` then ``rows + offs``)."""
        seen = set() if seen is None else seen
        for node in ast.walk(expression):
            if isinstance(node, ast.Name) and node.id not in bases and \
                    not self.bases(node) & bases:
                self._mark_int(node)
            elif isinstance(node, ast.Name) and node.id not in bases and \
                    node.id in self.assigned and node.id not in seen:
                seen.add(node.id)
                for value in self.assigned[node.id]:
                    self._mark_offsets(value, bases, seen)
            elif isinstance(node, ast.Call) and syntax.call_name(node) in ops.LOADS:
                self._mark_int(node)

    def _mark_int(self, expression):
        for node in ast.walk(expression):
            if isinstance(node, ast.Name):
                self._int_uses.add(node.id)
            elif isinstance(node, ast.Call) and syntax.call_name(node) in ops.LOADS and node.args:
                for base in self.bases(node.args[0]):
                    self._int_uses.add(f"loaded:{base}")

    def _int_loaded(self, pointer):
        if pointer in self._forced_int_pointers:
            return True
        if f"loaded:{pointer}" in self._int_uses:
            return True
        for name in self._int_uses:
            if name in self.assigned and pointer in self._loaded_from(ast.Name(id=name)):
                if self._directly_int(name, pointer):
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


def _named_dtypes(expression):
    """The names ``expression`` gives as a dtype: itself where it is a name, either side of a
    ternary; not what a dtype is read from (``out_ptr.dtype.element_ty``)."""
    if isinstance(expression, ast.Name):
        return {expression.id}
    if isinstance(expression, ast.IfExp):
        return _named_dtypes(expression.body) | _named_dtypes(expression.orelse)
    return set()


def _bitcast(call):
    """Whether a ``.to`` / ``tl.cast`` call says ``bitcast=True``."""
    flag = syntax.argument(call, 2 if syntax.call_name(call) == "to" else 3, "bitcast")
    return isinstance(flag, ast.Constant) and flag.value is True


# Calls that keep their first argument's dtype.
_SHAPE_CALLS = {"reshape", "view", "trans", "permute", "broadcast_to", "expand_dims"}


def _triton_dtype(dtype_name):
    """Triton's ``tl.<dtype_name>``, or None where that names no dtype."""
    import triton.language as tl
    dtype = getattr(tl, dtype_name or "", None)
    return dtype if isinstance(dtype, tl.dtype) else None


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
    return NO_DEFAULT
