"""OCP FP8 bits for the FP8-gradient variants (storage e4m3g / e5m2g): NumPy and torch 1.13
have no FP8 dtype, so FP8 tensors are uint8 arrays of bits. The conversion is the runtime's
(opforge_fp8_encode / _decode): nearest value, ties to even, finite values beyond the largest
saturate (E4M3 448, E5M2 57344), +-inf becomes E5M2's infinity or E4M3's NaN, NaN stays NaN.

    bits = opforge.fp8.encode(grad, "e4m3", scale=448 / grad.abs().max())
    adam(..., grad=bits, grad_scale_inv=1 / scale)   # an apply_adam e4m3g kernel
"""

import ctypes

from ._lib import OpforgeError, check, lib
from .dtypes import F8E4M3, F8E5M2

FORMATS = {"e4m3": F8E4M3, "float8_e4m3fn": F8E4M3, "e5m2": F8E5M2, "float8_e5m2": F8E5M2}


def _format(fmt):
    try:
        return FORMATS[fmt]
    except (KeyError, TypeError):
        raise OpforgeError(f"FP8 format {fmt!r}: e4m3 (float8_e4m3fn) or e5m2 "
                           "(float8_e5m2)") from None


def _contiguous(name, x, want):
    """(pointer, element count) of a C-contiguous CPU array of dtype `want` ("float32" or
    "uint8"), NumPy or torch; the caller keeps x alive."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        if x.device.type != "cpu" or str(x.dtype) != "torch." + want or not x.is_contiguous():
            raise OpforgeError(f"{name}: a contiguous CPU torch.{want} tensor, got "
                               f"{x.dtype} on {x.device}"
                               + ("" if x.is_contiguous() else ", not contiguous"))
        return x.data_ptr(), x.numel()
    if mod == "numpy" and hasattr(x, "__array_interface__"):
        if x.dtype.name != want or not x.flags["C_CONTIGUOUS"]:
            raise OpforgeError(f"{name}: a C-contiguous numpy {want} array, got {x.dtype}"
                               + ("" if x.flags["C_CONTIGUOUS"] else ", not contiguous"))
        return x.ctypes.data, x.size
    raise OpforgeError(f"{name}: a numpy array or torch tensor, got {type(x).__name__}")


def _empty_like(x, dtype):
    if type(x).__module__.startswith("torch"):
        import torch
        return torch.empty(x.shape, dtype=getattr(torch, dtype))
    import numpy as np
    return np.empty(x.shape, dtype=dtype)


def encode(x, fmt="e4m3", scale=1.0):
    """The FP8 bits (uint8, x's shape and kind) of float32 x * scale."""
    code = _format(fmt)
    ptr, n = _contiguous("fp8.encode: x", x, "float32")
    out = _empty_like(x, "uint8")
    optr, _ = _contiguous("fp8.encode: out", out, "uint8")
    check(lib().opforge_fp8_encode(ctypes.c_void_p(ptr), n, float(scale), code,
                                   ctypes.c_void_p(optr)))
    return out


def decode(bits, fmt="e4m3"):
    """The exact float32 values of FP8 bits (uint8)."""
    code = _format(fmt)
    ptr, n = _contiguous("fp8.decode: bits", bits, "uint8")
    out = _empty_like(bits, "float32")
    optr, _ = _contiguous("fp8.decode: out", out, "float32")
    check(lib().opforge_fp8_decode(ctypes.c_void_p(ptr), n, code, ctypes.c_void_p(optr)))
    return out
