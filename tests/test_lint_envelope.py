"""Red that means real: with a deployment envelope, a product's level follows from what the
tensor it indexes can hold (``lint.envelope``), and the reason says at what value it wraps."""

import json

import pytest

from tests.lint_cli import run_lint
from triton_overflow import triton_versions
from triton_overflow.lint import envelope

pytestmark = [pytest.mark.static, pytest.mark.selftest]

ROWS = '''
import triton
import triton.language as tl


@triton.jit
def rows_kernel(x_ptr, logits_ptr, kv_cache_ptr, stride_x, stride_logits, stride_head, n_rows,
                BLOCK: tl.constexpr = 128, BLOCK_M: tl.constexpr = 16):
    row = tl.program_id(0)
    head = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * stride_x + cols, 1.0)              # activations: bounded in serving
    tl.store(logits_ptr + row * stride_logits + cols, 1.0)    # logits: can pass 2**31
    tl.store(kv_cache_ptr + head * stride_head + cols, 1.0)   # an inner index into the cache
    tile = head * BLOCK_M + tl.arange(0, BLOCK_M)             # a tile of rows on grid axis 1
    tl.store(logits_ptr + (tile * stride_logits)[:, None] + cols[None, :], 2.0,
             mask=(tile < n_rows)[:, None])
'''

SERVING = '''
[envelope]
tokens = 65536
hidden = 16384
'''

TRAINING = '''
[envelope]
tokens = 1048576   # batch x sequence
hidden = 16384
'''


@pytest.fixture
def kernel(tmp_path):
    path = tmp_path / "rows.py"
    path.write_text(ROWS)
    return path


def _levels(done):
    assert "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    return {(f["line"], f["product"]): (f["level"], f["why"], f["tensors"])
            for k in report["kernels"] for f in k["findings"]}


def test_a_serving_envelope_keeps_red_for_tensors_that_can_pass_2_31(kernel, tmp_path):
    (tmp_path / "serving.toml").write_text(SERVING)
    levels = _levels(run_lint(kernel, "--format", "json", "--envelope",
                              tmp_path / "serving.toml"))
    assert levels[(12, "row * stride_x")][0] == "warning"
    assert "below 2**31" in levels[(12, "row * stride_x")][1]
    level, why, tensors = levels[(13, "row * stride_logits")]
    assert level == "error" and tensors == ["logits_ptr"]
    assert "requests * (drafts + 1) * vocab" in why and "passes 2**31 at requests = " in why
    assert levels[(14, "head * stride_head")][0] == "warning"
    # A tile of rows on grid axis 1, times a stride: not bounded by its axis alone.
    assert levels[(16, "tile * stride_logits")][0] == "error", levels


def test_a_training_envelope_makes_activations_red(kernel, tmp_path):
    (tmp_path / "training.toml").write_text(TRAINING)
    levels = _levels(run_lint(kernel, "--format", "json", "--envelope",
                              tmp_path / "training.toml"))
    assert levels[(12, "row * stride_x")][0] == "error"
    assert "tokens = " in levels[(12, "row * stride_x")][1]


SPLITS = '''
import triton
import triton.language as tl


@triton.jit
def splits_kernel(kv_cache_ptr, slot_mapping_ptr, logits_ptr, stride_block, stride_token,
                  stride_logits, block_size, n_rows, BLOCK: tl.constexpr = 128):
    token = tl.program_id(0)
    slot = tl.load(slot_mapping_ptr + token)
    cols = tl.arange(0, BLOCK)
    page = slot // block_size
    place = slot % block_size
    tl.store(kv_cache_ptr + page * stride_block + place * stride_token + cols, 1.0)
    rows = (token * BLOCK + tl.arange(0, BLOCK)) % n_rows
    tl.store(logits_ptr + rows * stride_logits, 1.0)
'''


def test_the_inner_part_of_a_split_index_does_not_run_over_rows(tmp_path):
    """A slot split into its page (``slot // block_size``) and its place in the page
    (``slot % block_size``): the page runs over the cache, the place stays inside one page. A
    remainder with no quotient beside it (a tile of rows wrapped by the row count) runs over
    the rows."""
    (tmp_path / "splits.py").write_text(SPLITS)
    (tmp_path / "serving.toml").write_text(SERVING)
    levels = _levels(run_lint(tmp_path / "splits.py", "--format", "json", "--envelope",
                              tmp_path / "serving.toml"))
    assert levels[(14, "page * stride_block")][0] == "error", levels
    level, why, _ = levels[(14, "place * stride_token")]
    assert level == "warning" and "a remainder by int argument `block_size`" in why, why
    assert levels[(16, "rows * stride_logits")][0] == "error", levels


