"""Adam (torch.optim.Adam semantics) on opforge's apply_adamw kernel, torch convention."""

import torch

from . import _state8
from ._base import ElementwiseOptimizer, call_kernel, check_betas, check_hyper, fold_grad, folds


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


class Adam(ElementwiseOptimizer):
    """torch.optim.Adam with its arguments and defaults; the L2 weight_decay term is added to
    a copy of the gradient. fused=True (default): one kernel call per group over flat
    buffers (the parameters and their gradients become views of them); False: one call per
    parameter. master_weights=True: bf16/f16 parameters, updated through fp32 masters
    (state 'master_param') by the kernels' bf16m/f16m variants. registry / isa: where
    kernels come from (default: opforge.open()) and a forced ISA.

    state_bits=8: exp_avg, exp_avg_sq (and max_exp_avg_sq) held in 8 bits, blockwise
    (Dettmers et al. 2022, as bitsandbytes' Adam8bit): uint8 codes plus one fp32 absmax per
    256 elements, updated in place by the q8s kernels (quant_map="dynamic", the paper's
    map) or q8ls ("linear"); one call per parameter. state_dict() holds them dequantized in
    torch's fp32 layout (torch.optim.Adam loads it), load_state_dict() quantizes fp32
    states."""

    _decoupled = False  # AdamW: weight decay applied to the parameter by the kernel

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, master_weights=False, registry=None,
                 isa=None, state_bits=32, quant_map="dynamic"):
        check_hyper("learning rate", lr)
        if state_bits not in (32, 8):
            raise ValueError(f"state_bits must be 32 or 8, got {state_bits!r}")
        if quant_map not in _state8.STORAGE:
            raise ValueError(f"quant_map must be 'dynamic' or 'linear', got {quant_map!r}")
        if state_bits == 8 and master_weights:
            raise ValueError("state_bits=8 with master_weights=True: no such kernel is built "
                             "(8-bit states take float32 parameters here)")
        self._state_bits = state_bits
        self._quant_map = quant_map
        check_hyper("epsilon value", eps)
        check_betas(betas)
        check_hyper("weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults, fused, registry, isa, master_weights)

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

    # 8-bit states ------------------------------------------------------------------------

    def _q8_slots(self, group):
        """(kernel argument, torch key, signed map) of the 8-bit states."""
        slots = [("m", "exp_avg", True), ("v", "exp_avg_sq", False)]
        if group["amsgrad"]:
            slots.append(("v_max", "max_exp_avg_sq", False))
        return slots

    def _q8_table(self, signed):
        return _state8.quant_map(self._quant_map, signed)

    def group_ready(self, group):
        return self._state_bits == 32 and super().group_ready(group)

    def group_step(self, group, ready=False):
        if self._state_bits == 32:
            return super().group_step(group, ready)
        # maximize and the L2 term go into a gradient copy: the 8-bit kernels are built for
        # maximize=false.
        fold = dict(negate=bool(group["maximize"]),
                    weight_decay=group["weight_decay"] if self._l2(group) else 0)
        attrs = dict(amsgrad=bool(group["amsgrad"]), maximize=False, convention="torch",
                     epsilon_mode="torch", storage=_state8.STORAGE[self._quant_map])
        kernel = self.kernel("apply_adamw", attrs)
        for pi, p in enumerate(group["params"]):
            if p.grad is None:
                continue
            if not p.is_contiguous():
                raise RuntimeError(f"{type(self).__name__}: parameter {pi} is not contiguous "
                                   "(8-bit states update parameters in place)")
            state = self.state[p]
            codes, absmax = {}, {}
            for arg, key, signed in self._q8_slots(group):
                if key + "_codes" not in state:
                    state[key + "_codes"], state[key + "_absmax"] = _state8.zeros(
                        p.numel(), self._q8_table(signed))
                codes[arg], absmax[arg] = state[key + "_codes"], state[key + "_absmax"]
            step = self._count(state)
            grad = p.grad.contiguous()
            if folds(fold):
                grad = fold_grad(torch.empty_like(p), grad, p, **fold)
            # flat: the codes and absmaxes are 1-D, elementwise ops flatten every tensor
            adam(kernel, p.view(-1), codes["m"], codes["v"], grad.view(-1),
                 v_max=codes.get("v_max"), absmax=absmax, **self._q8_scalars(group, step))

    def _q8_scalars(self, group, step):
        s = self.scalars(group, step)
        return dict(step=s["step"], lr=s["lr"], beta1=s["beta1"], beta2=s["beta2"],
                    eps=s["epsilon"], weight_decay=s["weight_decay"])

    def state_dict(self):
        """torch's layout: 8-bit states dequantized to fp32 exp_avg, exp_avg_sq,
        max_exp_avg_sq (each in its parameter's shape)."""
        sd = super().state_dict()
        if self._state_bits == 32:
            return sd
        params = [p for g in self.param_groups for p in g["params"]]
        signed = {"exp_avg": True, "exp_avg_sq": False, "max_exp_avg_sq": False}
        out = {}
        for i, st in sd["state"].items():
            st = dict(st)
            for key, sgn in signed.items():
                if key + "_codes" in st:
                    st[key] = _state8.dequantize(st.pop(key + "_codes"), st.pop(key + "_absmax"),
                                                 self._q8_table(sgn), params[i].shape)
            out[i] = st
        sd["state"] = out
        return sd

    def load_state_dict(self, state_dict):
        """torch.optim.Adam's (or an 8-bit opforge Adam's) state dict; with state_bits=8 the
        fp32 states are quantized blockwise."""
        super().load_state_dict(state_dict)
        if self._state_bits == 32:
            return
        signed = {"exp_avg": True, "exp_avg_sq": False, "max_exp_avg_sq": False}
        for state in self.state.values():
            for key, sgn in signed.items():
                if key in state:
                    codes, absmax = _state8.quantize(state.pop(key), self._q8_table(sgn))
                    state[key + "_codes"], state[key + "_absmax"] = codes, absmax
