"""Findings: i32 products on the way into an address.

Every address a kernel forms is a ``tt.addptr`` (block pointers are rewritten into them before
TTIR; where a Triton version keeps ``tt.make_tensor_ptr`` / ``tt.advance``, their element
offsets count too). From each offset the analysis walks back through everything that carries an
integer (``flow.Flow``); an ``arith.muli`` or ``arith.shli`` of i32 on that walk, with at least
one operand that is not a constant, is a finding, unless interval arithmetic proves it below
2**31 from constants and block offsets alone, or a bounded marker on its line names it::

    offs = block * BLOCK + tl.arange(0, BLOCK)  # overflow-lint: block * BLOCK bounded by vocab_size

A marker covers only the product it names, and needs its reason.
"""

import ast
import linecache
import re
import sys
from dataclasses import dataclass, field, replace

from triton_overflow import triton_versions
from triton_overflow.lint.fixes import Fix, widenings
from triton_overflow.lint.flow import Flow, is_i32
from triton_overflow.lint.levels import ERROR, LEVELS, WARNING, Levels
from triton_overflow.lint.ops import (BROADCASTS, DIVISIONS, DOTS, INT_WIDENINGS, PRODUCTS,
                                      REMAINDERS, SHAPE_OPS)
from triton_overflow.lint.ranges import INT32_LIMIT, Ranges
from triton_overflow.lint.rules import OffsetProduct, Rule
from triton_overflow.lint.syntax import block_pointer_offsets, nodes_of, segment, source_tree

MARKER = re.compile(r"#\s*overflow-lint:\s*(.*)$")
_BOUNDED = re.compile(r"^(?P<product>.+?)\s+bounded\s+by\s+(?P<reason>\S.*)$")


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    kernel: str
    product: str  # the product as written, e.g. "row * logits_stride"
    operands: tuple  # what each side is made of, e.g. ("program id x", "int argument `stride`")
    column: int = 0
    headroom: str = field(default="", compare=False)
    largest: int | None = field(default=None, compare=False)  # largest product seen, if known
    twin_of: str | None = field(default=None, compare=False)
    level: str = field(default=ERROR, compare=False)  # error, warning or note (``levels``)
    why: str = field(default="", compare=False)  # the level's reason, one line
    stand_ins: tuple = field(default=(), compare=False)  # stand-in helpers it depends on
    unsigned: bool = field(default=False, compare=False)
    cast_after: bool = field(default=False, compare=False)  # widened only after it wrapped
    fix: Fix | None = field(default=None, compare=False)
    candidate_fixes: tuple = field(default=(), compare=False)  # best first; ``fix`` is chosen
    tensors: tuple = field(default=(), compare=False)  # pointer arguments its addresses index
    grows: bool = field(default=False, compare=False)  # scales with the rows it indexes
    scaled: bool = field(default=False, compare=False)  # multiplied again before the address
    divided: bool = field(default=False, compare=False)  # a side is a quotient (token // top_k)
    outer: bool = field(default=False, compare=False)  # a batch or head on grid axis 1 or 2
    matmul: bool = field(default=False, compare=False)  # its kernel multiplies tiles (tl.dot)
    # a block pointer's coordinate: Triton multiplies it by the stride in 64 bits
    block_coordinate: bool = field(default=False, compare=False)
    reach: int | None = field(default=None, compare=False)  # elements its tensor can hold
    # the keys of the i32 index products its index is summed or scaled from (``i_b * T`` of
    # ``(i_b * T * H + i_h) * K``)
    roots: tuple = field(default=(), compare=False)
    indexes: bool = field(default=False, compare=False)  # a side is an index, not only sizes
    rule: type[Rule] = field(default=OffsetProduct, compare=False)

    @property
    def key(self):
        return (self.file, self.line, self.product)

    def message(self):
        return self.rule.message(self)


# The value analyses walk the IR recursively: a kernel that unrolls long chains (a bitonic
# sort, a scan over static ranges) goes deeper than Python's default limit of 1,000.
ANALYSIS_RECURSION_LIMIT = 20_000