SCALED = '''
import triton
import triton.language as tl


@triton.jit
def scaled_kernel(logits_ptr, stride_logits, rows_per_program, BLOCK: tl.constexpr = 128):
    row_start = tl.program_id(0) * rows_per_program
    cols = tl.arange(0, BLOCK)
    for r in range(0, rows_per_program):
        tl.store(logits_ptr + (row_start + r) * stride_logits + cols, 1.0)
'''


def test_a_row_index_scaled_again_is_red_where_it_meets_the_stride_and_where_it_is_made(
        tmp_path):
    """``row_start = pid * rows_per_program`` counts rows: it wraps only past 2**31 of them.
    Its product with the row stride is the error, and the line that makes the int32 row is
    red too, naming that product: widening it there is the fix (mamba's ``row_block_id *
    rows_per_program``)."""
    (tmp_path / "scaled.py").write_text(SCALED)
    (tmp_path / "serving.toml").write_text(SERVING)
    levels = _levels(run_lint(tmp_path / "scaled.py", "--format", "json", "--envelope",
                              tmp_path / "serving.toml"))
    level, why, _ = levels[(8, "tl.program_id(0) * rows_per_program")]
    assert level == "error" and "index of `(row_start + r) * stride_logits` (line 11)" in why, \
        why
    assert levels[(11, "(row_start + r) * stride_logits")][0] == "error", levels


def test_the_envelope_is_found_in_pyproject_and_can_be_turned_off(kernel, tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.triton-overflow.envelope]\n"
                                             "tokens = 65536\n")
    found = _levels(run_lint(kernel, "--format", "json", cwd=tmp_path, shape_alone=False))
    assert found[(12, "row * stride_x")][0] == "warning"
    shape_only = _levels(run_lint(kernel, "--format", "json", "--no-envelope", cwd=tmp_path))
    assert shape_only[(12, "row * stride_x")][0] == "error"


def test_with_no_envelope_stated_the_serving_preset_judges_and_says_so(kernel, tmp_path):
    """No ``--envelope``, no pyproject.toml table: the ``serving`` preset, named in a note;
    ``training`` and ``none`` are presets too."""
    done = run_lint(kernel, cwd=tmp_path, shape_alone=False)
    first = done.stdout.splitlines()[0]
    assert first.startswith("note: levels judged by the `serving` envelope") and \
        "--envelope training" in first, done.stdout
    default = _levels(run_lint(kernel, "--format", "json", cwd=tmp_path, shape_alone=False))
    assert default[(12, "row * stride_x")][0] == "warning"
    assert default[(13, "row * stride_logits")][0] == "error"
    training = _levels(run_lint(kernel, "--format", "json", "--envelope", "training",
                                cwd=tmp_path))
    assert training[(12, "row * stride_x")][0] == "error"
    assert "tokens = " in training[(12, "row * stride_x")][1]
    shape = run_lint(kernel, "--envelope", "none", cwd=tmp_path)
    assert "levels judged by" not in shape.stdout
    assert _levels(run_lint(kernel, "--format", "json", "--envelope", "none",
                            cwd=tmp_path))[(12, "row * stride_x")][0] == "error"


def test_a_team_names_its_own_large_tensors(kernel, tmp_path):
    (tmp_path / "mine.toml").write_text('[envelope]\n[envelope.tensors]\n'
                                        '"x_ptr" = "requests * context"\n')
    levels = _levels(run_lint(kernel, "--format", "json", "--envelope", tmp_path / "mine.toml"))
    assert levels[(12, "row * stride_x")][0] == "error"


@pytest.mark.parametrize("text, message", [
    ("[envelope]\ntokens = -1\n", "must be a positive integer"),
    ("[envelope]\n[envelope.tensors]\n'x' = 'rows * cols'\n", "names `rows`"),
    ("[envelope]\n[envelope.tensors]\n'x' = 'tokens / 0'\n", "cannot read the shape"),
    ("[envelope\n", "not valid TOML"),
    ("[other]\n", "has no [envelope]"),
    ("[envelope]\npreset = 'inference'\n", "one of serving, training"),
])
def test_an_unreadable_envelope_is_a_usage_error(kernel, tmp_path, text, message):
    (tmp_path / "bad.toml").write_text(text)
    done = run_lint(kernel, "--envelope", tmp_path / "bad.toml")
    assert done.returncode == 3 and message in done.stderr, done.stderr


