"""An i32 offset overflow in `_prepare_rope_positions_kernel` (vllm/v1/worker/gpu/mm/rope.py:203):
`req_state_idx * prefill_positions_stride0`.

Written by `triton-overflow repro`. Run it with `python -m pytest test_overflow_prepare_rope_positions_kernel_rope_203.py` where the
suite is installed (pip install triton-overflow-suite): on a CPU the interpreter tests run,
on a CUDA GPU the GPU tests too. The kernel is the engine's own, loaded from its source;
the tensor `prefill_positions_ptr` is taken past 2**31 elements with its highest rows planted as
copies of row 0 (the skip reasons state the memory). The tests of the kernel as shipped fail while
the product wraps, naming the line; the tests of the kernel with the fix pass.
"""

from triton_overflow.repro import Reproduction, ReproductionTests


class PrepareRopePositionsKernelRope203(Reproduction):
    root = '.'  # set $TRITON_OVERFLOW_ENGINE_ROOT to a vLLM checkout at 425c4eaf
    source = 'vllm/v1/worker/gpu/mm/rope.py'
    kernel = '_prepare_rope_positions_kernel'
    line = 203
    product = 'req_state_idx * prefill_positions_stride0'
    huge = 'prefill_positions_ptr'
    rows_from = 'load:idx_mapping_ptr'
    stride = 'prefill_positions_stride0'
    fix = {'line': 182,
           'replace': 'req_state_idx = tl.load(idx_mapping_ptr + batch_idx)',
           'with': 'req_state_idx = tl.load(idx_mapping_ptr + batch_idx).to(tl.int64)'}
    seconds = {'interpreter': 1.5, 'gpu': 9.6}
    launch_description = {'kernel': 'vllm/v1/worker/gpu/mm/rope.py:_prepare_rope_positions_kernel',
                          'rows': 1,
                          'slots': 4,
                          'grid': ['rows'],
                          'arguments': {'positions_ptr': {'shape': [3, 256], 'dtype': 'int64'},
                                        'positions_stride': 256,
                                        'prefill_positions_ptr': {'shape': ['slots', 2160000], 'dtype': 'int32'},
                                        'prefill_positions_stride0': 2160000,
                                        'prefill_positions_stride1': 720000,
                                        'prefill_delta_ptr': {'shape': ['slots'], 'dtype': 'int32'},
                                        'idx_mapping_ptr': {'shape': ['rows'], 'dtype': 'int32'},
                                        'query_start_loc_ptr': {'shape': [2],
                                                                'dtype': 'int32',
                                                                'values': [0, 200]},
                                        'prefill_lens_ptr': {'shape': ['slots'], 'dtype': 'int32', 'fill': 1000},
                                        'num_computed_tokens_ptr': {'shape': ['slots'],
                                                                    'dtype': 'int32',
                                                                    'fill': 0},
                                        'BLOCK_SIZE': 1024,
                                        'NUM_DIMS': 3}}


AS_SHIPPED = PrepareRopePositionsKernelRope203()
WIDENED = PrepareRopePositionsKernelRope203(widened=True)


class TestPrepareRopePositionsKernelRope203(ReproductionTests):
    reproductions = [AS_SHIPPED, WIDENED]
