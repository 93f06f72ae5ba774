"""An i32 offset overflow in `rejection_random_sample_kernel` (vllm/v1/sample/rejection_sampler.py:827):
`(start_idx + pos) * vocab_size`.

Written by `triton-overflow repro`. Run it with `python -m pytest test_overflow_rejection_random_sample_kernel_rejection_sampler_827.py` where the
suite is installed (pip install triton-overflow-suite): on a CPU the interpreter tests run,
on a CUDA GPU the GPU tests too. The kernel is the engine's own, loaded from its source;
the tensor `target_probs_ptr` is taken past 2**31 elements with its highest rows planted as
copies of row 0 (the skip reasons state the memory). The tests of the kernel as shipped fail while
the product wraps, naming the line; the tests of the kernel with the fix pass.
"""

from triton_overflow.repro import Reproduction, ReproductionTests


class RejectionRandomSampleKernelRejectionSampler827(Reproduction):
    root = '.'  # set $TRITON_OVERFLOW_ENGINE_ROOT to a vLLM checkout at 425c4eaf
    source = 'vllm/v1/sample/rejection_sampler.py'
    kernel = 'rejection_random_sample_kernel'
    line = 827
    product = '(start_idx + pos) * vocab_size'
    huge = 'target_probs_ptr'
    rows_from = 'load:cu_num_draft_tokens_ptr'
    stride = 'vocab_size'
    fix = {'line': 827,
           'replace': '(start_idx + pos) * vocab_size',
           'with': 'tl.cast(start_idx + pos, tl.int64) * vocab_size'}
    also_fix = [{'line': 823,
                 'replace': '(start_idx + pos) * vocab_size',
                 'with': 'tl.cast(start_idx + pos, tl.int64) * vocab_size'}]
    seconds = {'interpreter': 1.6, 'gpu': 12.4}
    launch_description = {'kernel': 'vllm/v1/sample/rejection_sampler.py:rejection_random_sample_kernel',
                          'rows': 2,
                          'slots': 4,
                          'grid': ['rows'],
                          'arguments': {'output_token_ids_ptr': {'shape': ['rows', 16],
                                                                 'dtype': 'int32',
                                                                 'fill': -1},
                                        'cu_num_draft_tokens_ptr': {'shape': ['rows'],
                                                                    'dtype': 'int32',
                                                                    'values': ['slot', 'slot + 1']},
                                        'draft_token_ids_ptr': {'shape': ['slots'], 'dtype': 'int32', 'fill': 7},
                                        'draft_probs_ptr': None,
                                        'target_probs_ptr': {'shape': ['slots', 151936], 'dtype': 'float32'},
                                        'bonus_token_ids_ptr': {'shape': ['rows'], 'dtype': 'int32', 'fill': 11},
                                        'recovered_token_ids_ptr': {'shape': ['slots'],
                                                                    'dtype': 'int32',
                                                                    'fill': 13},
                                        'uniform_probs_ptr': {'shape': ['slots'],
                                                              'dtype': 'float64',
                                                              'fill': 0.5},
                                        'is_greedy_ptr': {'shape': ['rows'], 'dtype': 'bool', 'values': [1, 0]},
                                        'max_spec_len': 15,
                                        'vocab_size': 151936,
                                        'synthetic_conditional_rates_ptr': None,
                                        'NO_DRAFT_PROBS': True,
                                        'SYNTHETIC_MODE': False}}


AS_SHIPPED = RejectionRandomSampleKernelRejectionSampler827()
WIDENED = RejectionRandomSampleKernelRejectionSampler827(widened=True)


class TestRejectionRandomSampleKernelRejectionSampler827(ReproductionTests):
    reproductions = [AS_SHIPPED, WIDENED]
