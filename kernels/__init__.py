"""int64-safe Triton sampling kernels; each module pairs with ``reference/<same name>.py``."""
