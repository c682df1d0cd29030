"""What the opforge optimizers share: the registry and kernels, parameter checks, and the
flat buffers a parameter group lives in for fused steps."""

import contextlib
import operator
import os
import warnings
import weakref

import torch

import opforge

from . import _sparse

_registry = None

_GRAD = operator.attrgetter("grad")

# id(flat gradient buffer) -> its FlatGroup, for whole-buffer gradient passes (clipping,
# unscaling) by code that sees only parameters.
_FLAT_GRADS = weakref.WeakValueDictionary()


def flat_group_of_grads(grads):
    """The FlatGroups whose gradient buffers hold exactly `grads` (every view of a buffer,
    none missing), and the gradients that are not in such a buffer."""
    by_base = {}
    for g in grads:
        by_base.setdefault(id(g._base) if g._base is not None else id(g), []).append(g)
    groups, loose = [], []
    for key, gs in by_base.items():
        fg = _FLAT_GRADS.get(key)
        if fg is not None and fg.holds_grads(gs):
            groups.append(fg)
        else:
            loose.extend(gs)
    return groups, loose


# Low-precision parameter dtypes with fp32 master weights, and the kernels' storage names.
MASTER_STORAGE = {torch.bfloat16: "bf16m", torch.float16: "f16m"}


def default_registry():
    """The registry the optimizers select kernels from (opened once, on first use)."""
    global _registry
    if _registry is None:
        _registry = opforge.open()
    return _registry


