"""opforge from Python: the runtime's C ABI (libopforge_runtime.so) through ctypes.

    import numpy as np, opforge
    reg = opforge.open()                      # $OPFORGE_REGISTRY, installed or build registry
    adam = reg.select("apply_adam", {"epsilon_mode": "torch"})
    adam(var=w, m=m, v=v, grad=g, lr=1e-3, beta1=0.9, beta2=0.999, epsilon=1e-8,
         beta1_power=0.9, beta2_power=0.999)  # updates w, m, v in place
    op = opforge.rule("my_opt.rule")          # or the rule's text: built on the fly (rules.py)

Tensors are NumPy arrays or CPU torch tensors, passed without copies (C-contiguous; uint16
arrays carry bfloat16 bits). Runtime failures raise OpforgeError with the runtime's message.
"""

from . import dtypes, fp8
from ._lib import OpforgeError
from .dump import dump_dir, dumping, set_dump_dir
from ._lib import find_library as _find_library
from ._lib import lib as _load
from .layout import ModelLayout, preset_names
from .registry import Kernel, Registry, open
from .rules import RuleOp, rule, user_registry_dir

__all__ = ["OpforgeError", "Registry", "Kernel", "ModelLayout", "RuleOp", "open", "rule",
           "preset_names", "version", "default_registry", "user_registry_dir", "library_path",
           "dtypes", "fp8", "set_scalar_checks", "set_dump_dir", "dump_dir", "dumping"]


def version():
    """The runtime library's version, "MAJOR.MINOR.PATCH"."""
    return _load().opforge_version().decode()


def default_registry():
    """The registry open() without a directory opens."""
    return _load().opforge_default_registry().decode()


def set_scalar_checks(enabled):
    """Whether calls check each scalar against its descriptor's domain (finite; betas in
    [0, 1), ...) and raise OpforgeError naming it. On by default; False is for experiments
    outside the domains. Process-wide."""
    _load().opforge_set_scalar_checks(1 if enabled else 0)


def library_path():
    """The runtime library this package loads (or would load)."""
    return _find_library()
