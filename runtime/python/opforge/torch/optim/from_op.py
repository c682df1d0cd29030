"""from_op: an optimizer for any dense elementwise optimizer op of the registry, built from
its descriptor alone (states, gradient, scalars), with no per-op code."""

import torch

import opforge
from opforge import ModelLayout

from ._base import ElementwiseOptimizer, default_registry

_STEP_SCALARS = ("step", "global_step")


class FromOp(ElementwiseOptimizer):
    """The op's formula as its descriptor states it (TensorFlow's or torch's conventions,
    whichever the op has: see `opforge describe OP`). State tensors: the op's state
    arguments other than var, under their descriptor names, zero-initialized (descriptors
    name no other initial value). Scalars: each from the hyperparameter of its name (a group
    entry, so schedulers and param groups work); 'step' / 'global_step' from the step count;
    'X_power' as X ** step when the hyperparameter X is given (TensorFlow's beta1_power).
    One call_model per group per step when the op is multi-tensor (descriptor
    shape.multi_tensor), else one call per parameter; segmented ops (shape.segments: LAMB,
    LARS, per-tensor norms) get their chunk table from the layout, and one parameter alone
    goes through a one-tensor layout. Rule-file ops (generators/rules, opforge.rule) work the
    same way, and a scalar that the descriptor gives a default (a rule's `hyper lr = 0.01`)
    takes it when no hyperparameter names it ('X_power' still follows X when X has a value).
    The gradient is passed unchanged."""

    def __init__(self, op, params, attrs=None, *, fused=None, registry=None, isa=None,
                 dump_dir=None, **hypers):
        reg = registry or default_registry()
        kernel = reg.select(op, attrs or {}, isa)
        d = kernel.descriptor
        if d["kind"] != "optimizer":
            raise ValueError(f"from_op: {op} is a {d['kind']} op, not an optimizer")
        # Segmented multi-tensor ops (LAMB, LARS): call_model builds the chunk table.
        segments = d["shape"].get("segments") or None
        bad = [f"{i['name']} ({i['role']} {i['dtype']})" for i in d["inputs"]
               if i["name"] != segments and (
                   i["role"] not in ("state", "gradient", "scalar")
                   or (i["role"] != "scalar" and i["dtype"] != "float32"))]
        states = [i["name"] for i in d["inputs"] if i["role"] == "state"]
        grads = [i["name"] for i in d["inputs"] if i["role"] == "gradient"]
        if "var" not in states or len(grads) != 1:
            bad.append(f"var/gradient (states {states}, gradients {grads})")
        if bad:
            raise ValueError(f"from_op: {op} has arguments opforge.torch.optim cannot map: "
                             + ", ".join(bad))
        scalars = [i["name"] for i in d["inputs"] if i["role"] == "scalar"]
        hypers = dict(hypers)
        defaults = {i["name"]: i["default"] for i in d["inputs"] if "default" in i}
        # Plain names first: a defaulted beta1 still makes beta1_power = beta1 ** step.
        for name in sorted(defaults, key=lambda n: n.endswith("_power")):
            powered = name.endswith("_power") and name[:-6] in hypers
            if name not in hypers and not powered and name not in _STEP_SCALARS:
                hypers[name] = defaults[name]
        used, missing = set(), []
        for name in scalars:
            if name in hypers:
                used.add(name)
            elif name.endswith("_power") and name[:-6] in hypers:
                used.add(name[:-6])
            elif name not in _STEP_SCALARS:
                missing.append(name)
        unknown = sorted(set(hypers) - used)
        if unknown or missing:
            # Each missing scalar with its description, to say what it is.
            docs = {i["name"]: i.get("description", "") for i in d["inputs"]}
            raise ValueError(f"from_op: {op}: " + "; ".join(
                ([f"unknown hyperparameters {unknown} (scalars: {scalars})"] if unknown else [])
                + ([f"no value for scalars {missing} ("
                    + ", ".join(f"{n}: {docs[n]}" for n in missing) + ")"] if missing else [])))
        self._op, self._attrs = op, dict(attrs or {})
        self._grad_arg = grads[0]
        self._state_args = [s for s in states if s != "var"]
        self._scalar_names = scalars
        self._segmented = segments is not None
        self._layouts = {}  # shape -> one-tensor ModelLayout (segmented ops, one call each)
        counts = any(n in _STEP_SCALARS or (n.endswith("_power") and n not in hypers)
                     for n in scalars)
        self.step_type = type(self).step_type if counts else None
        multi = bool(d["shape"].get("multi_tensor"))
        super().__init__(params, hypers, fused if multi else False, registry, isa,
                         dump_dir=dump_dir)

    def slots(self, group):
        return [(name, name, 0.0) for name in self._state_args]

    def grad_fold(self, group):
        return {}

    def kernel_for(self, group, multi):
        return self.kernel(self._op, self._attrs)

    def scalars(self, group, step):
        out = {}
        for name in self._scalar_names:
            if name in group:
                out[name] = group[name]
            elif name in _STEP_SCALARS:
                out[name] = int(step) if name == "global_step" else step
            else:
                out[name] = group[name[:-6]] ** step
        return out

    def functional(self, kernel, args, layout=None):
        args[self._grad_arg] = args.pop("grad")
        if self._segmented and layout is None:
            self._one_tensor_call(kernel, args)
        else:
            super().functional(kernel, args, layout)

    def _one_tensor_call(self, kernel, args):
        # A segmented op takes its chunk table from a layout only: one tensor goes through a
        # one-tensor layout, copied into zero-padded buffers (as a flat group pads) and back.
        tensors = {k: v for k, v in args.items() if torch.is_tensor(v)}
        shape = tuple(args["var"].shape)
        layout = self._layouts.get(shape)
        if layout is None:
            layout = self._layouts[shape] = ModelLayout([("0", shape)])
        n = args["var"].numel()
        flat = {k: torch.zeros(layout.total_elements, dtype=torch.float32) for k in tensors}
        for k, t in tensors.items():
            flat[k][:n].copy_(t.reshape(-1))
        kernel.call_model(layout, dict(args, **flat))
        for k, t in tensors.items():
            if k != self._grad_arg:
                t.copy_(flat[k][:n].view(t.shape))


def from_op(op, params, attrs=None, *, fused=None, registry=None, isa=None, dump_dir=None,
            **hypers):
    """An optimizer stepping `params` with registry op `op`, a built-in or rule-file op (attrs
    select the variant): see FromOp. Unknown hyperparameters, scalars without a value and
    arguments that are not dense float32 states / one gradient / scalars / a segmented op's
    chunk table are refused, naming them."""
    return FromOp(op, params, attrs, fused=fused, registry=registry, isa=isa,
                  dump_dir=dump_dir, **hypers)


def from_rule(text_or_path, params, attrs=None, *, fused=None, registry=None, isa=None,
              dump_dir=None, **hypers):
    """An optimizer stepping `params` with the op of a rule (its text, or a rule file's
    path), built on the fly into the user registry through the compile cache
    (opforge.rule): FromOp over that op, its hyperparameters defaulting to the rule's."""
    op = opforge.rule(text_or_path, registry or default_registry())
    return FromOp(op.name, params, attrs, fused=fused, registry=op.registry, isa=isa,
                  dump_dir=dump_dir, **hypers)
