"""Element types: the C ABI's codes (enum opforge_dtype), the descriptor's names and the
NumPy / torch types that carry them."""

F16, BF16, F32, F64, I32, I64, BOOL, U8, F8E4M3, F8E5M2 = range(10)  # enum opforge_dtype

# Descriptor dtype name -> C ABI code.
CODES = {"float16": F16, "bfloat16": BF16, "float32": F32, "float64": F64, "int32": I32,
         "int64": I64, "bool": BOOL, "uint8": U8, "float8_e4m3fn": F8E4M3,
         "float8_e5m2": F8E5M2}
# OCP FP8: torch 1.13 and NumPy have no such dtype; uint8 arrays carry the bits and are
# accepted where the descriptor wants one (see tensors.py).
FP8 = ("float8_e4m3fn", "float8_e5m2")
NAMES = {code: name for name, code in CODES.items()}

# NumPy dtype name -> descriptor name. NumPy has no bfloat16: uint16 arrays carry bf16 bits
# and are accepted where the descriptor wants bfloat16 (see tensors.py).
NUMPY = {"float16": "float16", "float32": "float32", "float64": "float64", "int32": "int32",
         "int64": "int64", "bool": "bool", "uint8": "uint8"}
# torch dtype str() -> descriptor name.
TORCH = {"torch.float16": "float16", "torch.bfloat16": "bfloat16", "torch.float32": "float32",
         "torch.float64": "float64", "torch.int32": "int32", "torch.int64": "int64",
         "torch.bool": "bool", "torch.uint8": "uint8"}


def numpy_dtype(name):
    """The NumPy dtype holding descriptor dtype `name` (uint16 bits for bfloat16)."""
    import numpy as np
    return np.dtype("uint16" if name == "bfloat16" else "uint8" if name in FP8 else name)


def torch_dtype(name):
    import torch
    return torch.uint8 if name in FP8 else getattr(torch, name)