def test_top_ranks_findings_by_how_far_past_2_31_they_reach(kernel, tmp_path):
    (tmp_path / "serving.toml").write_text(SERVING)
    done = run_lint(kernel, "--envelope", tmp_path / "serving.toml", "--top", "1")
    shown = [line for line in done.stdout.splitlines() if ": error: " in line
             or ": warning: " in line]
    assert len(shown) == 1 and "stride_logits" in shown[0], done.stdout


def test_a_training_library_has_a_row_of_logits_per_token(tmp_path):
    """Serving samples a row per request and draft; training scores every token of the batch,
    so its logits pass 2**31 at a few thousand tokens, and a file may start from that preset."""
    serving = envelope.preset("serving").reach("loss.py", "ce_kernel", "logits_ptr")
    assert serving.shape == "requests * (drafts + 1) * vocab"
    training = envelope.preset("training").reach("loss.py", "ce_kernel", "logits_ptr")
    assert training.shape == "tokens * vocab" and training.passes
    (tmp_path / "team.toml").write_text("[envelope]\npreset = 'training'\nvocab = 32000\n")
    team = envelope.load(tmp_path / "team.toml")
    assert team.dimensions["tokens"] == 2**20 and team.dimensions["vocab"] == 32000
    assert team.reach("loss.py", "ce_kernel", "dlogits_ptr").elements == 2**20 * 32000
    assert team.passes_at("tokens * vocab") == "tokens = 67,109"


BATCHES_ON_AXIS_1 = '''
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, o_ptr, k_cache_ptr, stride_qb, stride_qh, stride_ob, stride_kh,
                     stride_om, H, BLOCK: tl.constexpr = 128):
    off_hz = tl.program_id(1)
    batch = off_hz // H
    head = off_hz % H
    cols = tl.arange(0, BLOCK)
    tl.store(q_ptr + batch * stride_qb + head * stride_qh + cols, 1.0)
    tl.store(k_cache_ptr + off_hz * stride_kh + cols, 1.0)
    bid = tl.program_id(2)
    tl.store(o_ptr + bid * stride_ob + cols[:, None] * stride_om + cols[None, :], 1.0)
    tl.store(o_ptr + bid * stride_kh + cols, 1.0)  # the only row of what it indexes
'''


@pytest.mark.parametrize("preset, level", [("training", "error"), ("serving", "warning")])
def test_a_batch_on_grid_axis_1_runs_over_activations_where_one_sequence_passes_2_31(
        tmp_path, preset, level):
    """A training step holds one sequence's activations past 2**31 (131,072 x 16,384): a batch
    index on grid axis 1 times its stride runs over them. A serving step holds at most 2**30,
    the split's inner part (a head beside its batch) never does, nor a head into a KV cache,
    whose pages come first, nor a batch index beside columns alone."""
    (tmp_path / "attention.py").write_text(BATCHES_ON_AXIS_1)
    levels = _levels(run_lint("attention.py", "--format", "json", "--envelope", preset,
                              cwd=tmp_path))
    level_of = {product: found[0] for (_, product), found in levels.items()}
    assert level_of["bid * stride_ob"] == level, levels
    assert level_of["head * stride_qh"] == "warning", levels
    assert level_of["off_hz * stride_kh"] == "warning", levels
    # Beside columns alone, a batch index is the row of what it indexes (a norm's weight per
    # group, ``W + group * N + cols``): bounded by grid axis 2, not a sequence's activations.
    assert level_of["bid * stride_kh"] == "warning", levels
    if level == "error":
        assert "one sequence's activations pass 2**31" in \
            levels[(16, "bid * stride_ob")][1], levels


BLOCK_POINTER_COLUMNS = '''
import triton
import triton.language as tl


@triton.jit
def state_kernel(h_ptr, K: tl.constexpr = 64, V: tl.constexpr = 128, BV: tl.constexpr = 32):
    i_v = tl.program_id(0)
    p_h = tl.make_block_ptr(h_ptr, (K, V), (V, 1), (0, i_v * BV), (K, BV), (1, 0))
    tl.store(p_h, tl.zeros((K, BV), tl.float32), boundary_check=(0, 1))
'''


