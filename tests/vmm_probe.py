"""Checks of the virtual-memory backend that the GPU self-tests run in child processes."""

import torch
import triton
import triton.language as tl

from triton_overflow.engine.huge import HugeLayout, huge_layout
from triton_overflow.engine.memory import GRANULE, SHARED_BLOCK, AliasedDeviceMemory


@triton.jit
def _read_before_kernel(x_ptr, out_ptr, back):
    # An offset that starts in the guard below the tensor (back elements before it).
    tl.store(out_ptr, tl.load(x_ptr - back))


def _own_device_bytes():
    """Device memory this process uses, from NVML (other processes share the device), or None."""
    try:
        import pynvml
    except ImportError:
        return None
    import os
    pynvml.nvmlInit()
    try:
        index = int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0])
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if process.pid == os.getpid():
                return process.usedGpuMemory
        return None
    finally:
        pynvml.nvmlShutdown()


def leak_cycles(cycles):
    """This process's device memory before and after ``cycles`` reserve/release rounds (from
    NVML; without it the device's free memory, which other processes move too)."""
    layout = HugeLayout("negative", rows=64, vocab=2**17, row_stride=2**17, check_rows=(63, ),
                        poison_rows=())
    backend = AliasedDeviceMemory()
    torch.cuda.init()
    with backend.reserve(layout, torch.float32, (0, 63)) as tensor:
        tensor[0].fill_(1.0)  # warm up: the first round creates the context's own pools
    torch.cuda.synchronize()

    def used():
        own = _own_device_bytes()
        return ("this process (NVML)", own) if own is not None else \
            ("the device", -torch.cuda.mem_get_info()[0])

    source, before = used()
    for index in range(cycles):
        with backend.reserve(layout, torch.float32, (0, 63)) as tensor:
            tensor[63].fill_(float(index))
    torch.cuda.synchronize()
    return {"lost": used()[1] - before, "measured on": source, "cycles": cycles}


def aliasing():
    """Unplanted rows share memory, one chunk near a planted row and one block away from them;
    planted rows have their own; the background views are that shared memory."""
    layout = huge_layout("negative", 2**17)
    planted = (0, ) + layout.check_rows
    backend = AliasedDeviceMemory()
    rows_per_chunk = GRANULE // (2**17 * 4)  # four 512 KiB rows fill a 2 MiB chunk
    with backend.reserve(layout, torch.float32, planted) as tensor:
        # Row 0's chunk (rows 0-3) is its own, so rows 4-63 of the first block lie on the
        # one shared chunk.
        tensor[5].fill_(1.0)
        chunk_seen = float(tensor[5 + rows_per_chunk, 3])
        # No planted row lies near row 9001: its block is mapped whole, again one block on.
        tensor[9001].fill_(4.0)
        block_seen = float(tensor[9001 + rows_per_chunk * SHARED_BLOCK, 3])
        apart = float(tensor[5, 3]) != float(tensor[9001, 3])
        tensor[0].fill_(2.0)
        for row in layout.check_rows:
            tensor[row].fill_(float(row))
        planted_seen = [float(tensor[row, 7]) for row in planted]
        for region in backend.background():
            region.fill_(3.0)
        background_seen = [float(tensor[row, 11]) for row in (5, 777)]
        peak = backend.peak_bytes()
    return {"chunk": chunk_seen, "block": block_seen, "apart": apart, "planted": planted_seen,
            "background": background_seen,
            "peak_mib": peak / 2**20, "elements": layout.elements}


def guard_fault():
    """A read 2**30 elements before the tensor lands in the unmapped guard: a device fault."""
    layout = huge_layout("negative", 2**17)
    backend = AliasedDeviceMemory()
    out = torch.zeros(1, device="cuda")
    with backend.reserve(layout, torch.float32, (0, )) as tensor:
        _read_before_kernel[(1, )](tensor, out, 2**30)
        torch.cuda.synchronize()
    return float(out)


def sparse_rows(cycles):
    """A second large tensor inside a huge one's reservation: zeros, its listed rows its own,
    the rest sharing; released with the huge tensor, ``cycles`` times over without a leak."""
    huge = HugeLayout("negative", rows=64, vocab=2**17, row_stride=2**17, check_rows=(63, ),
                      poison_rows=())
    second = HugeLayout("sparse", rows=2**18, vocab=2**12, row_stride=2**12, check_rows=(),
                        poison_rows=())  # 4 GiB of fp32
    last = second.rows - 1
    backend = AliasedDeviceMemory()
    torch.cuda.init()
    with backend.reserve(huge, torch.float32, (0, 63)):
        tensor = backend.sparse(second, torch.float32, (0, last))
        zeros = [float(tensor[row].abs().sum()) for row in (0, 1000, last)]
        tensor[0].fill_(7.0)
        tensor[last].fill_(5.0)
        rows_per_block = SHARED_BLOCK * GRANULE // (second.vocab * 4)
        tensor[100_000].fill_(3.0)  # far from the planted rows: blocks mapped whole
        seen = {"own": [float(tensor[0, 9]), float(tensor[last, 9])],
                "shared": float(tensor[100_000 + rows_per_block, 9])}
        peak = backend.peak_bytes()
    torch.cuda.synchronize()
    before = _own_device_bytes()
    for _ in range(cycles):
        with backend.reserve(huge, torch.float32, (0, 63)):
            backend.sparse(second, torch.float32, (0, last))[last].fill_(1.0)
    torch.cuda.synchronize()
    after = _own_device_bytes()
    return {"zeros": zeros, **seen, "peak_mib": peak / 2**20,
            "lost": None if before is None else after - before}
