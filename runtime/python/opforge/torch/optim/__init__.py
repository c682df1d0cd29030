"""torch.optim.Optimizer subclasses updating fp32 CPU parameters with opforge kernels: one
kernel call per parameter group per step over flat buffers (fused=True, the default), or one
call per parameter (fused=False). Constructor arguments, defaults, update formulas and
state_dict keys follow torch.optim (1.13), so checkpoints load both ways; Lion, LAMB and LARS
(no torch class) follow the references their kernels name. Sparse gradients: Adagrad,
SparseAdam and SGD (momentum 0, weight_decay 0), as torch; the others refuse them. bf16/f16
parameters with fp32 master weights: Adam, AdamW, SGD, Lion (master_weights=True). 8-bit states
(state_bits=8): Adam, AdamW, Lion, SGD, also under bitsandbytes' names (Adam8bit, AdamW8bit,
Lion8bit, SGD8bit; per-parameter overrides of the state format by GlobalOptimManager)."""

from .adadelta import Adadelta, adadelta
from .adagrad import Adagrad, adagrad
from .adam import Adam, adam
from .adamax import Adamax, adamax
from .adamw import AdamW
from .bitsandbytes_names import (Adam8bit, AdamW8bit, Lion8bit, PagedAdam8bit, PagedAdamW8bit,
                                 PagedLion8bit, SGD8bit)
from .from_op import FromOp, from_op, from_rule
from .global_optim_manager import GlobalOptimManager
from .lamb import LAMB, lamb
from .lars import LARS, lars
from .lion import Lion, lion
from .rmsprop import RMSprop, rmsprop
from .sgd import SGD, sgd
from .sparse_adam import SparseAdam, sparse_adam

__all__ = ["Adadelta", "Adagrad", "Adam", "Adam8bit", "AdamW", "AdamW8bit", "Adamax", "FromOp",
           "GlobalOptimManager", "LAMB", "LARS", "Lion", "Lion8bit", "PagedAdam8bit",
           "PagedAdamW8bit", "PagedLion8bit", "RMSprop", "SGD", "SGD8bit", "SparseAdam",
           "adadelta", "adagrad", "adam", "adamax", "from_op", "from_rule", "lamb", "lars",
           "lion", "rmsprop", "sgd", "sparse_adam"]
