"""Every kernel compiles for sm_90 (H100/H200) through LLVM IR, checked on the CPU, and the
streaming kernels keep their 16-byte global accesses in the PTX.

A kernel that the interpreter and TTIR accept can still fail in the GPU compiler's later passes
(seen: a constexpr assigned inside ``tl.static_range``). Compiling here puts that failure in
the CPU tier instead of the first GPU launch.
"""

import pytest

from harness.isolation import run_isolated

I32 = "*i32"
I64 = "*i64"
_VERIFY_TYPES = {"sampled_ptr": I64, "num_sampled_ptr": I32, "target_argmax_ptr": I64,
                 "draft_sampled_ptr": I64, "cu_num_logits_ptr": I32, "idx_mapping_ptr": I32,
                 "seed_ptr": I64, "pos_ptr": I64}
_RESAMPLE_TYPES = {"block_id_ptr": I64, "num_sampled_ptr": I32, "draft_sampled_ptr": I64,
                   "cu_num_logits_ptr": I32, "expanded_idx_mapping_ptr": I32, "seed_ptr": I64,
                   "pos_ptr": I64}
JOBS = {
    "topk_topp": ("kernels.topk_topp", "_top_k_top_p_kernel", {"k_ptr": I32, "mask_value": "fp32"}, {}, 8),
    "topk_topp top-k only": ("kernels.topk_topp", "_top_k_top_p_kernel", {"k_ptr": I32, "mask_value": "fp32"},
                             {"TOPP_ENABLED": False}, 8),
    "topk_topp top-p only": ("kernels.topk_topp", "_top_k_top_p_kernel", {"k_ptr": I32, "mask_value": "fp32"},
                             {"TOPK_ENABLED": False}, 8),
    "logprobs bf16": ("kernels.logprob", "_token_logprobs_kernel", {"ids_ptr": I64, "logits_ptr": "*bf16"}, {}, 8),
    "logprobs fp16": ("kernels.logprob", "_token_logprobs_kernel", {"ids_ptr": I64, "logits_ptr": "*fp16"}, {}, 8),
    "ranks": ("kernels.logprob", "_token_ranks_kernel", {"ids_ptr": I64, "out_ptr": I64}, {}, 8),
    "min_p block max": ("kernels.min_p", "_block_max_kernel", {"idx_mapping_ptr": I32}, {}, 8),
    "min_p mask": ("kernels.min_p", "_min_p_kernel", {"idx_mapping_ptr": I32}, {}, 8),
    "temperature": ("kernels.gumbel", "_temperature_kernel", {"idx_mapping_ptr": I32}, {}, 8),
    "gumbel fp32": ("kernels.gumbel", "_gumbel_sample_kernel",
                    {"block_id_ptr": I64, "idx_mapping_ptr": I32, "seed_ptr": I64, "pos_ptr": I64,
                     "processed_col_ptr": I32}, {}, 4),
    "gumbel fp64 per-row col": ("kernels.gumbel", "_gumbel_sample_kernel",
                                {"block_id_ptr": I64, "block_value_ptr": "*fp64", "idx_mapping_ptr": I32,
                                 "seed_ptr": I64, "pos_ptr": I64, "processed_col_ptr": I32},
                                {"USE_FP64": True, "PER_ROW_COL": True}, 4),
    "logit bias": ("kernels.logit_bias", "_logit_bias_kernel",
                   {**{k: I32 for k in ("idx_mapping_ptr", "num_allowed_ptr", "allowed_ptr",
                                        "num_bias_ptr", "bias_ids_ptr", "min_lens_ptr",
                                        "num_stop_ptr", "stop_ids_ptr")}, "pos_ptr": I64}, {}, 4),
    "bad words": ("kernels.bad_words", "_bad_words_kernel",
                  {k: I32 for k in ("idx_mapping_ptr", "bad_word_token_ids_ptr", "bad_word_offsets_ptr",
                                    "num_bad_words_ptr", "all_token_ids_ptr", "prompt_len_ptr",
                                    "total_len_ptr", "input_ids_ptr", "local_pos_ptr")}, {}, 1),
    "bincount": ("kernels.penalties", "_bincount_kernel",
                 {k: I32 for k in ("all_token_ids_ptr", "idx_mapping_ptr", "prompt_len_ptr",
                                   "total_len_ptr", "prompt_bin_mask_ptr", "output_bin_counts_ptr")}, {}, 4),
    "penalties": ("kernels.penalties", "_penalties_kernel",
                  {k: I32 for k in ("idx_mapping_ptr", "token_ids_ptr", "local_pos_ptr",
                                    "prompt_bin_mask_ptr", "output_bin_counts_ptr")}, {}, 8),
    "block stats": ("kernels.rejection", "_block_stats_kernel",
                    {"target_argmax_ptr": I64, "idx_mapping_ptr": I32, "local_pos_ptr": I32}, {}, 8),
    "verify": ("kernels.rejection", "_verify_kernel", _VERIFY_TYPES, {}, 1),
    "verify synthetic": ("kernels.rejection", "_verify_kernel",
                         {**_VERIFY_TYPES, "draft_sampled_ptr": I32},
                         {"HAS_DRAFT_LOGITS": False, "SYNTHETIC_MODE": True}, 1),
    "resample": ("kernels.rejection", "_resample_kernel", _RESAMPLE_TYPES, {}, 4),
    "resample fp64 no draft": ("kernels.rejection", "_resample_kernel",
                               {**_RESAMPLE_TYPES, "block_value_ptr": "*fp64"},
                               {"HAS_DRAFT_LOGITS": False, "USE_FP64": True}, 4),
    "insert": ("kernels.rejection", "_insert_kernel",
               {"sampled_ptr": I64, "num_sampled_ptr": I32, "block_id_ptr": I64,
                "cu_num_logits_ptr": I32, "idx_mapping_ptr": I32}, {}, 4),
    "insert fp64": ("kernels.rejection", "_insert_kernel",
                    {"sampled_ptr": I64, "num_sampled_ptr": I32, "block_id_ptr": I64,
                     "block_value_ptr": "*fp64", "cu_num_logits_ptr": I32, "idx_mapping_ptr": I32},
                    {}, 4),
}


