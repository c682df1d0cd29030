"""AdamW (torch.optim.AdamW semantics): Adam with decoupled weight decay, applied by the
apply_adamw kernel (var *= 1 - lr*weight_decay before the update)."""

from .adam import Adam


class AdamW(Adam):
    """torch.optim.AdamW's arguments and defaults (weight_decay=1e-2); fused,
    master_weights, registry, isa, state_bits and quant_map as for opforge.torch.optim.Adam."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None, master_weights=False, registry=None,
                 isa=None, dump_dir=None, state_bits=32, quant_map="dynamic",
                 min_8bit_size=4096):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         master_weights=master_weights, registry=registry, isa=isa,
                         dump_dir=dump_dir, state_bits=state_bits, quant_map=quant_map,
                         min_8bit_size=min_8bit_size)
