"""8-bit blockwise optimizer states (Dettmers et al., "8-bit Optimizers via Block-wise
Quantization", ICLR 2022): the maps the q8s / q8ls kernels index (registry/SCHEMA.md,
`quant_map`), and blockwise quantization for loading and saving states in torch's fp32 layout.

A state of n elements is held as uint8 codes (n) plus one fp32 absmax per block of BLOCK
elements (ceil(n / BLOCK)); code c stands for map[c] * absmax of its block. The kernels
requantize on every step; this module only converts at load_state_dict / state_dict."""

import math

import torch

from ._base import fold_grad, folds

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


# Every torch state key an 8-bit optimizer may hold, and whether its map is signed.
SIGNED = {"exp_avg": True, "exp_avg_sq": False, "max_exp_avg_sq": False}


class EightBitStates:
    """Mixin for an ElementwiseOptimizer whose kernel has q8s / q8ls variants: with
    state_bits=8 its states live as codes + absmaxes in state[p] ("<key>_codes",
    "<key>_absmax"), one kernel call per parameter; state_dict() dequantizes them into
    torch's fp32 layout, load_state_dict() quantizes fp32 states. The class supplies
    q8_slots(group) -> [(kernel argument, torch key)], q8_fold(group) (fold_grad's arguments:
    what the 8-bit kernel's attrs leave to a gradient copy), q8_kernel(group, storage) and
    q8_call(kernel, var, grad, codes, absmax, group, step) (flat tensors)."""

    def _init_state_bits(self, state_bits, quant_map, master_weights):
        if state_bits not in (32, 8):
            raise ValueError(f"state_bits must be 32 or 8, got {state_bits!r}")
        if quant_map not in STORAGE:
            raise ValueError(f"quant_map must be 'dynamic' or 'linear', got {quant_map!r}")
        if state_bits == 8 and master_weights:
            raise ValueError("state_bits=8 with master_weights=True: no such kernel is built "
                             "(8-bit states take float32 parameters here)")
        self._state_bits = state_bits
        self._quant_map = quant_map

    def _table(self, key):
        return quant_map(self._quant_map, SIGNED[key])

    def group_ready(self, group):
        return self._state_bits == 32 and super().group_ready(group)

    def group_step(self, group, ready=False):
        if self._state_bits == 32:
            return super().group_step(group, ready)
        fold = self.q8_fold(group)
        kernel = self.q8_kernel(group, STORAGE[self._quant_map])
        for pi, p in enumerate(group["params"]):
            if p.grad is None:
                continue
            if not p.is_contiguous():
                raise RuntimeError(f"{type(self).__name__}: parameter {pi} is not contiguous "
                                   "(8-bit states update parameters in place)")
            state = self.state[p]
            codes, absmax = {}, {}
            for arg, key in self.q8_slots(group):
                if key + "_codes" not in state:
                    state[key + "_codes"], state[key + "_absmax"] = zeros(p.numel(),
                                                                          self._table(key))
                codes[arg], absmax[arg] = state[key + "_codes"], state[key + "_absmax"]
            step = self._count(state)
            grad = p.grad.contiguous()
            if folds(fold):
                grad = fold_grad(torch.empty_like(p), grad, p, **fold)
            # flat: the codes and absmaxes are 1-D, elementwise ops flatten every tensor
            self.q8_call(kernel, p.view(-1), grad.view(-1), codes, absmax, group, step)

    def state_dict(self):
        """torch's layout: 8-bit states dequantized to fp32, each in its parameter's shape."""
        sd = super().state_dict()
        if self._state_bits == 32:
            return sd
        params = [p for g in self.param_groups for p in g["params"]]
        out = {}
        for i, st in sd["state"].items():
            st = dict(st)
            for key in SIGNED:
                if key + "_codes" in st:
                    st[key] = dequantize(st.pop(key + "_codes"), st.pop(key + "_absmax"),
                                         self._table(key), params[i].shape)
            out[i] = st
        sd["state"] = out
        return sd

    def load_state_dict(self, state_dict):
        """A torch-layout state dict (torch's optimizer's, or an 8-bit opforge one's); with
        state_bits=8 its fp32 states are quantized blockwise."""
        super().load_state_dict(state_dict)
        if self._state_bits == 32:
            return
        for state in self.state.values():
            for key in SIGNED:
                if key in state:
                    state[key + "_codes"], state[key + "_absmax"] = quantize(state.pop(key),
                                                                             self._table(key))
