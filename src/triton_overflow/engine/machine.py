"""What this run ran on: device, free memory, versions. Shared by the pytest header and reports."""

import platform

from triton_overflow.engine import devices
from triton_overflow.interp import execution_mode


def describe():
    """Facts of this run; the GPUs as the run's budget measured them (no CUDA context here)."""
    import hypothesis
    import torch
    import triton

    gpus = devices.described() or [(str(i), *found) for i, found in enumerate(devices.survey())]
    if gpus:
        device = "; ".join(f"{gid}: {name} ({free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB)"
                           for gid, name, free, total in gpus)
    else:
        device = "none (kernels run in Triton's CPU interpreter)"
    return {
        "GPU": device,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "hypothesis": hypothesis.__version__,
        "python": platform.python_version(),
        "kernels": "interpreter" if execution_mode.interpreted() or not gpus else "native",
        "torch_cuda": torch.version.cuda or "none",
    }
