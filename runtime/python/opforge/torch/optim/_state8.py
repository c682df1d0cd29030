"""8-bit blockwise optimizer states (Dettmers et al., "8-bit Optimizers via Block-wise
Quantization", ICLR 2022): the maps the q8s / q8ls kernels index (registry/SCHEMA.md,
`quant_map`), and blockwise quantization for loading and saving states in torch's fp32 layout.

A state of n elements is held as uint8 codes (n) plus one fp32 absmax per block of BLOCK
elements (ceil(n / BLOCK)); code c stands for map[c] * absmax of its block. The kernels
requantize on every step; this module only converts at load_state_dict / state_dict."""

import math

import torch

BLOCK = 256

# Storage tag of each map kind, and the map of each (state key, signed) the kernels use.
STORAGE = {"dynamic": "q8s", "linear": "q8ls"}


def quant_map(kind, signed):
    """The 256 values of map `kind` ("dynamic" / "linear"), fp64 rounded to fp32, sorted."""
    if kind == "linear":
        if signed:
            v = [(c - 127) / 127 for c in range(255)] + [1.0]
        else:
            v = [c / 255 for c in range(256)]
    elif kind == "dynamic":
        v = []
        for i in range(7):
            per = 2 ** i if signed else 2 ** (i + 1)
            for j in range(per):
                x = 10.0 ** (i - 6) * (0.1 + 0.9 * (j + 0.5) / per)
                v += [x, -x] if signed else [x]
        v = sorted(v + [0.0, 1.0])
    else:
        raise ValueError(f"unknown quant_map kind {kind!r} (dynamic, linear)")
    return torch.tensor(v, dtype=torch.float64).to(torch.float32)


def blocks(n):
    return max(1, math.ceil(n / BLOCK)) if n else 0


def zeros(n, table):
    """Codes and absmax of n zeros: the code of 0, absmax 0."""
    zero = int(torch.nonzero(table == 0)[0])
    return torch.full((n,), zero, dtype=torch.uint8), torch.zeros(blocks(n))


def quantize(x, table):
    """x (any shape, fp32) -> (codes uint8 [n], absmax fp32 [ceil(n / BLOCK)]): per block
    the max |x|, then the code of the map value nearest x / absmax (0 blocks: the code of 0;
    a non-finite value makes its block's absmax NaN)."""
    flat = x.detach().reshape(-1).to(torch.float64)
    n = flat.numel()
    pad = blocks(n) * BLOCK - n
    padded = torch.cat([flat, flat.new_zeros(pad)]).view(-1, BLOCK)
    absmax = padded.abs().amax(dim=1)
    absmax[~torch.isfinite(padded).all(dim=1)] = math.nan
    absmax = absmax.to(torch.float32)
    scale = torch.where(absmax > 0, absmax.to(torch.float64), torch.ones_like(absmax,
                                                                             dtype=torch.float64))
    y = (padded / scale[:, None]).reshape(-1)[:n]
    t = table.to(torch.float64)
    mid = (t[1:] + t[:-1]) / 2
    codes = torch.bucketize(y, mid).clamp_(0, 255)  # nearest (above the midpoint: the upper)
    codes[~torch.isfinite(y)] = int(torch.nonzero(table == 0)[0])
    return codes.to(torch.uint8), absmax


def dequantize(codes, absmax, table, shape=None):
    """map[codes] * absmax of each code's block, fp32, in `shape` (default: flat)."""
    n = codes.numel()
    scale = absmax.repeat_interleave(BLOCK)[:n]
    out = (table[codes.long()] * scale).to(torch.float32)
    return out.view(shape) if shape is not None else out
