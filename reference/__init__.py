"""Plain PyTorch references, float64, one obvious loop per row; same names as ``kernels/``."""
