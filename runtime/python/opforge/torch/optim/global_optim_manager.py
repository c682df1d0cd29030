"""bitsandbytes' GlobalOptimManager (bnb.optim.GlobalOptimManager): per-parameter overrides of
the 8-bit optimizers' state format, the way bitsandbytes users keep an embedding in 32-bit
states (Hugging Face's Trainer does it for every nn.Embedding with its bitsandbytes
optimizers):

    mng = GlobalOptimManager.get_instance()
    mng.register_module_override(model.wte, "weight", {"optim_bits": 32})
    opt = AdamW8bit(model.parameters())

Overrides may be set before or after the optimizer is made; an optimizer reads a parameter's
when it first sorts that parameter's group into 8-bit and fp32 parts (its first step, or
load_state_dict), as bitsandbytes reads them at its first step; a parameter's own override
wins over its group's keys. Taken: optim_bits (32: fp32 states; 8: 8-bit states where the
optimizer has state_bits=8) and min_8bit_size, plus bitsandbytes' do-nothing values of
percentile_clipping (100), block_wise (true) and max_unorm (0). Other keys (lr, betas, eps,
weight_decay, is_sparse, ...) are refused by name: give those parameters a param group of
their own, which every opforge optimizer takes with its own hyperparameters."""

import weakref

import torch

from ._bnb_checks import DO_NOTHING, check_do_nothing, check_min_8bit_size

def _checked(config, where):
    if not isinstance(config, dict):
        raise TypeError(f"{where}: the config must be a dict of key: value, got "
                        f"{type(config).__name__}")
    for key, value in config.items():
        if key == "optim_bits":
            if isinstance(value, bool) or value not in (8, 32):
                raise ValueError(f"{where}: optim_bits must be 8 or 32, got {value!r}")
        elif key == "min_8bit_size":
            check_min_8bit_size(value, f"{where}: ")
        elif key in DO_NOTHING:
            check_do_nothing(key, value, f"{where}: ")
        else:
            raise ValueError(f"{where}: overriding {key!r} per parameter is not implemented "
                             f"(optim_bits and min_8bit_size are); put the parameters in a param "
                             f"group of their own with that {key}")
    return {k: v for k, v in config.items() if k not in DO_NOTHING}


def _tensors(params, where):
    if isinstance(params, torch.Tensor):
        return [params]
    out = list(params)
    for i, p in enumerate(out):
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"{where}: parameter {i} is a {type(p).__name__}, not a tensor")
    return out


class GlobalOptimManager:
    """The process-wide overrides (one instance: get_instance())."""

    _instance = None

    def __init__(self):
        raise RuntimeError("GlobalOptimManager: call GlobalOptimManager.get_instance() instead")

    def initialize(self):
        """Forgets every override (bitsandbytes' initialize)."""
        # id(parameter) -> (a weak reference to it, its overrides): tensors compare by value,
        # so they cannot be dictionary keys themselves; the reference tells a reused id.
        self._params = {}
        self._modules = []  # (weak reference to a module, attribute, overrides)

    @classmethod
    def get_instance(cls):
        if cls._instance is None:
            cls._instance = cls.__new__(cls)
            cls._instance.initialize()
        return cls._instance

    def register_parameters(self, params):
        """bitsandbytes maps parameters to their optimizer slots before they move to the GPU;
        on the CPU a parameter stays the same tensor, so overrides find it directly. Taken
        (parameters or param group dicts) and checked."""
        items = list(params)
        for item in items:
            _tensors(item["params"] if isinstance(item, dict) else [item],
                     "GlobalOptimManager.register_parameters")

    def override_config(self, parameters, key=None, value=None, key_value_dict=None):
        """Overrides `key` with `value` (or every key of key_value_dict) for a parameter or
        a list of them."""
        where = "GlobalOptimManager.override_config"
        if key is not None and key_value_dict is not None:
            raise ValueError(f"{where}: give key and value, or key_value_dict, not both")
        if key is not None:
            config = {key: value}
        elif key_value_dict is not None:
            config = dict(key_value_dict)
        else:
            raise ValueError(f"{where}: no key (key and value, or key_value_dict)")
        config = _checked(config, where)
        for p in _tensors(parameters, where):
            ref, old = self._params.get(id(p), (None, {}))
            if ref is None or ref() is not p:
                ref, old = weakref.ref(p), {}
            self._params[id(p)] = (ref, {**old, **config})

    def register_module_override(self, module, param_name, config):
        """Overrides `config` for `module`'s attribute param_name (found when an optimizer
        reads it, so the module may still change its parameter until then)."""
        where = "GlobalOptimManager.register_module_override"
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"{where}: module is a {type(module).__name__}, not a torch.nn.Module")
        if not isinstance(param_name, str):
            raise TypeError(f"{where}: param_name must be the attribute's name (a str), got "
                            f"{param_name!r}")
        self._modules.append((weakref.ref(module), param_name, _checked(config, where)))

    def config(self, p):
        """The overrides for parameter p: a dict, empty where there are none."""
        out = {}
        for ref, name, config in self._modules:
            module = ref()
            if module is not None and getattr(module, name, None) is p:
                out.update(config)
        ref, config = self._params.get(id(p), (None, {}))
        if ref is not None and ref() is p:
            out.update(config)
        return out
