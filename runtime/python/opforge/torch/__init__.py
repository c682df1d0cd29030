"""opforge for PyTorch: torch.optim-compatible optimizers whose update runs in opforge
kernels (opforge.torch.optim), clip_grad_norm_ and a CPU GradScaler on opforge kernels, and
torch.nn modules on opforge NN kernels (opforge.torch.nn) with patch(model) to swap them in."""

from .clip_grad import clip_grad_norm_
from .grad_scaler import GradScaler
from .nn import patch

__all__ = ["GradScaler", "clip_grad_norm_", "patch"]
