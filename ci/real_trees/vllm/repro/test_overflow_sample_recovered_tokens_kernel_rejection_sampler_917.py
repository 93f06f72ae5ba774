"""An i32 offset overflow in `sample_recovered_tokens_kernel` (vllm/v1/sample/rejection_sampler.py:917):
`token_idx * vocab_size`.

Written by `triton-overflow repro`. Run it with `python -m pytest test_overflow_sample_recovered_tokens_kernel_rejection_sampler_917.py` where the
suite is installed (pip install triton-overflow-suite): on a CPU the interpreter tests run,
on a CUDA GPU the GPU tests too. The kernel is the engine's own, loaded from its source;
the tensor `target_probs_ptr` is taken past 2**31 elements with its highest rows planted as
copies of row 0 (the skip reasons state the memory). The tests of the kernel as shipped fail while
the product wraps, naming the line; the tests of the kernel with the fix pass.
"""

from triton_overflow.repro import Reproduction, ReproductionTests


class SampleRecoveredTokensKernelRejectionSampler917(Reproduction):
    root = '.'  # set $TRITON_OVERFLOW_ENGINE_ROOT to a vLLM checkout at 425c4eaf
    source = 'vllm/v1/sample/rejection_sampler.py'
    kernel = 'sample_recovered_tokens_kernel'
    line = 917
    product = 'token_idx * vocab_size'
    huge = 'target_probs_ptr'
    rows_from = 'load:cu_num_draft_tokens_ptr'
    stride = 'vocab_size'
    fix = {'line': 917,
           'replace': 'token_idx * vocab_size',
           'with': 'tl.cast(token_idx, tl.int64) * vocab_size'}
    also_fix = [{'line': 923,
                 'replace': 'token_idx * vocab_size',
                 'with': 'tl.cast(token_idx, tl.int64) * vocab_size'},
                {'line': 928,
                 'replace': 'token_idx * vocab_size',
                 'with': 'tl.cast(token_idx, tl.int64) * vocab_size'}]
    seconds = {'interpreter': 2.0, 'gpu': 13.7}
    launch_description = {'kernel': 'vllm/v1/sample/rejection_sampler.py:sample_recovered_tokens_kernel',
                          'rows': 2,
                          'slots': 4,
                          'grid': ['rows', 2],
                          'arguments': {'output_token_ids_ptr': {'shape': ['slots'],
                                                                 'dtype': 'int32',
                                                                 'fill': -1},
                                        'cu_num_draft_tokens_ptr': {'shape': ['rows'],
                                                                    'dtype': 'int32',
                                                                    'values': ['slot', 'slot + 1']},
                                        'draft_token_ids_ptr': {'shape': ['slots'], 'dtype': 'int32', 'fill': 7},
                                        'draft_probs_ptr': None,
                                        'target_probs_ptr': {'shape': ['slots', 151936], 'dtype': 'float32'},
                                        'inv_q_ptr': {'shape': ['rows', 151936], 'dtype': 'float32'},
                                        'vocab_size': 151936,
                                        'BLOCK_SIZE': 8192,
                                        'NO_DRAFT_PROBS': True,
                                        'USE_FP64_GUMBEL': False}}


AS_SHIPPED = SampleRecoveredTokensKernelRejectionSampler917()
WIDENED = SampleRecoveredTokensKernelRejectionSampler917(widened=True)


class TestSampleRecoveredTokensKernelRejectionSampler917(ReproductionTests):
    reproductions = [AS_SHIPPED, WIDENED]
