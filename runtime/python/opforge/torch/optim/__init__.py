"""torch.optim.Optimizer subclasses updating fp32 CPU parameters with opforge kernels: one
kernel call per parameter group per step over flat buffers (fused=True, the default), or one
call per parameter (fused=False). Constructor arguments, defaults, update formulas and
state_dict keys follow torch.optim (1.13), so checkpoints load both ways."""

from .adam import Adam, adam
from .adamw import AdamW
from .sgd import SGD, sgd

__all__ = ["Adam", "AdamW", "SGD", "adam", "sgd"]
