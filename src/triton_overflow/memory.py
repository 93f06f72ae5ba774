"""Where huge tensors come from, and whether this machine has room for one.

A case never allocates its huge tensor itself: ``runner`` asks a backend for it.

* ``lazy-host`` (``LazyHostMemory``): a CPU tensor whose pages the OS maps only when touched,
  so a 17 GiB tensor of which a case touches a few rows costs a few MiB (for the interpreter);
* ``dense-device`` (``DenseDeviceMemory``): a plain CUDA allocation, gated on free memory.

Each backend has ``name``, ``device``, ``fills_background`` (whether ``runner`` should fill
every unplanted row with random data), ``shortfall(nbytes, case)`` (None, or why it cannot
run), ``reserve(layout, dtype, rows)`` (a context manager giving the tensor, released after)
and ``peak_bytes()``.
"""

import contextlib
import gc
from pathlib import Path

import torch

GIB = 2**30


def gib(nbytes):
    return f"{nbytes / GIB:.1f} GiB"


def tensor_bytes(shape, dtype):
    count = 1
    for size in shape:
        count *= size
    return count * torch.empty((), dtype=dtype).element_size()


class LazyHostMemory:
    name = "lazy host memory"
    device = torch.device("cpu")
    fills_background = False

    def shortfall(self, nbytes, case=None):
        """None when ``nbytes`` of address space can be reserved, else why not."""
        mode = _read_int("/proc/sys/vm/overcommit_memory")
        if mode == 2:
            return ("needs memory overcommit (vm.overcommit_memory is 2, so the kernel would "
                    f"commit all {gib(nbytes)} up front)")
        return None

    @contextlib.contextmanager
    def reserve(self, layout, dtype, rows):
        yield torch.empty(layout.shape, dtype=dtype)

    def peak_bytes(self):
        return 0


class DenseDeviceMemory:
    name = "dense device memory"
    fills_background = True

    def __init__(self, index=None):
        self.device = torch.device("cuda", torch.cuda.current_device() if index is None else index) \
            if torch.cuda.is_available() else torch.device("cuda")

    def shortfall(self, nbytes, case=None):
        if not torch.cuda.is_available():
            return "needs a CUDA device (none visible)"
        gc.collect()
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info(self.device)
        if free < nbytes:
            return (f"needs {gib(nbytes)}, {gib(free)} free on "
                    f"{torch.cuda.get_device_name(self.device)}")
        return None

    @contextlib.contextmanager
    def reserve(self, layout, dtype, rows):
        tensor = torch.empty(layout.shape, dtype=dtype, device=self.device)
        try:
            yield tensor
        finally:
            del tensor
            torch.cuda.empty_cache()

    def peak_bytes(self):
        return torch.cuda.max_memory_allocated(self.device)


BACKENDS = {
    "lazy-host": LazyHostMemory,
    "dense-device": DenseDeviceMemory,
}


def allocator(backend):
    try:
        return BACKENDS[backend]()
    except KeyError:
        raise ValueError(f"unknown memory backend {backend!r}; known: {', '.join(BACKENDS)}") \
            from None


def free_device_memory():
    """(free, total) bytes of the current CUDA device, or None without one."""
    if not torch.cuda.is_available():
        return None
    gc.collect()
    torch.cuda.empty_cache()
    return torch.cuda.mem_get_info()


def _read_int(path):
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
