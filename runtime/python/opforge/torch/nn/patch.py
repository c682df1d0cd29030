"""opforge.torch.patch(model): swaps every supported submodule for its opforge module, in
place, and says what it swapped and what it left, and why."""

from dataclasses import dataclass, field

import torch

from opforge.torch.optim._base import default_registry

from .modules import REPLACEMENTS


@dataclass
class PatchReport:
    swapped: list = field(default_factory=list)  # (qualified name, torch class name)
    left: list = field(default_factory=list)     # (qualified name, class name, reason)

    def __str__(self):
        lines = [f"swapped {len(self.swapped)} modules, left {len(self.left)}"]
        lines += [f"  swapped {name or '<model>'}: {cls}" for name, cls in self.swapped]
        lines += [f"  left    {name or '<model>'}: {cls}: {why}" for name, cls, why in self.left]
        return "\n".join(lines)


def _reason_left(module):
    for base in type(module).__mro__[1:]:
        if base in REPLACEMENTS:
            return (f"a subclass of torch.nn.{base.__name__} ({type(module).__qualname__}): "
                    "its forward may differ")
    return f"no opforge kernel for {type(module).__module__}.{type(module).__qualname__}"


def patch(model, fallback=False):
    """Replaces, in place, every submodule (the model itself included) whose class is exactly
    one of torch.nn's LayerNorm, Linear, Conv2d, GELU, Softmax, in a form opforge runs, by its
    opforge.torch.nn module: the same object state (parameters, buffers, hooks are shared, not
    copied), a forward on opforge kernels. fallback: with gradients needed, run torch's forward
    instead of raising. Returns the model's replacement (itself unless the model is itself a
    supported module) and a PatchReport: what was swapped, and every leaf module left with
    the reason (containers are not listed). A module whose kernels the registry the modules
    run on (opforge.open()'s) lacks is left, naming the op."""
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
        for child_name, child in list(module.named_children()):
            name = f"{prefix}.{child_name}" if prefix else child_name
            new = convert(name, child)
            if new is None:
                walk(name, child)
            elif new is not child:
                setattr(module, child_name, new)

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"patch: expected a torch.nn.Module, got {type(model).__name__}")
    root = convert("", model)
    if root is None:
        walk("", model)
        root = model
    return root, report
