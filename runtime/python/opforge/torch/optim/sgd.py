"""SGD with momentum (torch.optim.SGD semantics) on opforge's apply_momentum (momentum > 0,
Nesterov as its attr) and apply_gradient_descent (no momentum) kernels."""

import torch
from torch.optim.optimizer import required

from . import _sparse
from ._base import OpforgeOptimizer, check_hyper, fold_grad


def sgd(kernel, var, grad, *, lr, momentum_buffer=None, momentum=0.0, layout=None):
    """One step, in place. momentum_buffer None: apply_gradient_descent, var -= lr*grad.
    Else apply_momentum: buf = momentum*buf + grad; var -= lr*buf (nesterov attr:
    var -= lr*(grad + momentum*buf)). torch's maximize, weight decay and dampening are in
    `grad` already (fold_grad). One parameter's tensors, or flat buffers with `layout`."""
    if momentum_buffer is None:
        args = dict(var=var, delta=grad, alpha=lr)
    else:
        args = dict(var=var, accum=momentum_buffer, grad=grad, lr=lr, momentum=momentum)
    if layout is not None:
        kernel.call_model(layout, args)
    else:
        kernel.call(args)


class SGD(OpforgeOptimizer):
    """torch.optim.SGD's arguments and defaults; fused, registry and isa as for
    opforge.torch.optim.Adam."""

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None, registry=None, isa=None):
        if lr is not required:
            check_hyper("learning rate", lr)
        check_hyper("momentum value", momentum)
        check_hyper("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults, fused, registry, isa)

    group_defaults = {"nesterov": False, "maximize": False}

    def check_sparse_grad(self, gi, pi, group, p):
        # torch keeps a sparse momentum buffer (no opforge kernel does) and refuses weight
        # decay on sparse gradients: only plain SGD's p -= lr * g maps.
        for key in ("momentum", "weight_decay"):
            if group[key] != 0:
                raise _sparse.refusal(self, gi, pi, f"and {key} is {group[key]} (opforge's SGD "
                                      "takes sparse gradients with momentum 0 and "
                                      "weight_decay 0 only)")
        _sparse.check_rows(self, gi, pi, p)

    def _sparse_step(self, group, p):
        """torch's p.add_(g, alpha=-lr) on the gradient's rows: apply_gradient_descent on a
        gathered copy (coalesced first: torch adds duplicates one by one, the same sum up to
        rounding)."""
        self.state[p]["momentum_buffer"] = None  # as torch, for momentum 0
        idx, grad = _sparse.rows(p.grad, negate=bool(group["maximize"]))
        if len(idx) == 0:
            return
        var = _sparse.row_view(p.data, p.grad.sparse_dim())
        var_rows = var.index_select(0, idx)
        sgd(self.kernel("apply_gradient_descent", {}), var_rows, grad, lr=group["lr"])
        var.index_copy_(0, idx, var_rows)

    def group_step(self, group):
        dense, sparse = _sparse.split(group)
        for p in sparse:
            self._sparse_step(group, p)
        if dense is None:
            return
        group = dense  # the parameters with dense gradients, the group's hyperparameters
        momentum = group["momentum"]
        if momentum != 0:
            kernel = self.kernel("apply_momentum", {"use_nesterov": bool(group["nesterov"])})
        else:
            kernel = self.kernel("apply_gradient_descent", {})
        params = group["params"]

        def grad_into(dst, p, first):
            # torch: the first step's buffer is the gradient itself (no dampening).
            scale = 1.0 if momentum == 0 or first else 1.0 - group["dampening"]
            return fold_grad(dst, p.grad, p, negate=bool(group["maximize"]),
                             weight_decay=group["weight_decay"], scale=scale)

        if self._fused:
            fg = self.flat_group(params, ["var", "grad"] + (["accum"] if momentum else []))
            for i, p in enumerate(params):
                if p.grad is None:
                    continue
                state = self.state[p]
                first = True
                if momentum:
                    buf_view = fg.view("accum", i)
                    had = state.get("momentum_buffer")
                    first = had is None
                    if had is None:
                        buf_view.zero_()
                    elif had.data_ptr() != buf_view.data_ptr():
                        buf_view.copy_(had)
                    state["momentum_buffer"] = buf_view
                else:
                    state["momentum_buffer"] = None
                grad_into(fg.view("grad", i), p, first)
            if all(p.grad is not None for p in params):
                sgd(kernel, fg.flat["var"], fg.flat["grad"], lr=group["lr"],
                    momentum_buffer=fg.flat.get("accum"), momentum=momentum, layout=fg.layout)
                return
            for i, p in enumerate(params):
                if p.grad is not None:
                    sgd(kernel, fg.view("var", i), fg.view("grad", i), lr=group["lr"],
                        momentum_buffer=self.state[p]["momentum_buffer"], momentum=momentum)
            return
        for pi, p in enumerate(params):
            if p.grad is None:
                continue
            if not p.is_contiguous():
                raise RuntimeError(f"SGD: parameter {pi} is not contiguous (fused=False "
                                   "updates parameters in place)")
            state = self.state[p]
            buf = state.get("momentum_buffer") if momentum else None
            first = buf is None
            if momentum and first:
                buf = torch.zeros_like(p, memory_format=torch.contiguous_format)
            grad = grad_into(torch.empty_like(p, memory_format=torch.contiguous_format), p,
                             first)
            state["momentum_buffer"] = buf
            sgd(kernel, p, grad, lr=group["lr"], momentum_buffer=buf, momentum=momentum)
