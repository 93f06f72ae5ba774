"""An i32 offset overflow in `_fused_moe_lora_one_shot_kernel` (vllm/lora/ops/triton_ops/fused_moe_lora_op.py:296):
`offs_token[:, None] * stride_om`.

Written by `triton-overflow repro`. Run it with `python -m pytest test_overflow_fused_moe_lora_one_shot_kernel_fused_moe_lora_op_296.py` where the
suite is installed (pip install triton-overflow-suite): on a CPU the interpreter tests run,
on a CUDA GPU the GPU tests too. The kernel is the engine's own, loaded from its source;
the tensor `out_ptr` is taken past 2**31 elements with its highest rows planted as
copies of row 0 (the skip reasons state the memory). The tests of the kernel as shipped fail while
the product wraps, naming the line; the tests of the kernel with the fix pass.
"""

from triton_overflow.repro import Reproduction, ReproductionTests


class FusedMoeLoraOneShotKernelFusedMoeLoraOp296(Reproduction):
    root = '.'  # set $TRITON_OVERFLOW_ENGINE_ROOT to a vLLM checkout at 425c4eaf
    source = 'vllm/lora/ops/triton_ops/fused_moe_lora_op.py'
    kernel = '_fused_moe_lora_one_shot_kernel'
    line = 296
    product = 'offs_token[:, None] * stride_om'
    huge = 'out_ptr'
    rows_from = 'load:sorted_token_ids_ptr'
    stride = 'stride_om'
    fix = {'line': 296,
           'replace': 'offs_token[:, None] * stride_om',
           'with': 'tl.cast(offs_token[:, None], tl.int64) * stride_om'}
    seconds = {'interpreter': 2.0, 'gpu': 12.1}
    launch_description = {'kernel': 'vllm/lora/ops/triton_ops/fused_moe_lora_op.py:_fused_moe_lora_one_shot_kernel',
                          'rows': 1,
                          'slots': 4,
                          'grid': [1, 1, 1],
                          'arguments': {'x_ptr': {'shape': ['slots', 128], 'dtype': 'bfloat16'},
                                        'A_ptrs': {'pointers': ['lora_a'], 'dtype': 'uint64'},
                                        'B_ptrs': {'pointers': ['lora_b'], 'dtype': 'uint64'},
                                        'out_ptr': {'shape': ['slots', 7168], 'dtype': 'bfloat16'},
                                        'topk_weights_ptr': {'shape': ['slots'],
                                                             'dtype': 'float32',
                                                             'fill': 0.5},
                                        'sorted_token_ids_ptr': {'shape': [16], 'dtype': 'int32'},
                                        'expert_ids_ptr': {'shape': [1], 'dtype': 'int32', 'values': [0]},
                                        'num_tokens_post_padded_ptr': {'shape': [1],
                                                                       'dtype': 'int32',
                                                                       'values': [16]},
                                        'token_lora_mapping_ptr': {'shape': [1],
                                                                   'dtype': 'int32',
                                                                   'values': [0]},
                                        'lora_ids_ptr': {'shape': [1], 'dtype': 'int32', 'values': [0]},
                                        'adapter_enabled_ptr': {'shape': [2],
                                                                'dtype': 'int32',
                                                                'values': [1, 1]},
                                        'N': 7168,
                                        'K': 128,
                                        'num_valid_tokens': 'slots',
                                        'top_k_num': 8,
                                        'max_loras': 1,
                                        'stride_xm': 128,
                                        'stride_xk': 1,
                                        'stride_A_lora': 2048,
                                        'stride_A_expert': 2048,
                                        'stride_A_r': 128,
                                        'stride_A_k': 1,
                                        'stride_B_lora': 114688,
                                        'stride_B_expert': 114688,
                                        'stride_B_n': 16,
                                        'stride_B_r': 1,
                                        'stride_om': 7168,
                                        'stride_on': 1,
                                        'stride_tl_': 16,
                                        'stride_el': 1,
                                        'slice_n_offset': 7168,
                                        'token_mapping_factor': 1,
                                        'naive_block_assignment': False,
                                        'MUL_ROUTED_WEIGHT': True,
                                        'BLOCK_M': 16,
                                        'BLOCK_R': 16,
                                        'actual_rank': 16,
                                        'NPID_FACTOR': 1,
                                        'BLOCK_N': 128,
                                        'BLOCK_K': 128,
                                        'EVEN_K': True,
                                        'ADD_INPUTS': False},
                          'pointees': {'lora_a': {'shape': [1, 1, 16, 128], 'dtype': 'bfloat16'},
                                       'lora_b': {'shape': [1, 1, 7168, 16], 'dtype': 'bfloat16'}}}


AS_SHIPPED = FusedMoeLoraOneShotKernelFusedMoeLoraOp296()
WIDENED = FusedMoeLoraOneShotKernelFusedMoeLoraOp296(widened=True)


class TestFusedMoeLoraOneShotKernelFusedMoeLoraOp296(ReproductionTests):
    reproductions = [AS_SHIPPED, WIDENED]