@pytest.mark.skipif(not triton_versions.block_pointers_supported(),
                    reason="this Triton removed tl.make_block_ptr: no block pointer to judge")
def test_a_block_pointers_coordinate_is_not_red_for_the_size_of_its_tensor(tmp_path):
    """Triton multiplies a block pointer's coordinate by its stride in 64 bits: ``i_v * BV``
    wraps only past 2**31 columns, however large the tensor (a training envelope's
    activation)."""
    (tmp_path / "state.py").write_text(BLOCK_POINTER_COLUMNS)
    levels = _levels(run_lint("state.py", "--format", "json", "--envelope", "training",
                              cwd=tmp_path))
    level, why, _ = levels[(9, "i_v * BV")]
    assert level == "warning" and "an offset of a block pointer" in why, why


MASKED_BY_A_CONSTEXPR = '''
import triton
import triton.language as tl


@triton.jit
def columns_kernel(x_ptr, D: tl.constexpr = 4096, BD: tl.constexpr = 128):
    i_d = tl.program_id(0)
    o_d = i_d * BD + tl.arange(0, BD)
    tl.store(x_ptr + o_d, 1.0, mask=o_d < D)


@triton.jit
def rows_kernel(x_ptr, n, BD: tl.constexpr = 128):
    i_d = tl.program_id(0)
    o_d = i_d * BD + tl.arange(0, BD)
    tl.store(x_ptr + o_d, 1.0, mask=o_d < n)
'''


def test_an_index_masked_below_a_constexpr_does_not_run_over_rows(tmp_path):
    """A size fixed when the kernel compiles (a head's width, ``D: tl.constexpr``) is a
    model's, not the workload's: a program id whose lanes the mask keeps below it is a column,
    not a row, even in a training envelope. Masked below a run-time ``n``, it is a row."""
    (tmp_path / "columns.py").write_text(MASKED_BY_A_CONSTEXPR)
    levels = _levels(run_lint("columns.py", "--format", "json", "--envelope", "training",
                              cwd=tmp_path))
    by_line = {line: found for (line, _), found in levels.items()}
    assert by_line[9][0] == "warning" and "inner index" in by_line[9][1], levels
    assert by_line[16][0] == "error", levels


def test_where_a_shape_passes_2_31_is_said_in_the_envelope_units():
    serving = envelope.Envelope(dict(envelope.SERVING_DIMENSIONS))
    assert serving.size("requests * (drafts + 1) * vocab") == 1024 * 16 * 262144
    assert serving.passes_at("requests * context") == "requests = 1,024"
    assert serving.passes_at("tokens * hidden") == "tokens = 131,072"


WIDER_THAN_ACTIVATIONS = '''
import triton
import triton.language as tl


@triton.jit
def fused_moe_rows_kernel(a_ptr, c_ptr, sorted_token_ids_ptr, stride_am, stride_cm, top_k,
                          BLOCK: tl.constexpr = 64, BLOCK_M: tl.constexpr = 16):
    offs = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    token = tl.load(sorted_token_ids_ptr + offs)
    cols = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + (token // top_k)[:, None] * stride_am + cols[None, :])
    tl.store(c_ptr + token[:, None] * stride_cm + cols[None, :], a)


@triton.jit
def silu_and_mul_kernel(x_ptr, out_ptr, stride_x, stride_out, BLOCK: tl.constexpr = 64):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    gate = tl.load(x_ptr + row * stride_x + cols)
    tl.store(out_ptr + row * stride_out + cols, gate * tl.sigmoid(gate))


@triton.jit
def decode_kernel(K_Buffer, Req_to_tokens, stride_req, stride_buf, BLOCK: tl.constexpr = 64):
    request = tl.program_id(0)
    slot = tl.load(Req_to_tokens + request * stride_req)
    cols = tl.arange(0, BLOCK)
    tl.store(K_Buffer + slot * stride_buf + cols, 0.0)


@triton.jit
def rms_norm_kernel(x_ptr, stride_x, BLOCK: tl.constexpr = 64):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * stride_x + cols, 1.0)
'''