def find_products(graph, kernel_name, ranges_env=None):
    """The findings of one compiled kernel (``ir.Graph``)."""
    if sys.getrecursionlimit() < ANALYSIS_RECURSION_LIMIT:
        sys.setrecursionlimit(ANALYSIS_RECURSION_LIMIT)
    flow = Flow(graph)
    static = Ranges(graph, flow, None)
    ranges = Ranges(graph, flow, ranges_env) if ranges_env is not None else None
    levels = Levels(graph, flow, static)
    # A product is direct when it reaches an address without being multiplied again.
    direct_products, scaled_products, visited = {}, {}, set()
    tensors = {}  # product op index -> the pointer arguments whose addresses it reaches
    stack = [(value, True, root) for value, root in _sink_offsets(graph, flow)]
    while stack:
        value, direct, root = stack.pop()
        if (value, direct, root) in visited:
            continue
        visited.add((value, direct, root))
        op, _ = flow.producer(value)
        is_product = op is not None and op.name in PRODUCTS
        if is_product and is_i32(op.types[0]):
            (direct_products if direct else scaled_products).setdefault(op.index, op)
            if root:
                tensors.setdefault(op.index, set()).add(root)
        under = direct and not (is_product and not _by_one(static, op))
        # What is divided, or taken a remainder of, on its way into an address does not index
        # that tensor at its own size (a token position over a page size is a page).
        if op is not None and op.name in DIVISIONS | REMAINDERS:
            root = None
        stack.extend((source, under, root) for source in flow.sources(value))
    cast_after = _products_cast_after(graph, flow)
    addresses = list(_address_terms(graph, flow, static))
    inner = _inner_products(addresses, flow, levels)
    alone = _alone_in_addresses(addresses)
    findings, keys = {}, {}
    products = {**scaled_products, **direct_products}
    matmul = any(op.name in DOTS for op in graph.ops)
    for index, op in sorted(products.items()):
        finding = _product_finding(op, flow, static, ranges, kernel_name, levels,
                                   direct=index in direct_products,
                                   cast_after=index in cast_after)
        if finding is not None:
            keys[index] = finding.key
            finding = replace(finding, tensors=tuple(sorted(tensors.get(index, ()))),
                              grows=levels.grows(op) and index not in inner,
                              scaled=index not in direct_products,
                              divided=levels.divided(op),
                              outer=levels.outer_on_grid(op) and index not in inner | alone,
                              matmul=matmul,
                              roots=tuple(_roots(flow, op, products)),
                              indexes=_indexes(flow, op))
            if index in inner and finding.level == ERROR and ranges is None:
                finding = replace(finding, level=WARNING, why=f"{finding.why}; but it indexes "
                                  f"an inner dimension: it sits beside a row already widened "
                                  f"to int64, or is the column of `row * stride + col`")
            known = findings.get(finding.key)
            if known is None or LEVELS.index(finding.level) < LEVELS.index(known.level):
                findings[finding.key] = finding
    findings = {key: replace(finding, roots=tuple(sorted(
        {keys[index] for index in finding.roots if index in keys} - {key})))
        for key, finding in findings.items()}
    return sorted(findings.values(), key=lambda f: (f.file, f.line, f.product))


# What an index is made from where it grows with the work: a program, a loaded value, a loop.
_INDEX_KINDS = frozenset({"program id", "loaded value", "atomic result", "loop variable"})


def _indexes(flow, product):
    """Whether a side of ``product`` is an index (``i_b`` of ``i_b * T``), not only sizes
    (``H * K``)."""
    return any(origin.kind in _INDEX_KINDS for operand in product.operands[:2]
               for origin in flow.origins(operand))


def _roots(flow, product, products):
    """The indices of the i32 products in ``products`` that ``product``'s sides are summed or
    scaled from (``bos = i_b * T`` of ``(bos * H + i_h) * K``), not through a division or a
    remainder, past which they no longer set its size."""
    return {op.index for op in flow.upstream(product.operands[:2], stop=DIVISIONS | REMAINDERS)
            if op.index in products}