class FlatGroup:
    """A parameter group's tensors back to back in flat buffers (an opforge ModelLayout):
    parameters (p.data), their gradients (p.grad) and their state tensors become views of
    them, so one kernel call (call_model) updates the whole group. Padding stays zero.

    Gradients: backward accumulates into an existing p.grad in place, so once p.grad is a
    view here (and zero_grad keeps it: set_to_none=False, torch 1.13's default) a step
    reads the gradients where backward left them, with no copy. A p.grad that is not the
    view (the first step, set_to_none, a gradient set by hand) is copied in and replaced.

    'var' holds the parameters (fp32), or with master weights the fp32 masters while the
    parameters live in 'model' (bf16/f16) and the gradients in 'grad' of the same dtype."""

    def __init__(self, params, dtype=torch.float32, alignment=0):
        self.params = list(params)
        self.dtype = dtype
        self.master = dtype != torch.float32
        # alignment: each tensor's first element, in elements (0: the runtime's default)
        self.layout = opforge.ModelLayout([(str(i), tuple(p.shape))
                                           for i, p in enumerate(self.params)], alignment)
        self.flat = {}
        self._views = {}  # (buffer, i) -> view, made once (a slice costs ~µs every step)
        # state['step'] of every parameter as a 0-dim view of this (torch's float32 step
        # tensors): one add_ advances them all (_foreach_add_ over 3005 costs ~10 ms).
        self.steps = torch.zeros(len(self.params))
        self._step_views = None
        self.bound = None  # (optimizer state, slot keys) while everything is bound
        self.fresh = {}  # parameter index -> whether _bind created its states this step
        self._grad_views = None
        self._param_ptrs = None

    def buffer(self, name):
        buf = self.flat.get(name)
        if buf is None:
            dtype = self.dtype if name in ("model", "grad") else torch.float32
            buf = self.flat[name] = torch.zeros(self.layout.total_elements, dtype=dtype)
        return buf

    def view(self, name, i, checked=False):
        """Tensor i of buffer `name`. checked: also when the cached view's .data was
        replaced (e.g. Module._apply assigning p.grad.data), a new one."""
        v = self._views.get((name, i))
        off = self.layout.offsets[i]
        if v is None or (checked and v.data_ptr() != self.buffer(name)[off:].data_ptr()):
            v = self.buffer(name)[off:off + self.layout.elements[i]].view(self.params[i].shape)
            self._views[name, i] = v
        return v

    def step_view(self, i):
        if self._step_views is None:
            self._step_views = list(self.steps.unbind())
        return self._step_views[i]

    @property
    def param_buffer(self):
        return "model" if self.master else "var"

    def bind_param(self, i):
        """Makes parameter i's data the flat view (copying it in when it moved)."""
        p, v = self.params[i], self.view(self.param_buffer, i, checked=True)
        if p.data.data_ptr() != v.data_ptr():
            v.copy_(p.data)
            p.data = v

    def bind_grad(self, i):
        """Makes parameter i's gradient the flat view (copying it in when it is not)."""
        p = self.params[i]
        v = self.view("grad", i, checked=True)
        if p.grad is not v:
            if p.grad.data_ptr() != v.data_ptr():
                v.copy_(p.grad)
            p.grad = v

    def bind_state(self, state, key, arg, i, init):
        """state[key] as the view of buffer `arg`: a loaded or fresh tensor is copied in,
        none is initialized (a number, or "param": the parameter's value in fp32). Returns
        whether the state existed."""
        v = self.view(arg, i, checked=True)
        t = state.get(key)
        if t is v:
            return True
        if t is None:
            if init == "param":
                v.copy_(self.params[i].data)
            else:
                v.fill_(init)
        elif t.data_ptr() != v.data_ptr():
            v.copy_(t)
        state[key] = v
        return t is not None

    def bind_step(self, state, i):
        """state['step'] as the view of steps[i] (its value kept); returns the value."""
        v = self.step_view(i)
        t = state.get("step")
        if t is not v:
            v.fill_(0.0 if t is None else float(t))
            state["step"] = v
        return float(v)

    def mark_bound(self, state, keys):
        """Everything is bound now: until the optimizer's state is replaced
        (load_state_dict), a parameter moves or a gradient is replaced, steps skip binding."""
        self.bound = (state, keys)
        self._grad_views = [self.view("grad", i) for i in range(len(self.params))]
        _FLAT_GRADS[id(self.flat["grad"])] = self
        self._param_ptrs = [p.data_ptr() for p in self.params]

    def is_bound(self, state, keys, check=True):
        """Whether the binding holds. check: also the two C-level passes over the parameters
        (gradients still the views, data still in place): ~0.2 µs a parameter with warm
        caches, ~0.6 µs after a step has streamed the buffers through them."""
        return (self.bound is not None and self.bound[0] is state and self.bound[1] == keys
                and (not check or (
                    all(map(operator.is_, map(_GRAD, self.params), self._grad_views))
                    and list(map(torch.Tensor.data_ptr, self.params)) == self._param_ptrs)))

    def zero_grad(self):
        self.flat["grad"].zero_()

    def holds_grads(self, grads):
        """Whether `grads` are exactly this group's gradient views (any order)."""
        views = self._grad_views
        return (views is not None and len(grads) == len(views)
                and {id(g) for g in grads} == {id(v) for v in views}
                and all(map(operator.is_, map(_GRAD, self.params), views)))


