"""The deployment envelope: how large a team's tensors can get, so that red means real.

A product that indexes a tensor (``row * stride`` into ``logits_ptr``) is bounded by the
tensor's size: if every access is in bounds, the offset never passes the number of elements.
Whether that number can pass 2**31 is a fact of the deployment, not of the kernel: a serving
engine's activations (``[tokens per step, hidden]``) cannot, its logits with drafts, its
per-request token tables and its KV cache can; a training library's ``[batch x sequence,
hidden]`` activations often can. The envelope states it once:

* **dimensions**: the largest value of each (``tokens``, ``requests``, ``context``, ``vocab``,
  ``hidden``, ``drafts``, ``pages``, ``page_size``, ``topk``, or any a team names);
* **tensors**: which tensors have which shape in those dimensions, by pattern over the pointer
  argument's name (``"*logits*" = "requests * (drafts + 1) * vocab"``), or over
  ``file:kernel:argument`` where a name alone is ambiguous. A team's patterns come first; the
  built-in ones (``DEFAULT_TENSORS``) after; a tensor no pattern matches is an activation,
  ``tokens * hidden``.

With an envelope, a finding at ``error`` by its shape whose tensor cannot reach 2**31 elements
is a ``warning`` (bounded by that tensor's size), and a product that grows with the rows of a
tensor that can (a tile's rows on grid axis 1 times a stride, a remainder by the row count)
is an ``error``; either way the reason names the tensor, its shape and the dimension value at
which it passes 2**31. A team that states none is judged by the ``serving`` preset (and told
so); ``training`` is the preset of a training library; ``--no-envelope`` lets the shape decide
alone.
"""

import ast
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from triton_overflow.lint import arithmetic

INT32_LIMIT = 2**31

SERVING_DIMENSIONS = {"tokens": 65_536, "requests": 1_024, "context": 2**21, "vocab": 262_144,
                      "hidden": 16_384, "intermediate": 53_248, "heads": 128, "drafts": 15,
                      "pages": 2**20, "page_size": 16, "topk": 8}

# (pattern over the pointer argument's name, shape, what it is); first match wins. A serving
# engine has a row of logits per sampled position (each request and its drafts); a training
# library one per token of the batch.
DEFAULT_TENSORS = (
    ("*bitmask*", "requests * (drafts + 1) * vocab / 32", "a bitmask over the vocabulary"),
    ("*logit*", "requests * (drafts + 1) * vocab", "logits"),
    ("*prob*", "requests * (drafts + 1) * vocab", "probabilities over the vocabulary"),
)
TRAINING_TENSORS = (
    ("*bitmask*", "tokens * vocab / 32", "a bitmask over the vocabulary"),
    ("*logit*", "tokens * vocab", "logits, a row per token"),
    ("*prob*", "tokens * vocab", "probabilities over the vocabulary, a row per token"),
)
# A statistic of each row (``max_logits``, ``logits_lse``, a norm's ``Mean`` and ``Rstd``, a
# row's ``loss``), or its gradient (``dlse``, ``dloss``): one value per row, a token's or a
# token's head's, not the vocabulary nor the hidden width.
_STATISTIC_WORDS = {"max", "min", "sum", "lse", "mean", "argmax", "argmin", "logsumexp",
                    "rstd", "std", "var", "loss"}
STATISTICS = ("tokens * heads", "a statistic of each row (a token's, or a token's head's)")
# A scale per group of values (``x_scale``, ``a_sf``, ``descale_q``): at least 16 values to a
# scale (NVFP4's group; MXFP8's is 32, a 1x128 block's 128).
_SCALE_WORDS = {"scale", "descale", "sf", "zero"}
SCALES = ("tokens * hidden / 16", "a scale per group of at least 16 values")
# A one-letter operand's scales: ``As``, ``Bs``, ``x_s``, ``y_s_ptr``, ``as_ptr``.
_SCALE_OF_OPERAND = re.compile(r"([A-Z]s|[A-Za-z]_s)(_ptr)?|[a-z]s_ptr")
# A KV cache, however a kernel spells it (``k_cache``, ``KCache``, ``K_Buffer``,
# ``kv_pool``, ``kv_c_and_k_pe_cache``): a word for keys or values first or just before a word
# for a store (not ``index_k_rope_cos_sin_cache``, a table of positions).
KV_CACHE = ("pages * page_size * hidden", "a KV cache")
_STORE_WORDS = {"cache", "buffer", "buf", "pool"}
_KV_WORDS = {"k", "v", "kv", "key", "value"}
# Tensors wider or taller than ``[tokens, hidden]`` by the kernel they are in: a mixture of
# experts' rows are tokens x topk (sorted, dispatched, gathered by expert); a gated MLP's
# activation holds gate and up side by side.
MOE_ACTIVATIONS = ("tokens * topk * hidden",
                   "an activation of a mixture of experts (tokens x topk rows)")
