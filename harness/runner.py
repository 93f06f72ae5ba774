"""Drive one huge case: obtain memory, plant rows, launch, compare.

A case (any object with the attributes below) describes rows, never memory:

* ``name``, ``module`` (dotted kernel module), ``vocab`` and ``dtype`` of the huge tensor's
  rows (the logits, or a per-request table such as draft logits, one row per slot), and
  optionally ``random_row(generator, width)`` for its planted data (default: normal floats);
* ``programs(layout)``: the axis-0 program ids that touch the planted rows (the interpreter runs
  only these);
* ``prepare(logits, layout)``: build the side inputs (ids, k, p, ...) on the tensor's device;
* ``launch(module, logits, inputs, layout, interpreted)``: call the module's launcher and
  return what it produced;
* ``check(produced, logits, inputs, layout, planted)``: raise on a wrong row, comparing the
  checked rows with row 0 and with the reference on that row alone, and the poison rows and
  row 0 with the reference on their own data.

``run_case`` is what a child process runs (``harness.isolation``); it returns a JSON summary.
"""

import importlib
import time

import torch

from harness import memory
from harness.huge import huge_layout
from harness.interp import (int32_wrap_checked, interpreter_active, only_programs,
                            unwrap_interpreter_error)
from harness.twin import load_twin

BACKENDS = {
    "lazy-host": memory.LazyHostMemory,
    "dense-device": memory.DenseDeviceMemory,
}
PLANT_SEED = 20260
POISON_SEED = 7919


def resolve(dotted):
    module_name, _, attribute = dotted.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def layout_for(case, mode):
    return huge_layout(mode, case.vocab)


def bytes_needed(case, mode):
    """The logits plus the case's side inputs, with 1 GiB to spare for the launch itself."""
    layout = layout_for(case, mode)
    extra = case.extra_bytes(layout) if hasattr(case, "extra_bytes") else 0
    return memory.tensor_bytes((layout.elements, ), case.dtype) + extra + memory.GIB


def run_case(case, mode, backend, twin=False, wrap_check=False):
    """Run ``case`` ("module:attribute") in ``mode`` on ``backend``; raise on a wrong row."""
    started = time.monotonic()
    case = resolve(case)
    layout = layout_for(case, mode)
    allocator = BACKENDS[backend]()
    shortfall = allocator.shortfall(bytes_needed(case, mode))
    if shortfall:
        return {"skipped": shortfall}
    module = importlib.import_module(case.module)
    if twin:
        module = load_twin(module)
    interpreted = interpreter_active()
    if interpreted != (allocator.device.type == "cpu"):
        raise RuntimeError(f"{backend} needs TRITON_INTERPRET={'1' if allocator.device.type == 'cpu' else '0'}")
    logits = allocator.empty(layout.shape, case.dtype)
    planted = plant(logits, layout, fill_background=not interpreted,
                    random_row=getattr(case, "random_row", _normal_row))
    inputs = case.prepare(logits, layout)
    with _maybe(interpreted, lambda: only_programs(case.programs(layout))), \
            _maybe(wrap_check, int32_wrap_checked):
        try:
            produced = case.launch(module, logits, inputs, layout, interpreted)
        except Exception as error:
            raise unwrap_interpreter_error(error) from None
    if logits.is_cuda:
        torch.cuda.synchronize()
    case.check(produced, logits, inputs, layout, planted)
    peak = torch.cuda.max_memory_allocated() if logits.is_cuda else 0
    return {"layout": layout.describe(), "seconds": round(time.monotonic() - started, 2),
            "peak_gib": round(peak / memory.GIB, 2)}


def plant(huge, layout, fill_background, random_row):
    """Row 0 random, the checked rows copies of it, the poison rows other data; CPU copies back.

    On a device every other row is filled with random data too, so that a read from any wrong
    row shows; lazy host memory leaves them untouched (zero pages cost nothing).
    """
    device = huge.device
    width = layout.vocab
    if fill_background:
        background = torch.Generator(device).manual_seed(PLANT_SEED + 1)
        chunk = max(1, 2**28 // width)
        for start in range(0, layout.rows, chunk):
            rows = min(chunk, layout.rows - start)
            huge[start:start + rows] = random_row(background, rows * width).view(rows, width)
    huge[0] = random_row(torch.Generator().manual_seed(PLANT_SEED), width).to(device)
    for row in layout.check_rows:
        huge[row] = huge[0]
    poison = torch.Generator().manual_seed(POISON_SEED)
    for row in layout.poison_rows:
        huge[row] = (random_row(poison, width) * 3 if huge.is_floating_point()
                     else random_row(poison, width) + 1).to(device)
    rows = (0, ) + layout.poison_rows + layout.check_rows
    return {row: huge[row].cpu().clone() for row in rows}


def _normal_row(generator, width):
    return torch.randn(width, generator=generator, device=generator.device)


class _maybe:
    def __init__(self, enabled, factory):
        self.context = factory() if enabled else None

    def __enter__(self):
        return self.context.__enter__() if self.context else None

    def __exit__(self, *exc):
        return self.context.__exit__(*exc) if self.context else False
