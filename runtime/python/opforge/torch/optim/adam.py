"""Adam (torch.optim.Adam semantics) on opforge's apply_adamw kernel, torch convention."""

import torch

from ._base import ElementwiseOptimizer, call_kernel, check_betas, check_hyper
from ._state8 import EightBitStates


def adam(kernel, var, m, v, grad, *, step, lr, beta1, beta2, eps, weight_decay=0.0,
         v_max=None, model=None, layout=None, absmax=None):
    """One Adam step through apply_adamw (convention=torch, epsilon_mode=torch):
    var *= 1 - lr*weight_decay; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
    var -= lr/(1-b1^t) * m / (sqrt(v_or_v_max)/sqrt(1-b2^t) + eps), in place.
    var, m, v, grad (and v_max with amsgrad; model, the bf16/f16 copy of the fp32 master
    var, with a storage=bf16m/f16m kernel): one parameter's tensors, or with `layout` the
    flat buffers of a whole group (one kernel call). maximize is the kernel's attr.
    8-bit states (a storage=q8s/q8ls kernel): m, v, v_max are uint8 codes and `absmax` maps
    each to its fp32 absmaxes, {"m": ..., "v": ...[, "v_max": ...]}, all updated in place."""
    args = dict(var=var, m=m, v=v, grad=grad, step=float(step), lr=lr, beta1=beta1,
                beta2=beta2, epsilon=eps, weight_decay=weight_decay)
    for name, t in (absmax or {}).items():
        args[name + "_absmax"] = t
    if v_max is not None:
        args["v_max"] = v_max
    if model is not None:
        args["model"] = model
    call_kernel(kernel, args, layout)


class Adam(EightBitStates, ElementwiseOptimizer):
    """torch.optim.Adam with its arguments and defaults; the L2 weight_decay term is added to
    a copy of the gradient. fused=True (default): one kernel call per group over flat
    buffers (the parameters and their gradients become views of them); False: one call per
    parameter. master_weights=True: bf16/f16 parameters, updated through fp32 masters
    (state 'master_param') by the kernels' bf16m/f16m variants. registry / isa: where
    kernels come from (default: opforge.open()) and a forced ISA.

    state_bits=8: exp_avg, exp_avg_sq (and max_exp_avg_sq) held in 8 bits, blockwise
    (Dettmers et al. 2022, as bitsandbytes' Adam8bit): uint8 codes plus one fp32 absmax per
    256 elements, updated in place by the q8s kernels (quant_map="dynamic", the paper's
    map) or q8ls ("linear"), for every parameter of at least min_8bit_size elements
    (default 4096, bitsandbytes' default: biases and norm weights keep fp32 states, updated
    by the fp32 kernel as with state_bits=32; 0 puts every parameter in 8 bits; a param
    group's own "state_bits": 32 or "min_8bit_size" overrides them for it). fused=True:
    one kernel call per group over flat buffers in which every 8-bit parameter starts on a
    256-element block (and one for the fp32 ones); fused=False: one call per parameter.
    state_dict() holds them dequantized in torch's fp32 layout (torch.optim.Adam loads it),
    load_state_dict() quantizes the 8-bit parameters' fp32 states (nearest code). With
    master_weights=True and bfloat16 parameters: fp32 masters and 8-bit moments, updated by
    the bf16mq8s kernels (the dynamic map; the L2 term and maximize fold the gradient into a
    bf16 copy, rounded once); float16 is refused (no such kernel). Not built with 8-bit
    states: GradScaler's one-pass step (it unscales, then steps)."""

    _decoupled = False  # AdamW: weight decay applied to the parameter by the kernel
    q8_master = True  # bf16 parameters with 8-bit states: the bf16mq8s kernels

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, master_weights=False, registry=None,
                 isa=None, dump_dir=None, state_bits=32, quant_map="dynamic",
                 min_8bit_size=4096):
        check_hyper("learning rate", lr)
        self._init_state_bits(state_bits, quant_map, master_weights, min_8bit_size)
        check_hyper("epsilon value", eps)
        check_betas(betas)
        check_hyper("weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults, fused, registry, isa, master_weights, dump_dir=dump_dir)

    group_defaults = {"amsgrad": False, "maximize": False}

    def _l2(self, group):
        """Adam's L2 term goes into the gradient copy."""
        return not self._decoupled and group["weight_decay"] != 0

    def _maximize_in_kernel(self, group):
        # The kernels negate the gradient for fp32 only; else it is folded into the copy.
        return (bool(group["maximize"]) and not self._l2(group)
                and group["params"][0].dtype == torch.float32)

    def slots(self, group):
        slots = [("m", "exp_avg", 0.0), ("v", "exp_avg_sq", 0.0)]
        if group["amsgrad"]:
            slots.append(("v_max", "max_exp_avg_sq", 0.0))
        return slots

    def grad_fold(self, group):
        negate = bool(group["maximize"]) and not self._maximize_in_kernel(group)
        return dict(negate=negate, weight_decay=group["weight_decay"] if self._l2(group) else 0)

    def _attrs(self, group, storage=None):
        return dict(amsgrad=bool(group["amsgrad"]), maximize=self._maximize_in_kernel(group),
                    convention="torch", epsilon_mode="torch",
                    **self.storage_attrs(group, storage))

    def kernel_for(self, group, multi, storage=None):
        return self.kernel("apply_adamw", self._attrs(group, storage))

    def scalars(self, group, step):
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2, epsilon=group["eps"],
                    weight_decay=group["weight_decay"] if self._decoupled else 0.0,
                    step=float(step))

    def amp_kernel(self, group):
        # None where no such variant is built (amsgrad, maximize, f16m)
        return self.kernel("apply_adamw", dict(self._attrs(group), unscale=True,
                                               skip_if_nonfinite=True), optional=True)

    # 8-bit states (_state8.EightBitStates) --------------------------------------------------

    def q8_slots(self, group):
        slots = [("m", "exp_avg"), ("v", "exp_avg_sq")]
        if group["amsgrad"]:
            slots.append(("v_max", "max_exp_avg_sq"))
        return slots

    def q8_fold(self, group):
        # maximize and the L2 term go into a gradient copy: the 8-bit kernels are built for
        # maximize=false.
        return dict(negate=bool(group["maximize"]),
                    weight_decay=group["weight_decay"] if self._l2(group) else 0)

    def q8_kernel(self, group, storage):
        return self.kernel("apply_adamw", dict(amsgrad=bool(group["amsgrad"]), maximize=False,
                                               convention="torch", epsilon_mode="torch",
                                               storage=storage))

    def q8_call(self, kernel, var, grad, codes, absmax, group, step, model=None):
        s = self.scalars(group, step)
        adam(kernel, var, codes["m"], codes["v"], grad, v_max=codes.get("v_max"), model=model,
             absmax=absmax, step=s["step"], lr=s["lr"], beta1=s["beta1"], beta2=s["beta2"],
             eps=s["epsilon"], weight_decay=s["weight_decay"])
