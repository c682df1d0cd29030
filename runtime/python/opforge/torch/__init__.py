"""opforge for PyTorch: torch.optim-compatible optimizers whose update runs in opforge
kernels (opforge.torch.optim)."""
