"""RMSprop (torch.optim.RMSprop semantics, centered and momentum too) on opforge's
apply_rms_prop / apply_centered_rms_prop kernels with epsilon_mode=torch: epsilon outside
the square root, and the kernels' mom is torch's momentum_buffer itself (lr applied after
it), so state_dict() holds torch's buffer and lr may change between steps (lr schedulers)."""

import torch

from ._base import ElementwiseOptimizer, call_kernel, check_hyper


def rmsprop(kernel, var, square_avg, grad, *, lr, alpha, eps, momentum=0.0,
            momentum_buffer=None, grad_avg=None, layout=None):
    """One step of torch's RMSprop, in place, through an epsilon_mode=torch kernel:
    sa = alpha*sa + (1-alpha)*g^2; with grad_avg (centered, apply_centered_rms_prop):
    ga = alpha*ga + (1-alpha)*g, avg = sqrt(sa - ga^2) + eps, else (apply_rms_prop)
    avg = sqrt(sa) + eps; with momentum_buffer: buf = momentum*buf + g/avg, var -= lr*buf;
    else var -= lr*g/avg. maximize and the L2 term are in `grad` already. One tensor, or
    flat buffers + layout."""
    if momentum_buffer is None:
        mom, momentum = torch.zeros_like(var), 0.0  # scratch: the kernel's g/avg
    else:
        mom = momentum_buffer
    args = dict(var=var, ms=square_avg, mom=mom, grad=grad, lr=lr, rho=alpha,
                momentum=momentum, epsilon=eps)
    if grad_avg is not None:
        args["mg"] = grad_avg
    call_kernel(kernel, args, layout)


class RMSprop(ElementwiseOptimizer):
    """torch.optim.RMSprop's arguments, defaults (eps=1e-8) and state ('step' as an int,
    'square_avg', 'momentum_buffer' with momentum > 0, 'grad_avg' when centered). Both
    kernels support multi-tensor calls: fused=True (default) is one kernel call per group
    per step, fused=False one per parameter."""

    step_type = int

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, foreach=None, maximize=False, differentiable=False, *,
                 fused=None, registry=None, isa=None, dump_dir=None):
        check_hyper("learning rate", lr)
        check_hyper("epsilon value", eps)
        check_hyper("momentum value", momentum)
        check_hyper("weight_decay value", weight_decay)
        check_hyper("alpha value", alpha)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults, fused, registry, isa, dump_dir=dump_dir)

    group_defaults = {"momentum": 0, "centered": False, "foreach": None, "maximize": False,
                      "differentiable": False}

    def slots(self, group):
        slots = [("ms", "square_avg", 0.0)]
        if group["momentum"] > 0:
            slots.append(("mom", "momentum_buffer", 0.0))
        if group["centered"]:
            slots.append(("mg", "grad_avg", 0.0))
        return slots

    def kernel_for(self, group, multi):
        return self.kernel("apply_centered_rms_prop" if group["centered"] else "apply_rms_prop",
                           {"epsilon_mode": "torch"})

    def scalars(self, group, step):
        return dict(lr=group["lr"], alpha=group["alpha"], eps=group["eps"],
                    momentum=group["momentum"])

    @staticmethod
    def functional(kernel, args, layout=None):
        rmsprop(kernel, args["var"], args["ms"], args["grad"], lr=args["lr"],
                alpha=args["alpha"], eps=args["eps"], momentum=args["momentum"],
                momentum_buffer=args.get("mom"), grad_avg=args.get("mg"), layout=layout)