_MOE_WORDS = {"moe", "expert", "ep"}
# Words of an index table's name (``sorted_token_ids``, ``topk_weights``, ``expert_offsets``),
# a row per token or per expert, or of a scale per group of values (``x_scale``, ``a_sf``):
# smaller than the activation by a row's width or by the group.
_TABLE_WORDS = {"id", "ids", "idx", "index", "indice", "topk", "loc", "offset", "count", "num",
                "map", "mapping", "padded", "cumsum", "scale", "sf"}
# An index table (``chunk_indices``, ``topk_ids``, ``row_id_map``, ``block_indices``): at most
# an entry per token, head and choice (an expert, a selected block), below the activation it
# indexes where a head is narrower than the choices are many. A running sum (``g_cumsum``) is
# of values, not indices.
INDEX_TABLES = ("tokens * heads * topk", "an index table (an entry per token, head and choice)")
_INDEX_TABLE_WORDS = _TABLE_WORDS - _SCALE_WORDS - {"cumsum"}
GATED_ACTIVATIONS = ("tokens * 2 * intermediate", "a gated MLP's activation (gate and up)")
_GATE_WORDS = {"silu", "gelu", "swiglu", "geglu", "swish", "act", "activation"}
# A matrix multiply serves every layer: the operands its rows of tokens index (``a_ptr``,
# ``c_ptr``) are as wide as the widest one, an MLP's down projection reading ``[tokens,
# intermediate]`` (the LM head's ``[tokens, vocab]`` is wider still). Its weight (``b_ptr``,
# ``w``, ``qweight``) is no row of tokens: an activation's size at most, as any tensor no word
# names.
MATMUL_OPERANDS = ("tokens * intermediate",
                   "a matrix multiply's operand (tokens x an MLP's intermediate width)")
_MATMUL_WORDS = {"mm", "matmul", "gemm", "bmm", "gemv"}
_WEIGHT_WORDS = {"b", "w", "weight", "qweight"}
ACTIVATIONS = ("tokens * hidden", "an activation")
_ACTIVATION_KINDS = {ACTIVATIONS[1], MOE_ACTIVATIONS[1], GATED_ACTIVATIONS[1],
                     MATMUL_OPERANDS[1]}
# Envelopes by name, for ``--envelope NAME`` or ``preset = "NAME"`` in a file: what they are,
# their dimensions beyond the serving ones, and their built-in tensors. ``serving`` is the
# default; ``none`` (no envelope) lets the shape decide.
PRESETS = {
    "serving": ("a serving engine at its largest", {}, DEFAULT_TENSORS),
    "training": ("a training library at its largest (tokens: batch x sequence; requests: "
                 "sequences)", {"tokens": 2**20, "requests": 64, "context": 2**17},
                 TRAINING_TENSORS),
}
DEFAULT_PRESET = "serving"
SHAPE_ALONE = "none"
# What a product indexes when no pointer argument does: an address loaded from a table, or an
# index that is divided or taken a remainder of before it reaches an address.
_UNNAMED = "a tensor no argument names"


class EnvelopeError(ValueError):
    """An envelope that cannot be read: a usage error."""


@dataclass(frozen=True)
class Reach:
    tensor: str  # the pointer argument
    shape: str  # in the envelope's dimensions
    what: str
    elements: int

    @property
    def passes(self):
        return self.elements >= INT32_LIMIT


# Element types a team may give an index table, by the names torch and Triton use.
POINTEES = {"int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8",
            "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
            "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5"}


