"""GradScaler: torch.cuda.amp.GradScaler's loss scaling for CPU training (torch 1.13's
disables itself without CUDA), on opforge kernels: amp_update_scale for the scale, and
for a fused opforge optimizer the optimizer kernel's own unscale / skip_if_nonfinite
variant (unscaling, the inf/NaN check and the update in one pass)."""

import enum

import torch

from .optim._base import default_registry, flat_group_of_grads


class _Stage(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


class GradScaler:
    """torch.cuda.amp.GradScaler's constructor, methods and state_dict:

        scaler = opforge.torch.GradScaler()
        loss = scaler.scale(loss); loss.backward()
        scaler.unscale_(opt); opforge.torch.clip_grad_norm_(...)   # optional
        scaler.step(opt)      # skipped when a gradient is inf/NaN
        scaler.update()       # backoff after a skip, growth after growth_interval

    step() on an opforge optimizer whose single fused group is already bound (a step has
    run) and whose kernel has an unscale + skip_if_nonfinite variant (Adam, AdamW) is one
    kernel call; otherwise the gradients are unscaled (one pass per flat buffer, else per
    tensor), checked, and the step runs only when all are finite. A skipped step leaves
    parameters and states bit-identical, step counts included. Gradients of any optimizer
    work (torch.optim's too); f16 gradients are allowed (opforge's master_weights)."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True, *, registry=None, isa=None):
        if not growth_factor > 1.0:
            raise ValueError(f"GradScaler: growth_factor {growth_factor} must be > 1")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor {backoff_factor} must be in (0, 1)")
        if not (isinstance(growth_interval, int) and growth_interval > 0):
            raise ValueError(f"GradScaler: growth_interval {growth_interval!r} must be a "
                             "positive int")
        self._enabled = bool(enabled)
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._registry, self._isa = registry, isa
        self._scale = torch.full((1,), self._init_scale)
        self._growth_tracker = torch.zeros(1)  # fp32 count, as amp_update_scale keeps it
        self._per_optimizer = {}  # id(optimizer) -> {"stage", "found_inf"}

    def is_enabled(self):
        return self._enabled

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(
            id(optimizer), {"stage": _Stage.READY, "found_inf": None})

    def scale(self, outputs):
        """outputs * scale (a tensor, or tensors in lists / tuples / dicts)."""
        if not self._enabled:
            return outputs
        if torch.is_tensor(outputs):
            return outputs * self._scale.to(outputs.dtype)[0]
        if isinstance(outputs, dict):
            return {k: self.scale(v) for k, v in outputs.items()}
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(v) for v in outputs)
        raise ValueError("GradScaler.scale: outputs must be a tensor or an iterable of tensors")

    def _inv_scale(self):
        return float(self._scale.double().reciprocal())

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by the scale in place and records whether any
        is inf/NaN (once per optimizer between updates, as torch)."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] is _Stage.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv = self._inv_scale()
        found = False
        for t in _gradient_buffers(optimizer):
            t.mul_(inv)
            found = found or not bool(torch.isfinite(t).all())
        state["found_inf"] = torch.tensor([1.0 if found else 0.0])
        state["stage"] = _Stage.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(), skipped when the (unscaled) gradients hold an inf/NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        state = self._state(optimizer)
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _Stage.READY and not args and not kwargs:
            fused = getattr(optimizer, "amp_fused_step", None)
            found = fused(self._inv_scale()) if fused is not None else None
            if found is not None:
                state["found_inf"], state["stage"] = found, _Stage.STEPPED
                return None
        if state["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        retval = None
        if not float(state["found_inf"][0]):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = _Stage.STEPPED
        return retval

    def update(self, new_scale=None):
        """The scale for the next iteration: backoff_factor times after a step with an
        inf/NaN, growth_factor times after growth_interval clean steps (amp_update_scale,
        torch's _amp_update_scale_), or new_scale."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale.fill_(float(new_scale))
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values()
                     if s["found_inf"] is not None]
            if not found:
                raise RuntimeError("No inf checks were recorded prior to update().")
            combined = torch.zeros(1)
            for f in found:
                combined += f
            kernel = (self._registry or default_registry()).select("amp_update_scale", {},
                                                                   self._isa)
            kernel.call(scale=self._scale, growth_tracker=self._growth_tracker,
                        found_inf=combined, growth_factor=self._growth_factor,
                        backoff_factor=self._backoff_factor,
                        growth_interval=self._growth_interval)
        self._per_optimizer = {}

    def get_scale(self):
        return float(self._scale[0]) if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def state_dict(self):
        """torch's keys: scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker (empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": int(self._growth_tracker[0])}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._scale.fill_(float(state_dict["scale"]))
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker.fill_(float(state_dict["_growth_tracker"]))


def _gradient_buffers(optimizer):
    """The tensors to unscale: each fused opforge group's whole flat gradient buffer when its
    gradients are all still views of it (one pass; its padding is zero), else each gradient
    (a sparse one's values, coalesced)."""
    dense = []
    out = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                p.grad = p.grad.coalesce()
                out.append(p.grad._values())
            else:
                dense.append(p.grad)
    groups, loose = flat_group_of_grads(dense)
    return [fg.flat["grad"] for fg in groups] + loose + out
