"""Adamax (torch.optim.Adamax semantics) on opforge's apply_ada_max kernel with
epsilon_mode=torch: eps added to |grad| inside the max, as torch does."""

from ._base import ElementwiseOptimizer, call_kernel, check_betas, check_hyper


def adamax(kernel, var, exp_avg, exp_inf, grad, *, step, lr, beta1, beta2, eps, layout=None):
    """One step of torch's Adamax through an epsilon_mode=torch apply_ada_max, in place:
    m = b1*m + (1-b1)*g; u = max(b2*u, |g| + eps); var -= lr/(1-b1^step) * m/u. maximize
    and the L2 term are in `grad` already. One tensor, or flat buffers + layout."""
    call_kernel(kernel, dict(var=var, m=exp_avg, v=exp_inf, grad=grad,
                             beta1_power=beta1 ** step, lr=lr, beta1=beta1, beta2=beta2,
                             epsilon=eps), layout)


class Adamax(ElementwiseOptimizer):
    """torch.optim.Adamax's arguments, defaults (eps=1e-8) and state ('step' tensor,
    'exp_avg', 'exp_inf'). apply_ada_max supports multi-tensor calls: fused=True (default)
    is one kernel call per group per step, fused=False one per parameter."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, fused=None, registry=None, isa=None,
                 dump_dir=None):
        check_hyper("learning rate", lr)
        check_hyper("epsilon value", eps)
        check_betas(betas)
        check_hyper("weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize)
        super().__init__(params, defaults, fused, registry, isa, dump_dir=dump_dir)

    group_defaults = {"foreach": None, "maximize": False}

    def slots(self, group):
        return [("m", "exp_avg", 0.0), ("v", "exp_inf", 0.0)]

    def kernel_for(self, group, multi):
        return self.kernel("apply_ada_max", {"epsilon_mode": "torch"})

    def scalars(self, group, step):
        beta1, beta2 = group["betas"]
        return dict(step=step, lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"])

    @staticmethod
    def functional(kernel, args, layout=None):
        adamax(kernel, args["var"], args["m"], args["v"], args["grad"], step=args["step"],
               lr=args["lr"], beta1=args["beta1"], beta2=args["beta2"], eps=args["eps"],
               layout=layout)
