"""LAMB on opforge's multi_tensor_apply_lamb (one call per group) and apply_lamb (one call
per tensor) kernels, following the reference their descriptors name (TensorFlow Addons
tfa.optimizers.LAMB): no torch.optim class exists."""

from ._base import ElementwiseOptimizer, call_kernel, check_betas, check_hyper


def lamb(kernel, var, exp_avg, exp_avg_sq, grad, *, step, lr, beta1, beta2, eps,
         weight_decay, layout=None):
    """One step, in place: m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
    u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + weight_decay*var;
    ratio = ||var||/||u|| per tensor (1 when either is 0); var -= ratio*lr*u.
    kernel: apply_lamb for one tensor, multi_tensor_apply_lamb with `layout` (flat buffers
    of many tensors, norms per tensor)."""
    call_kernel(kernel, dict(var=var, m=exp_avg, v=exp_avg_sq, grad=grad, lr=lr, beta1=beta1,
                             beta2=beta2, epsilon=eps, weight_decay=weight_decay,
                             step=float(step)), layout)


class LAMB(ElementwiseOptimizer):
    """LAMB as tfa.optimizers.LAMB (the reference apply_lamb names): lr=1e-3,
    betas=(0.9, 0.999), eps=1e-6, weight_decay=0 (added to the update, inside the trust
    ratio); state 'step' (tensor, as torch's Adam), 'exp_avg', 'exp_avg_sq'. No exclusion
    lists. fused=True (default): one multi_tensor_apply_lamb call per group per step (trust
    ratios still per tensor); fused=False: one apply_lamb call per parameter."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, *,
                 fused=None, registry=None, isa=None, dump_dir=None):
        check_hyper("learning rate", lr)
        check_hyper("epsilon value", eps)
        check_betas(betas)
        check_hyper("weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults, fused, registry, isa, dump_dir=dump_dir)

    def slots(self, group):
        return [("m", "exp_avg", 0.0), ("v", "exp_avg_sq", 0.0)]

    def grad_fold(self, group):
        return {}  # weight decay is in the kernel's update

    def kernel_for(self, group, multi):
        return self.kernel("multi_tensor_apply_lamb" if multi else "apply_lamb", {})

    def scalars(self, group, step):
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2, epsilon=group["eps"],
                    weight_decay=group["weight_decay"], step=step)

    @staticmethod
    def functional(kernel, args, layout=None):
        lamb(kernel, args["var"], args["m"], args["v"], args["grad"], step=args["step"],
             lr=args["lr"], beta1=args["beta1"], beta2=args["beta2"], eps=args["epsilon"],
             weight_decay=args["weight_decay"], layout=layout)