def test_tensors_wider_or_taller_than_activations_are_known_by_their_kernel_and_name(tmp_path):
    """With no pattern of the team's: a mixture of experts' rows are tokens x topk, a gated
    MLP's activation is 2 x intermediate wide, a KV cache is one however it is spelt; an index
    table of a mixture of experts, its input read by token (``token // top_k``) and a plain
    activation stay below 2**31 in serving."""
    (tmp_path / "wide.py").write_text(WIDER_THAN_ACTIVATIONS)
    levels = _levels(run_lint(tmp_path / "wide.py", "--format", "json", "--envelope",
                              "serving"))
    level, why, _ = levels[(13, "token[:, None] * stride_cm")]
    assert level == "error" and "tokens * topk * hidden" in why, why
    # A row divided first (token // top_k) is a token's: the input is not expanded.
    level, why, _ = levels[(12, "(token // top_k)[:, None] * stride_am")]
    assert level == "warning" and "`a_ptr` (an activation, tokens * hidden)" in why, why
    level, why, _ = levels[(9, "tl.program_id(0) * BLOCK_M")]
    assert level == "warning" and "`sorted_token_ids_ptr` (an index table" in why, why
    level, why, _ = levels[(20, "row * stride_x")]
    assert level == "error" and "tokens * 2 * intermediate" in why, why
    level, why, _ = levels[(29, "slot * stride_buf")]
    assert level == "error" and "a KV cache" in why, why
    assert levels[(36, "row * stride_x")][0] == "warning", levels


MATRIX_MULTIPLY = '''
import triton
import triton.language as tl


@triton.jit
def block_scaled_matmul_kernel(A, B, C, As, stride_am, stride_bn, stride_cm, stride_as, M, N,
                               K: tl.constexpr = 32, BLOCK: tl.constexpr = 16):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = (pid_m * BLOCK + tl.arange(0, BLOCK)) % M
    cols = (pid_n * BLOCK + tl.arange(0, BLOCK)) % N
    ks = tl.arange(0, K)
    a = tl.load(A + rows[:, None] * stride_am + ks[None, :])
    b = tl.load(B + cols[None, :] * stride_bn + ks[:, None])
    scale = tl.load(As + rows * stride_as)
    c = tl.dot(a, b) * scale[:, None]
    tl.store(C + rows[:, None] * stride_cm + cols[None, :], c)


@triton.jit
def per_token_quant_deep_gemm_kernel(y_ptr, y_q_ptr, stride_y, BLOCK: tl.constexpr = 64):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    y = tl.load(y_ptr + row * stride_y + cols)
    tl.store(y_q_ptr + row * stride_y + cols, y.to(tl.float8e4nv))
'''


def test_a_matrix_multiplys_rows_of_tokens_are_as_wide_as_an_mlp(tmp_path):
    """In a kernel that multiplies tiles and says so in its name, the operands its rows of
    tokens index (``A``, ``C``) are ``[tokens, intermediate]``, past 2**31 in serving (a down
    projection reads that wide); its weight (``B``) and a one-letter operand's scales (``As``)
    are not. A quantizer named after a GEMM library multiplies nothing: its rows are
    activations."""
    (tmp_path / "gemm.py").write_text(MATRIX_MULTIPLY)
    done = run_lint(tmp_path / "gemm.py", "--format", "json", "--envelope", "serving")
    levels = _levels(done)
    reach = {(f["line"], f["product"]): f["reach"]
             for k in json.loads(done.stdout)["kernels"] for f in k["findings"]}
    serving = envelope.preset("serving")
    for line, product, tensor in ((14, "rows[:, None] * stride_am", "A"),
                                  (18, "rows[:, None] * stride_cm", "C")):
        level, why, _ = levels[(line, product)]
        assert level == "error" and f"`{tensor}` ({envelope.MATMUL_OPERANDS[1]}" in why, why
    for line, product, tensor, shape in (
            (15, "cols[None, :] * stride_bn", "B", envelope.ACTIVATIONS[0]),
            (16, "rows * stride_as", "As", envelope.SCALES[0]),
            (25, "row * stride_y", "y_ptr", envelope.ACTIVATIONS[0]),
            (26, "row * stride_y", "y_q_ptr", envelope.ACTIVATIONS[0])):
        assert levels[(line, product)][0] == "warning", levels[(line, product)]
        assert levels[(line, product)][2] == [tensor]
        assert reach[(line, product)] == serving.size(shape) < 2**31


