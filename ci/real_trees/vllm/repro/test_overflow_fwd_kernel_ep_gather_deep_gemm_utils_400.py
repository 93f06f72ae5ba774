"""An i32 offset overflow in `_fwd_kernel_ep_gather` (vllm/model_executor/layers/fused_moe/deep_gemm_utils.py:400):
`source_token_index * input_tensor_stride0`.

Written by `triton-overflow repro`. Run it with `python -m pytest test_overflow_fwd_kernel_ep_gather_deep_gemm_utils_400.py` where the
suite is installed (pip install triton-overflow-suite): on a CPU the interpreter tests run,
on a CUDA GPU the GPU tests too. The kernel is the engine's own, loaded from its source;
the tensor `input_tensor` is taken past 2**31 elements with its highest rows planted as
copies of row 0 (the skip reasons state the memory). The tests of the kernel as shipped fail while
the product wraps, naming the line; the tests of the kernel with the fix pass.
"""

from triton_overflow.repro import Reproduction, ReproductionTests


class FwdKernelEpGatherDeepGemmUtils400(Reproduction):
    root = '.'  # set $TRITON_OVERFLOW_ENGINE_ROOT to a vLLM checkout at 425c4eaf
    source = 'vllm/model_executor/layers/fused_moe/deep_gemm_utils.py'
    kernel = '_fwd_kernel_ep_gather'
    line = 400
    product = 'source_token_index * input_tensor_stride0'
    huge = 'input_tensor'
    rows_from = 'load:input_index'
    stride = 'input_tensor_stride0'
    fix = {'line': 392,
           'replace': 'source_token_index = tl.load( input_index + cur_token * '
                      'input_index_stride0 + topk_index )',
           'with': 'source_token_index = tl.load( input_index + cur_token * input_index_stride0 '
                   '+ topk_index ).to(tl.int64)'}
    seconds = {'interpreter': 1.7, 'gpu': 7.6}
    launch_description = {'kernel': 'vllm/model_executor/layers/fused_moe/deep_gemm_utils.py:_fwd_kernel_ep_gather',
                          'rows': 1,
                          'slots': 4,
                          'grid': [7, 'rows'],
                          'arguments': {'total_token_num': 'rows',
                                        'input_tensor': {'shape': ['slots', 7168], 'dtype': 'bfloat16'},
                                        'input_tensor_stride0': 7168,
                                        'input_tensor_stride1': 1,
                                        'recv_topk_ids': {'shape': ['rows', 1], 'dtype': 'int32'},
                                        'recv_topk_ids_stride0': 1,
                                        'recv_topk_ids_stride1': 1,
                                        'recv_topk_weight': {'shape': ['rows', 1],
                                                             'dtype': 'float32',
                                                             'fill': 1.0},
                                        'recv_topk_weight_stride0': 1,
                                        'recv_topk_weight_stride1': 1,
                                        'input_index': {'shape': ['rows', 1], 'dtype': 'int32'},
                                        'input_index_stride0': 1,
                                        'input_index_stride1': 1,
                                        'output_tensor': {'shape': ['rows', 7168], 'dtype': 'bfloat16'},
                                        'output_tensor_stride0': 7168,
                                        'output_tensor_stride1': 1,
                                        'topk_num': 1,
                                        'expert_map': None,
                                        'HAS_EXPERT_MAP': False,
                                        'BLOCK_D': 1024}}


AS_SHIPPED = FwdKernelEpGatherDeepGemmUtils400()
WIDENED = FwdKernelEpGatherDeepGemmUtils400(widened=True)


class TestFwdKernelEpGatherDeepGemmUtils400(ReproductionTests):
    reproductions = [AS_SHIPPED, WIDENED]
