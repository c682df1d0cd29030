"""Adagrad (torch.optim.Adagrad semantics) on opforge's apply_adagrad_v2 kernel (epsilon
outside the square root, as torch), dense and sparse gradients."""

import torch

from . import _sparse
from ._base import ElementwiseOptimizer, call_kernel, check_hyper


def adagrad(kernel, var, state_sum, grad, *, lr, eps, layout=None):
    """One step through apply_adagrad_v2, in place: sum += grad^2;
    var -= lr * grad / (sqrt(sum) + eps). lr is torch's clr = lr / (1 + (step-1)*lr_decay);
    maximize and the L2 term are in `grad` already. One tensor, or flat buffers + layout."""
    call_kernel(kernel, dict(var=var, accum=state_sum, grad=grad, lr=lr, epsilon=eps), layout)


class Adagrad(ElementwiseOptimizer):
    """torch.optim.Adagrad's arguments, defaults and state ('step', 'sum'; made with the
    group, as torch's constructor does, also for groups added later). apply_adagrad_v2
    supports multi-tensor calls: fused=True (default) is one kernel call per group per
    step, fused=False one per parameter.

    Sparse gradients (weight_decay 0, as torch): torch's update of the gradient's rows
    (coalesced), sum += g^2; var -= clr * g / (sqrt(sum) + eps), one apply_adagrad_v2 call
    on the gathered rows per parameter. sparse_apply_adagrad is not used: it has no epsilon
    (var -= lr * g * rsqrt(sum); NaN for a zero gradient on a zero sum)."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *, maximize=False,
                 fused=None, registry=None, isa=None, dump_dir=None):
        check_hyper("learning rate", lr)
        check_hyper("lr_decay value", lr_decay)
        check_hyper("weight_decay value", weight_decay)
        check_hyper("initial_accumulator_value value", initial_accumulator_value)
        check_hyper("epsilon value", eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults, fused, registry, isa, dump_dir=dump_dir)

    def add_param_group(self, param_group):
        # torch makes the state in the constructor; here also for groups added later
        # (torch's step would fail on those).
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        for p in group["params"]:
            state = self.state[p]
            state["step"] = torch.tensor(0.0)
            state["sum"] = torch.full_like(p, group["initial_accumulator_value"],
                                           memory_format=torch.preserve_format)

    group_defaults = {"foreach": None, "maximize": False}

    def slots(self, group):
        return [("accum", "sum", group["initial_accumulator_value"])]

    def check_sparse_grad(self, gi, pi, group, p):
        if group["weight_decay"] != 0:
            raise _sparse.refusal(self, gi, pi, f"and weight_decay is {group['weight_decay']}"
                                  " (torch.optim.Adagrad takes sparse gradients only with "
                                  "weight_decay 0)")
        _sparse.check_rows(self, gi, pi, p)

    def group_step(self, group, ready=False):
        if ready:  # (every gradient a flat view: none sparse)
            return super().group_step(group, True)
        dense, sparse = _sparse.split(group)
        if dense is not None:
            super().group_step(dense)
        for p in sparse:
            self._sparse_step(group, p)

    def _sparse_step(self, group, p):
        state = self.state[p]
        if not state["sum"].is_contiguous():  # (a loaded checkpoint's may not be)
            state["sum"] = state["sum"].contiguous()
        step = self._count(state)
        idx, grad = _sparse.rows(p.grad, negate=bool(group["maximize"]))
        if len(idx) == 0:
            return
        s = p.grad.sparse_dim()
        var, accum = _sparse.row_view(p.data, s), _sparse.row_view(state["sum"], s)
        # torch updates only these rows, elementwise: the dense kernel on a gathered copy.
        var_rows, accum_rows = var.index_select(0, idx), accum.index_select(0, idx)
        args = dict(var=var_rows, accum=accum_rows, grad=grad, **self.scalars(group, step))
        self.functional(self.kernel_for(group, False), args)
        var.index_copy_(0, idx, var_rows)
        accum.index_copy_(0, idx, accum_rows)

    def kernel_for(self, group, multi):
        return self.kernel("apply_adagrad_v2", {"update_slots": True})

    def scalars(self, group, step):
        return dict(lr=group["lr"] / (1 + (step - 1) * group["lr_decay"]), epsilon=group["eps"])

    @staticmethod
    def functional(kernel, args, layout=None):
        adagrad(kernel, args["var"], args["accum"], args["grad"], lr=args["lr"],
                eps=args["epsilon"], layout=layout)
