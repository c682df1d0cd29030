"""ctypes mirror of the opforge C ABI (runtime/include/opforge/opforge.h), shared by the
benchmark scripts (bench_torch.py, bench_nn_torch.py). Every failing call raises OpforgeError
with opforge_last_error()'s message."""

import ctypes

OPFORGE_F32 = 2  # enum opforge_dtype in opforge.h
MAX_RANK = 8


class OpforgeTensor(ctypes.Structure):
    """typedef struct opforge_tensor { const char* name; void* data; int dtype; int rank;
    const int64_t* shape; } opforge_tensor;"""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
    ]


class OpforgeScalar(ctypes.Structure):
    """typedef struct opforge_scalar { const char* name; double value; } opforge_scalar;"""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("value", ctypes.c_double),
    ]


class OpforgeError(RuntimeError):
    pass


class Opforge:
    """Thin wrapper over the opforge C ABI."""

    def __init__(self, lib_path):
        try:
            self.lib = ctypes.CDLL(lib_path)
        except OSError as e:
            raise OpforgeError(f"cannot load the opforge runtime library {lib_path}: {e}")
        lib = self.lib
        vp = ctypes.c_void_p  # opaque opforge_registry* / opforge_kernel*
        T = ctypes.POINTER(OpforgeTensor)
        S = ctypes.POINTER(OpforgeScalar)
        sz = ctypes.c_size_t
        signatures = {
            "opforge_last_error": ([], ctypes.c_char_p),
            "opforge_open": ([ctypes.c_char_p, ctypes.POINTER(vp)], ctypes.c_int),
            "opforge_close": ([vp], None),
            "opforge_select": ([vp, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                ctypes.POINTER(vp)], ctypes.c_int),
            "opforge_select_for": ([vp, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, T,
                                    sz, S, sz, ctypes.POINTER(vp)], ctypes.c_int),
            "opforge_output_shape": ([vp, T, sz, S, sz, sz, ctypes.POINTER(ctypes.c_int64),
                                      ctypes.c_int, ctypes.POINTER(ctypes.c_int)], ctypes.c_int),
            "opforge_shape_value": ([vp, T, sz, S, sz, ctypes.c_char_p,
                                     ctypes.POINTER(ctypes.c_int64)], ctypes.c_int),
            "opforge_kernel_variant": ([vp], ctypes.c_char_p),
            "opforge_kernel_isa": ([vp], ctypes.c_char_p),
            "opforge_call": ([vp, T, sz, S, sz], ctypes.c_int),
            "opforge_set_num_threads": ([vp, ctypes.c_int], ctypes.c_int),
        }
        for name, (args, res) in signatures.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = res
        self.reg = None

    def _check(self, rc, what):
        if rc != 0:
            msg = self.lib.opforge_last_error()
            msg = msg.decode("utf-8", "replace") if msg else ""
            raise OpforgeError(f"{what} failed (rc={rc}): {msg or 'no message'}")

    def open(self, registry_dir):
        reg = ctypes.c_void_p()
        self._check(self.lib.opforge_open(registry_dir.encode(), ctypes.byref(reg)),
                    f"opforge_open({registry_dir!r})")
        self.reg = reg

    def close(self):
        if self.reg:
            self.lib.opforge_close(self.reg)
            self.reg = None

    def set_num_threads(self, n):
        self._check(self.lib.opforge_set_num_threads(self.reg, n),
                    f"opforge_set_num_threads({n})")

    def select(self, op, attrs=None, isa=None):
        k = ctypes.c_void_p()
        self._check(self.lib.opforge_select(self.reg, op.encode(),
                                            attrs.encode() if attrs else None,
                                            isa.encode() if isa else None, ctypes.byref(k)),
                    f"opforge_select({op!r}, attrs={attrs!r}, isa={isa!r})")
        return k

    def select_for(self, op, attrs, isa, args):
        """NN ops: the variant whose algorithm applies to `args` (a CallArgs-like object with
        targs/nt/sargs/ns)."""
        k = ctypes.c_void_p()
        self._check(self.lib.opforge_select_for(self.reg, op.encode(),
                                                attrs.encode() if attrs else None,
                                                isa.encode() if isa else None,
                                                args.targs, args.nt, args.sargs, args.ns,
                                                ctypes.byref(k)),
                    f"opforge_select_for({op!r}, attrs={attrs!r}, isa={isa!r})")
        return k

    def output_shape(self, k, args, index):
        shape = (ctypes.c_int64 * MAX_RANK)()
        rank = ctypes.c_int()
        self._check(self.lib.opforge_output_shape(k, args.targs, args.nt, args.sargs, args.ns,
                                                  index, shape, MAX_RANK, ctypes.byref(rank)),
                    f"opforge_output_shape(output {index})")
        return tuple(shape[i] for i in range(rank.value))

    def shape_value(self, k, args, expr):
        """A shape expression (e.g. a descriptor's cost.flops) evaluated for this call."""
        v = ctypes.c_int64()
        self._check(self.lib.opforge_shape_value(k, args.targs, args.nt, args.sargs, args.ns,
                                                 expr.encode(), ctypes.byref(v)),
                    f"opforge_shape_value({expr!r})")
        return v.value

    def variant(self, k):
        return self.lib.opforge_kernel_variant(k).decode()

    def isa(self, k):
        return self.lib.opforge_kernel_isa(k).decode()
