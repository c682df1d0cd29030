"""opforge.torch.distributed: data-parallel training on torch.distributed with opforge kernels."""