def with_roots_of_errors(findings):
    """``findings`` (one compiled kernel's, levels final) with the index product that an
    ``error`` is made from on another line raised to ``error`` too: ``bos = i_b * T`` is where
    the int32 index of ``(bos * H + i_h) * K`` is made, and widening it there widens that
    product (where upstream fixes widen it). Only where the error's index is one chain of
    products (not a sum of two, ``(pid_g * G + pid_s * S) * stride``, where either may be the
    small one), only an index (``H * K`` is a size), and not a product that numbers alone
    bound (a ``note``: the first program of a group, ``pid // (G * n) * G``)."""
    by_key = {finding.key: finding for finding in findings}
    raised = {}
    for error in findings:
        if error.level != ERROR:
            continue
        roots = [by_key[key] for key in error.roots if key in by_key and by_key[key].indexes]
        if any(a.key not in b.roots and b.key not in a.roots
               for i, a in enumerate(roots) for b in roots[i + 1:]):
            continue
        for root in roots:
            if root.level != WARNING or root.line == error.line or root.key in raised:
                continue
            raised[root.key] = replace(root, level=ERROR, why=(
                f"it makes the int32 index of `{error.product}` (line {error.line}), an "
                f"error: widened here, that product is too"))
    return [raised.get(finding.key, finding) for finding in findings]


def _inner_products(addresses, flow, levels):
    """The indices of the i32 products that index an inner dimension of every address they
    reach unscaled: one that sits beside a row already widened (an int64 multiply that grows
    with the workload: the row is that term, this one is a head, a split or a column), an
    index times a constant beside an index times an int argument (``col`` of ``row * stride +
    col``, below the stride), or a tile on grid axis 1 or 2 beside a term that runs over the
    rows by the workload itself (``cols * stride_n`` of ``row * stride_m + cols * stride_n``,
    ``row`` from ``program_id(0)``: an address has one row)."""
    verdicts = {}  # product index -> inner in every address so far
    for terms in addresses:
        for term, axes in terms.values():
            if not is_i32(term.types[0]):
                continue
            others = [(t, a) for t, a in terms.values() if t is not term]
            beside_a_row = any(not is_i32(t.types[0]) and levels.grows(t) for t, _ in others)
            by_constant = any(not flow.origins(v) for v in term.operands[:2])
            column = by_constant and any(_scaled_by_argument(flow, t) for t, _ in others) or \
                axes == {0} and any(1 in a for _, a in others)
            tile_beside_the_row = levels.grows(term) and not levels.grows_by_workload(term) \
                and any(levels.grows_by_workload(t) for t, _ in others)
            # The products inside a term scale what the term scales: its verdict is theirs.
            for index in {term.index} | _products_within(flow, term):
                verdicts[index] = verdicts.get(index, True) and \
                    (beside_a_row or column or tile_beside_the_row)
    return {index for index, is_inner in verdicts.items() if is_inner}


def _address_terms(graph, flow, static):
    """For each address the kernel forms, {product index: (product, the axes it was expanded
    along)} of its product terms: ``row * stride`` and ``col * stride_n`` of ``ptr + row *
    stride + col * stride_n``, not ``col`` nor a product by one."""
    for offsets in _addresses(graph, flow):
        terms, seen, stack = {}, set(), [(offset, frozenset()) for offset in offsets]
        while stack:  # each term of the address, with the axes it was expanded along
            value, axes = stack.pop()
            if (value, axes) in seen:
                continue
            seen.add((value, axes))
            op, _ = flow.producer(value)
            if op is not None and op.name in PRODUCTS and not _by_one(static, op):
                terms.setdefault(op.index, (op, set()))[1].update(axes)
                continue
            if op is not None and op.name == "tt.expand_dims" and op.axis is not None:
                axes = axes | {op.axis}
            stack.extend((source, axes) for source in flow.sources(value))
        yield terms


def _alone_in_addresses(addresses):
    """The indices of the products that are the only product term of every address they
    reach (``W + group * N + cols``), of ``addresses`` as ``_address_terms`` gives them: what
    they index has no other row, so an index there is that tensor's row, not a batch or head
    above rows."""
    alone = {}
    for terms in addresses:
        for index in terms:
            alone[index] = alone.get(index, True) and len(terms) == 1
    return {index for index, is_alone in alone.items() if is_alone}


