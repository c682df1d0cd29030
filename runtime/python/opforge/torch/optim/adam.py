"""Adam (torch.optim.Adam semantics) on opforge's apply_adamw kernel, torch convention."""

import torch

from ._base import OpforgeOptimizer, check_hyper, fold_grad


def adam(kernel, var, m, v, grad, *, step, lr, beta1, beta2, eps, weight_decay=0.0,
         v_max=None, layout=None):
    """One Adam step through apply_adamw (convention=torch, epsilon_mode=torch):
    var *= 1 - lr*weight_decay; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
    var -= lr/(1-b1^t) * m / (sqrt(v_or_v_max)/sqrt(1-b2^t) + eps), in place.
    var, m, v, grad (and v_max with amsgrad): one parameter's tensors, or with `layout` the
    flat buffers of a whole group (one kernel call). maximize is the kernel's attr."""
    args = dict(var=var, m=m, v=v, grad=grad, step=float(step), lr=lr, beta1=beta1,
                beta2=beta2, epsilon=eps, weight_decay=weight_decay)
    if v_max is not None:
        args["v_max"] = v_max
    if layout is not None:
        kernel.call_model(layout, args)
    else:
        kernel.call(args)


class Adam(OpforgeOptimizer):
    """torch.optim.Adam with its arguments and defaults; the L2 weight_decay term is added to
    a copy of the gradient. fused=True (default): one kernel call per group over flat
    buffers (the parameters become views of them); False: one call per parameter.
    registry / isa: where kernels come from (default: opforge.open()) and a forced ISA."""

    _decoupled = False  # AdamW: weight decay applied to the parameter by the kernel

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, registry=None, isa=None):
        check_hyper("learning rate", lr)
        check_hyper("epsilon value", eps)
        check_hyper("beta parameter at index 0", betas[0], high=1.0)
        check_hyper("beta parameter at index 1", betas[1], high=1.0)
        check_hyper("weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults, fused, registry, isa)

    group_defaults = {"amsgrad": False, "maximize": False}

    def _fold(self, group):
        """Adam's L2 term goes into the gradient copy (and maximize with it)."""
        return not self._decoupled and group["weight_decay"] != 0

    def group_step(self, group):
        fold = self._fold(group)
        keys = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if group["amsgrad"] else [])
        kernel = self.kernel("apply_adamw", {
            "amsgrad": bool(group["amsgrad"]), "maximize": bool(group["maximize"]) and not fold,
            "convention": "torch", "epsilon_mode": "torch"})
        beta1, beta2 = group["betas"]
        hyper = dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                     weight_decay=group["weight_decay"] if self._decoupled else 0.0)
        grad_fold = dict(negate=bool(group["maximize"]) and fold,
                         weight_decay=group["weight_decay"] if fold else 0.0)
        params = group["params"]
        if self._fused:
            fg = self.flat_group(params, ["var", "grad"] + keys)
            step_ts = []
            for i, p in enumerate(params):
                if p.grad is None:
                    continue
                state = self.state[p]
                if "step" not in state:  # (setdefault would build a tensor every step)
                    state["step"] = torch.tensor(0.0)
                for key in keys:
                    fg.bind_state(state, key, i)
                step_ts.append(state["step"])
                fold_grad(fg.view("grad", i), p.grad, p, **grad_fold)
            if step_ts:  # one op for every step count (per-tensor += costs µs each)
                torch._foreach_add_(step_ts, 1)
            steps = [float(t) for t in step_ts]
            if len(steps) == len(params) and len(set(steps)) == 1:
                adam(kernel, fg.flat["var"], fg.flat["exp_avg"], fg.flat["exp_avg_sq"],
                     fg.flat["grad"], v_max=fg.flat.get("max_exp_avg_sq"), step=steps[0],
                     layout=fg.layout, **hyper)
                return
            # Some parameters without gradients or at other steps: one call each.
            for i, p in enumerate(params):
                if p.grad is not None:
                    s = self.state[p]
                    adam(kernel, fg.view("var", i), s["exp_avg"], s["exp_avg_sq"],
                         fg.view("grad", i), v_max=s.get("max_exp_avg_sq"),
                         step=float(s["step"]), **hyper)
            return
        for pi, p in enumerate(params):
            if p.grad is None:
                continue
            if not p.is_contiguous():
                raise RuntimeError(f"Adam: parameter {pi} is not contiguous (fused=False "
                                   "updates parameters in place)")
            state = self.state[p]
            if "step" not in state:
                state["step"] = torch.tensor(0.0)
                for key in keys:
                    state[key] = torch.zeros_like(p, memory_format=torch.contiguous_format)
            state["step"] += 1
            grad = p.grad.contiguous()
            if fold:
                grad = fold_grad(torch.empty_like(grad), p.grad, p, **grad_fold)
            adam(kernel, p, state["exp_avg"], state["exp_avg_sq"], grad,
                 v_max=state.get("max_exp_avg_sq"), step=float(state["step"]), **hyper)
