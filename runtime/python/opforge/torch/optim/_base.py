"""What the opforge optimizers share: the registry and kernels, parameter checks, and the
flat buffers a parameter group lives in for fused steps."""

import torch

import opforge

from . import _sparse

_registry = None


def default_registry():
    """The registry the optimizers select kernels from (opened once, on first use)."""
    global _registry
    if _registry is None:
        _registry = opforge.open()
    return _registry


class FlatGroup:
    """A parameter group's tensors back to back in flat fp32 buffers (an opforge
    ModelLayout): the parameters' .data and their state tensors become views of them, so one
    kernel call (call_model) updates the whole group. Padding stays zero."""

    def __init__(self, params, buffers):
        self.params = list(params)
        self.key = tuple(id(p) for p in self.params)
        self.layout = opforge.ModelLayout([(str(i), tuple(p.shape))
                                           for i, p in enumerate(self.params)])
        n = self.layout.total_elements
        self.flat = {name: torch.zeros(n, dtype=torch.float32) for name in buffers}
        self._views = {}  # (buffer, i) -> view, made once (a slice costs ~µs every step)

    def view(self, name, i):
        v = self._views.get((name, i))
        if v is None:
            off, n = self.layout.offsets[i], self.layout.elements[i]
            v = self._views[name, i] = self.flat[name][off:off + n].view(self.params[i].shape)
        return v

    def bind_param(self, i):
        """Makes parameter i's data the flat view (copying it in when it moved)."""
        p, v = self.params[i], self.view("var", i)
        if p.data.data_ptr() != v.data_ptr():
            v.copy_(p.data)
            p.data = v

    def bind_state(self, state, key, i):
        """state[key] as the flat view: a loaded or fresh tensor is copied in, none zeroes it.
        Returns whether the state existed."""
        v = self.view(key, i)
        t = state.get(key)
        if t is v:
            return True
        if t is None:
            v.zero_()
        elif t.data_ptr() != v.data_ptr():
            v.copy_(t)
        state[key] = v
        return t is not None


class OpforgeOptimizer(torch.optim.Optimizer):
    """The shared part: fp32 CPU dense parameters only (checked when a group is added),
    kernels cached by attrs, flat groups rebuilt when a group's parameters change."""

    # Group keys a checkpoint from an older torch may lack, filled on unpickling as each torch
    # class's own __setstate__ does.
    group_defaults = {}

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, value in self.group_defaults.items():
                group.setdefault(key, value)

    def __init__(self, params, defaults, fused, registry, isa):
        for flag in ("capturable", "differentiable"):
            if defaults.pop(flag, False):
                raise ValueError(f"{type(self).__name__}: {flag}=True is not supported by "
                                 "opforge (CPU kernels, no autograd through the step)")
        self._fused = True if fused is None else bool(fused)
        self._registry = registry
        self._isa = isa
        self._kernels = {}
        self._flat_groups = {}  # tuple of parameter ids -> FlatGroup
        super().__init__(params, defaults)

    def add_param_group(self, param_group):
        params = param_group["params"]
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        gi = len(getattr(self, "param_groups", []))
        for pi, p in enumerate(params):
            if not isinstance(p, torch.Tensor):
                continue  # torch's own check names it
            if p.dtype != torch.float32 or p.device.type != "cpu" or p.is_sparse:
                raise ValueError(f"{type(self).__name__}: parameter {pi} of group {gi} is "
                                 f"{p.dtype} on {p.device}{' (sparse)' if p.is_sparse else ''};"
                                 " opforge optimizers take dense float32 CPU parameters")
        super().add_param_group(param_group)

    def kernel(self, op, attrs):
        key = (op, tuple(sorted(attrs.items())))
        k = self._kernels.get(key)
        if k is None:
            reg = self._registry or default_registry()
            k = self._kernels[key] = reg.select(op, attrs, self._isa)
        return k

    def flat_group(self, params, buffers):
        key = tuple(id(p) for p in params)
        fg = self._flat_groups.get(key)
        if fg is None:
            fg = self._flat_groups[key] = FlatGroup(params, buffers)
        for i in range(len(params)):
            fg.bind_param(i)
        return fg

    def check_grads(self):
        """Every gradient usable, checked before any state changes."""
        for gi, group in enumerate(self.param_groups):
            for pi, p in enumerate(group["params"]):
                g = p.grad
                if g is None:
                    continue
                if g.is_sparse:
                    self.check_sparse_grad(gi, pi, group, p)
                if g.dtype != torch.float32 or g.shape != p.shape or g.device != p.device:
                    raise RuntimeError(f"{type(self).__name__}: parameter {pi} of group {gi} "
                                       f"has a {g.dtype} gradient of shape {tuple(g.shape)} on "
                                       f"{g.device}; expected float32 {tuple(p.shape)} on cpu")

    def check_sparse_grad(self, gi, pi, group, p):
        """Optimizers whose step takes sparse gradients override this (_sparse.py); it must
        raise for what they cannot take, and change nothing."""
        name = type(self).__name__
        raise _sparse.refusal(self, gi, pi, f"which opforge's {name} does not take (no "
                              f"opforge kernel computes {name}'s sparse update as torch does)")

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.check_grads()
        for group in self.param_groups:
            if any(p.grad is not None for p in group["params"]):
                self.group_step(group)
        return loss


