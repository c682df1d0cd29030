"""NumPy arrays and torch tensors as C ABI arguments, without copies: each argument passes
its data pointer, so the arrays must stay alive (Args holds them) and in-place ops update
them where they lie."""

import ctypes
import numbers
import sys
import threading

from . import dtypes
from ._lib import OpforgeError, Scalar, Tensor


def _is_torch(x):
    mod = type(x).__module__
    return mod.startswith("torch") and hasattr(x, "data_ptr")


def _is_numpy(x):
    return type(x).__module__ == "numpy" and hasattr(x, "__array_interface__")


def is_array(x):
    return _is_numpy(x) or _is_torch(x)


# What array_info has accepted so far, for the short paths (_torch_fast, CallTemplates): a
# dict lookup instead of str(dtype) and the checks, which cost microseconds per call at small
# sizes. torch dtype object -> descriptor name; the torch tensor classes; [torch.strided]
# (torch is never imported here).
_TORCH_SEEN = {}
_TORCH_TYPES = set()
_STRIDED = []


def _plain_torch(x):
    """x (of a class in _TORCH_TYPES) is a contiguous dense CPU tensor."""
    return x.is_cpu and x.layout is _STRIDED[0] and x.is_contiguous()


def _torch_fast(x, wants):
    """(pointer, code, shape) of a contiguous dense CPU tensor of a dtype taken before; None
    for anything else (array_info's checks then say what is wrong)."""
    dtype = _TORCH_SEEN.get(x.dtype)
    if dtype is None or not _plain_torch(x):
        return None
    if dtype == "uint8" and wants in dtypes.FP8:
        dtype = wants  # FP8 bits
    return x.data_ptr(), dtypes.CODES[dtype], x.shape


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
        if not _STRIDED:
            _STRIDED.append(sys.modules[type(x).__module__.split(".")[0]].strided)
        if x.layout is _STRIDED[0]:
            _TORCH_SEEN[x.dtype] = dtype
            _TORCH_TYPES.add(type(x))
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


def roles(descriptor):
    """(wants, writes) of a descriptor: the dtype name of each tensor argument, and the names
    the kernel writes (Kernel keeps them: building them per call cost more than the call)."""
    wants, writes = {}, set()
    if descriptor is not None:
        for i in descriptor["inputs"]:
            wants[i["name"]] = i["dtype"]
        for o in descriptor["outputs"]:
            wants.setdefault(o["name"], o["dtype"])
            writes.add(o["aliases"] or o["name"])
    return wants, writes


_NO_ROLES = ({}, set())


class Args:
    """A call's tensors and scalars as the C ABI arrays (kept alive with the arrays).
    descriptor, or its roles() when the caller keeps them: what each tensor must be."""

    def __init__(self, args, descriptor=None, roles_=None):
        wants, writes = roles_ or (roles(descriptor) if descriptor is not None else _NO_ROLES)
        self.keep = []  # the arrays whose data the structs point to
        self.shape_bufs = []  # the shapes the structs point to
        tensors, scalars = [], []
        for name, value in args.items():
            if not isinstance(name, str) or not name:
                raise OpforgeError(f"argument names must be non-empty strings, got {name!r}")
            kind = type(value)
            if kind is float or kind is int:
                scalars.append(Scalar(name.encode(), float(value)))
                continue
            info = _torch_fast(value, wants.get(name)) if kind in _TORCH_TYPES else None
            if info is None and is_array(value):
                info = array_info(name, value, wants.get(name), name in writes)
            if info is not None:
                ptr, code, shape = info
                shape_buf = (ctypes.c_int64 * max(len(shape), 1))(*shape)
                self.keep.append(value)
                self.shape_bufs.append(shape_buf)
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


class CallTemplates:
    """Args per call signature (each torch tensor's name, dtype and shape, each scalar's
    name), refilled per call with the tensors' data pointers and the scalars' values: a
    small op's call then costs a few hundred nanoseconds per argument instead of a few
    microseconds (a decode step's Linear, a norm at batch 1). Per thread: ctypes releases the
    GIL during the call, so another thread must not refill the arrays the C side is reading."""

    MAX = 64  # signatures per thread and kernel; past this, start over

    def __init__(self, roles_):
        self._roles = roles_
        self._local = threading.local()

    def args(self, merged):
        """Args for `merged`: a template's, refilled, where every tensor is a contiguous
        dense CPU torch tensor of a dtype taken before (else None: the caller converts)."""
        sig = []
        for name, value in merged.items():
            kind = type(value)
            if kind in _TORCH_TYPES:
                if not _plain_torch(value):
                    return None
                sig.append((name, value.dtype, value.shape))
            elif kind is float or kind is int:
                sig.append(name)
            else:
                return None
        sig = tuple(sig)
        local = self._local.__dict__
        templates = local.get("t")
        if templates is None:
            templates = local["t"] = {}
        t = templates.get(sig)
        if t is None:
            a = Args(merged, roles_=self._roles)  # checks everything; raises before storing
            if len(templates) >= self.MAX:
                templates.clear()
            templates[sig] = (a, _slots(a))
            a.keep = []  # the template must not keep this call's tensors alive
            return a
        a, (data, values) = t
        ti = si = 0
        for value in merged.values():
            kind = type(value)
            if kind is float or kind is int:
                values[si].value = value
                si += 1
            else:
                data[ti].value = value.data_ptr()
                ti += 1
        return a


def _slots(a):
    """ctypes views of a's tensors' data fields and scalars' value fields, in order."""
    tsize, ssize = ctypes.sizeof(Tensor), ctypes.sizeof(Scalar)
    data = [ctypes.c_void_p.from_buffer(a.tensors, i * tsize + Tensor.data.offset)
            for i in range(a.nt)]
    values = [ctypes.c_double.from_buffer(a.scalars, i * ssize + Scalar.value.offset)
              for i in range(a.ns)]
    return data, values
