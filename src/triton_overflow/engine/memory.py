"""Where huge tensors come from, and whether this machine has room for one.

A case never allocates its huge tensor itself: ``runner`` asks a backend for it.

* ``lazy-host`` (``LazyHostMemory``): a CPU tensor whose pages the OS maps only when touched,
  so a 17 GiB tensor of which a case touches a few rows costs a few MiB (for the interpreter);
* ``aliased-device`` (``AliasedDeviceMemory``): CUDA virtual memory. The tensor's whole range is
  reserved; the planted rows get pages of their own, and every other row lies on shared memory
  (one block of ``SHARED_BLOCK`` chunks mapped again and again, one chunk where a planted row
  breaks a block), so every program of the full grid runs on valid addresses while the tensor
  costs a few tens of MiB. 2**31 elements below the tensor stay reserved and unmapped, so a
  wrapped negative offset always faults instead of landing in some other live allocation;
* ``dense-device`` (``DenseDeviceMemory``): a plain CUDA allocation (9-18 GiB), gated on free
  memory.

Each backend is a ``MemoryBackend``: what it is called, where its cases run, what it needs and
how the report labels its cells are its own class attributes, so a new backend is one class
here, which registers itself in ``BACKENDS`` as it is defined.
"""

import abc
import contextlib
import gc
from pathlib import Path
from typing import ClassVar

import torch

from triton_overflow.interp.execution_mode import DEVICE, INTERPRETER

GIB = 2**30


def gib(nbytes):
    return f"{nbytes / GIB:.1f} GiB"


# Every backend, by key, in the order of the report's columns: each class registers itself.
BACKENDS: "dict[str, type[MemoryBackend]]" = {}


class MemoryBackend(abc.ABC):
    """Where a huge case's tensor comes from. Defining a subclass with a ``key`` registers it:
    its huge-case tests, its column of the report (``detector``) and the marks of its tier
    follow from its declarations."""

    key: ClassVar[str]  # how tests and child processes name it: "aliased-device"
    name: ClassVar[str]  # how messages name it
    execution: ClassVar[str]  # where its cases run: execution_mode.INTERPRETER or .DEVICE
    detector: ClassVar[str]  # its column of the kernel x detector report
    spare_bytes: ClassVar[int]  # room beyond the tensor and the case's inputs, for the launch
    fills_background: ClassVar[bool]  # whether runner fills every unplanted row with data
    opt_in: ClassVar[str | None] = None  # the pytest option without which its tests are left out
    mutant_tests: ClassVar[bool] = False  # whether the per-widening mutants run on it
    device: torch.device

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "key" in vars(cls):
            BACKENDS[cls.key] = cls

    @staticmethod
    @abc.abstractmethod
    def estimate(layout, dtype, rows) -> int:
        """Bytes the tensor with these planted rows takes, known without a device."""

    @abc.abstractmethod
    def shortfall(self, nbytes: int, case: str | None = None) -> str | None:
        """None when ``nbytes`` fit, else why the case cannot run here."""

    @abc.abstractmethod
    def reserve(self, layout, dtype, rows):
        """A context manager giving the huge tensor, released after."""

    def background(self) -> "tuple[torch.Tensor, ...]":
        """Tensors over the memory the unplanted rows share (none where they share none)."""
        return ()

    sparse_rows: ClassVar[bool] = False  # whether ``sparse`` can make a second large tensor

    def sparse(self, layout, dtype, rows) -> torch.Tensor:
        """Inside ``reserve``: another tensor of ``layout``, zeros, whose ``rows`` have memory of
        their own and whose other rows share a little (a second input as large as the huge
        tensor), released with the huge tensor. Only where ``sparse_rows``."""
        raise NotImplementedError(f"{self.name} cannot make a sparse tensor")

    @abc.abstractmethod
    def peak_bytes(self) -> int:
        """The most bytes the case held at once."""


class LazyHostMemory(MemoryBackend):
    key = "lazy-host"
    name = "lazy host memory"
    execution = INTERPRETER
    detector = "interpreter huge"
    spare_bytes = GIB
    fills_background = False
    mutant_tests = True
    device = torch.device("cpu")

    @staticmethod
    def estimate(layout, dtype, rows):
        return layout.elements * dtype.itemsize

    def shortfall(self, nbytes, case=None):
        """None when ``nbytes`` of address space can be reserved, else why not."""
        mode = _read_int("/proc/sys/vm/overcommit_memory")
        if mode == 2:
            return ("needs memory overcommit (vm.overcommit_memory is 2, so the kernel would "
                    f"commit all {gib(nbytes)} up front)")
        return None

    @contextlib.contextmanager
    def reserve(self, layout, dtype, rows):
        yield _with_row_stride(torch.empty(layout.elements, dtype=dtype), layout)

    def peak_bytes(self):
        return 0


class VirtualMemoryError(RuntimeError):
    def __init__(self, call, code):
        from cuda.bindings import driver
        _, name = driver.cuGetErrorName(code)
        self.out_of_memory = code == driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY
        super().__init__(f"{call} failed: {name.decode() if isinstance(name, bytes) else name}")