@pytest.mark.static
@pytest.mark.parametrize("job", sorted(JOBS))
def test_kernel_compiles_for_sm90(job):
    _compile_in_child("harness.lint:compile_for_gpu", job)


def _compile_in_child(target, job, **extra):
    """Run ``target`` on one job (a name in JOBS, or its tuple) in a child process, the
    interpreter flag unset; return its value."""
    module, kernel, types, constants, warps = JOBS[job] if isinstance(job, str) else job
    outcome = run_isolated(target, dict(module=module, kernel=kernel, types=types,
                                        constants=constants, num_warps=warps, **extra),
                           unset_env=("TRITON_INTERPRET", ), timeout=300)
    assert outcome.status == "passed", outcome.summary() + "\n" + outcome.output
    return outcome.value


# Streaming kernels whose logits traffic must stay in 16-byte accesses on sm_90, as launched
# with vocab sizes and strides that are multiples of 16. Each limit is a regression once seen:
# a value-dependent store mask (min_p: 32 scalar stores per thread) and a per-entry bitset
# gather (penalties: 38 scalar loads).
WIDE_ACCESS_JOBS = {
    "temperature": ("logits_stride", "vocab_size"),
    "min_p block max": ("logits_stride", "vocab_size"),
    "min_p mask": ("logits_stride", "vocab_size"),
    "penalties": ("logits_stride", "vocab_size", "prompt_bin_mask_stride",
                  "output_bin_counts_stride"),
}
SCALAR_LOAD_LIMIT = {"penalties": 8}


PLANTED_NARROW_JOBS = {
    "value-masked store": (("tests.planted.narrow_access", "value_masked_store_kernel",
                            {"threshold": "fp32"}, {}, 8), ("stride", "vocab_size")),
    "per-entry word gather": (("tests.planted.narrow_access", "per_entry_word_gather_kernel",
                               {"words_ptr": I32}, {}, 8), ("stride", "vocab_size")),
}


def _narrow_accesses(job, accesses):
    """What breaks the 16-byte rule in ``accesses``: a list of messages, empty when none."""
    scalar_loads, scalar_stores = accesses.get("ld.global.b32", 0), accesses.get("st.global.b32", 0)
    problems = []
    if accesses.get("ld.global.v4.b32", 0) < 8:
        problems.append(f"{job}: too few 16-byte loads: {accesses}")
    if scalar_stores > 1:
        problems.append(f"{job}: {scalar_stores} scalar 4-byte stores: {accesses}")
    if scalar_loads > SCALAR_LOAD_LIMIT.get(job, 3):
        problems.append(f"{job}: {scalar_loads} scalar 4-byte loads: {accesses}")
    return problems


@pytest.mark.static
@pytest.mark.parametrize("job", sorted(WIDE_ACCESS_JOBS))
def test_streaming_kernels_move_logits_in_16_byte_accesses(job):
    accesses = _compile_in_child("harness.lint:global_accesses", job,
                                 aligned=WIDE_ACCESS_JOBS[job])
    assert not _narrow_accesses(job, accesses)


@pytest.mark.static
@pytest.mark.selftest
@pytest.mark.parametrize("job", sorted(PLANTED_NARROW_JOBS))
def test_access_width_check_flags_planted_narrow_kernel(job):
    """The check above fails the two patterns it guards against, planted in small kernels."""
    spec, aligned = PLANTED_NARROW_JOBS[job]
    accesses = _compile_in_child("harness.lint:global_accesses", spec, aligned=aligned)
    assert _narrow_accesses(job, accesses), f"{job}: not flagged: {accesses}"
