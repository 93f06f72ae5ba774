"""A kernel's TTIR as a graph of Triton's own IR objects, built on the CPU.

The structure (which value each operand is, which block and region an op sits in, whose
arguments a block has) comes from Triton's IR bindings, so values are told apart exactly even
where the printed IR reuses a name in another region. What the bindings do not expose (an op's
source location, a constant's value, a program id's axis, a callee's name) is read from the
printed form of the same op: the printed ops are put in the order the bindings walk them and
checked op by op against it.
"""

import contextlib
import functools
import re
from dataclasses import dataclass, field

from triton_overflow import triton_versions
from triton_overflow.lint import sm90

_LOC_ALIAS = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
_TRAILING_LOC = re.compile(r"\bloc\((#loc\d*|.*)\)\s*$")
_FILE_LOC = re.compile(r"\"([^\"]+)\":(\d+):(\d+)")
_OP_NAME = re.compile(r"^(?:(?:%[\w.$-]+(?::\d+)?)(?:\s*,\s*%[\w.$-]+(?::\d+)?)*\s*=\s*)?"
                      r"(\"[\w.]+\"|[a-z_][\w]*\.[\w.]+)")
_INT_CONSTANT = re.compile(r"arith\.constant\s+(?:dense<)?(-?\d+|true|false)>?\s*:\s*"
                           r"(?:tensor<[^>]*x)?(i\d+)")
_AXIS = re.compile(r"tt\.get_(?:program_id|num_programs)\s+(x|y|z)\b")
_EXPAND_AXIS = re.compile(r"\{axis = (\d+) : i32\}")
_SYMBOL = r"(\"[^\"]+\"|[\w.$-]+)"
_CALLEE = re.compile(r"tt\.call\s+@" + _SYMBOL + r"\(")
_FUNC = re.compile(r"^tt\.func\s+(?:public|private|nested)?\s*@" + _SYMBOL + r"\((.*)\)\s*"
                   r"(?:->.*?)?\s*(?:attributes\s*\{.*\})?\s*\{$")


class IRError(Exception):
    """The IR could not be read (its printed form and its objects disagree)."""


@dataclass
class Op:
    index: int
    name: str
    operands: list
    results: list
    types: list  # result types, as printed (e.g. "i32", "tensor<128xi32>")
    block: int | None
    regions: list
    text: str = ""
    location: tuple = ("", 0, 0)  # (file, line, column)
    constant: int | None = None
    axis: int | None = None
    callee: str | None = None


@dataclass
class Graph:
    """The ops of one compiled module, and how their values connect."""

    ops: list
    producer: dict = field(default_factory=dict)  # value id -> (op index, result index)
    block_args: dict = field(default_factory=dict)  # value id -> (block id, argument index)
    block_owner: dict = field(default_factory=dict)  # block id -> (op index, region index)
    region_blocks: dict = field(default_factory=dict)  # region id -> [block ids]
    block_ops: dict = field(default_factory=dict)  # block id -> [op indices]
    arg_values: dict = field(default_factory=dict)  # block id -> [value ids]
    functions: dict = field(default_factory=dict)  # symbol -> (op index, [parameter names])
    value_types: dict = field(default_factory=dict)  # value id -> printed type
    keep_alive: object = None

    def terminator(self, block):
        ops = self.block_ops.get(block, [])
        return self.ops[ops[-1]] if ops else None

    def region_terminators(self, op, region_index):
        region = op.regions[region_index]
        return [t for t in (self.terminator(b) for b in self.region_blocks.get(region, [])) if t]

    def entry_block(self, op, region_index=0):
        blocks = self.region_blocks.get(op.regions[region_index], [])
        return blocks[0] if blocks else None


def compile_ttir(jit_function, signature, constexprs, attrs=None):
    """The TTIR module (Triton's object) of ``jit_function`` for an sm_90 target that takes
    every fp8 format and the functions Triton removed (``removed_apis``), helpers inlined and
    block pointers rewritten, but not otherwise optimised (``triton_versions``)."""
    from triton_overflow.lint import removed_apis
    with removed_apis.restored():
        built = sm90.build(jit_function, signature, constexprs, attrs,
                           options={"supported_fp8_dtypes": EVERY_FP8})
    return triton_versions.analysis_passes(built.module), built.context


# Every fp8 format Triton names, AMD's too: the addresses do not depend on which one a kernel
# reads, and a kernel written for both vendors picks AMD's under a flag.
EVERY_FP8 = ("fp8e4b15", "fp8e4b8", "fp8e4nv", "fp8e5", "fp8e5b16")


