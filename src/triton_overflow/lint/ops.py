"""The names of Triton's ops that the static check tells apart, one table per meaning.

First the ``triton.language`` calls as a kernel's source spells them (what ``usage`` and
``addresses`` read to type the arguments), then the TTIR ops as the compiled module names them
(what ``flow``, ``ranges``, ``levels`` and ``analysis`` follow). Where one table is part of
another, the larger is built from the smaller.
"""

# --- triton.language calls -----------------------------------------------------------------

ATOMICS = frozenset({"atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or",
                     "atomic_xor", "atomic_xchg", "atomic_cas"})
# Calls whose value is what their pointer held: a load, or an atomic's old value (a slot taken
# from a counter indexes like a loaded index).
LOADS = frozenset({"load"}) | ATOMICS
# Calls that take an address: their first argument's base is a pointer.
POINTER_CALLS = frozenset({"load", "store", "make_block_ptr", "make_tensor_descriptor",
                           "prefetch"}) | ATOMICS
# Calls whose value is an address with the same base as their argument.
SAME_BASE_CALLS = frozenset({"multiple_of", "max_contiguous", "max_constancy", "where",
                             "advance"})
FLOAT_CALLS = frozenset({"exp", "exp2", "log", "log2", "log1p", "sqrt", "sqrt_rn", "rsqrt",
                         "sin", "cos", "sigmoid", "tanh", "erf", "div_rn", "fdiv", "softmax",
                         "pow", "fma"})
# Calls that take integers: a histogram's values, a random seed or offset, integer math.
INT_CALLS = frozenset({"histogram", "rand", "randint", "randn", "randint4x", "rand4x", "randn4x",
                       "philox", "umulhi", "cdiv"})
WIDE_INT_TYPES = frozenset({"int64", "uint64"})

# --- TTIR ops ------------------------------------------------------------------------------

# Ops whose result is what memory held: a load, or an atomic's old value.
LOADED_VALUE_OPS = frozenset({"tt.load", "tt.atomic_rmw", "tt.atomic_cas"})
PRODUCTS = frozenset({"arith.muli", "arith.shli"})
# Ops that multiply tiles of matrices: a kernel holding one is a matrix multiply's.
DOTS = frozenset({"tt.dot", "tt.dot_scaled"})
INT_WIDENINGS = frozenset({"arith.extsi", "arith.extui"})
INT_CASTS = INT_WIDENINGS | {"arith.trunci", "arith.index_cast", "arith.index_castui"}
BROADCASTS = frozenset({"tt.splat", "tt.broadcast", "tt.expand_dims"})
SHAPE_OPS = BROADCASTS | {"tt.reshape", "ttg.convert_layout", "tt.trans", "tt.bitcast"}
# One operand, whose value the result keeps (cast or reshaped).
PASS_THROUGH = INT_CASTS | SHAPE_OPS
DIVISIONS = frozenset({"arith.divsi", "arith.divui", "arith.ceildivsi", "arith.floordivsi",
                       "arith.shrsi", "arith.shrui"})
REMAINDERS = frozenset({"arith.remsi", "arith.remui"})
# Ops whose integer result is made from their operands.
CARRIERS = PASS_THROUGH | PRODUCTS | DIVISIONS | REMAINDERS | {
    "arith.addi", "arith.subi", "arith.select", "arith.maxsi", "arith.minsi", "arith.maxui",
    "arith.minui", "arith.fptosi", "arith.fptoui", "tt.join", "tt.cat"}
# Ops whose results come from what their regions yield or their callee returns.
STRUCTURED = frozenset({"scf.for", "scf.if", "scf.while", "tt.call"})
# Ops a pointer passes through on its way from a kernel parameter to an access.
POINTER_CARRIERS = SHAPE_OPS | {"tt.addptr", "tt.advance", "tt.make_tensor_ptr", "arith.select"}
