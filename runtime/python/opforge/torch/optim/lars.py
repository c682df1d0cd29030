"""LARS on opforge's multi_tensor_apply_lars (one call per group) and apply_lars (one call
per tensor) kernels, following the reference their descriptors name (TensorFlow contrib
LARSOptimizer, r1.15): no torch.optim class exists."""

from torch.optim.optimizer import required

from ._base import ElementwiseOptimizer, call_kernel, check_hyper


def lars(kernel, var, momentum_buffer, grad, *, lr, momentum, weight_decay, eta, epsilon,
         layout=None):
    """One step, in place: trust = eta*||var||/(||grad|| + weight_decay*||var|| + epsilon)
    per tensor (1 when either norm is 0); u = lr*trust*(grad + weight_decay*var);
    buf = momentum*buf + u; var -= buf (a use_nesterov kernel: var -= u + momentum*buf).
    kernel: apply_lars for one tensor, multi_tensor_apply_lars with `layout` (flat buffers
    of many tensors, norms per tensor)."""
    call_kernel(kernel, dict(var=var, m=momentum_buffer, grad=grad, lr=lr, momentum=momentum,
                             weight_decay=weight_decay, eta=eta, epsilon=epsilon), layout)


class LARS(ElementwiseOptimizer):
    """LARS as TensorFlow contrib's LARSOptimizer (the reference apply_lars names): lr
    (required), momentum=0.9, weight_decay=1e-4 (in the trust ratio and as an L2 term added
    to the gradient), eta=1e-3 (TF's eeta), epsilon=0, nesterov=False; no skip_list (put
    parameters to exclude in a group of plain SGD instead). State 'momentum_buffer': TF's
    momentum slot, which holds steps already scaled by lr*trust (so a changed lr weighs only
    later gradients, as in TF). fused=True (default): one multi_tensor_apply_lars call per
    group per step (trust ratios still per tensor); fused=False: one apply_lars call per
    parameter."""

    step_type = None

    def __init__(self, params, lr=required, momentum=0.9, weight_decay=1e-4, eta=1e-3,
                 epsilon=0.0, nesterov=False, *, fused=None, registry=None, isa=None,
                 dump_dir=None):
        if lr is not required:
            check_hyper("learning rate", lr)
        check_hyper("momentum value", momentum)
        check_hyper("weight_decay value", weight_decay)
        check_hyper("eta value", eta)
        check_hyper("epsilon value", epsilon)
        defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta,
                        epsilon=epsilon, nesterov=nesterov)
        super().__init__(params, defaults, fused, registry, isa, dump_dir=dump_dir)

    def slots(self, group):
        return [("m", "momentum_buffer", 0.0)]

    def grad_fold(self, group):
        return {}  # the L2 term is in the kernel (after the trust ratio's raw-gradient norm)

    def kernel_for(self, group, multi):
        return self.kernel("multi_tensor_apply_lars" if multi else "apply_lars",
                           {"use_nesterov": bool(group["nesterov"])})

    def scalars(self, group, step):
        return dict(lr=group["lr"], momentum=group["momentum"],
                    weight_decay=group["weight_decay"], eta=group["eta"],
                    epsilon=group["epsilon"])

    @staticmethod
    def functional(kernel, args, layout=None):
        lars(kernel, args["var"], args["m"], args["grad"], lr=args["lr"],
             momentum=args["momentum"], weight_decay=args["weight_decay"], eta=args["eta"],
             epsilon=args["epsilon"], layout=layout)
