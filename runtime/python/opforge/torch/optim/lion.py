"""Lion on opforge's apply_lion kernel, following the reference its descriptor names
(google/automl lion_pytorch.py): no torch.optim class exists."""

from ._base import ElementwiseOptimizer, call_kernel, check_betas, check_hyper
from ._state8 import EightBitStates


def lion(kernel, var, exp_avg, grad, *, lr, beta1, beta2, weight_decay, layout=None,
         exp_avg_absmax=None, model=None):
    """One step through apply_lion, in place: c = beta1*m + (1-beta1)*g;
    var -= lr*(sign(c) + weight_decay*var); m = beta2*m + (1-beta2)*g.
    One tensor, or flat buffers + layout. 8-bit states (a storage=q8s kernel): exp_avg is
    uint8 codes and exp_avg_absmax its fp32 absmaxes, both updated in place. model: the
    bf16/f16 copy of the fp32 master var (storage bf16m / f16m / bf16mq8s kernels)."""
    args = dict(var=var, m=exp_avg, grad=grad, lr=lr, beta1=beta1, beta2=beta2,
                weight_decay=weight_decay)
    if exp_avg_absmax is not None:
        args["m_absmax"] = exp_avg_absmax
    if model is not None:
        args["model"] = model
    call_kernel(kernel, args, layout)


class Lion(EightBitStates, ElementwiseOptimizer):
    """Lion as google/automl's lion_pytorch.Lion (the reference apply_lion names): its
    arguments lr=1e-4, betas=(0.9, 0.99), weight_decay=0 (decoupled: var *= 1 - lr*wd), its
    state key 'exp_avg', no step count. apply_lion supports multi-tensor calls: fused=True
    (default) is one kernel call per group per step, fused=False one per parameter.
    state_bits=8: exp_avg in 8 bits, blockwise (q8s kernel, the dynamic map; see
    opforge.torch.optim.Adam); fused as with fp32 states (one call per group, the
    parameters on 256-element blocks). master_weights=True: bf16/f16 parameters updated
    through fp32 masters (bf16m / f16m kernels; with state_bits=8 bf16 ones, bf16mq8s), as
    opforge.torch.optim.Adam's."""

    step_type = None
    q8_master = True  # bf16 parameters with 8-bit states: the bf16mq8s kernel

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, *, fused=None,
                 master_weights=False, registry=None, isa=None, dump_dir=None, state_bits=32,
                 min_8bit_size=4096):
        check_hyper("learning rate", lr)
        self._init_state_bits(state_bits, "dynamic", master_weights, min_8bit_size)
        check_betas(betas)
        check_hyper("weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay)
        super().__init__(params, defaults, fused, registry, isa, master_weights,
                         dump_dir=dump_dir)

    def slots(self, group):
        return [("m", "exp_avg", 0.0)]

    def grad_fold(self, group):
        return {}  # weight decay is decoupled, in the kernel

    def kernel_for(self, group, multi, storage=None):
        return self.kernel("apply_lion", self.storage_attrs(group, storage))

    def scalars(self, group, step):
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2,
                    weight_decay=group["weight_decay"])

    @staticmethod
    def functional(kernel, args, layout=None):
        lion(kernel, args["var"], args["m"], args["grad"], lr=args["lr"], beta1=args["beta1"],
             beta2=args["beta2"], weight_decay=args["weight_decay"], layout=layout,
             model=args.get("model"))

    # 8-bit states (_state8.EightBitStates)
    def q8_slots(self, group):
        return [("m", "exp_avg")]

    def q8_fold(self, group):
        return {}

    def q8_kernel(self, group, storage):
        return self.kernel("apply_lion", {"storage": storage})

    def q8_call(self, kernel, var, grad, codes, absmax, group, step, model=None):
        beta1, beta2 = group["betas"]
        lion(kernel, var, codes["m"], grad, lr=group["lr"], beta1=beta1, beta2=beta2,
             weight_decay=group["weight_decay"], exp_avg_absmax=absmax["m"], model=model)
