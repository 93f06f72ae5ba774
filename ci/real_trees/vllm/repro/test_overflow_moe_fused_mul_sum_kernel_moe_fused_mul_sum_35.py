"""An i32 offset overflow in `moe_fused_mul_sum_kernel` (vllm/model_executor/layers/fused_moe/moe_fused_mul_sum.py:35):
`offs_m * stride_m`.

Written by `triton-overflow repro`. Run it with `python -m pytest test_overflow_moe_fused_mul_sum_kernel_moe_fused_mul_sum_35.py` where the
suite is installed (pip install triton-overflow-suite): on a CPU the interpreter tests run,
on a CUDA GPU the GPU tests too. The kernel is the engine's own, loaded from its source;
the tensor `inputs_ptr` is taken past 2**31 elements with its highest rows planted as
copies of row 0 (the skip reasons state the memory). The tests of the kernel as shipped fail while
the product wraps, naming the line; the tests of the kernel with the fix pass.
"""

from triton_overflow.repro import Reproduction, ReproductionTests


class MoeFusedMulSumKernelMoeFusedMulSum35(Reproduction):
    root = '.'  # set $TRITON_OVERFLOW_ENGINE_ROOT to a vLLM checkout at 425c4eaf
    source = 'vllm/model_executor/layers/fused_moe/moe_fused_mul_sum.py'
    kernel = 'moe_fused_mul_sum_kernel'
    line = 35
    product = 'offs_m * stride_m'
    huge = 'inputs_ptr'
    rows_from = 'program_id(1)'
    stride = 'stride_m'
    fix = {'line': 35,
           'replace': 'offs_m * stride_m',
           'with': 'tl.cast(offs_m, tl.int64) * stride_m'}
    seconds = {'interpreter': 1.8, 'gpu': 10.4}
    launch_description = {'kernel': 'vllm/model_executor/layers/fused_moe/moe_fused_mul_sum.py:moe_fused_mul_sum_kernel',
                          'rows': 16,
                          'grid': [14, 'rows/8'],
                          'arguments': {'inputs_ptr': {'shape': ['rows', 57344], 'dtype': 'bfloat16'},
                                        'topk_weights_ptr': {'shape': ['rows', 8], 'dtype': 'float32'},
                                        'outputs_ptr': {'shape': ['rows', 7168], 'dtype': 'bfloat16'},
                                        'top_ids_ptr': {'shape': ['rows', 8], 'dtype': 'int32'},
                                        'expert_map_ptr': None,
                                        'num_tokens': 'rows',
                                        'stride_m': 57344,
                                        'has_expert_map': False,
                                        'top_k': 8,
                                        'size': 7168,
                                        'BLOCK_M': 8,
                                        'BLOCK_K': 512}}


AS_SHIPPED = MoeFusedMulSumKernelMoeFusedMulSum35()
WIDENED = MoeFusedMulSumKernelMoeFusedMulSum35(widened=True)


class TestMoeFusedMulSumKernelMoeFusedMulSum35(ReproductionTests):
    reproductions = [AS_SHIPPED, WIDENED]
