"""What this run ran on: device, free memory, versions. Shared by the pytest header and reports."""

import platform

from triton_overflow import mode


def describe():
    import hypothesis
    import torch
    import triton

    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        free, total = torch.cuda.mem_get_info()
        device = (f"{torch.cuda.get_device_name()} ({free / 2**30:.1f} GiB free of "
                  f"{total / 2**30:.1f} GiB)" + (f", {count} devices" if count > 1 else ""))
    else:
        device = "none (kernels run in Triton's CPU interpreter)"
    return {
        "GPU": device,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "hypothesis": hypothesis.__version__,
        "python": platform.python_version(),
        "kernels": "interpreter" if mode.interpreted() else "native",
    }
