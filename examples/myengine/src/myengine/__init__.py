"""A small engine's sampling kernels, written the way engines write them."""