class OpforgeOptimizer(torch.optim.Optimizer):
    """The shared part: dense CPU parameters (fp32; bf16/f16 with master_weights=True),
    checked when a group is added; kernels cached by attrs; flat groups rebuilt when a
    group's parameters change."""

    # Group keys a checkpoint from an older torch may lack, filled on unpickling as each torch
    # class's own __setstate__ does.
    group_defaults = {}

    # False: once a fused group is bound, steps skip checking that every p.grad and p.data
    # is still its flat buffers' view (~0.6 µs a parameter: ~2 ms a step for ResNet-1001's
    # 3005 tensors). Only for loops where nothing but backward and this optimizer's
    # zero_grad() touches .grad / .data between steps (no p.grad = ..., no set_to_none
    # outside it, no Module.to()); load_state_dict and add_param_group are still noticed.
    check_bindings = True

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, value in self.group_defaults.items():
                group.setdefault(key, value)

    def __init__(self, params, defaults, fused, registry, isa, master_weights=False,
                 dump_dir=None):
        for flag in ("capturable", "differentiable"):
            if defaults.pop(flag, False):
                raise ValueError(f"{type(self).__name__}: {flag}=True is not supported by "
                                 "opforge (CPU kernels, no autograd through the step)")
        self._fused = True if fused is None else bool(fused)
        self._master = bool(master_weights)
        self._registry = registry
        self._isa = isa
        # Precision dumps of this optimizer's kernel calls (opforge check --replay DIR).
        self._dump_dir = os.fspath(dump_dir) if dump_dir is not None else None
        self._kernels = {}
        self._flat_groups = {}  # tuple of parameter ids -> FlatGroup
        self._group_flat = {}  # id(param group) -> (its params list, FlatGroup)
        super().__init__(params, defaults)

    def add_param_group(self, param_group):
        params = param_group["params"]
        if isinstance(params, set):  # torch refuses a set (no order): let it say so
            return super().add_param_group(param_group)
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        param_group["params"] = params  # a generator is read once, here
        gi = len(getattr(self, "param_groups", []))
        name = type(self).__name__
        dtypes = set()
        for pi, p in enumerate(params):
            if not isinstance(p, torch.Tensor):
                continue  # torch's own check names it
            ok = (torch.float32,) + (tuple(MASTER_STORAGE) if self._master else ())
            if p.dtype not in ok or p.device.type != "cpu" or p.is_sparse:
                want = ("float32, bfloat16 or float16" if self._master else
                        "float32 (bfloat16/float16 with master_weights=True)")
                raise ValueError(f"{name}: parameter {pi} of group {gi} is "
                                 f"{p.dtype} on {p.device}{' (sparse)' if p.is_sparse else ''};"
                                 f" opforge optimizers take dense {want} CPU parameters")
            if not p.requires_grad:
                # Taken, as torch takes it: it gets no gradient, so each step skips it. But a
                # fused group with a parameter lacking a gradient takes the per-parameter path.
                warnings.warn(f"{name}: parameter {pi} of group {gi} does not require grad: "
                              "each step skips it, and its group is updated one parameter at "
                              "a time instead of in one fused call; pass the trainable "
                              "parameters only ([p for p in model.parameters() if "
                              "p.requires_grad]) to keep the fused call")
            dtypes.add(p.dtype)
        if len(dtypes) > 1:
            raise ValueError(f"{name}: group {gi} mixes parameter dtypes "
                             f"{sorted(map(str, dtypes))}; put each dtype in its own group")
        self.check_param_group(param_group, gi)
        super().add_param_group(param_group)

    def check_param_group(self, param_group, gi):
        """Hook: a subclass's own checks of group gi (its params a list by now), run before
        the group is added; raise to refuse it."""

    def load_state_dict(self, state_dict):
        """torch's, except that bf16/f16 parameters' fp32 states (the masters, the moments)
        stay fp32: torch casts every floating state to its parameter's dtype."""
        super().load_state_dict(state_dict)
        saved_ids = [i for g in state_dict["param_groups"] for i in g["params"]]
        params = [p for g in self.param_groups for p in g["params"]]
        for i, p in zip(saved_ids, params):
            saved = state_dict["state"].get(i)
            if p.dtype == torch.float32 or saved is None:
                continue
            for key, value in saved.items():
                if key != "step" and torch.is_tensor(value) and value.is_floating_point():
                    self.state[p][key] = value.detach().to(torch.float32, copy=True)

    def kernel(self, op, attrs, optional=False):
        """The variant of op for attrs, selected once. optional: None (also remembered)
        where the registry has no such variant, instead of the runtime's error."""
        key = (op, tuple(sorted(attrs.items())))
        if key in self._kernels:
            return self._kernels[key]
        reg = self._registry or default_registry()
        try:
            k = reg.select(op, attrs, self._isa)
        except opforge.OpforgeError:
            if not optional:
                raise
            k = None
        self._kernels[key] = k
        return k

    def flat_group(self, params):
        key = tuple(id(p) for p in params)
        fg = self._flat_groups.get(key)
        if fg is None:
            fg = self._flat_groups[key] = FlatGroup(params, params[0].dtype)
        return fg

    def group_flat(self, group):
        """The group's FlatGroup, found without a pass over its parameters."""
        params = group["params"]
        hit = self._group_flat.get(id(group))
        if hit is not None and hit[0] is params and len(hit[1].params) == len(params):
            return hit[1]
        fg = self.flat_group(params)
        self._group_flat[id(group)] = (params, fg)
        return fg

    def group_ready(self, group):
        """Whether the group's parameters, gradients and states are all bound to its flat
        buffers (then its gradients need no checks: they are the buffers' views)."""
        return False

    def check_grads(self, gi, group):
        """Every gradient of the group usable, checked before any state changes."""
        for pi, p in enumerate(group["params"]):
            g = p.grad
            if g is None:
                continue
            if not self._fused and not g.is_sparse and not p.is_contiguous():
                raise RuntimeError(f"{type(self).__name__}: parameter {pi} of group {gi} is not "
                                   "contiguous (fused=False updates parameters in place; "
                                   "fused=True takes it)")
            if g.is_sparse:
                if p.dtype != torch.float32:
                    raise _sparse.refusal(self, gi, pi, f"and the parameter is {p.dtype} "
                                          "(sparse updates take float32 parameters)")
                self.check_sparse_grad(gi, pi, group, p)
                continue
            if g.dtype != p.dtype or g.shape != p.shape or g.device != p.device:
                raise RuntimeError(f"{type(self).__name__}: parameter {pi} of group {gi} "
                                   f"has a {g.dtype} gradient of shape {tuple(g.shape)} on "
                                   f"{g.device}; expected {p.dtype} {tuple(p.shape)} on cpu")

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
        ready = [self.group_ready(group) for group in self.param_groups]
        for gi, group in enumerate(self.param_groups):
            if not ready[gi]:
                self.check_grads(gi, group)
        dumping = (opforge.dumping(self._dump_dir) if getattr(self, "_dump_dir", None)
                   else contextlib.nullcontext())
        with dumping:
            for gi, group in enumerate(self.param_groups):
                if ready[gi]:
                    self.group_step(group, True)
                elif any(p.grad is not None for p in group["params"]):
                    self.group_step(group, False)
        return loss

    def zero_grad(self, set_to_none=False):
        """torch's zero_grad; gradients that are views of a group's flat buffer (fused
        steps) are zeroed with one fill of the buffer and stay views."""
        if set_to_none:
            for fg in self._flat_groups.values():
                fg.bound = None  # the next step copies the new gradients in and rebinds
            return super().zero_grad(set_to_none=True)
        for group in self.param_groups:
            self.zero_group_grads(group)

    def zero_group_grads(self, group):
        """zero_grad(set_to_none=False) of one param group: one fill of its flat gradient
        buffer while it is bound, else each gradient."""
        hit = self._group_flat.get(id(group))
        fg = hit[1] if hit is not None and hit[0] is group["params"] else None
        if (fg is not None and fg.bound is not None
                and fg.is_bound(*fg.bound, check=self.check_bindings)):
            fg.zero_grad()
        else:
            for p in group["params"]:
                if p.grad is not None:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()


