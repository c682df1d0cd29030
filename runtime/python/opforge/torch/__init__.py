"""opforge for PyTorch: torch.optim-compatible optimizers whose update runs in opforge
kernels (opforge.torch.optim), clip_grad_norm_ and a CPU GradScaler on opforge kernels."""

from .clip_grad import clip_grad_norm_
from .grad_scaler import GradScaler

__all__ = ["GradScaler", "clip_grad_norm_"]
