"""NumPy arrays and torch tensors as C ABI arguments, without copies: each argument passes
its data pointer, so the arrays must stay alive (Args holds them) and in-place ops update
them where they lie."""

import ctypes
import numbers

from . import dtypes
from ._lib import OpforgeError, Scalar, Tensor


def _is_torch(x):
    mod = type(x).__module__
    return mod.startswith("torch") and hasattr(x, "data_ptr")


def _is_numpy(x):
    return type(x).__module__ == "numpy" and hasattr(x, "__array_interface__")


def is_array(x):
    return _is_numpy(x) or _is_torch(x)


def array_info(name, x, wants=None, writes=False):
    """(data pointer, dtype code, shape) of argument `name`; refuses what the kernel cannot
    read in place. wants: the descriptor dtype name for `name` (None: unknown); writes: the
    kernel writes this tensor."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise OpforgeError(f"tensor '{name}' is on device {x.device}; opforge runs on the "
                               "CPU (move it with .cpu())")
        if not x.is_contiguous():
            raise OpforgeError(f"tensor '{name}' is not contiguous (stride {tuple(x.stride())}"
                               f" for shape {tuple(x.shape)}); pass .contiguous()")
        if x.is_sparse or x.is_quantized or x.is_complex():
            raise OpforgeError(f"tensor '{name}' is sparse, quantized or complex ({x.dtype})")
        dtype = dtypes.TORCH.get(str(x.dtype))
        if dtype is None:
            raise OpforgeError(f"tensor '{name}' has dtype {x.dtype}, which opforge does not "
                               f"take ({', '.join(sorted(dtypes.TORCH))})")
        if dtype == "uint8" and wants in dtypes.FP8:
            dtype = wants  # FP8 bits
        return x.data_ptr(), dtypes.CODES[dtype], tuple(x.shape)
    if _is_numpy(x):
        if not x.flags["C_CONTIGUOUS"]:
            raise OpforgeError(f"array '{name}' is not C-contiguous (strides {x.strides} for "
                               f"shape {x.shape}); pass numpy.ascontiguousarray(...)")
        if writes and not x.flags["WRITEABLE"]:
            raise OpforgeError(f"array '{name}' is read-only, and the kernel writes it")
        if not x.dtype.isnative:
            raise OpforgeError(f"array '{name}' has non-native byte order ({x.dtype.str})")
        name_np = x.dtype.name
        if name_np == "uint16":
            # NumPy has no bfloat16: uint16 bits stand for bf16 where bf16 is wanted.
            if wants not in ("bfloat16", None):
                raise OpforgeError(f"array '{name}' is uint16, taken as bfloat16 bits only "
                                   f"where the op wants bfloat16; it wants {wants}")
            dtype = "bfloat16"
        else:
            dtype = dtypes.NUMPY.get(name_np)
            if dtype is None:
                raise OpforgeError(f"array '{name}' has dtype {name_np}, which opforge does not "
                                   "take (float16, uint16 as bfloat16 bits, float32, float64, "
                                   "int32, int64)")
        if dtype == "uint8" and wants in dtypes.FP8:
            dtype = wants  # FP8 bits
        return x.ctypes.data, dtypes.CODES[dtype], tuple(x.shape)
    raise OpforgeError(f"argument '{name}' is a {type(x).__name__}: tensors must be "
                       "numpy.ndarray or torch.Tensor, scalars Python or NumPy numbers")


class Args:
    """A call's tensors and scalars as the C ABI arrays (kept alive with the arrays)."""

    def __init__(self, args, descriptor=None):
        wants, writes = {}, set()
        if descriptor is not None:
            for i in descriptor["inputs"]:
                wants[i["name"]] = i["dtype"]
            for o in descriptor["outputs"]:
                wants.setdefault(o["name"], o["dtype"])
                writes.add(o["aliases"] or o["name"])
        self.keep = []  # arrays and shape buffers referenced by the structs
        tensors, scalars = [], []
        for name, value in args.items():
            if not isinstance(name, str) or not name:
                raise OpforgeError(f"argument names must be non-empty strings, got {name!r}")
            if is_array(value):
                ptr, code, shape = array_info(name, value, wants.get(name), name in writes)
                shape_buf = (ctypes.c_int64 * max(len(shape), 1))(*shape)
                self.keep += [value, shape_buf]
                tensors.append(Tensor(name.encode(), ptr, code, len(shape), shape_buf))
            elif isinstance(value, numbers.Real) and not isinstance(value, complex):
                scalars.append(Scalar(name.encode(), float(value)))
            else:
                raise OpforgeError(f"argument '{name}' is a {type(value).__name__}: tensors "
                                   "must be numpy.ndarray or torch.Tensor, scalars real numbers")
        self.names = list(args)
        self.nt = len(tensors)
        self.ns = len(scalars)
        self.tensors = (Tensor * max(self.nt, 1))(*tensors)
        self.scalars = (Scalar * max(self.ns, 1))(*scalars)
