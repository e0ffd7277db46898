"""Fast planners (Numba kernels), each a registered plugin object."""