def fold_grad(dst, grad, param, negate=False, weight_decay=0.0, scale=1.0):
    """dst = scale * (+-grad + weight_decay * param), in torch.optim's order of operations
    (maximize, then the L2 term, then e.g. SGD's dampening)."""
    if negate:
        torch.neg(grad, out=dst)
    else:
        dst.copy_(grad)
    if weight_decay != 0:
        dst.add_(param, alpha=weight_decay)
    if scale != 1:
        dst.mul_(scale)
    return dst


def check_hyper(name, value, low=0.0, high=None):
    """torch.optim's range checks, before anything is built."""
    if not low <= value or (high is not None and not value < high):
        raise ValueError(f"Invalid {name}: {value}")


def call_kernel(kernel, args, layout=None):
    """One kernel call: over a whole group's flat buffers with `layout`, else one tensor."""
    if layout is not None:
        kernel.call_model(layout, args)
    else:
        kernel.call(args)


class ElementwiseOptimizer(OpforgeOptimizer):
    """An optimizer whose kernel updates var and a few state tensors from one gradient.
    Subclasses say which kernel (`kernel_for`), which state tensors (`slots`: kernel
    argument, torch state_dict key, initial value), the scalars for a step (`scalars`) and
    how the gradient is folded (`grad_fold`, torch's maximize / L2 order; None: the raw
    gradient). fused: one call per group when every parameter has a gradient and all are at
    the same step (call_model over flat buffers), else one call per parameter.
    step_type: torch's type for state['step'] (tensor, int, or None for no step)."""

    step_type = torch.Tensor

    def slots(self, group):
        raise NotImplementedError

    def kernel_for(self, group, multi):
        raise NotImplementedError

    def scalars(self, group, step):
        raise NotImplementedError

    def grad_fold(self, group):
        return dict(negate=bool(group.get("maximize", False)),
                    weight_decay=group.get("weight_decay", 0.0))

    def _new_step(self):
        return torch.tensor(0.0) if self.step_type is torch.Tensor else 0

    def _count(self, state):
        if self.step_type is None:
            return 0
        state.setdefault("step", self._new_step())
        state["step"] += 1
        return float(state["step"])

    def group_step(self, group):
        slots = self.slots(group)
        fold = self.grad_fold(group)
        params = group["params"]
        if self._fused:
            fg = self.flat_group(params, ["var", "grad"] + [arg for arg, _, _ in slots])
            steps = []
            for i, p in enumerate(params):
                if p.grad is None:
                    continue
                state = self.state[p]
                for arg, key, init in slots:
                    v = fg.view(arg, i)
                    t = state.get(key)
                    if t is None:
                        v.fill_(init)
                    elif t.data_ptr() != v.data_ptr():
                        v.copy_(t)
                    state[key] = v
                steps.append(self._count(state))
                fold_grad(fg.view("grad", i), p.grad, p, **fold)
            if len(steps) == len(params) and len(set(steps)) == 1:
                args = {arg: fg.flat[arg] for arg, _, _ in slots}
                args.update(var=fg.flat["var"], grad=fg.flat["grad"])
                args.update(self.scalars(group, steps[0]))
                self.functional(self.kernel_for(group, True), args, fg.layout)
                return
            # Some parameters without gradients or at other steps: one call each.
            kernel = self.kernel_for(group, False)
            for i, p in enumerate(params):
                if p.grad is not None:
                    state = self.state[p]
                    args = {arg: state[key] for arg, key, _ in slots}
                    args.update(var=fg.view("var", i), grad=fg.view("grad", i))
                    step = float(state["step"]) if self.step_type is not None else 0
                    args.update(self.scalars(group, step))
                    self.functional(kernel, args)
            return
        kernel = self.kernel_for(group, False)
        for pi, p in enumerate(params):
            if p.grad is None:
                continue
            if not p.is_contiguous():
                raise RuntimeError(f"{type(self).__name__}: parameter {pi} is not contiguous "
                                   "(fused=False updates parameters in place)")
            state = self.state[p]
            for arg, key, init in slots:
                t = state.get(key)
                if t is None or not t.is_contiguous():
                    state[key] = torch.full_like(p, init, memory_format=torch.contiguous_format) \
                        if t is None else t.contiguous()
            step = self._count(state)
            grad = fold_grad(torch.empty_like(p, memory_format=torch.contiguous_format),
                             p.grad, p, **fold)
            args = {arg: state[key] for arg, key, _ in slots}
            args.update(var=p, grad=grad)
            args.update(self.scalars(group, step))
            self.functional(kernel, args)

    @staticmethod
    def functional(kernel, args, layout=None):
        call_kernel(kernel, args, layout)
