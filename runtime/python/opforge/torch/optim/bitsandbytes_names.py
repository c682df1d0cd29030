"""bitsandbytes' 8-bit optimizer classes (bnb.optim.Adam8bit, AdamW8bit, Lion8bit, SGD8bit) as
opforge optimizers with state_bits=8: their constructor arguments and defaults, so that code
written for bitsandbytes runs by changing the import. What they compute is opforge's Adam,
AdamW, Lion and SGD with 8-bit states (torch.optim's update rules and state_dict layout; the
dynamic map, blocks of 256, min_8bit_size 4096 as bitsandbytes), except where bitsandbytes'
rule differs: its Adam8bit decays the parameter itself (decoupled, as AdamW8bit), not
through torch.optim.Adam's L2 gradient term. The bitsandbytes arguments
opforge does not implement are taken at their do-nothing values only (percentile_clipping=100,
block_wise true, args=None) and refused otherwise; optim_bits is ignored, as bitsandbytes'
8-bit classes ignore it. Paging (is_paged=True, the Paged* classes) moves GPU states to host
memory under pressure: on the CPU the states are in host memory already, so it is taken and
changes nothing. Further keyword arguments go to the opforge class (fused, registry, isa,
quant_map, master_weights, ...)."""

from ._bnb_checks import check_do_nothing
from .adam import Adam
from .adamw import AdamW
from .lion import Lion
from .sgd import SGD


def _check_bnb_args(name, args, percentile_clipping, block_wise):
    if args is not None:
        raise ValueError(f"{name}: args (bitsandbytes' GlobalOptimManager config) is not "
                         f"taken; pass the arguments themselves")
    check_do_nothing("percentile_clipping", percentile_clipping, f"{name}: ")
    check_do_nothing("block_wise", block_wise, f"{name}: ")


class Adam8bit(Adam):
    """bnb.optim.Adam8bit: opforge's Adam with state_bits=8 and bitsandbytes' weight decay.
    bitsandbytes' Adam kernels (8-bit and 32-bit alike) multiply the parameter by
    1 - lr*weight_decay after the update instead of adding weight_decay*param to the
    gradient as torch.optim.Adam does; here the decay is AdamW's, applied before the update:
    the two differ by lr^2*weight_decay times the update, far below the 8-bit states'
    rounding. With weight_decay=0 (the default) it is opforge's Adam bit for bit."""

    _decoupled = True  # bitsandbytes' rule; also keeps no folded-gradient copy

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, optim_bits=32, args=None, min_8bit_size=4096,
                 percentile_clipping=100, block_wise=True, is_paged=False, **kwargs):
        _check_bnb_args(type(self).__name__, args, percentile_clipping, block_wise)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, state_bits=8, min_8bit_size=min_8bit_size, **kwargs)


class AdamW8bit(AdamW):
    """bnb.optim.AdamW8bit: opforge's AdamW (decoupled weight decay, default 1e-2) with
    state_bits=8."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, optim_bits=32, args=None, min_8bit_size=4096,
                 percentile_clipping=100, block_wise=True, is_paged=False, **kwargs):
        _check_bnb_args(type(self).__name__, args, percentile_clipping, block_wise)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, state_bits=8, min_8bit_size=min_8bit_size, **kwargs)


class Lion8bit(Lion):
    """bnb.optim.Lion8bit: opforge's Lion (lr 1e-4, betas (0.9, 0.99)) with state_bits=8."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0, optim_bits=32,
                 args=None, min_8bit_size=4096, percentile_clipping=100, block_wise=True,
                 is_paged=False, **kwargs):
        _check_bnb_args(type(self).__name__, args, percentile_clipping, block_wise)
        super().__init__(params, lr=lr, betas=betas, weight_decay=weight_decay, state_bits=8,
                         min_8bit_size=min_8bit_size, **kwargs)


class SGD8bit(SGD):
    """bnb.optim.SGD8bit: opforge's SGD with the momentum buffer in 8 bits (momentum > 0 and
    dampening 0, as bitsandbytes requires momentum)."""

    def __init__(self, params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 args=None, min_8bit_size=4096, percentile_clipping=100, block_wise=True,
                 **kwargs):
        _check_bnb_args(type(self).__name__, args, percentile_clipping, block_wise)
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening,
                         weight_decay=weight_decay, nesterov=nesterov, state_bits=8,
                         min_8bit_size=min_8bit_size, **kwargs)


# bnb.optim's paged classes: the plain ones (paging changes nothing on the CPU).
PagedAdam8bit, PagedAdamW8bit, PagedLion8bit = Adam8bit, AdamW8bit, Lion8bit
