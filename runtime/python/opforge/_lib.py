"""Loads libopforge_runtime.so and declares the C ABI (runtime/include/opforge/opforge.h).

The library is looked for, in order, at $OPFORGE_LIBRARY; where an install put it relative to
this package (_install_paths.py, written by `cmake --install`: relative, so the prefix can
move; the package lies in <prefix>/<libdir>/python3/dist-packages/opforge); and in the build
tree of the source checkout this package lies in (<repo>/build/runtime/libopforge_runtime.so).
"""

import ctypes
import os
import threading

LIBRARY_NAME = "libopforge_runtime.so"
MAX_RANK = 16  # output ranks read back by opforge_output_shape


class OpforgeError(RuntimeError):
    """A failure reported by the opforge runtime (its opforge_last_error() message) or a
    bad argument refused by this package before anything ran."""


class Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
    ]


class Scalar(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_double)]


class TensorShape(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("rank", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
    ]


def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def candidate_paths():
    """Where the library is looked for, in order (existing or not)."""
    paths = []
    env = os.environ.get("OPFORGE_LIBRARY")
    if env:
        paths.append(env)
    try:
        from . import _install_paths  # only in an installed package
    except ImportError:
        # The source tree: runtime/python/opforge -> the repository root.
        repo = os.path.normpath(os.path.join(_package_dir(), "..", "..", ".."))
        paths.append(os.path.join(repo, "build", "runtime", LIBRARY_NAME))
    else:
        paths.append(os.path.normpath(os.path.join(
            _package_dir(), _install_paths.LIBRARY_FROM_PACKAGE, _install_paths.LIBRARY_FILE)))
    return paths


def find_library():
    paths = candidate_paths()
    if os.environ.get("OPFORGE_LIBRARY"):
        # An explicit choice is not second-guessed: a wrong path is an error, not a fallback.
        return paths[0]
    for p in paths:
        if os.path.exists(p):
            return p
    raise OpforgeError(f"cannot find {LIBRARY_NAME}; looked at: {', '.join(paths)} "
                       "(set OPFORGE_LIBRARY to its path)")


_P = ctypes.c_void_p
_T = ctypes.POINTER(Tensor)
_S = ctypes.POINTER(Scalar)
_SZ = ctypes.c_size_t
_I = ctypes.c_int
_I64 = ctypes.c_int64
_STR = ctypes.c_char_p
_PSTR = ctypes.POINTER(ctypes.c_char_p)
_PI64 = ctypes.POINTER(ctypes.c_int64)

SIGNATURES = {
    "opforge_last_error": ([], _STR),
    "opforge_version": ([], _STR),
    "opforge_default_registry": ([], _STR),
    "opforge_default_user_registry": ([], _STR),
    "opforge_cli_path": ([], _STR),
    "opforge_open": ([_STR, ctypes.POINTER(_P)], _I),
    "opforge_open_with_user": ([_STR, _STR, ctypes.POINTER(_P)], _I),
    "opforge_close": ([_P], None),
    "opforge_registry_dir": ([_P], _STR),
    "opforge_registry_user_dir": ([_P], _STR),
    "opforge_registry_op": ([_P, _SZ], _STR),
    "opforge_registry_refresh_ops": ([_P], _I),
    "opforge_op_variants_json": ([_P, _STR, _PSTR], _I),
    "opforge_select": ([_P, _STR, _STR, _STR, ctypes.POINTER(_P)], _I),
    "opforge_select_for": ([_P, _STR, _STR, _STR, _T, _SZ, _S, _SZ, ctypes.POINTER(_P)], _I),
    "opforge_output_shape": ([_P, _T, _SZ, _S, _SZ, _SZ, _PI64, _I, ctypes.POINTER(_I)], _I),
    "opforge_shape_value": ([_P, _T, _SZ, _S, _SZ, _STR, _PI64], _I),
    "opforge_kernel_variant": ([_P], _STR),
    "opforge_kernel_isa": ([_P], _STR),
    "opforge_kernel_descriptor_json": ([_P, _PSTR], _I),
    "opforge_call": ([_P, _T, _SZ, _S, _SZ], _I),
    "opforge_kernel_splittable": ([_P], _I),
    "opforge_call_chunked": ([_P, _T, _SZ, _S, _SZ, _I64], _I),
    "opforge_model_layout_create": ([ctypes.POINTER(TensorShape), _SZ, _I64,
                                     ctypes.POINTER(_P)], _I),
    "opforge_model_layout_preset": ([_STR, _I64, ctypes.POINTER(_P)], _I),
    "opforge_model_layout_free": ([_P], None),
    "opforge_model_preset_name": ([_SZ], _STR),
    "opforge_model_layout_tensors": ([_P], _SZ),
    "opforge_model_layout_total_elements": ([_P], _I64),
    "opforge_model_layout_offsets": ([_P], _PI64),
    "opforge_model_layout_elements": ([_P], _PI64),
    "opforge_model_layout_name": ([_P, _SZ], _STR),
    "opforge_call_model": ([_P, _P, _T, _SZ, _S, _SZ], _I),
    "opforge_set_num_threads": ([_P, _I], _I),
    "opforge_set_scalar_checks": ([_I], None),
    "opforge_set_dump_dir": ([_STR], _I),
    "opforge_dump_dir": ([], _STR),
    "opforge_fp8_encode": ([ctypes.c_void_p, _SZ, ctypes.c_float, _I, ctypes.c_void_p], _I),
    "opforge_fp8_decode": ([ctypes.c_void_p, _SZ, _I, ctypes.c_void_p], _I),
}

_lib = None
_lock = threading.Lock()


def lib():
    """The loaded runtime library (loaded on first use)."""
    global _lib
    with _lock:
        if _lib is None:
            path = find_library()
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                raise OpforgeError(f"cannot load the opforge runtime {path}: {e}") from None
            for name, (args, res) in SIGNATURES.items():
                try:
                    fn = getattr(handle, name)
                except AttributeError:
                    raise OpforgeError(f"{path} lacks {name}: a runtime older than this "
                                       "package") from None
                fn.argtypes = args
                fn.restype = res
            _lib = handle
            _lib.path = path
        return _lib


def decode(s):
    return s.decode("utf-8", "replace") if s is not None else None


def check(rc):
    """Raises OpforgeError with the runtime's message when a call failed."""
    if rc != 0:
        raise OpforgeError(decode(lib().opforge_last_error()) or "unknown error")