@dataclass
class Envelope:
    dimensions: dict
    tensors: list = field(default_factory=list)  # (pattern, shape, what), the team's first
    source: str = "the envelope"
    pointees: list = field(default_factory=list)  # (pattern, Triton type): element types
    builtin: tuple = DEFAULT_TENSORS  # the preset's tensors, after the team's

    def pointee(self, argument):
        """The element type the envelope gives pointer argument ``argument``, or None."""
        for pattern, pointee in self.pointees:
            if fnmatch.fnmatchcase(argument.lower(), pattern.lower()):
                return pointee
        return None

    def reach(self, file, kernel, argument, divided=False, matmul=False):
        """The ``Reach`` of pointer argument ``argument`` of ``kernel`` in ``file``, indexed by
        a row ``divided`` first or not, in a kernel that multiplies tiles (``matmul``) or not:
        the team's patterns, then the built-in ones, then a KV cache, a statistic of each row
        or a scale by its words, then an activation as the kernel makes it (an index table by
        its words is smaller)."""
        qualified = f"{Path(file).as_posix()}:{kernel}:{argument}"
        named = words(argument)
        statistic = any(word in _STATISTIC_WORDS or word[:1] == "d" and
                        word[1:] in _STATISTIC_WORDS for word in named)
        for pattern, shape, what in list(self.tensors) + [
                entry for entry in self.builtin if not statistic]:
            subject = qualified if ":" in pattern else argument
            if fnmatch.fnmatchcase(subject.lower(), pattern.lower()) or ":" in pattern and \
                    fnmatch.fnmatchcase(subject.lower(), "*" + pattern.lower()):
                return Reach(argument, shape, what, self.size(shape))
        if _is_kv_cache(argument):
            return Reach(argument, *KV_CACHE, self.size(KV_CACHE[0]))
        if statistic:
            return Reach(argument, *STATISTICS, self.size(STATISTICS[0]))
        if named & _SCALE_WORDS or _SCALE_OF_OPERAND.fullmatch(argument):
            return Reach(argument, *SCALES, self.size(SCALES[0]))
        if named & _INDEX_TABLE_WORDS:
            return Reach(argument, *INDEX_TABLES, self.size(INDEX_TABLES[0]))
        return self.activation(argument, kernel, divided, matmul)

    def activation(self, tensor, kernel="", divided=False, matmul=False):
        """The ``Reach`` of a tensor no pattern names: an activation, ``[tokens, hidden]``
        unless the kernel's name says it is a mixture of experts' (and the tensor is no index
        table, nor indexed by a row divided first, ``token // top_k``: that row is a token's),
        a gated MLP's (an activation and a multiply), or a matrix multiply's (and the kernel
        multiplies tiles: ``deep_gemm`` in a quantizer's name is not one)."""
        kernel_words, small = words(kernel), bool(words(tensor) & _TABLE_WORDS)
        if kernel_words & _MOE_WORDS and not small and not divided:
            shape, what = MOE_ACTIVATIONS
        elif (kernel_words & _GATE_WORDS and "mul" in kernel_words or
              kernel_words & {"swiglu", "geglu"}) and not small:
            shape, what = GATED_ACTIVATIONS
        elif matmul and kernel_words & _MATMUL_WORDS and not small and \
                not words(tensor) - {"ptr"} <= _WEIGHT_WORDS:
            shape, what = MATMUL_OPERANDS
        else:
            shape, what = ACTIVATIONS
        return Reach(tensor, shape, what, self.size(shape))

    def one_sequence(self):
        """The elements of one sequence's activations in one step: where they pass 2**31,
        a batch or head index times its stride can too."""
        dimensions = self.dimensions
        return min(dimensions["tokens"], dimensions["context"]) * dimensions["hidden"]

    def size(self, shape):
        return int(_evaluate(ast.parse(shape, mode="eval").body, self.dimensions, shape))

    def passes_at(self, shape):
        """Where ``shape`` passes 2**31, in the envelope's units: the least value of its first
        dimension that takes it there, every other dimension at its largest (``requests =
        512``), or None."""
        names = sorted((node for node in ast.walk(ast.parse(shape, mode="eval"))
                        if isinstance(node, ast.Name)), key=lambda node: node.col_offset)
        if not names:
            return None
        first = names[0].id
        low, high = 1, self.dimensions[first] * 2**20
        if self.size_with(shape, first, high) < INT32_LIMIT:
            return None
        while low < high:  # sizes grow with each dimension: the least value that passes
            middle = (low + high) // 2
            if self.size_with(shape, first, middle) >= INT32_LIMIT:
                high = middle
            else:
                low = middle + 1
        return f"{first} = {low:,}"

    def size_with(self, shape, name, value):
        return int(_evaluate(ast.parse(shape, mode="eval").body,
                             {**self.dimensions, name: value}, shape))


def words(name):
    """The words of an identifier, lower case, a plural's ``s`` dropped (not ``loss``'s):
    ``K_Buffer`` -> {"k", "buffer"}, ``KCache`` -> {"k", "cache"}, ``fused_moe.py`` ->
    {"fused", "moe", "py"}."""
    return set(_word_list(name))


