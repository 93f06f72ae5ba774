"""An i32 offset overflow in `_num_nans_kernel` (vllm/v1/worker/gpu/metrics/logits.py:23):
`req_idx * logits_stride`.

Written by `triton-overflow repro`. Run it with `python -m pytest test_overflow_num_nans_kernel_logits_23.py` where the
suite is installed (pip install triton-overflow-suite): on a CPU the interpreter tests run,
on a CUDA GPU the GPU tests too. The kernel is the engine's own, loaded from its source;
the tensor `logits_ptr` is taken past 2**31 elements with its highest rows planted as
copies of row 0 (the skip reasons state the memory). The tests of the kernel as shipped fail while
the product wraps, naming the line; the tests of the kernel with the fix pass.
"""

from triton_overflow.repro import Reproduction, ReproductionTests


class NumNansKernelLogits23(Reproduction):
    root = '.'  # set $TRITON_OVERFLOW_ENGINE_ROOT to a vLLM checkout at 425c4eaf
    source = 'vllm/v1/worker/gpu/metrics/logits.py'
    kernel = '_num_nans_kernel'
    line = 23
    product = 'req_idx * logits_stride'
    nan_fraction = 0.01  # the kernel counts NaNs: planted rows need some
    huge = 'logits_ptr'
    rows_from = 'program_id(0)'
    stride = 'logits_stride'
    fix = {'line': 17,
           'replace': 'req_idx = tl.program_id(0)',
           'with': 'req_idx = tl.program_id(0).to(tl.int64)'}
    seconds = {'interpreter': 2.3, 'gpu': 9.9}
    launch_description = {'kernel': 'vllm/v1/worker/gpu/metrics/logits.py:_num_nans_kernel',
                          'rows': 4,
                          'grid': ['rows'],
                          'arguments': {'logits_ptr': {'shape': ['rows', 151936], 'dtype': 'float32'},
                                        'logits_stride': 151936,
                                        'num_nans_ptr': {'shape': ['rows'], 'dtype': 'int32'},
                                        'vocab_size': 151936,
                                        'BLOCK_SIZE': 8192}}


AS_SHIPPED = NumNansKernelLogits23()
WIDENED = NumNansKernelLogits23(widened=True)


class TestNumNansKernelLogits23(ReproductionTests):
    reproductions = [AS_SHIPPED, WIDENED]
