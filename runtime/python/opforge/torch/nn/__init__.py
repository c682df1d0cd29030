"""opforge.torch.nn: torch.nn modules (and their functional forms) whose forward runs opforge NN
kernels on fp32 CPU tensors (bf16 too for the memory-bound ops), for inference, and
patch(model) to swap them into a model."""

from . import functional
from .functional import GradientsNotSupported
from .modules import (GELU, Conv2d, GroupNorm, LayerNorm, Linear, MultiheadAttention, RMSNorm,
                      SiLU, Softmax)
from .patch import PatchReport, patch

__all__ = ["Conv2d", "GELU", "GradientsNotSupported", "GroupNorm", "LayerNorm", "Linear",
           "MultiheadAttention", "PatchReport", "RMSNorm", "SiLU", "Softmax", "functional",
           "patch"]