def _word_list(name):
    found = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", name)
    return [w.lower()[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss")
            else w.lower() for w in found]


def _is_kv_cache(name):
    """A word for keys or values that comes first, or just before a word for a store."""
    listed = _word_list(name)
    stores = [i for i, word in enumerate(listed) if word in _STORE_WORDS]
    return bool(stores) and (listed[0] in _KV_WORDS or
                             any(i > 0 and listed[i - 1] in _KV_WORDS for i in stores))


def _evaluate(node, dimensions, shape):
    unknown = [n.id for n in sorted((n for n in ast.walk(node) if isinstance(n, ast.Name)),
                                    key=lambda n: n.col_offset) if n.id not in dimensions]
    if unknown:
        raise EnvelopeError(f"the shape `{shape}` names `{unknown[0]}`, which is no dimension "
                            f"of the envelope ({', '.join(sorted(dimensions))})")
    number = arithmetic.value(node, dimensions, kinds=(int, float))
    if number is None:
        raise EnvelopeError(f"cannot read the shape `{shape}`: write it with dimensions, "
                            f"numbers, +, -, *, / and **")
    return number


def chosen(given=None, shape_alone=False, start=None):
    """(envelope, defaulted): the envelope ``--envelope`` gives (a file, or a preset's name;
    ``none`` for the shape alone, as ``--no-envelope``), else the ``pyproject.toml``'s, else
    the default preset, with ``defaulted`` set. The envelope is None where the shape decides
    alone. A file of a preset's name is read as a file."""
    named = str(given) if given is not None and not Path(given).exists() else None
    if shape_alone or named == SHAPE_ALONE:
        return None, False
    if named in PRESETS:
        return preset(named), False
    found = load(given, start)
    if found is not None:
        return found, False
    return preset(DEFAULT_PRESET), True


def preset(name):
    """The built-in envelope ``name`` (``PRESETS``)."""
    what, dimensions, builtin = PRESETS[name]
    dimensions = {**SERVING_DIMENSIONS, **dimensions}
    shown = ", ".join(f"{dimension} {value:,}" for dimension, value in dimensions.items())
    return Envelope(dimensions, source=f"the `{name}` envelope ({what}: {shown})",
                    builtin=builtin)


def load(path=None, start=None):
    """The ``Envelope`` in ``path`` (a TOML file: an ``[envelope]`` table, or
    ``[tool.triton-overflow.envelope]`` of a ``pyproject.toml``); without ``path``, the
    ``pyproject.toml`` of ``start`` (default: the current directory) or the nearest folder
    above that has one with that table, or None."""
    if path is not None:
        table = _table(Path(path), required=True)
        return _parse(table, str(path))
    folder = Path(start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            table = _table(pyproject, required=False)
            if table is not None:
                return _parse(table, str(pyproject))
    return None


def _table(path, required):
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as error:
        raise EnvelopeError(f"cannot read the envelope {path}: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise EnvelopeError(f"the envelope {path} is not valid TOML: {error}") from None
    table = data.get("tool", {}).get("triton-overflow", {}).get("envelope")
    if table is None:
        table = data.get("envelope")
    if table is None and required:
        raise EnvelopeError(f"{path} has no [envelope] (or [tool.triton-overflow.envelope]) "
                            f"table")
    return table


def _parse(table, source):
    if not isinstance(table, dict):
        raise EnvelopeError(f"the envelope in {source} must be a table")
    pointees = []
    for pattern, name in (table.get("dtypes") or {}).items():
        triton_name = POINTEES.get(str(name).replace("torch.", ""), None)
        if triton_name is None and name in POINTEES.values():
            triton_name = name
        if triton_name is None:
            raise EnvelopeError(f"dtype `{name}` of `{pattern}` in the envelope in {source} is "
                                f"none of {', '.join(POINTEES)}")
        pointees.append((pattern, triton_name))
    tensors_table = table.get("tensors", {})
    if not isinstance(tensors_table, dict):
        raise EnvelopeError(f"`tensors` of the envelope in {source} must be a table of "
                            f"pattern = \"shape\"")
    base = table.get("preset", DEFAULT_PRESET)
    if not isinstance(base, str) or base not in PRESETS:
        raise EnvelopeError(f"`preset` of the envelope in {source} is {base!r}: one of "
                            f"{', '.join(PRESETS)}")
    _, preset_dimensions, builtin = PRESETS[base]
    dimensions = {**SERVING_DIMENSIONS, **preset_dimensions}
    for name, value in table.items():
        if name in ("tensors", "dtypes", "preset"):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise EnvelopeError(f"dimension `{name}` of the envelope in {source} must be a "
                                f"positive integer, not {value!r}")
        dimensions[name] = value
    tensors = []
    for pattern, shape in tensors_table.items():
        what = "as the envelope says"
        if isinstance(shape, dict):
            what = str(shape.get("what", what))
            shape = shape.get("shape")
        if not isinstance(shape, str):
            raise EnvelopeError(f"tensor `{pattern}` of the envelope in {source} needs a shape "
                                f"such as \"requests * context\"")
        tensors.append((pattern, shape, what))
    envelope = Envelope(dimensions, tensors, source, pointees, builtin)
    for _, shape, _ in tensors:
        envelope.size(shape)  # every shape readable now, not halfway through a run
    return envelope


def judged(finding, envelope, shown_file):
    """``finding`` with the level its tensors' reach in ``envelope`` gives (patterns match
    ``shown_file``, its file as the user names it). An ``error`` needs both a tensor that can
    pass 2**31 elements and a product that runs over its rows (``finding.grows``) into the
    address itself; a product into a smaller tensor, an inner index into a large one, a row
    index scaled again before the address (``pid * rows_per_program``, whose product with the
    stride is a finding of its own) or a block pointer's coordinate (``pid * BLOCK_M`` in
    ``tl.make_block_ptr``'s offsets, which Triton scales by the stride in 64 bits) is at most a
    ``warning``. A batch or head on grid axis 1 or 2 times a stride (``finding.outer``) is an
    ``error`` into an activation where one sequence's activations pass 2**31."""
    from dataclasses import replace

    from triton_overflow.lint.levels import ERROR, WARNING
    # A block pointer's coordinate is multiplied by its stride in Triton's own 64-bit
    # arithmetic: it wraps only past 2**31 rows, like an index scaled again.
    runs_over_rows = finding.grows and not finding.scaled and not finding.block_coordinate
    # A product no argument names (an address from a table of addresses) is an activation:
    # the kernel's name says what its tensors are, not what such an address points to.
    reaches = [envelope.reach(shown_file, finding.kernel, tensor, finding.divided,
                              finding.matmul)
               for tensor in finding.tensors] or [envelope.activation(_UNNAMED)]
    widest = max(reaches, key=lambda r: r.elements)
    said = (f"`{widest.tensor}` ({widest.what}, {widest.shape}) holds at most "
            f"{widest.elements:,} elements in the envelope")
    if finding.outer and not (finding.scaled or finding.block_coordinate or runs_over_rows) \
            and widest.what in _ACTIVATION_KINDS and \
            (sequence := envelope.one_sequence()) >= INT32_LIMIT:
        return replace(finding, level=ERROR, reach=widest.elements, why=(
            f"{finding.why}; a batch or head on grid axis 1 or 2 times a stride runs over "
            f"`{widest.tensor}` ({widest.what}) where its layout puts that index first, and "
            f"one sequence's activations pass 2**31 in the envelope (min(tokens, context) * "
            f"hidden = {sequence:,})"))
    if widest.passes and runs_over_rows:
        at = envelope.passes_at(widest.shape)
        where = f"; it passes 2**31 at {at}" if at else ""
        return replace(finding, level=ERROR, why=f"{finding.why}; {said}{where}",
                       reach=widest.elements)
    if finding.level != ERROR:
        return replace(finding, reach=widest.elements)
    if widest.passes and finding.grows and finding.block_coordinate:
        why = (f"{finding.why}; but it is a block pointer's coordinate, which Triton multiplies "
               f"by the stride in 64 bits: it wraps only past 2**31 rows of `{widest.tensor}`")
    elif widest.passes and finding.grows and finding.scaled:
        why = (f"{finding.why}; but it is an index scaled again before the address (the "
               f"product that scales it is judged on its own): it wraps only past 2**31 rows "
               f"of `{widest.tensor}`")
    elif widest.passes:
        why = (f"{finding.why}; but it is an inner index (a head, a split, a column): it does "
               f"not run over the rows of `{widest.tensor}`")
    else:
        why = f"{finding.why}; but {said}, below 2**31"
    return replace(finding, level=WARNING, why=why, reach=widest.elements)


def ranked(findings, top):
    """The ``top`` findings that reach furthest past 2**31 (then by level), best first."""
    from triton_overflow.lint.levels import LEVELS
    return sorted(findings, key=lambda f: (LEVELS.index(f.level), -(f.reach or 0),
                                           f.file, f.line))[:top]
