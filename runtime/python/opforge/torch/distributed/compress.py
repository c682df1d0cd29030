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

1-bit compression with error feedback (1-bit Adam's compressor), over chunks of `chunk`
elements (a multiple of 32 that divides the length), one kernel pass each way:

    onebit_compress(x, err, err_out, chunk, bits=None, scale=None) -> (bits, scale)
        s = x + err; per chunk scale = mean |s|; bit = s >= 0 (-0 included, NaN gives 0);
        err_out = s - scale * (bit ? 1 : -1). bits: torch.int32, numel / 32 words, element
        32 w + j in bit j of word w, so bits.view(torch.uint8) holds element 8 i + j in bit j
        of byte i (numpy.packbits(..., bitorder="little")); scale: fp32, numel / chunk.
        err_out must not overlap x or err (swap two buffers from step to step).
        Kernel: onebit_compress.

    onebit_decompress(bits, scale, chunk, out=None, weight=1.0) -> out
        out = weight * sum over k of scale[k] * (bit ? 1 : -1): bits [K, n / 32] and scale
        [K, n / chunk] hold K codes of one length n (1-D tensors: K = 1); weight 1 / K
        averages K ranks' codes. out: fp32 [n], allocated when None. Kernel:
        onebit_decompress.

Every function takes `registry=` (default: opforge.torch.optim's registry, opened once) and
`isa=` (None: the best the CPU runs; "avx2" or "avx512" to force one). Kernels are selected
once per (registry, op, attrs, isa) and kept. Bad arguments raise ValueError / TypeError
naming the argument.
"""

import torch

from ..optim._base import default_registry

__all__ = ["compress_ef", "decompress_accumulate", "onebit_compress", "onebit_decompress"]

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


def _chunks(chunk, n, name):
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 32 or chunk % 32:
        raise ValueError(f"chunk: expected a positive multiple of 32, got {chunk!r}")
    if n % chunk:
        raise ValueError(f"{name}: {n} elements are not whole chunks of {chunk}")
    return n // chunk


def _overlap(a, b):
    sa, sb = a.data_ptr(), b.data_ptr()
    return sa < sb + b.numel() * b.element_size() and sb < sa + a.numel() * a.element_size()


def onebit_compress(x, err, err_out, chunk, bits=None, scale=None, *, registry=None,
                    isa=None):
    """bits (int32, n/32) and scale (fp32, n/chunk) of s = x + err; err_out = s - decoded."""
    _check("x", x, (torch.float32,))
    _check("err", err, (torch.float32,), x.shape)
    _check("err_out", err_out, (torch.float32,), x.shape)
    groups = _chunks(chunk, x.numel(), "x")
    for name, other in (("x", x), ("err", err)):
        if x.numel() and _overlap(err_out, other):
            raise ValueError(f"err_out: overlaps {name} (the kernel's output never aliases its "
                             "inputs: swap two error buffers)")
    if bits is None:
        bits = torch.empty(x.numel() // 32, dtype=torch.int32)
    if scale is None:
        scale = torch.empty(groups)
    _check("bits", bits, (torch.int32,), torch.Size([x.numel() // 32]))
    _check("scale", scale, (torch.float32,), torch.Size([groups]))
    if groups:
        k = _kernel(registry, "onebit_compress", {}, isa)
        k(x=x.view(groups, chunk), err=err.view(groups, chunk),
          bits=bits.view(groups, chunk // 32), scale=scale, err_out=err_out.view(groups, chunk))
    return bits, scale


def onebit_decompress(bits, scale, chunk, out=None, weight=1.0, *, registry=None, isa=None):
    """out = weight * sum over the K codes of scale * (bit ? 1 : -1)."""
    _check("bits", bits, (torch.int32,))
    _check("scale", scale, (torch.float32,))
    if bits.dim() not in (1, 2) or scale.dim() != bits.dim():
        raise ValueError(f"bits, scale: expected [K, n/32] and [K, n/chunk] (or both 1-D), got "
                         f"shapes {tuple(bits.shape)} and {tuple(scale.shape)}")
    codes = bits.shape[0] if bits.dim() == 2 else 1
    if codes == 0:
        raise ValueError("bits, scale: expected at least one code (K >= 1)")
    n = bits.numel() // codes * 32
    groups = _chunks(chunk, n, "bits")
    if scale.numel() != codes * groups:
        raise ValueError(f"scale: expected {codes * groups} elements ({codes} codes of "
                         f"{groups} chunks), got {scale.numel()}")
    if out is None:
        out = torch.empty(n)
    _check("out", out, (torch.float32,))
    if out.numel() != n:
        raise ValueError(f"out: expected {n} elements, got {out.numel()}")
    if groups:
        k = _kernel(registry, "onebit_decompress", {}, isa)
        k(bits=bits.view(codes, groups, chunk // 32), scale=scale.view(codes, groups),
          weight=float(weight), y=out.view(groups, chunk))
    return out