@pytest.mark.parametrize("name, expected", [
    ("K_Buffer", {"k", "buffer"}), ("KCache", {"k", "cache"}),
    ("kv_cache_ptr", {"kv", "cache", "ptr"}), ("expert_offsets", {"expert", "offset"}),
    ("dloss_ptr", {"dloss", "ptr"})])
def test_words_of_a_name_split_case_and_underscores_and_drop_a_plural(name, expected):
    assert envelope.words(name) == expected


GROUPED = '''
import triton
import triton.language as tl


@triton.jit
def grouped_kernel(c_ptr, stride_cm, stride_cn, M, N, BLOCK_M: tl.constexpr = 64,
                   BLOCK_N: tl.constexpr = 64, GROUP_SIZE_M: tl.constexpr = 8):
    pid = tl.program_id(0)
    num_pid_in_group = GROUP_SIZE_M * tl.cdiv(N, BLOCK_N)
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(tl.cdiv(M, BLOCK_M) - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + offs[:, None] * stride_cm + offs_n[None, :] * stride_cn, 1.0)
'''


@pytest.mark.parametrize("judged_by", ["none", "training"])
def test_the_first_program_of_a_group_is_at_most_the_program_id(tmp_path, judged_by):
    """``pid // (GROUP_SIZE_M * n) * GROUP_SIZE_M`` (the grouped ordering of every tiled
    matmul) is at most ``pid``: a note, whatever the tensor. The column tile, from ``pid %
    num_pid_in_group`` beside ``pid // num_pid_in_group``, is an inner coordinate: it does not
    run over the rows, so a large tensor does not make it red. The tile's rows times the
    stride stay an error."""
    (tmp_path / "grouped.py").write_text(GROUPED)
    levels = _levels(run_lint(tmp_path / "grouped.py", "--format", "json", "--envelope",
                              judged_by))
    level, why, _ = levels[(12, "group_id * GROUP_SIZE_M")]
    assert level == "note" and "at most what was divided, program_id(0)" in why, why
    assert levels[(18, "offs[:, None] * stride_cm")][0] == "error", levels
    assert levels[(18, "offs_n[None, :] * stride_cn")][0] == "warning", levels
    # The tile's first row is where the int32 row of that error is made; the column tile's
    # product is no error, so neither is its first column.
    level, why, _ = levels[(16, "pid_m * BLOCK_M")]
    assert level == "error" and "`offs[:, None] * stride_cm` (line 18)" in why, why
    assert levels[(17, "pid_n * BLOCK_N")][0] == "warning", levels


SPLIT_HEADS = '''
import triton
import triton.language as tl


@triton.jit
def split_heads_kernel(x_ptr, stride_head, heads_per_group, heads_per_program,
                       BLOCK: tl.constexpr = 64):
    pid_g = tl.program_id(1)
    pid_s = tl.program_id(2)
    first = pid_g * heads_per_group
    within = pid_s * heads_per_program
    cols = tl.arange(0, BLOCK)
    tl.store(x_ptr + (first + within) * stride_head + cols, 1.0)
'''


def test_a_sum_of_two_products_raises_neither(tmp_path):
    """``(pid_g * G + pid_s * S) * stride``: either term may be the small one, so where the
    product is red, neither term's line is named as where its index is made."""
    (tmp_path / "split.py").write_text(SPLIT_HEADS)
    levels = _levels(run_lint(tmp_path / "split.py", "--format", "json", "--envelope",
                              "training"))
    assert levels[(14, "(first + within) * stride_head")][0] == "error", levels
    assert levels[(11, "pid_g * heads_per_group")][0] == "warning", levels
    assert levels[(12, "pid_s * heads_per_program")][0] == "warning", levels


CHUNKS = '''
import triton
import triton.language as tl


@triton.jit
def chunked_kernel(q_ptr, g_cumsum, chunk_indices, stride_q, BLOCK: tl.constexpr = 64):
    i_t = tl.program_id(0)
    row = tl.load(chunk_indices + i_t * 2)
    cols = tl.arange(0, BLOCK)
    tl.store(q_ptr + row * stride_q + cols, 1.0)
    tl.store(g_cumsum + row * stride_q + cols, 1.0)
'''