def _addresses(graph, flow):
    """The offsets of each address a kernel forms, every term of it: ``ptr + row * stride +
    col`` is two ``tt.addptr`` in a chain, one offset each."""
    from triton_overflow.lint.ops import POINTER_CARRIERS
    for op in graph.ops:
        if op.name != "tt.addptr" or len(op.operands) < 2:
            continue
        offsets, pointer, seen = [op.operands[1]], op.operands[0], set()
        while pointer not in seen:
            seen.add(pointer)
            producer, _ = flow.producer(pointer)
            if producer is None:
                break
            if producer.name == "tt.addptr" and len(producer.operands) >= 2:
                offsets.append(producer.operands[1])
            elif producer.name not in POINTER_CARRIERS or producer.name == "arith.select":
                break
            pointer = producer.operands[0]
        yield offsets


def _products_within(flow, product):
    """The indices of the products that feed ``product``'s operands."""
    return {op.index for op in flow.upstream(product.operands[:2]) if op.name in PRODUCTS}


def _scaled_by_argument(flow, product):
    """Whether one side of ``product`` is an int argument (a stride), the other an index."""
    kinds = [{o.kind for o in flow.origins(v)} for v in product.operands[:2]]
    return any(k == {"int argument"} for k in kinds) and all(kinds)


def _products_cast_after(graph, flow):
    """The indices of the i32 products whose result is widened to i64 as it is (the cast
    written around the multiply: ``tl.cast(B * T, tl.int64)``)."""
    found = set()
    for op in graph.ops:
        if op.name not in INT_WIDENINGS or not op.operands:
            continue
        value = op.operands[0]
        for _ in range(8):
            producer, _ = flow.producer(value)
            if producer is None or producer.name not in SHAPE_OPS:
                break
            value = producer.operands[0]
        if producer is not None and producer.name in PRODUCTS and is_i32(producer.types[0]):
            found.add(producer.index)
    return found


def _by_one(static, op):
    """A multiply by one (a unit stride) does not scale what it multiplies."""
    return any(static.interval(v) == (1, 1) for v in op.operands[:2])


def _sink_offsets(graph, flow):
    """(offset, the pointer argument it indexes, or None) of every address the kernel forms."""
    for op in graph.ops:
        if op.name == "tt.addptr" and len(op.operands) >= 2:
            yield op.operands[1], flow.pointer_root(op.operands[0])
        elif op.name == "tt.make_tensor_ptr":
            root = flow.pointer_root(op.operands[0])
            for offset in _unit_stride_offsets(flow, op, op.operands[1 + 2 * _rank(op):]):
                yield offset, root
        elif op.name == "tt.advance":
            tensor_pointer = _tensor_pointer(flow, op.operands[0])
            offsets = op.operands[1:]
            if tensor_pointer is None:
                for offset in offsets:
                    yield offset, None
                continue
            root = flow.pointer_root(tensor_pointer.operands[0])
            for offset in _unit_stride_offsets(flow, tensor_pointer, offsets):
                yield offset, root


def _rank(make_tensor_ptr):
    """Operands of ``tt.make_tensor_ptr``: base, then shape, strides and offsets, rank each."""
    return (len(make_tensor_ptr.operands) - 1) // 3


def _unit_stride_offsets(flow, make_tensor_ptr, offsets):
    """Those of ``offsets`` (one per dimension of the block pointer) whose stride is 1."""
    rank = _rank(make_tensor_ptr)
    strides = make_tensor_ptr.operands[1 + rank:1 + 2 * rank]
    return (o for o, s in zip(offsets, strides) if _is_one(flow, s))


def _is_one(flow, value):
    seen = set()
    while value not in seen:
        seen.add(value)
        op, _ = flow.producer(value)
        if op is None:
            return False
        if op.name == "arith.constant":
            return op.constant == 1
        if op.name not in INT_WIDENINGS and op.name != "tt.splat":
            return False
        value = op.operands[0]
    return False


def _tensor_pointer(flow, value):
    seen, stack = set(), [value]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        op, _ = flow.producer(current)
        if op is not None and op.name == "tt.make_tensor_ptr":
            return op
        if op is not None and op.name == "tt.advance":
            stack.append(op.operands[0])
        else:
            stack.extend(flow.sources(current))
    return None


