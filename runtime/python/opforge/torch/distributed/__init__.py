"""Data-parallel training over torch.distributed with opforge kernels: ZeroOptimizer (ZeRO
stage 1/2: optimizer states and the step sharded over the ranks, gradients optionally sent
compressed) and the compression kernels it uses (`compress`)."""

from ._comm import DistributedStepError
from .zero import OPTIMIZERS, ZeroOptimizer

__all__ = ["DistributedStepError", "OPTIMIZERS", "ZeroOptimizer"]
