"""The GPU a launcher sees while its kernels run in Triton's CPU interpreter.

Engines size persistent grids and tiles from the device: ``torch.cuda.get_device_properties(
device).multi_processor_count``, Triton's ``driver.active.utils.get_device_properties(index)``,
the compute capability. On a CPU machine those calls fail or describe the CPU, so an
interpreted launch would run another grid than on a GPU. ``presented(model)`` answers them, for
the duration of a block, as the named GPU would (an H100 by default), so the launcher computes
the grid and tile sizes it computes on that GPU.
"""

import contextlib
from dataclasses import dataclass
from types import SimpleNamespace

from triton_overflow.interp import runtime


@dataclass(frozen=True)
class GpuModel:
    name: str
    multiprocessors: int
    capability: tuple
    total_memory: int
    l2_cache: int
    shared_memory_per_block: int
    registers_per_multiprocessor: int = 65536
    warp_size: int = 32
    max_threads_per_multiprocessor: int = 2048
    clock_khz: int = 1980000
    memory_clock_khz: int = 2619000
    memory_bus_width: int = 5120

    def torch_properties(self):
        """What ``torch.cuda.get_device_properties`` returns for this GPU."""
        major, minor = self.capability
        return SimpleNamespace(
            name=self.name, major=major, minor=minor, total_memory=self.total_memory,
            multi_processor_count=self.multiprocessors, L2_cache_size=self.l2_cache,
            warp_size=self.warp_size, regs_per_multiprocessor=self.registers_per_multiprocessor,
            max_threads_per_multi_processor=self.max_threads_per_multiprocessor,
            shared_memory_per_block_optin=self.shared_memory_per_block, is_integrated=0,
            gcnArchName="NVIDIA")

    def triton_properties(self):
        """What Triton's ``driver.active.utils.get_device_properties`` returns."""
        return {"max_shared_mem": self.shared_memory_per_block,
                "multiprocessor_count": self.multiprocessors, "max_num_regs":
                self.registers_per_multiprocessor, "warpSize": self.warp_size,
                "sm_clock_rate": self.clock_khz, "mem_clock_rate": self.memory_clock_khz,
                "mem_bus_width": self.memory_bus_width}


GPU_MODELS = {
    "H100": GpuModel("NVIDIA H100 80GB HBM3", 132, (9, 0), 80 * 2**30, 50 * 2**20, 232448),
    "H200": GpuModel("NVIDIA H200", 132, (9, 0), 141 * 2**30, 50 * 2**20, 232448),
    "A100": GpuModel("NVIDIA A100-SXM4-80GB", 108, (8, 0), 80 * 2**30, 40 * 2**20, 166912,
                     clock_khz=1410000, memory_clock_khz=1593000),
    "L4": GpuModel("NVIDIA L4", 58, (8, 9), 24 * 2**30, 48 * 2**20, 101376,
                   max_threads_per_multiprocessor=1536, clock_khz=2040000,
                   memory_clock_khz=6251000, memory_bus_width=192),
}


def gpu_model(name):
    """The ``GpuModel`` called ``name`` (a key of ``GPU_MODELS``)."""
    try:
        return GPU_MODELS[name]
    except KeyError:
        raise ValueError(f"unknown GPU model {name!r}; known: {', '.join(GPU_MODELS)}") from None


class _PresentedDriver:
    """Triton's active driver as far as a launcher asks it about the device."""

    def __init__(self, model):
        self.model = model
        self.utils = SimpleNamespace(get_device_properties=lambda index=0:
                                     model.triton_properties())

    def get_current_device(self):
        return 0

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget
        major, minor = self.model.capability
        return GPUTarget("cuda", major * 10 + minor, self.model.warp_size)

    def get_active_torch_device(self):
        import torch
        return torch.device("cpu")

    def get_device_interface(self):
        import torch
        return torch.cuda

    def is_active(self):
        return True


@contextlib.contextmanager
def presented(name="H100"):
    """Inside the block, device queries answer as the GPU model ``name`` would."""
    import torch
    from triton.runtime import driver
    model = gpu_model(name)
    slot = "_active" if "_active" in vars(driver) else "active"  # "active" before Triton 3.5
    previous = vars(driver)[slot]
    driver.set_active(_PresentedDriver(model))
    try:
        with runtime.patched(torch.cuda,
                             get_device_properties=lambda device=None: model.torch_properties(),
                             get_device_capability=lambda device=None: model.capability,
                             get_device_name=lambda device=None: model.name,
                             current_device=lambda: 0):
            yield model
    finally:
        setattr(driver, slot, previous)
