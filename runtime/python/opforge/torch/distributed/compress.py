"""Gradient compression kernels for data-parallel training, on CPU torch tensors.

fp16/bf16 compression with error feedback (the rounding error is kept and added to the next
step's gradient, as 1-bit Adam and DeepSpeed's compressed communication do), one kernel pass:

    compress_ef(grad, err, out=None, format="bf16") -> out
        s = grad + err (one fp32 add); out = s rounded to nearest even in bf16 or fp16 (bf16:
        NaN stays NaN; fp16: IEEE, overflow to inf, subnormals kept); err = s - out (exact),
        or 0 where out is inf or NaN (the receiver's found_inf sees it; err restarts clean).
        grad, err: contiguous fp32 CPU tensors of one shape; err is updated in place; out:
        torch.bfloat16 / torch.float16 of that shape, allocated when None. Kernel: compress_ef.

    decompress_accumulate(acc, c, scale) -> acc
        acc += scale * c.float() (the receiver's average of K ranks' compressed gradients: K
        calls with scale 1/K into one fp32 buffer), one fp32 rounding per call. acc fp32, c
        bfloat16 or float16, same shape. Kernel: accumulate_grad (scaled, storage bf16g/f16g).

Every function takes `registry=` (default: opforge.torch.optim's registry, opened once) and
`isa=` (None: the best the CPU runs; "avx2" or "avx512" to force one). Kernels are selected
once per (registry, op, attrs, isa) and kept. Bad arguments raise ValueError / TypeError
naming the argument.
"""

import torch

from ..optim._base import default_registry

__all__ = ["compress_ef", "decompress_accumulate"]

_FORMATS = {"bf16": torch.bfloat16, "f16": torch.float16}
_GRAD_STORAGE = {torch.bfloat16: "bf16g", torch.float16: "f16g"}
_kernels = {}


def _kernel(registry, op, attrs, isa):
    reg = registry if registry is not None else default_registry()
    key = (id(reg), op, tuple(sorted(attrs.items())), isa)
    k = _kernels.get(key)
    if k is None or k[0] is not reg:
        k = _kernels[key] = (reg, reg.select(op, attrs, isa))
    return k[1]


def _check(name, t, dtypes, shape=None):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"{name}: expected a CPU tensor, got device {t.device}")
    if t.dtype not in dtypes:
        want = " or ".join(str(d) for d in dtypes)
        raise TypeError(f"{name}: expected dtype {want}, got {t.dtype}")
    if not t.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor")
    if shape is not None and t.shape != shape:
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(t.shape)}")


def _flat(t):
    return t.view(-1)


def compress_ef(grad, err, out=None, format="bf16", *, registry=None, isa=None):
    """out = round(grad + err) in bf16/fp16; err = what the rounding lost (see the module)."""
    if format not in _FORMATS:
        raise ValueError(f"format: expected 'bf16' or 'f16', got {format!r}")
    _check("grad", grad, (torch.float32,))
    _check("err", err, (torch.float32,), grad.shape)
    if out is None:
        out = torch.empty(grad.shape, dtype=_FORMATS[format])
    _check("out", out, (_FORMATS[format],), grad.shape)
    if grad.numel() == 0:
        return out
    k = _kernel(registry, "compress_ef", {"format": format}, isa)
    k(grad=_flat(grad), err=_flat(err), c=_flat(out))
    return out


def decompress_accumulate(acc, c, scale, *, registry=None, isa=None):
    """acc += scale * c.float(), through accumulate_grad (scaled, bf16g/f16g storage)."""
    _check("acc", acc, (torch.float32,))
    _check("c", c, tuple(_GRAD_STORAGE), acc.shape)
    if acc.numel() == 0:
        return acc
    k = _kernel(registry, "accumulate_grad",
                {"scaled": "true", "storage": _GRAD_STORAGE[c.dtype]}, isa)
    k(acc=_flat(acc), grad=_flat(c), scale=float(scale))
    return acc