class _CompilerOutput:
    def __init__(self, handle):
        self.handle = handle

    def text(self):
        self.handle.flush()
        self.handle.seek(0)
        return self.handle.read().decode(errors="replace")

    def first_error(self):
        for line in self.text().splitlines():
            if ": error:" in line or line.startswith("error:"):
                return line.strip()[:300]
        return ""


@contextlib.contextmanager
def quiet():
    """Keep what the compiler prints at the C level (MLIR dumps a whole module on a failed
    verification) off this process's stdout and stderr; yields what was printed."""
    import os
    import sys
    import tempfile
    with tempfile.TemporaryFile() as handle:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(1), os.dup(2)]
        os.dup2(handle.fileno(), 1)
        os.dup2(handle.fileno(), 2)
        try:
            yield _CompilerOutput(handle)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def build_graph(module, context=None, kernel_parameters=None):
    """The ``Graph`` of a compiled TTIR module; ``kernel_parameters`` names the public
    function's arguments (Triton 3.4 prints them as %arg0, %arg1, ...)."""
    walked = []
    module.walk(walked.append)
    printed = _printed_ops(module.str())
    pairs = _align(walked, printed)
    graph = Graph(ops=[], keep_alive=(module, context, walked))
    region_owner = {}
    for index, (op, text) in enumerate(pairs):
        results = [op.get_result(i) for i in range(op.get_num_results())]
        regions = [op.get_region(i).id() for i in range(op.get_num_regions())]
        block = op.get_block()
        node = Op(index=index, name=op.get_name(),
                  operands=[op.get_operand(i).id() for i in range(op.get_num_operands())],
                  results=[value.id() for value in results],
                  types=[str(value.get_type()) for value in results],
                  block=block.id() if block is not None else None, regions=regions,
                  text=text.text, location=text.location)
        _read_attributes(node, text.text, op)
        graph.ops.append(node)
        for position, value in enumerate(node.results):
            graph.producer[value] = (index, position)
            graph.value_types[value] = node.types[position]
        for position, region in enumerate(regions):
            region_owner[region] = (index, position)
        if block is not None:
            block_id = block.id()
            if block_id not in graph.arg_values:
                args = [block.get_argument(i) for i in range(block.get_num_arguments())]
                graph.arg_values[block_id] = [arg.id() for arg in args]
                for position, arg in enumerate(args):
                    graph.block_args[arg.id()] = (block_id, position)
                    graph.value_types[arg.id()] = str(arg.get_type())
                parent = block.get_parent()
                graph.region_blocks.setdefault(parent.id(), []).append(block_id)
                graph.block_owner[block_id] = parent.id()
            graph.block_ops.setdefault(block_id, []).append(index)
    graph.block_owner = {block: region_owner[region] for block, region in graph.block_owner.items()
                         if region in region_owner}
    for op in graph.ops:
        if op.name == "tt.func":
            symbol, names = _function_signature(op.text)
            if kernel_parameters is not None and op.text.startswith("tt.func public"):
                names = list(kernel_parameters)
            graph.functions[symbol] = (op.index, names)
    return graph


@dataclass
class _Printed:
    name: str
    text: str
    location: tuple = ("", 0, 0)
    children: list = field(default_factory=list)


def _printed_ops(text):
    """The printed ops in the order the IR walk visits them (regions before their op)."""
    lines = text.splitlines()
    aliases = {}
    for line in lines:
        match = _LOC_ALIAS.match(line.strip())
        if match:
            aliases[match.group(1)] = match.group(2)
    root = _Printed("", "")
    stack = [root]
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#loc") or line.startswith("^bb"):
            continue
        if line.startswith("}"):
            if line.endswith("{"):
                continue  # "} else {", "} do {": the next region of the same op
            closed = stack.pop()
            closed.location = _location(line, aliases)
            continue
        name = "builtin.module" if line.startswith("module") else _op_name(line)
        if name is None:
            raise IRError(f"cannot read the op of this TTIR line: {line[:160]}")
        node = _Printed(name, line, _location(line, aliases))
        stack[-1].children.append(node)
        if line.endswith("{"):
            stack.append(node)
    if len(stack) != 1:
        raise IRError("unbalanced regions in the TTIR text")
    ordered = []

    def visit(node):
        for child in node.children:
            visit(child)
            ordered.append(child)

    visit(root)
    return ordered


def _op_name(line):
    match = _OP_NAME.match(line)
    if not match:
        return None
    return match.group(1).strip('"')


