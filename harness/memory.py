"""Where huge tensors come from, and whether this machine has room for one.

A case asks an allocator for a tensor; it never allocates by itself. Two backends exist:

* ``LazyHostMemory``: CPU tensors whose pages the OS maps only when touched, so a 17 GiB tensor
  of which a case touches a few rows costs a few MiB (for Triton's interpreter);
* ``DenseDeviceMemory``: plain CUDA allocations, gated on free memory after ``gc.collect()``
  and ``empty_cache()``.

A backend that maps physical pages only under the rows a case touches can be added beside them:
it needs ``name``, ``device``, ``shortfall(nbytes)`` and ``empty(shape, dtype)``.
"""

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

    def shortfall(self, nbytes):
        """None when ``nbytes`` of address space can be reserved, else why not."""
        mode = _read_int("/proc/sys/vm/overcommit_memory")
        if mode == 2:
            return ("needs memory overcommit (vm.overcommit_memory is 2, so the kernel would "
                    f"commit all {gib(nbytes)} up front)")
        return None

    def empty(self, shape, dtype):
        return torch.empty(shape, dtype=dtype)


class DenseDeviceMemory:
    name = "dense device memory"

    def __init__(self, index=0):
        self.device = torch.device("cuda", index)

    def shortfall(self, nbytes):
        if not torch.cuda.is_available():
            return "needs a CUDA device (none visible)"
        gc.collect()
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info(self.device)
        if free < nbytes:
            return f"needs {gib(nbytes)}, {gib(free)} free on {torch.cuda.get_device_name(self.device)}"
        return None

    def empty(self, shape, dtype):
        return torch.empty(shape, dtype=dtype, device=self.device)


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