def fold_grad(dst, grad, param, negate=False, weight_decay=0.0, scale=1.0):
    """dst = scale * (+-grad + weight_decay * param), in torch.optim's order of operations
    (maximize, then the L2 term, then e.g. SGD's dampening)."""
    dst.copy_(grad)  # (may widen bf16/f16 to fp32)
    if negate:
        dst.neg_()
    if weight_decay != 0:
        dst.add_(param.to(dst.dtype), alpha=weight_decay)
    if scale != 1:
        dst.mul_(scale)
    return dst


def folds(fold):
    """Whether fold_grad with these arguments changes the gradient."""
    return bool(fold.get("negate")) or fold.get("weight_decay", 0) != 0 \
        or fold.get("scale", 1) != 1


def check_hyper(name, value, low=0.0, high=None):
    """torch.optim's range checks, before anything is built."""
    if not low <= value or (high is not None and not value < high):
        raise ValueError(f"Invalid {name}: {value}")


def check_betas(betas):
    """torch.optim's check of (beta1, beta2): each in [0, 1)."""
    for i, beta in enumerate(betas):
        check_hyper(f"beta parameter at index {i}", beta, high=1.0)


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
    how the gradient is folded (`grad_fold`, torch's maximize / L2 order; {}: the raw
    gradient). step_type: torch's type for state['step'] (tensor, int, or None).

    fused=True: one call_model per group per step over the flat buffers when every
    parameter has a gradient and all are at the same step, else one call per parameter.
    Once bound, a step costs the kernel, one add_ for the step counts and two C-level
    passes over the parameters checking nothing moved. fused=False: one call per parameter
    on the parameters themselves."""

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

    def fold_for(self, group, first):
        """grad_fold for a step where the states are new (first) or not (SGD's dampening)."""
        return self.grad_fold(group)

    def all_slots(self, group):
        """slots(), plus the fp32 master weights ('var', state 'master_param') when the
        group's parameters are bf16/f16."""
        slots = list(self.slots(group))
        if group["params"][0].dtype != torch.float32:
            slots.insert(0, ("var", "master_param", "param"))
        return slots

    def init_state(self, group, state):
        """Hook: torch state entries without a tensor (SGD's momentum_buffer=None)."""

    def _new_step(self):
        return torch.tensor(0.0) if self.step_type is torch.Tensor else 0

    def _count(self, state):
        if self.step_type is None:
            return 0
        if "step" not in state:
            state["step"] = self._new_step()
        state["step"] += 1
        return float(state["step"])

    def group_ready(self, group):
        return self._fused and self.group_flat(group).is_bound(
            self.state, tuple(self.all_slots(group)), self.check_bindings)

    def group_step(self, group, ready=False):
        if self._fused:
            self._fused_step(group, ready)
        else:
            self._unfused_step(group)

    def _bind(self, group, fg, slots):
        """Binds every parameter with a gradient (data, gradient, states, step) to the flat
        buffers. Returns (step, first) when one call can update the whole group, else None:
        step the common count before this step, first whether every state is new."""
        params = group["params"]
        steps, fresh = set(), set()
        complete = True
        for i, p in enumerate(params):
            fg.bind_param(i)
            if p.grad is None:
                complete = False
                continue
            fg.bind_grad(i)
            state = self.state[p]
            new = [not fg.bind_state(state, key, arg, i, init) for arg, key, init in slots]
            fg.fresh[i] = any(new)
            fresh.update(new)
            self.init_state(group, state)
            if self.step_type is torch.Tensor:
                steps.add(fg.bind_step(state, i))
            elif self.step_type is int:
                steps.add(state.setdefault("step", 0))
        if not complete or len(steps) > 1 or len(fresh) > 1:
            return None
        fg.mark_bound(self.state, tuple(slots))
        return (steps.pop() if steps else 0), (fresh.pop() if fresh else False)

    def _fused_step(self, group, ready):
        params = group["params"]
        fg = self.group_flat(group)
        slots = self.all_slots(group)
        if ready:
            first = False
        else:
            bound = self._bind(group, fg, slots)
            if bound is None:
                return self._per_param_step(group, fg, slots)
            first = bound[1]
        step = self._advance(fg, params)
        args = {arg: fg.flat[arg] for arg, _, _ in slots}
        self._update(group, args, fg.flat["var"], fg.flat.get("model"), fg.flat["grad"],
                     lambda: fg.buffer("grad_folded"), first, step, fg.layout)

    def _advance(self, fg, params, by=1):
        """Advances a bound group's step counts (all equal) by `by`; returns the count.
        torch's step tensors are views of fg.steps: one add_ for all of them."""
        if self.step_type is torch.Tensor:
            fg.steps.add_(by)
            return float(fg.steps[0])
        if self.step_type is int:
            for p in params:
                self.state[p]["step"] += by
            return self.state[params[0]]["step"]
        return 0

    def _update(self, group, args, var, model, grad, scratch, first, step, layout=None):
        """One kernel call: `args` (the states) plus var / model / grad and the scalars;
        the gradient folded into scratch() (maximize, L2, dampening) when it must be.
        With a bf16/f16 model and a fold, the fold stays fp32 (the low-precision kernels
        read low-precision gradients): the fp32 kernel updates the master, and the model
        is the master rounded to nearest even."""
        fold = self.fold_for(group, first)
        folded = folds(fold)
        if folded:  # scratch() is fp32
            # the gradient stays as backward left it; the kernel reads the folded copy
            grad = fold_grad(scratch(), grad, var, **fold)
        args.update(var=var, grad=grad)
        low = model is not None
        fp32_fold = low and folded
        if low and not fp32_fold:
            args["model"] = model
        args.update(self.scalars(group, step))
        multi = layout is not None
        kernel = (self.kernel_for(group, multi, storage="f32") if fp32_fold
                  else self.kernel_for(group, multi))
        self.functional(kernel, args, layout)
        if fp32_fold:
            model.copy_(var)

    def _per_param_step(self, group, fg, slots):
        """Some parameters without gradients or at other steps: one call each on the views
        (bound by _bind)."""
        for i, p in enumerate(group["params"]):
            if p.grad is None:
                continue
            state = self.state[p]
            first = fg.fresh.get(i, False)
            step = self._count(state)
            args = {arg: state[key] for arg, key, _ in slots}
            self._update(group, args, fg.view("var", i),
                         fg.view("model", i) if fg.master else None, fg.view("grad", i),
                         lambda: fg.view("grad_folded", i), first, step)

    def _unfused_step(self, group):
        slots = self.all_slots(group)
        for pi, p in enumerate(group["params"]):
            if p.grad is None:
                continue
            if not p.is_contiguous():
                raise RuntimeError(f"{type(self).__name__}: parameter {pi} is not contiguous "
                                   "(fused=False updates parameters in place)")
            state = self.state[p]
            first = False
            for arg, key, init in slots:
                t = state.get(key)
                if t is None:
                    first = True
                    t = p.detach().float().contiguous() if init == "param" else \
                        torch.full_like(p, init, dtype=torch.float32,
                                        memory_format=torch.contiguous_format)
                    state[key] = t
                elif not t.is_contiguous():
                    state[key] = t.contiguous()
            self.init_state(group, state)
            step = self._count(state)
            args = {arg: state[key] for arg, key, _ in slots}
            low = p.dtype != torch.float32
            self._update(group, args, state["master_param"] if low else p, p if low else None,
                         p.grad.contiguous(), lambda: torch.empty(p.shape), first, step)

    def amp_kernel(self, group):
        """Hook: the group's kernel with unscale and skip_if_nonfinite (scalar inv_scale,
        tensor found_inf), or None where the op has no such variant."""
        return None

    def amp_fused_step(self, inv_scale):
        """GradScaler.step's one-pass path: the step with gradients times inv_scale, skipped
        (states and step counts untouched) when one is inf/NaN. Returns found_inf (a
        1-element tensor, 1 when skipped), or None when this optimizer cannot (more than
        one group, not bound yet, a folded gradient, no such kernel): the caller then
        unscales and steps."""
        if not self._fused or len(self.param_groups) != 1:
            return None
        group = self.param_groups[0]
        if not self.group_ready(group) or folds(self.fold_for(group, False)):
            return None
        kernel = self.amp_kernel(group)
        if kernel is None:
            return None
        fg = self.group_flat(group)
        found = torch.zeros(1)
        step = self._advance(fg, group["params"])
        args = {arg: fg.flat[arg] for arg, _, _ in self.all_slots(group)}
        args.update(var=fg.flat["var"], grad=fg.flat["grad"], inv_scale=inv_scale,
                    found_inf=found)
        if fg.master:
            args["model"] = fg.flat["model"]
        args.update(self.scalars(group, step))
        self.functional(kernel, args, fg.layout)
        if found[0] != 0:
            self._advance(fg, group["params"], -1)  # skipped: torch's step() never ran
        return found

    def storage_attrs(self, group, storage=None):
        """The kernel attrs for the group's parameter dtype (master weights: bf16m / f16m),
        or for `storage` ("f32": the fp32 kernel on the masters)."""
        dtype = group["params"][0].dtype
        if storage == "f32" or dtype == torch.float32:
            return {}
        return {"storage": storage or MASTER_STORAGE[dtype]}

    @staticmethod
    def functional(kernel, args, layout=None):
        call_kernel(kernel, args, layout)
