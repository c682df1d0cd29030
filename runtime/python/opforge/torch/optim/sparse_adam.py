"""SparseAdam (torch.optim.SparseAdam semantics: lazy Adam on the rows a sparse gradient
names) on opforge's sparse_adam kernel, epsilon_mode=tf: torch's SparseAdam adds eps to
sqrt(v) and folds both bias corrections into the step size, as TensorFlow does."""

import torch

from . import _sparse
from ._base import OpforgeOptimizer, check_betas


def sparse_adam(kernel, var, m, v, grad, indices, *, step, lr, beta1, beta2, eps):
    """One step through sparse_adam (epsilon_mode=tf), in place on the rows `indices` (unique)
    of var, m, v (rows, cols); grad (len(indices), cols):
    m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2);
    var -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)."""
    # beta^t reach the kernel as fp32: 1 - beta2^t loses digits early on (measured on the
    # embedding test: 4.4e-6 max parameter difference vs torch as is, 4.3e-6 with the step
    # size corrected for that rounding; not worth the correction).
    kernel.call(var=var, m=m, v=v, grad=grad, indices=indices, lr=lr, beta1=beta1,
                beta2=beta2, epsilon=eps, beta1_power=beta1 ** step,
                beta2_power=beta2 ** step)


class SparseAdam(OpforgeOptimizer):
    """torch.optim.SparseAdam's arguments, defaults and state ('step' int, 'exp_avg',
    'exp_avg_sq'): only the rows a gradient names move, their moments included. Sparse
    gradients only (a dense one is refused before anything changes, where torch raises
    mid-step). One sparse_adam call per parameter per step (the sparse ops are not
    multi-tensor). registry / isa as for opforge.torch.optim.Adam."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False, *,
                 registry=None, isa=None, dump_dir=None):
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        check_betas(betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, maximize=maximize)
        super().__init__(params, defaults, False, registry, isa, dump_dir=dump_dir)

    group_defaults = {"maximize": False}

    def check_grads(self, gi, group):
        super().check_grads(gi, group)
        for pi, p in enumerate(group["params"]):
            if p.grad is not None and not p.grad.is_sparse:
                raise RuntimeError(f"SparseAdam: parameter {pi} of group {gi} has a dense "
                                   "gradient; SparseAdam takes sparse gradients only "
                                   "(consider Adam)")

    def check_sparse_grad(self, gi, pi, group, p):
        _sparse.check_rows(self, gi, pi, p)

    def group_step(self, group, ready=False):
        beta1, beta2 = group["betas"]
        kernel = self.kernel("sparse_adam", {"epsilon_mode": "tf", "use_nesterov": False,
                                             "Tindices": "int64"})
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            for key in ("exp_avg", "exp_avg_sq"):
                if not state[key].is_contiguous():  # (a loaded checkpoint's may not be)
                    state[key] = state[key].contiguous()
            state["step"] += 1
            idx, grad = _sparse.rows(p.grad, negate=bool(group["maximize"]))
            if len(idx) == 0:
                continue
            s = p.grad.sparse_dim()
            sparse_adam(kernel, _sparse.row_view(p.data, s),
                        _sparse.row_view(state["exp_avg"], s),
                        _sparse.row_view(state["exp_avg_sq"], s), grad, idx,
                        step=state["step"], lr=group["lr"], beta1=beta1, beta2=beta2,
                        eps=group["eps"])