def _product_finding(op, flow, static, ranges, kernel_name, levels, direct, cast_after=False):
    sides = [flow.origins(operand) for operand in op.operands[:2]]
    if not any(sides):
        return None  # constants only
    bound = static.product_bound(op)
    if bound is not None and bound < INT32_LIMIT:
        return None  # provably small: constants and block offsets
    file, line, column = op.location
    nested = tuple(_is_product_on_line(flow, operand, line) for operand in op.operands[:2])
    product, left, right = product_parts(file, line, column, shift=op.name == "arith.shli",
                                         nested=nested)
    if suppressed(file, line, product):
        return None
    described = tuple(" and ".join(sorted(o.describe() for o in side)) or "constant"
                      for side in sides)
    headroom, largest = (ranges or static).headroom(op, (left, right))
    in_block_offsets = _in_block_pointer_offsets(file, line, column)
    if direct and in_block_offsets:
        direct = "block offsets"
    level, why = levels.level(op, direct, largest, facts_given=ranges is not None)
    # Triton widens a block pointer's offsets itself, after the product.
    cast_after = cast_after and not in_block_offsets
    if product.startswith("a product inside ") and level == ERROR:
        level, why = WARNING, f"{why}; inside Triton's library, which computes tile indices"
    unsigned = _unsigned(file, line)
    if unsigned:
        headroom = headroom.replace("2**31", "2**32")
    candidates = tuple(widenings(file, line, product, left, right, sides,
                                 shift=op.name == "arith.shli", cast_after=cast_after,
                                 block_offsets=in_block_offsets))
    return Finding(file=file, line=line, kernel=kernel_name, product=product,
                   operands=described, column=column, headroom=headroom, largest=largest,
                   level=level, why=why, unsigned=unsigned, cast_after=cast_after,
                   fix=candidates[0] if candidates else None, candidate_fixes=candidates,
                   block_coordinate=direct == "block offsets")


_UNSIGNED = re.compile(r"\buint32\b|\bu32\b")


def _unsigned(file, line):
    """Whether the values on ``file:line`` are uint32 (cast, annotated or made so in the
    kernel's assignments): Triton's IR does not say, its multiply wraps at 2**32."""
    function, values, names = line_values(file, line)
    if function is None:
        return False
    typed = {a.arg for a in function.args.args if a.annotation is not None
             and _UNSIGNED.search(segment(file, a.annotation) or "")}
    return bool(typed & names) or any(
        _UNSIGNED.search(segment(file, value) or "") for value in values)


def line_values(file, line):
    """(the jit function holding ``file:line``, the expressions the values on that line are
    computed from through its local assignments, the names they use)."""
    function = next((node for node in nodes_of(file).get(ast.FunctionDef, ())
                     if node.lineno <= line <= node.end_lineno), None)
    if function is None:
        return None, [], set()
    assigned = {}
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        assigned.setdefault(name.id, []).append(node.value)
    values = [n for n in ast.walk(function) if isinstance(n, ast.expr)
              and getattr(n, "lineno", None) == line]
    names, pending = set(), list(values)
    while pending:
        for inner in ast.walk(pending.pop()):
            if isinstance(inner, ast.Name) and inner.id not in names:
                names.add(inner.id)
                values += assigned.get(inner.id, [])
                pending += assigned.get(inner.id, [])
    return function, values, names


def _in_block_pointer_offsets(file, line, column):
    """Whether the source at ``file:line:column`` is inside the ``offsets`` of a
    ``tl.make_block_ptr`` or ``tl.advance`` (bounded by the block's shape)."""
    return any(_contains(offset, line, column) for node in nodes_of(file).get(ast.Call, ())
               if _contains(node, line, column) for offset in block_pointer_offsets(node))


def _is_product_on_line(flow, value, line):
    """Whether ``value`` is itself a product written on ``line`` (``a * b`` in ``a * b * c``)."""
    for _ in range(8):
        op, _ = flow.producer(value)
        if op is None:
            return False
        if op.name in PRODUCTS:
            return op.location[1] == line
        if op.name not in INT_WIDENINGS and op.name not in BROADCASTS:
            return False
        value = op.operands[0]
    return False


# --- the source: products as written, and bounded markers --------------------------------


