"""An i32 offset overflow in `_apply_grammar_bitmask_kernel` (vllm/v1/worker/gpu/structured_outputs.py:112):
`logits_idx * logits_stride`.

Written by `triton-overflow repro`. Run it with `python -m pytest test_overflow_apply_grammar_bitmask_kernel_structured_outputs_112.py` where the
suite is installed (pip install triton-overflow-suite): on a CPU the interpreter tests run,
on a CUDA GPU the GPU tests too. The kernel is the engine's own, loaded from its source;
the tensor `logits_ptr` is taken past 2**31 elements with its highest rows planted as
copies of row 0 (the skip reasons state the memory). The tests of the kernel as shipped fail while
the product wraps, naming the line; the tests of the kernel with the fix pass.
"""

from triton_overflow.repro import Reproduction, ReproductionTests


class ApplyGrammarBitmaskKernelStructuredOutputs112(Reproduction):
    root = '.'  # set $TRITON_OVERFLOW_ENGINE_ROOT to a vLLM checkout at 425c4eaf
    source = 'vllm/v1/worker/gpu/structured_outputs.py'
    kernel = '_apply_grammar_bitmask_kernel'
    line = 112
    product = 'logits_idx * logits_stride'
    huge = 'logits_ptr'
    rows_from = 'load:logits_indices_ptr'
    stride = 'logits_stride'
    fix = {'line': 96,
           'replace': 'logits_idx = tl.load(logits_indices_ptr + bitmask_idx)',
           'with': 'logits_idx = tl.load(logits_indices_ptr + bitmask_idx).to(tl.int64)'}
    seconds = {'interpreter': 1.8, 'gpu': 13.9}
    launch_description = {'kernel': 'vllm/v1/worker/gpu/structured_outputs.py:_apply_grammar_bitmask_kernel',
                          'rows': 1,
                          'slots': 4,
                          'grid': ['rows', 19],
                          'arguments': {'logits_ptr': {'shape': ['slots', 151936], 'dtype': 'float32'},
                                        'logits_stride': 151936,
                                        'logits_indices_ptr': {'shape': ['rows'], 'dtype': 'int32'},
                                        'bitmask_ptr': {'shape': ['rows', 4748], 'dtype': 'int32'},
                                        'bitmask_stride': 4748,
                                        'vocab_size': 151936,
                                        'BLOCK_SIZE': 8192}}


AS_SHIPPED = ApplyGrammarBitmaskKernelStructuredOutputs112()
WIDENED = ApplyGrammarBitmaskKernelStructuredOutputs112(widened=True)


class TestApplyGrammarBitmaskKernelStructuredOutputs112(ReproductionTests):
    reproductions = [AS_SHIPPED, WIDENED]