def _align(walked, printed):
    """Pair each walked op with its printed line; printing leaves out empty terminators."""
    pairs, cursor = [], 0
    for op in walked:
        name = op.get_name()
        if cursor < len(printed) and printed[cursor].name == name:
            pairs.append((op, printed[cursor]))
            cursor += 1
        elif name in ("scf.yield", "tt.return") and op.get_num_operands() == 0:
            pairs.append((op, _Printed(name, "")))
        else:
            shown = printed[cursor].name if cursor < len(printed) else "the end"
            raise IRError(f"the TTIR objects and their printed form disagree at {name} "
                          f"(printed: {shown})")
    if cursor != len(printed):
        raise IRError(f"{len(printed) - cursor} printed TTIR ops were not walked")
    return pairs


def _read_attributes(node, text, op):
    if node.name == "arith.constant":
        match = _INT_CONSTANT.search(text)
        if match:
            value = match.group(1)
            node.constant = {"true": 1, "false": 0}.get(value, None)
            if node.constant is None:
                node.constant = int(value)
    elif node.name in ("tt.get_program_id", "tt.get_num_programs"):
        match = _AXIS.search(text)
        node.axis = "xyz".index(match.group(1)) if match else 0
    elif node.name == "tt.expand_dims":
        match = _EXPAND_AXIS.search(text)
        node.axis = int(match.group(1)) if match else None
    elif node.name == "tt.call":
        match = _CALLEE.search(text)
        node.callee = match.group(1).strip('"') if match else \
            op.get_flat_symbol_ref_attr("callee")


def _function_signature(text):
    match = _FUNC.match(text)
    if not match:
        raise IRError(f"cannot read the function signature: {text[:160]}")
    names = []
    for argument in _split_top_level(match.group(2)):
        argument = argument.strip()
        if not argument:
            continue
        named = re.search(r"loc\(\"([^\"]+)\"\(", argument)
        names.append(named.group(1) if named else argument.split(":")[0].strip().lstrip("%"))
    return match.group(1).strip('"'), names


def _split_top_level(text):
    parts, depth, current = [], 0, []
    for char in text:
        if char in "(<[{":
            depth += 1
        elif char in ")>]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _callee_part(inner):
    """``A`` of ``A at B)``, where A may nest parentheses."""
    depth = 0
    for index, char in enumerate(inner):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0 and inner.startswith(" at ", index):
            return inner[:index].strip()
    return inner.strip()


def _caller_part(inner):
    """``B`` of ``A at B)``."""
    callee = _callee_part(inner)
    rest = inner[len(callee):].strip()
    if not rest.startswith("at "):
        return ""
    rest = rest[3:].strip()
    return rest[:-1].strip() if rest.endswith(")") else rest


@functools.lru_cache(maxsize=None)
def _in_triton(file):
    import os

    import triton
    return bool(file) and os.path.abspath(file).startswith(
        os.path.dirname(os.path.abspath(triton.__file__)) + os.sep)


def _location(line, aliases):
    """(file, line, 0-based column) of a printed op: where
    ``triton_versions.source_columns_are_starts``, the column of the expression's start, else that
    of a binary operation's right operand."""
    match = _TRAILING_LOC.search(line)
    if not match:
        return ("", 0, 0)
    file, number, column = _resolve(match.group(1), aliases, 0)
    return file, number, max(0, column - _column_base())


@functools.cache
def _column_base():
    return 1 if triton_versions.source_columns_are_starts() else 0


def _resolve(loc, aliases, depth):
    """(file, line, column) of a location; a call site resolves to the callee's line."""
    if depth > 64:
        return ("", 0, 0)
    body = aliases.get(loc, loc) if loc.startswith("#") else loc
    if body.startswith("callsite("):
        inner = body[len("callsite("):]
        callee = _resolve(_callee_part(inner), aliases, depth + 1)
        if not _in_triton(callee[0]):
            return callee
        # Inside Triton's own library (tl.swizzle2d, say): the user's line that called it.
        caller = _caller_part(inner)
        return _resolve(caller, aliases, depth + 1) if caller else callee
    direct = _FILE_LOC.search(body) if not body.startswith("#") else None
    refs = re.findall(r"#loc\d*", body)
    if direct and (not refs or body.index(direct.group(0)) < body.index(refs[0])):
        return (direct.group(1), int(direct.group(2)), int(direct.group(3)))
    for ref in refs:
        found = _resolve(ref, aliases, depth + 1)
        if found[1]:
            return found
    if direct:
        return (direct.group(1), int(direct.group(2)), int(direct.group(3)))
    return ("", 0, 0)