def product_parts(file, line, column, shift=False, nested=None):
    """(the product, its left side, its right side) as written at ``file:line:column``.

    ``nested`` says which operands are themselves products on the line, which tells
    ``(a * b) * c`` from ``a * b`` where Triton versions place the column differently."""
    text = linecache.getline(file, line)
    tree = source_tree(file) if text else None
    wanted = (ast.LShift, ) if shift else (ast.Mult, )
    candidates = []
    if tree is not None:
        index = nodes_of(file)
        candidates += [(node, node.right) for node in index.get(ast.BinOp, ())
                       if isinstance(node.op, wanted)]
        candidates += [(node, node.value) for node in index.get(ast.AugAssign, ())
                       if isinstance(node.op, wanted)]
    on_line = [(n, r) for n, r in candidates if n.lineno <= line <= n.end_lineno]

    def at_column(products):
        starting = [n for n, r in products if (n.lineno, n.col_offset) == (line, column)]
        return ((triton_versions.source_columns_are_starts() and _innermost(starting))
                or _innermost([n for n, r in products if _contains(r, line, column)])
                or _innermost([n for n, r in products if _contains(n, line, column)]))

    def alone(products):
        return products[0][0] if len(products) == 1 else None

    # Constants folded into one multiply (``i_t * H*K*V`` compiles to ``i_t * 4096``) leave a
    # product whose shape no node on the line has: then the product at the column is it.
    shaped = [(n, r) for n, r in on_line
              if nested is None or sorted(_sides_nested(n, wanted)) == sorted(nested)]
    chosen = at_column(shaped) or at_column(on_line) or alone(shaped) or alone(on_line)
    if chosen is None:
        call = tree and _innermost([n for n in nodes_of(file).get(ast.Call, ())
                                    if _contains(n, line, column)])
        if call is not None:
            # A product inside a library function (tl.swizzle2d), reported where it is called.
            called = " ".join((segment(file, call.func) or "").split())
            return f"a product inside {called}()", "", ""
        return text.strip() or "<source unavailable>", "", ""

    def written(node):
        # On one line, without the space a line break leaves inside brackets.
        text = " ".join((segment(file, node) or "").split())
        return re.sub(r"([(\[]) | ([)\]])", r"\1\2", text)

    def side(node):
        # A side that binds more loosely than the product keeps the parentheses it needs
        # ("(row + 1)", not "row + 1"), as the source must have had them.
        loose = (isinstance(node, (ast.BoolOp, ast.Compare, ast.IfExp))
                 or (isinstance(node, ast.BinOp) and not isinstance(node.op, _TIGHT_OPERATORS)))
        return f"({written(node)})" if loose else written(node)

    if isinstance(chosen, ast.AugAssign):
        return written(chosen), written(chosen.target), side(chosen.value)
    return written(chosen) or text.strip(), side(chosen.left), side(chosen.right)


# Operators that bind at least as tightly as a multiply.
_TIGHT_OPERATORS = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.MatMult, ast.Pow)


def _sides_nested(node, wanted):
    sides = (node.target, node.value) if isinstance(node, ast.AugAssign) else (node.left, node.right)
    return tuple(isinstance(side, ast.BinOp) and isinstance(side.op, wanted) for side in sides)


def _contains(node, line, column):
    start = (node.lineno, node.col_offset)
    end = (node.end_lineno, node.end_col_offset)
    return start <= (line, column) < end or (line, column) == start


def _innermost(nodes):
    if not nodes:
        return None
    return min(nodes, key=lambda n: (n.end_lineno - n.lineno, n.end_col_offset - n.col_offset))


def markers(file, line):
    """``[(product, reason)]`` of the bounded markers on a line."""
    match = MARKER.search(linecache.getline(file, line))
    if not match:
        return []
    found = []
    for part in match.group(1).split(";"):
        bounded = _BOUNDED.match(part.strip())
        if bounded:
            found.append((bounded.group("product"), bounded.group("reason").strip()))
    return found


def suppressed(file, line, product):
    """A marker on the line names this product (whitespace aside) and gives a reason."""
    wanted = _normal(product)
    return any(_normal(named) == wanted and reason for named, reason in markers(file, line))


def _normal(expression):
    return re.sub(r"\s+", "", expression)
