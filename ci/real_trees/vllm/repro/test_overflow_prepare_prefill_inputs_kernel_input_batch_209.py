"""An i32 offset overflow in `_prepare_prefill_inputs_kernel` (vllm/v1/worker/gpu/input_batch.py:209):
`req_state_idx * all_token_ids_stride`.

Written by `triton-overflow repro`. Run it with `python -m pytest test_overflow_prepare_prefill_inputs_kernel_input_batch_209.py` where the
suite is installed (pip install triton-overflow-suite): on a CPU the interpreter tests run,
on a CUDA GPU the GPU tests too. The kernel is the engine's own, loaded from its source;
the tensor `all_token_ids_ptr` is taken past 2**31 elements with its highest rows planted as
copies of row 0 (the skip reasons state the memory). The tests of the kernel as shipped fail while
the product wraps, naming the line; the tests of the kernel with the fix pass.
"""

from triton_overflow.repro import Reproduction, ReproductionTests


class PreparePrefillInputsKernelInputBatch209(Reproduction):
    root = '.'  # set $TRITON_OVERFLOW_ENGINE_ROOT to a vLLM checkout at 425c4eaf
    source = 'vllm/v1/worker/gpu/input_batch.py'
    kernel = '_prepare_prefill_inputs_kernel'
    line = 209
    product = 'req_state_idx * all_token_ids_stride'
    huge = 'all_token_ids_ptr'
    rows_from = 'load:idx_mapping_ptr'
    stride = 'all_token_ids_stride'
    fix = {'line': 198,
           'replace': 'req_state_idx = tl.load(idx_mapping_ptr + batch_idx)',
           'with': 'req_state_idx = tl.load(idx_mapping_ptr + batch_idx).to(tl.int64)'}
    seconds = {'interpreter': 1.6, 'gpu': 9.2}
    launch_description = {'kernel': 'vllm/v1/worker/gpu/input_batch.py:_prepare_prefill_inputs_kernel',
                          'rows': 1,
                          'slots': 4,
                          'grid': ['rows'],
                          'arguments': {'input_ids_ptr': {'shape': [256], 'dtype': 'int32'},
                                        'next_prefill_tokens_ptr': {'shape': ['slots'], 'dtype': 'int32'},
                                        'idx_mapping_ptr': {'shape': ['rows'], 'dtype': 'int32'},
                                        'query_start_loc_ptr': {'shape': [2],
                                                                'dtype': 'int32',
                                                                'values': [0, 200]},
                                        'all_token_ids_ptr': {'shape': ['slots', 2097152], 'dtype': 'int32'},
                                        'all_token_ids_stride': 2097152,
                                        'prefill_lens_ptr': {'shape': ['slots'], 'dtype': 'int32', 'fill': 1000},
                                        'num_computed_tokens_ptr': {'shape': ['slots'],
                                                                    'dtype': 'int32',
                                                                    'fill': 0},
                                        'BLOCK_SIZE': 1024}}


AS_SHIPPED = PreparePrefillInputsKernelInputBatch209()
WIDENED = PreparePrefillInputsKernelInputBatch209(widened=True)


class TestPreparePrefillInputsKernelInputBatch209(ReproductionTests):
    reproductions = [AS_SHIPPED, WIDENED]