def _call(name, *args):
    from cuda.bindings import driver
    result = getattr(driver, name)(*args)
    code, values = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
    if code != driver.CUresult.CUDA_SUCCESS:
        raise VirtualMemoryError(name, code)
    return values[0] if len(values) == 1 else values


class AliasedDeviceMemory(MemoryBackend):
    """CUDA virtual memory through NVIDIA's ``cuda-bindings`` (``cuda.bindings.driver``)."""

    key = "aliased-device"
    name = "aliased device memory"
    execution = DEVICE
    detector = "gpu aliased huge"
    spare_bytes = GIB // 4
    fills_background = False
    mutant_tests = True

    sparse_rows = True

    def __init__(self, index=None):
        self.device = torch.device("cuda", torch.cuda.current_device() if index is None else
                                   index) if torch.cuda.is_available() else torch.device("cuda")
        self._mapped = 0
        self._background: tuple[torch.Tensor, ...] = ()
        self._reservations: list[tuple] = []  # (mappings, handles, reservation, size) of each

    @staticmethod
    def estimate(layout, dtype, rows):
        """Physical bytes: the chunks under the planted rows, and the shared chunk and block."""
        chunks = _dedicated_chunks(layout, dtype.itemsize, rows, GRANULE)
        return (len(chunks) + 1 + SHARED_BLOCK) * GRANULE

    def shortfall(self, nbytes, case=None):
        if not torch.cuda.is_available():
            return "needs a CUDA device (none visible)"
        try:
            from cuda.bindings import driver
        except ImportError:
            return "needs NVIDIA's cuda-bindings for virtual memory (pip install cuda-bindings)"
        torch.cuda.init()
        supported = _call("cuDeviceGetAttribute", driver.CUdevice_attribute
                          .CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                          self._cu_device())
        if not supported:
            return f"{torch.cuda.get_device_name(self.device)} has no virtual memory management"
        free, _ = torch.cuda.mem_get_info(self.device)
        if free < nbytes:
            return (f"needs {gib(nbytes)}, {gib(free)} free on "
                    f"{torch.cuda.get_device_name(self.device)}")
        return None

    def _cu_device(self):
        return _call("cuDeviceGet", self.device.index or 0)

    def _properties(self):
        from cuda.bindings import driver
        prop = driver.CUmemAllocationProp()
        prop.type = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = self.device.index or 0
        return prop

    @contextlib.contextmanager
    def reserve(self, layout, dtype, rows):
        torch.cuda.init()
        torch.cuda.set_device(self.device)
        guard = 2**31 * dtype.itemsize  # unmapped below the tensor: a negative offset faults
        self._mapped = 0
        try:
            tensor, self._background = self._map_span(layout, dtype, rows, guard)
            yield tensor
            torch.cuda.synchronize(self.device)
            del tensor
        except BaseException:
            self._release_all(strict=False)
            raise
        self._release_all(strict=True)

    def sparse(self, layout, dtype, rows):
        tensor, _ = self._map_span(layout, dtype, rows, 0)
        return tensor.zero_()  # every row, through the few blocks most of them share

    def _map_span(self, layout, dtype, rows, guard):
        """(tensor, tensors over its shared memory): ``layout`` in virtual memory after
        ``guard`` unmapped bytes, every chunk under ``rows`` its own, the other chunks sharing a
        few physical blocks; released by ``_release_all``."""
        from cuda.bindings import driver
        prop = self._properties()
        granule = _call("cuMemGetAllocationGranularity", prop, driver
                        .CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM)
        itemsize = dtype.itemsize
        span = _round_up(layout.elements * itemsize, granule)
        guard = _round_up(guard, granule)
        dedicated = _dedicated_chunks(layout, itemsize, rows, granule)
        handles: list = []
        mappings: list = []
        reservation = _call("cuMemAddressReserve", guard + span, granule, 0, 0)
        self._reservations.append((mappings, handles, reservation, guard + span))
        base = int(reservation) + guard
        for start, count in _runs(dedicated):
            handles.append(_call("cuMemCreate", count * granule, prop, 0))
            self._map(base + start * granule, count * granule, handles[-1], mappings)
        shared = {}  # chunks per mapping -> (its handle, where it is first mapped)
        for start, count in _shared_pieces(span // granule, dedicated, SHARED_BLOCK):
            if count not in shared:
                handles.append(_call("cuMemCreate", count * granule, prop, 0))
                shared[count] = (handles[-1], base + start * granule)
            self._map(base + start * granule, count * granule, shared[count][0], mappings)
        access = driver.CUmemAccessDesc()
        access.location = prop.location
        access.flags = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        _call("cuMemSetAccess", driver.CUdeviceptr(base), span, [access], 1)
        self._mapped += (len(dedicated) + sum(shared)) * granule
        background = tuple(_tensor(address, (count * granule // itemsize, ), (itemsize, ), dtype,
                                   self.device) for count, (_, address) in shared.items())
        tensor = _tensor(base, layout.shape, (layout.row_stride * itemsize, itemsize), dtype,
                         self.device)
        return tensor, background

    def _release_all(self, strict):
        self._background = ()
        while self._reservations:
            _release(*self._reservations.pop(), strict=strict)

    def _map(self, address, size, handle, mappings):
        from cuda.bindings import driver
        _call("cuMemMap", driver.CUdeviceptr(address), size, 0, handle, 0)
        mappings.append((address, size))

    def background(self):
        return self._background

    def peak_bytes(self):
        return self._mapped + torch.cuda.max_memory_allocated(self.device)


def _round_up(value, multiple):
    return -(-value // multiple) * multiple


def _dedicated_chunks(layout, itemsize, rows, granule):
    """Chunk indices under every byte of the given rows."""
    chunks = set()
    for row in rows:
        first = row * layout.row_stride * itemsize
        last = first + layout.vocab * itemsize - 1
        chunks.update(range(first // granule, last // granule + 1))
    return chunks


def _shared_pieces(chunks, dedicated, block):
    """(first, count) for each shared mapping of a ``chunks``-chunk range: a whole aligned
    block where no ``dedicated`` chunk lies, else one chunk per chunk not dedicated."""
    pieces = []
    for first in range(0, chunks, block):
        covered = range(first, min(first + block, chunks))
        if len(covered) == block and dedicated.isdisjoint(covered):
            pieces.append((first, block))
        else:
            pieces.extend((chunk, 1) for chunk in covered if chunk not in dedicated)
    return pieces


def _runs(chunks):
    """(first, count) for each run of consecutive chunk indices."""
    runs = []
    for chunk in sorted(chunks):
        if runs and runs[-1][0] + runs[-1][1] == chunk:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((chunk, 1))
    return runs


_TYPESTR = {torch.float32: "<f4", torch.float16: "<f2", torch.float64: "<f8",
            torch.int32: "<i4", torch.int64: "<i8", torch.int16: "<i2", torch.int8: "|i1",
            torch.uint8: "|u1", torch.bfloat16: "<i2"}


class _DeviceArray:
    """A ``__cuda_array_interface__`` over raw device memory, for ``torch.as_tensor``."""

    def __init__(self, address, shape, strides, typestr):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "strides": tuple(strides),
                                         "typestr": typestr, "data": (address, False),
                                         "version": 3}


def _tensor(address, shape, strides, dtype, device):
    if dtype not in _TYPESTR:
        raise ValueError(f"the aliased backend cannot hold {dtype}")
    tensor = torch.as_tensor(_DeviceArray(address, shape, strides, _TYPESTR[dtype]), device=device)
    return tensor.view(torch.bfloat16) if dtype == torch.bfloat16 else tensor


def _release(mappings, handles, reservation, size, strict):
    """Unmap, release and free, in that order. After a device fault the context is gone and the
    process is about to end, so there (``strict`` False) failures are not reported."""
    from cuda.bindings import driver
    calls = [("cuMemUnmap", driver.CUdeviceptr(address), length)
             for address, length in reversed(mappings)]
    calls += [("cuMemRelease", handle) for handle in handles]
    if reservation is not None:
        calls.append(("cuMemAddressFree", reservation, size))
    for name, *args in calls:
        try:
            _call(name, *args)
        except VirtualMemoryError:
            if strict:
                raise


class DenseDeviceMemory(MemoryBackend):
    key = "dense-device"
    name = "dense device memory"
    execution = DEVICE
    detector = "gpu dense huge"
    spare_bytes = GIB
    fills_background = True
    opt_in = "--dense-huge"

    @staticmethod
    def estimate(layout, dtype, rows):
        return layout.elements * dtype.itemsize

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
        tensor = _with_row_stride(torch.empty(layout.elements, dtype=dtype, device=self.device),
                                  layout)
        try:
            yield tensor
        finally:
            del tensor
            torch.cuda.empty_cache()

    def peak_bytes(self):
        return torch.cuda.max_memory_allocated(self.device)


def _with_row_stride(flat, layout):
    """``flat`` (``layout.elements`` long) seen as ``[rows, vocab]`` rows ``row_stride`` apart."""
    return flat.as_strided(layout.shape, (layout.row_stride, 1))


GRANULE = 2**21  # the H100 / H200 mapping granularity; the real one is asked for at run time
# Chunks of shared memory one mapping covers away from the planted rows. CUDA maps a handle
# only whole, and each mapping is a driver call that concurrent processes queue on: a 17 GiB
# tensor is some 8700 one-chunk mappings, or some 550 of a 16-chunk block (32 MiB more).
SHARED_BLOCK = 16


INTERPRETER_BACKEND = LazyHostMemory.key
DEVICE_BACKENDS = tuple(key for key, backend in BACKENDS.items() if backend.execution == DEVICE)
# Where the per-widening mutants run on a GPU.
MUTANT_DEVICE_BACKEND = next(key for key in DEVICE_BACKENDS if BACKENDS[key].mutant_tests)


def allocator(backend: str) -> MemoryBackend:
    try:
        return BACKENDS[backend]()
    except KeyError:
        raise ValueError(f"unknown memory backend {backend!r}; known: {', '.join(BACKENDS)}") \
            from None


def _read_int(path):
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
