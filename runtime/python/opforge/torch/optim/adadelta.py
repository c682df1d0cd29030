"""Adadelta (torch.optim.Adadelta semantics) on opforge's apply_adadelta kernel (TF's
formula, which is torch's: epsilon inside both square roots)."""

from ._base import ElementwiseOptimizer, call_kernel, check_hyper


def adadelta(kernel, var, square_avg, acc_delta, grad, *, lr, rho, eps, layout=None):
    """One step through apply_adadelta, in place: square_avg = rho*sa + (1-rho)*g^2;
    delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g;
    acc_delta = rho*ad + (1-rho)*delta^2; var -= lr*delta. maximize and the L2 term are in
    `grad` already. One tensor, or flat buffers + layout."""
    call_kernel(kernel, dict(var=var, accum=square_avg, accum_update=acc_delta, grad=grad,
                             lr=lr, rho=rho, epsilon=eps), layout)


class Adadelta(ElementwiseOptimizer):
    """torch.optim.Adadelta's arguments, defaults and state ('step' as an int,
    'square_avg', 'acc_delta'). apply_adadelta supports multi-tensor calls: fused=True
    (default) is one kernel call per group per step, fused=False one per parameter."""

    step_type = int

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 maximize=False, fused=None, registry=None, isa=None, dump_dir=None):
        check_hyper("learning rate", lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_hyper("epsilon value", eps)
        check_hyper("weight_decay value", weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach)
        super().__init__(params, defaults, fused, registry, isa, dump_dir=dump_dir)

    group_defaults = {"foreach": None, "maximize": False}

    def slots(self, group):
        return [("accum", "square_avg", 0.0), ("accum_update", "acc_delta", 0.0)]

    def kernel_for(self, group, multi):
        return self.kernel("apply_adadelta", {})

    def scalars(self, group, step):
        return dict(lr=group["lr"], rho=group["rho"], epsilon=group["eps"])

    @staticmethod
    def functional(kernel, args, layout=None):
        adadelta(kernel, args["var"], args["accum"], args["accum_update"], args["grad"],
                 lr=args["lr"], rho=args["rho"], eps=args["epsilon"], layout=layout)
