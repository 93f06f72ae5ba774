"""What this run ran on: device, free memory, versions. Shared by the pytest header and reports."""

import os
import platform


def describe():
    import hypothesis
    import torch
    import triton

    if torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        device = (f"{torch.cuda.get_device_name()} ({free / 2**30:.1f} GiB free of "
                  f"{total / 2**30:.1f} GiB)")
    else:
        device = "none (kernels run in Triton's CPU interpreter)"
    return {
        "GPU": device,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "hypothesis": hypothesis.__version__,
        "python": platform.python_version(),
        "kernels": ("interpreter" if os.environ.get("TRITON_INTERPRET") == "1"
                    or not torch.cuda.is_available() else "native"),
    }
