"""SGD with momentum (torch.optim.SGD semantics) on opforge's apply_momentum (momentum > 0,
Nesterov as its attr) and apply_gradient_descent (no momentum) kernels; with state_bits=8 the
momentum buffer in 8 bits (apply_momentum's q8s kernels)."""

from torch.optim.optimizer import required

from . import _sparse
from ._base import ElementwiseOptimizer, call_kernel, check_hyper
from ._state8 import EightBitStates


def sgd(kernel, var, grad, *, lr, momentum_buffer=None, momentum=0.0, model=None,
        layout=None, momentum_buffer_absmax=None):
    """One step, in place. momentum_buffer None: apply_gradient_descent, var -= lr*grad.
    Else apply_momentum: buf = momentum*buf + grad; var -= lr*buf (nesterov attr:
    var -= lr*(grad + momentum*buf)). torch's maximize, weight decay and dampening are in
    `grad` already (fold_grad). model: the bf16/f16 copy of the fp32 master var (storage
    bf16m/f16m kernels). One parameter's tensors, or flat buffers with `layout`. 8-bit
    states (a storage=q8s kernel): momentum_buffer is uint8 codes and momentum_buffer_absmax
    its fp32 absmaxes, both updated in place."""
    if momentum_buffer is None:
        args = dict(var=var, delta=grad, alpha=lr)
    else:
        args = dict(var=var, accum=momentum_buffer, grad=grad, lr=lr, momentum=momentum)
    if model is not None:
        args["model"] = model
    if momentum_buffer_absmax is not None:
        args["accum_absmax"] = momentum_buffer_absmax
    call_kernel(kernel, args, layout)


class SGD(EightBitStates, ElementwiseOptimizer):
    """torch.optim.SGD's arguments and defaults (state 'momentum_buffer', None without
    momentum, as torch); fused, master_weights, registry and isa as for
    opforge.torch.optim.Adam. state_bits=8 (bitsandbytes' SGD8bit): the momentum buffer in 8
    bits, blockwise (q8s kernel, the signed dynamic map; see opforge.torch.optim.Adam), for
    momentum > 0 and dampening 0 (torch's first step copies the gradient into the buffer,
    which dampening would make a different first step; no such kernel is built); with
    master_weights=True and bf16 parameters, the bf16mq8s kernels."""

    step_type = None
    q8_master = True  # bf16 parameters with 8-bit states: the bf16mq8s kernels

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None, master_weights=False, registry=None, isa=None,
                 dump_dir=None, state_bits=32, min_8bit_size=4096):
        if lr is not required:
            check_hyper("learning rate", lr)
        check_hyper("momentum value", momentum)
        check_hyper("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        self._init_state_bits(state_bits, "dynamic", master_weights, min_8bit_size)
        if state_bits == 8 and (momentum <= 0 or dampening != 0):
            raise ValueError(f"state_bits=8 keeps the momentum buffer in 8 bits: it needs "
                             f"momentum > 0 and dampening 0, got momentum={momentum}, "
                             f"dampening={dampening}")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults, fused, registry, isa, master_weights, dump_dir=dump_dir)

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

    def group_step(self, group, ready=False):
        if ready:  # (every gradient a flat view: none sparse)
            return super().group_step(group, True)
        dense, sparse = _sparse.split(group)
        for p in sparse:
            self._sparse_step(group, p)
        if dense is not None:
            super().group_step(dense)

    def slots(self, group):
        return [("accum", "momentum_buffer", 0.0)] if group["momentum"] != 0 else []

    def init_state(self, group, state):
        if group["momentum"] == 0:
            state["momentum_buffer"] = None

    def fold_for(self, group, first):
        # torch: the first step's buffer is the gradient itself (no dampening).
        scale = 1.0 if group["momentum"] == 0 or first else 1.0 - group["dampening"]
        return dict(negate=bool(group["maximize"]), weight_decay=group["weight_decay"],
                    scale=scale)

    def kernel_for(self, group, multi, storage=None):
        attrs = self.storage_attrs(group, storage)
        if group["momentum"] != 0:
            attrs["use_nesterov"] = bool(group["nesterov"])
            return self.kernel("apply_momentum", attrs)
        return self.kernel("apply_gradient_descent", attrs)

    def scalars(self, group, step):
        return dict(lr=group["lr"], momentum=group["momentum"])

    @staticmethod
    def functional(kernel, args, layout=None):
        sgd(kernel, args["var"], args["grad"], lr=args["lr"],
            momentum_buffer=args.get("accum"), momentum=args["momentum"],
            model=args.get("model"), layout=layout)

    # 8-bit states (_state8.EightBitStates); the checks above keep momentum > 0, dampening 0
    def q8_slots(self, group):
        return [("accum", "momentum_buffer")]

    def q8_fold(self, group):
        return dict(negate=bool(group["maximize"]), weight_decay=group["weight_decay"],
                    scale=1.0)

    def q8_kernel(self, group, storage):
        return self.kernel("apply_momentum", {"use_nesterov": bool(group["nesterov"]),
                                              "storage": storage})

    def q8_call(self, kernel, var, grad, codes, absmax, group, step, model=None):
        sgd(kernel, var, grad, lr=group["lr"], momentum_buffer=codes["accum"],
            momentum=group["momentum"], momentum_buffer_absmax=absmax["accum"], model=model)