def test_an_index_table_is_an_entry_per_token_head_and_choice(tmp_path):
    """In training an activation passes 2**31, an index table by its name (``chunk_indices``,
    ``topk_ids``) does not: an entry per token, head and choice. A running sum (``g_cumsum``)
    holds values: an activation."""
    (tmp_path / "chunks.py").write_text(CHUNKS)
    levels = _levels(run_lint(tmp_path / "chunks.py", "--format", "json", "--envelope",
                              "training"))
    level, why, _ = levels[(9, "i_t * 2")]
    assert level == "warning" and "`chunk_indices` (an index table" in why, why
    level, why, _ = levels[(11, "row * stride_q")]
    assert level == "error" and "`q_ptr` (an activation, tokens * hidden)" in why, why
    level, why, _ = levels[(12, "row * stride_q")]
    assert level == "error" and "`g_cumsum` (an activation, tokens * hidden)" in why, why


@pytest.mark.parametrize("name, is_cache", [
    ("K_Buffer", True), ("KCache", True), ("k_caches", True), ("value_cache", True),
    ("kv_c_and_k_pe_cache", True), ("v_pool", True), ("index_k_rope_cos_sin_cache", False),
    ("intermediate_cache", False), ("cache_ptr", False), ("k_ptr", False)])
def test_a_kv_cache_is_known_however_it_is_spelt(name, is_cache):
    serving = envelope.preset("serving")
    assert (serving.reach("ops.py", "kernel", name).what == "a KV cache") is is_cache


COLUMN_TILE = '''
import triton
import triton.language as tl


@triton.jit
def columns_kernel(logits_ptr, stride_m, stride_n, n_cols, BLOCK: tl.constexpr = 128):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    tl.store(logits_ptr + row * stride_m + cols * stride_n, 1.0, mask=cols < n_cols)
    split = (row % 4) * BLOCK + tl.arange(0, BLOCK)
    tl.store(logits_ptr + split * stride_n, 2.0)
'''


def test_a_tile_on_grid_axis_1_beside_the_row_is_a_column(tmp_path):
    """``row * stride_m + cols * stride_n`` with ``row`` from ``program_id(0)`` and ``cols`` a
    tile on grid axis 1: an address has one row, so the tile is a column of a tensor that can
    pass 2**31, not a run over its rows; nor is an index the kernel bounds by its own numbers
    (``row % 4 * BLOCK``)."""
    (tmp_path / "columns.py").write_text(COLUMN_TILE)
    levels = _levels(run_lint(tmp_path / "columns.py", "--format", "json", "--envelope",
                              "serving"))
    assert levels[(10, "row * stride_m")][0] == "error", levels
    level, why, _ = levels[(10, "cols * stride_n")]
    assert level == "warning", why
    # A split of program_id(0) bounded by the kernel's numbers does not run over the rows.
    level, why, _ = levels[(12, "split * stride_n")]
    assert level == "warning", why


@pytest.mark.parametrize("name, what", [
    ("logits_ptr", envelope.TRAINING_TENSORS[1][2]), ("max_logits", envelope.STATISTICS[1]),
    ("probs_lse", envelope.STATISTICS[1]), ("Rstd", envelope.STATISTICS[1]),
    ("x_scale_ptr", envelope.SCALES[1]), ("a_sf", envelope.SCALES[1]),
    ("Bs", envelope.SCALES[1]), ("y_s_ptr", envelope.SCALES[1]), ("as_ptr", envelope.SCALES[1]),
    ("zeros_ptr", envelope.SCALES[1]), ("xs", "an activation"),
    ("descale_q_ptr", envelope.SCALES[1]), ("loss_ptr", envelope.STATISTICS[1]),
    ("dloss_ptr", envelope.STATISTICS[1]),
    ("dlse", envelope.STATISTICS[1]), ("dx_ptr", "an activation"), ("data_ptr", "an activation"),
    ("x_ptr", "an activation")])
def test_a_statistic_of_each_row_or_a_scale_is_smaller_than_what_it_describes(name, what):
    """A per-row statistic (a norm's ``Rstd``, a row's ``max_logits`` or ``loss``, and their
    gradients ``dlse``, ``dloss``) holds a value per token and head, a scale one per group of
    values: below 2**31 even where a training step's
    activations are not."""
    training = envelope.preset("training")
    found = training.reach("ops.py", "kernel", name)
    assert found.what == what
    assert found.passes == (what in (envelope.TRAINING_TENSORS[1][2], "an activation"))
