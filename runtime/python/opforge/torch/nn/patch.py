"""opforge.torch.patch(model): swaps every supported submodule for its opforge module, in
place, and says what it swapped and what it left, and why."""

from dataclasses import dataclass, field

import torch

from opforge.torch.optim._base import default_registry

from .modules import REPLACEMENTS, _OpforgeModule


@dataclass
class PatchReport:
    swapped: list = field(default_factory=list)  # (qualified name, torch class name)
    left: list = field(default_factory=list)     # (qualified name, class name, reason)
    changed: list = field(default_factory=list)  # (qualified name, what was changed, why)

    def __str__(self):
        lines = [f"swapped {len(self.swapped)} modules, left {len(self.left)}"]
        lines += [f"  swapped {name or '<model>'}: {cls}" for name, cls in self.swapped]
        lines += [f"  left    {name or '<model>'}: {cls}: {why}" for name, cls, why in self.left]
        lines += [f"  changed {name or '<model>'}: {what}: {why}"
                  for name, what, why in self.changed]
        return "\n".join(lines)


def _reason_left(module):
    if isinstance(module, _OpforgeModule):
        return "already an opforge module"
    for base in type(module).__mro__[1:]:
        if base in REPLACEMENTS:
            return (f"a subclass of torch.nn.{base.__name__} ({type(module).__qualname__}): "
                    "its forward may differ")
    return f"no opforge kernel for {type(module).__module__}.{type(module).__qualname__}"


def patch(model, fallback=False):
    """Replaces, in place, every submodule (the model itself included) whose class is exactly
    one of torch.nn's LayerNorm, Linear, Conv2d, GELU, Softmax, SiLU, GroupNorm,
    MultiheadAttention (modules.REPLACEMENTS), in a form opforge runs (float32 parameters;
    the norms also bfloat16), by its opforge.torch.nn module: the same object state
    (parameters, buffers, hooks are shared, not copied), a forward on opforge kernels.
    fallback: with gradients needed, run torch's forward instead of raising. Returns the
    model's replacement (itself unless the model is itself a supported module) and a
    PatchReport: what was swapped, every leaf module left with the reason (containers are not
    listed), and what else was changed so that the swapped modules run (a
    TransformerEncoderLayer's fused fast path turned off). A module whose kernels the
    registry the modules run on (opforge.open()'s) lacks is left, naming the op."""
    report = PatchReport()
    have = set(default_registry().ops())

    def convert(name, module):
        """The replacement of `module`, or None: then `module` is left, or (a container)
        walked."""
        new_cls = REPLACEMENTS.get(type(module))
        if new_cls is None:
            if not any(True for _ in module.children()):
                report.left.append((name, type(module).__name__, _reason_left(module)))
            return None
        missing = [op for op in new_cls.ops if op not in have]
        why = (f"the registry has no op {missing[0]!r} (built by an older opforge?)"
               if missing else new_cls.supports(module))
        if why:  # left whole: its submodules (MultiheadAttention's out_proj) go with it
            report.left.append((name, type(module).__name__, why))
            return module
        new = new_cls.__new__(new_cls)
        new.__dict__.update(module.__dict__)
        new.fallback = fallback
        report.swapped.append((name, type(module).__name__))
        return new

    def walk(prefix, module):
        swapped = False
        for child_name, child in list(module.named_children()):
            name = f"{prefix}.{child_name}" if prefix else child_name
            new = convert(name, child)
            if new is None:
                walk(name, child)
            elif new is not child:
                setattr(module, child_name, new)
                swapped = True
        if swapped and isinstance(module, torch.nn.TransformerEncoderLayer):
            _no_fused_fast_path(prefix, module)

    def _no_fused_fast_path(name, layer):
        # In eval mode without gradients torch's forward hands the whole layer to one fused
        # aten op (torch._transformer_encoder_layer_fwd) that reads the weights and never
        # calls the submodules: the swapped ones would not run. The op is taken only while
        # this flag is set (TransformerEncoder checks it too, for its nested tensors).
        if getattr(layer, "activation_relu_or_gelu", 0):
            layer.activation_relu_or_gelu = 0
            report.changed.append((name, "activation_relu_or_gelu = 0",
                                   "turns off torch's fused encoder-layer fast path, which "
                                   "bypasses the swapped submodules"))

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"patch: expected a torch.nn.Module, got {type(model).__name__}")
    root = convert("", model)
    if root is None:
        walk("", model)
        root = model
    return root, report
