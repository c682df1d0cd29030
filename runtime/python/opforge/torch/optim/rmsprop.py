"""RMSprop (torch.optim.RMSprop semantics, centered and momentum too) on opforge's
apply_rms_prop / apply_centered_rms_prop kernels (TensorFlow's RMSProp).

The kernels add epsilon inside the square root, torch adds it outside: no transformation
of the inputs makes one the other, so eps must be 0 (where both formulas agree); any other
eps is refused. The kernels keep lr * torch's momentum_buffer: the buffer is scaled by lr
before the call and back after it, so state_dict() holds torch's buffer and lr may change
between steps (lr schedulers)."""

import torch

from ._base import ElementwiseOptimizer, call_kernel, check_hyper


def rmsprop(kernel, var, square_avg, grad, *, lr, alpha, momentum=0.0, momentum_buffer=None,
            grad_avg=None, layout=None):
    """One step of torch's RMSprop with eps=0, in place: sa = alpha*sa + (1-alpha)*g^2;
    with grad_avg (centered, kernel apply_centered_rms_prop): ga = alpha*ga + (1-alpha)*g,
    avg = sqrt(sa - ga^2), else (apply_rms_prop) avg = sqrt(sa); with momentum_buffer:
    buf = momentum*buf + g/avg, var -= lr*buf; else var -= lr*g/avg. maximize and the L2
    term are in `grad` already. One tensor, or flat buffers + layout."""
    if momentum_buffer is None:
        mom, momentum = torch.zeros_like(var), 0.0  # scratch: the kernel's g*lr/avg
    else:
        if lr == 0:
            raise ValueError("RMSprop: lr=0 with momentum (the kernel keeps lr * buffer)")
        mom = momentum_buffer.mul_(lr)
    args = dict(var=var, ms=square_avg, mom=mom, grad=grad, lr=lr, rho=alpha,
                momentum=momentum, epsilon=0.0)
    if grad_avg is not None:
        args["mg"] = grad_avg
    call_kernel(kernel, args, layout)
    if momentum_buffer is not None:
        momentum_buffer.div_(lr)


class RMSprop(ElementwiseOptimizer):
    """torch.optim.RMSprop's arguments and state ('step' as an int, 'square_avg',
    'momentum_buffer' with momentum > 0, 'grad_avg' when centered), except eps: it must be
    0 (the kernels' epsilon sits inside the square root, torch's outside). The default is
    torch's 1e-8, so that RMSprop(params) fails loudly instead of silently running with
    eps=0 (0/0 = NaN on an exactly-zero gradient): pass eps=0 explicitly. Both kernels
    support multi-tensor calls: fused=True (default) is one kernel call per group per step,
    fused=False one per parameter."""

    step_type = int

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, foreach=None, maximize=False, differentiable=False, *,
                 fused=None, registry=None, isa=None):
        check_hyper("learning rate", lr)
        check_hyper("epsilon value", eps)
        check_hyper("momentum value", momentum)
        check_hyper("weight_decay value", weight_decay)
        check_hyper("alpha value", alpha)
        if eps != 0:
            raise ValueError(f"RMSprop: eps={eps} is not supported: opforge's RMSProp kernels "
                             "add epsilon inside the square root (TensorFlow), torch adds it "
                             "outside; only eps=0 gives torch's update: pass eps=0 to accept "
                             "it (an exactly-zero gradient then gives NaN, as in torch with "
                             "eps=0)")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults, fused, registry, isa)

    group_defaults = {"momentum": 0, "centered": False, "foreach": None, "maximize": False,
                      "differentiable": False}

    def add_param_group(self, param_group):
        if param_group.get("eps", 0) != 0:
            raise ValueError(f"RMSprop: eps={param_group['eps']} is not supported (only 0)")
        super().add_param_group(param_group)

    def slots(self, group):
        slots = [("ms", "square_avg", 0.0)]
        if group["momentum"] > 0:
            slots.append(("mom", "momentum_buffer", 0.0))
        if group["centered"]:
            slots.append(("mg", "grad_avg", 0.0))
        return slots

    def kernel_for(self, group, multi):
        return self.kernel("apply_centered_rms_prop" if group["centered"] else "apply_rms_prop",
                           {})

    def scalars(self, group, step):
        if group["eps"] != 0:  # set after construction
            raise ValueError(f"RMSprop: eps={group['eps']} is not supported (only 0)")
        return dict(lr=group["lr"], alpha=group["alpha"], momentum=group["momentum"])

    @staticmethod
    def functional(kernel, args, layout=None):
        rmsprop(kernel, args["var"], args["ms"], args["grad"], lr=args["lr"],
                alpha=args["alpha"], momentum=args["momentum"],
                momentum_buffer=args.get("mom"), grad_avg=args.get("mg"), layout=layout)
