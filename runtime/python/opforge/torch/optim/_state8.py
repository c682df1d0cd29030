"""8-bit blockwise optimizer states (Dettmers et al., "8-bit Optimizers via Block-wise
Quantization", ICLR 2022): the maps the q8s / q8ls kernels index (registry/SCHEMA.md,
`quant_map`), and blockwise quantization for loading and saving states in torch's fp32 layout.

A state of n elements is held as uint8 codes (n) plus one fp32 absmax per block of BLOCK
elements (ceil(n / BLOCK)); code c stands for map[c] * absmax of its block. The kernels
requantize on every step; this module only converts at load_state_dict / state_dict."""

import math

import torch

from ._base import FlatGroup, fold_grad, folds
from ._bnb_checks import DO_NOTHING, check_do_nothing, check_min_8bit_size
from .global_optim_manager import GlobalOptimManager

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


def _nearest_codes(padded, absmax, table):
    """The codes of the map values nearest padded / absmax, per block row (fp64)."""
    scale = torch.where(absmax > 0, absmax.to(torch.float64), torch.ones_like(absmax,
                                                                             dtype=torch.float64))
    y = padded / scale[:, None]
    t = table.to(torch.float64)
    mid = (t[1:] + t[:-1]) / 2
    codes = torch.bucketize(y, mid).clamp_(0, 255)  # nearest (above the midpoint: the upper)
    codes[~torch.isfinite(y)] = int(torch.nonzero(table == 0)[0])
    return codes


def quantize(x, table):
    """x (any shape, fp32) -> (codes uint8 [n], absmax fp32 [ceil(n / BLOCK)]): per block
    the max |x|, then the code of the map value nearest x / absmax (0 blocks: the code of 0;
    a non-finite value makes its block's absmax NaN).

    A map without -1.0 (the signed dynamic one) stores a block whose largest magnitude is
    negative with that value at table[0] * absmax, |table[0]| < 1: dequantized (state_dict)
    and quantized by the rule above, its absmax would shrink and its codes move. So where
    such a block's values are all within 4 ulps of table[codes] * (its largest magnitude /
    |table[0]|), that absmax is taken instead: an 8-bit checkpoint loads back to the same
    codes (the absmax within an ulp); other states are not on that grid and take the rule."""
    flat = x.detach().reshape(-1).to(torch.float64)
    n = flat.numel()
    pad = blocks(n) * BLOCK - n
    padded = torch.cat([flat, flat.new_zeros(pad)]).view(-1, BLOCK)
    absmax = padded.abs().amax(dim=1)
    absmax[~torch.isfinite(padded).all(dim=1)] = math.nan
    absmax = absmax.to(torch.float32)
    codes = _nearest_codes(padded, absmax, table)
    low = float(table[0])
    if -1.0 < low < 0.0:
        # the largest magnitude is (also) a negative value: 1.0 * absmax was not stored
        at_min = (-padded).amax(dim=1) >= padded.amax(dim=1)
        rows = torch.nonzero(at_min & (absmax > 0)).flatten()
        if rows.numel():
            grid = (absmax[rows].to(torch.float64) / -low).to(torch.float32)
            c2 = _nearest_codes(padded[rows], grid, table)
            back = (table[c2] * grid[:, None]).to(torch.float64)
            ulp = 4 * torch.finfo(torch.float32).eps * padded[rows].abs()
            on_grid = ((back - padded[rows]).abs() <= ulp).all(dim=1)
            absmax[rows[on_grid]] = grid[on_grid]
            codes[rows[on_grid]] = c2[on_grid]
    return codes.reshape(-1)[:n].to(torch.uint8), absmax


def dequantize(codes, absmax, table, shape=None):
    """map[codes] * absmax of each code's block, fp32, in `shape` (default: flat)."""
    n = codes.numel()
    scale = absmax.repeat_interleave(BLOCK)[:n]
    out = (table[codes.long()] * scale).to(torch.float32)
    return out.view(shape) if shape is not None else out


# Every torch state key an 8-bit optimizer may hold, and whether its map is signed.
SIGNED = {"exp_avg": True, "exp_avg_sq": False, "max_exp_avg_sq": False,
          "momentum_buffer": True}


class EightBitStates:
    """Mixin for an ElementwiseOptimizer whose kernel has q8s / q8ls variants: with
    state_bits=8 the states of every parameter of at least min_8bit_size elements live as
    codes + absmaxes in state[p] ("<key>_codes", uint8, one per element; "<key>_absmax",
    fp32, one per BLOCK elements); state_dict() dequantizes them into torch's fp32 layout,
    load_state_dict() quantizes fp32 states. Smaller parameters keep fp32 states, updated as
    with state_bits=32: each group is stepped as two parts (_split), each with its own flat
    buffers.

    fused=True: one kernel call per group per step over flat buffers in which every
    parameter starts at a multiple of BLOCK elements (a ModelLayout aligned to BLOCK), so
    each block holds one parameter's elements and the zero padding stays zero (zero
    gradients keep zero states zero, and a block's absmax is its parameter's); the codes and
    absmaxes in state[p] are views of those buffers. The q8 kernels are plain dense kernels
    (no multi-tensor descriptor): the call is `Kernel.call` on the whole buffers. As for fp32
    states, a step where some parameter has no gradient or the step counts differ is one
    call per parameter (on the views). fused=False: one call per parameter on its own tensors.

    The class supplies q8_slots(group) -> [(kernel argument, torch key)], q8_fold(group)
    (fold_grad's arguments: what the 8-bit kernel's attrs leave to a gradient copy),
    q8_kernel(group, storage) and q8_call(kernel, var, grad, codes, absmax, group, step,
    model=None) (flat tensors; model: the bf16 parameters when var holds their fp32 masters,
    for a class with q8_master)."""

    # Whether the class has 8-bit kernels with bf16 parameters and fp32 masters (bf16mq8s).
    q8_master = False

    def _init_state_bits(self, state_bits, quant_map, master_weights, min_8bit_size):
        if state_bits not in (32, 8):
            raise ValueError(f"state_bits must be 32 or 8, got {state_bits!r}")
        if quant_map not in STORAGE:
            raise ValueError(f"quant_map must be 'dynamic' or 'linear', got {quant_map!r}")
        check_min_8bit_size(min_8bit_size, "")
        if state_bits == 8 and master_weights and not self.q8_master:
            raise ValueError(f"state_bits=8 with master_weights=True: no such "
                             f"{type(self).__name__} kernel is built (8-bit states take float32 "
                             f"parameters here)")
        if state_bits == 8 and master_weights and quant_map != "dynamic":
            raise ValueError(f"state_bits=8 with master_weights=True takes quant_map='dynamic' "
                             f"(the bf16mq8s kernels), got {quant_map!r}")
        self._state_bits = state_bits
        self._quant_map = quant_map
        self._min_8bit_size = min_8bit_size
        # id(param group) -> (its params list, its length, its overrides, 8-bit part, fp32 part)
        self._parts = {}
        self._q8_ids = set()  # ids of the parameters in 8-bit parts

    # bitsandbytes' blockwise states: codes `state1` / `state2` of maps `qmap1` / `qmap2`,
    # absmaxes `absmax1` / `absmax2`; and its param group keys that opforge has no use for.
    _BNB_STATES = (("state1", "qmap1", "absmax1", True), ("state2", "qmap2", "absmax2", False))
    _BNB_GROUP_KEYS = ("optim_bits", "percentile_clipping", "block_wise", "max_unorm",
                       "skip_zeros", "is_paged", "alpha", "t_alpha", "t_beta3")

    def _from_bitsandbytes(self, state_dict):
        """state_dict with a bitsandbytes 8-bit optimizer's states (bnb.optim.Adam8bit, ...)
        as fp32 states in torch's layout, each dequantized with the checkpoint's own map and
        absmaxes (blocks of the power of two that many absmaxes cover): state1 is the first 8-bit
        state (exp_avg, SGD's momentum_buffer), state2 the second (exp_avg_sq). Others
        unchanged. What cannot be read that way (per-tensor maxima, clipping) is refused."""
        states = state_dict.get("state", {})
        if not any("state1" in s for s in states.values()):
            return state_dict
        name = f"{type(self).__name__}.load_state_dict"
        torch_keys = [key for _, key in self.q8_slots(self.param_groups[0])]
        converted = {}
        for i, s in states.items():
            s = dict(s)
            if "max1" in s or "new_max1" in s:
                raise ValueError(f"{name}: state of parameter {i} holds 'max1' (bitsandbytes' "
                                 "per-tensor, not blockwise, 8-bit states): not taken")
            for slot, (codes, qmap, absmax, signed) in enumerate(self._BNB_STATES):
                if codes not in s:
                    continue
                if slot >= len(torch_keys):
                    raise ValueError(f"{name}: state of parameter {i} has '{codes}', which "
                                     f"{type(self).__name__} has no state for")
                c = s.pop(codes).reshape(-1).long()
                table = s.pop(qmap, None)
                table = (quant_map("dynamic", signed) if table is None
                         else table.detach().to(torch.float32).reshape(-1))
                m = s.pop(absmax, None)
                n = c.numel()
                # bitsandbytes' blocks: a power of two (256 for its optimizers' states)
                block = next((2 ** k for k in range(6, 17)
                              if m is not None and math.ceil(n / 2 ** k) == m.numel()), 0)
                if not block or table.numel() != 256:
                    raise ValueError(f"{name}: state of parameter {i}: '{codes}' ({n} codes) "
                                     f"needs its 256-value '{qmap}' and one '{absmax}' per "
                                     "block")
                scale = m.detach().to(torch.float32).reshape(-1).repeat_interleave(block)[:n]
                s[torch_keys[slot]] = table[c] * scale
            s.pop("unorm_vec", None)
            if "step" in s and not torch.is_tensor(s["step"]):
                s["step"] = torch.tensor(float(s["step"]))
            converted[i] = s
        groups = []
        for gi, g in enumerate(state_dict["param_groups"]):
            g = dict(g)
            for key in DO_NOTHING:  # what the checkpoint's optimizer did that opforge does not
                if key in g:
                    check_do_nothing(key, g[key], f"{name}: bitsandbytes param group {gi}'s ")
            for key in self._BNB_GROUP_KEYS:
                g.pop(key, None)
            groups.append(g)
        return {"state": converted, "param_groups": groups}

    def eight_bit(self, p, group):
        """Whether parameter p of param group `group` has its states in 8 bits: state_bits=8
        and at least min_8bit_size elements (as bitsandbytes: biases and norm weights keep fp32
        states, updated by the fp32 kernels). A group's own 'state_bits' (32: its parameters
        in fp32 states) and 'min_8bit_size' keys override the optimizer's, and the
        parameter's GlobalOptimManager overrides (optim_bits, min_8bit_size) the group's."""
        config = GlobalOptimManager.get_instance().config(p)
        bits = config.get("optim_bits", group.get("state_bits", self._state_bits))
        if bits == 8 and self._state_bits != 8:
            raise ValueError(f"{type(self).__name__}: a parameter of {tuple(p.shape)} asks for "
                             f"optim_bits=8 (GlobalOptimManager); this optimizer keeps fp32 "
                             f"states (make it with state_bits=8)")
        return (self._state_bits == 8 and bits == 8
                and p.numel() >= config.get("min_8bit_size",
                                            group.get("min_8bit_size", self._min_8bit_size)))

    def _split(self, group):
        """The group's 8-bit and fp32 parts (None where it has no such parameter): param
        group dicts that persist across steps (the flat buffers are found by their ids),
        given the group's current hyperparameters on every call (a scheduler changes them)."""
        params = group["params"]
        hit = self._parts.get(id(group))
        overrides = (group.get("state_bits"), group.get("min_8bit_size"))
        if hit is None or hit[0] is not params or hit[1:3] != (len(params), overrides):
            eight = [self.eight_bit(p, group) for p in params]
            big = [p for p, e in zip(params, eight) if e]
            small = [p for p, e in zip(params, eight) if not e]
            self._q8_ids.update(id(p) for p in big)
            self._q8_ids.difference_update(id(p) for p in small)
            hit = (params, len(params), overrides, {"params": big} if big else None,
                   {"params": small} if small else None)
            self._parts[id(group)] = hit
        for part in hit[3:]:
            if part is not None:
                part.update((k, v) for k, v in group.items() if k != "params")
        return hit[3], hit[4]

    def check_param_group(self, param_group, gi):
        super().check_param_group(param_group, gi)
        params = param_group["params"]
        name = type(self).__name__
        bits = param_group.get("state_bits", 8)
        if bits not in (8, 32) or isinstance(bits, bool):
            raise ValueError(f"{name}: group {gi}'s state_bits must be 32 or 8, got {bits!r}")
        if bits == 8 and "state_bits" in param_group and self._state_bits != 8:
            raise ValueError(f"{name}: group {gi} asks for state_bits=8, the optimizer has "
                             f"{self._state_bits} (a group can only keep fp32 states)")
        check_min_8bit_size(param_group.get("min_8bit_size", 0), f"{name}: group {gi}'s ")
        if self._state_bits == 32:  # refuses an optim_bits=8 override it cannot honour
            for p in params:
                if isinstance(p, torch.Tensor):
                    self.eight_bit(p, param_group)
        # No float16 master-weight 8-bit kernel is built.
        if any(isinstance(p, torch.Tensor) and p.dtype == torch.float16
               and self.eight_bit(p, param_group) for p in params):
            raise ValueError(f"{name}: group {gi} has float16 parameters of at "
                             f"least min_8bit_size={self._min_8bit_size} elements; 8-bit "
                             f"states with master weights take bfloat16 parameters (no f16mq8s "
                             f"kernel is built)")

    def _q8_storage(self, group):
        """The 8-bit kernels' storage tag: q8s / q8ls, bf16mq8s with bf16 parameters."""
        low = group["params"][0].dtype != torch.float32
        return ("bf16m" if low else "") + STORAGE[self._quant_map]

    def _table(self, key):
        return quant_map(self._quant_map, SIGNED[key])

    def _q8_keys(self, group):
        master = group["params"][0].dtype != torch.float32
        return ("q8", master) + tuple(self.q8_slots(group))

    def flat_group(self, params):
        if id(params[0]) not in self._q8_ids:  # a part (_split) is all 8-bit or all fp32
            return super().flat_group(params)
        key = ("q8",) + tuple(id(p) for p in params)
        fg = self._flat_groups.get(key)
        if fg is None:
            fg = self._flat_groups[key] = FlatGroup(params, params[0].dtype, alignment=BLOCK)
        return fg

    def group_ready(self, group):
        if self._state_bits == 32:
            return super().group_ready(group)
        big, small = self._split(group)
        return ((big is None or self._fused and self.group_flat(big).is_bound(
            self.state, self._q8_keys(big), self.check_bindings))
            and (small is None or super().group_ready(small)))

    def amp_fused_step(self, inv_scale):
        # No unscaling 8-bit kernel for float32 parameters: GradScaler unscales, then steps.
        return None if self._state_bits == 8 else super().amp_fused_step(inv_scale)

    def zero_group_grads(self, group):
        if self._state_bits == 32:
            return super().zero_group_grads(group)
        for part in self._split(group):  # each part's flat buffer is zeroed by one fill
            if part is not None:
                super().zero_group_grads(part)

    def group_step(self, group, ready=False):
        if self._state_bits == 32:
            return super().group_step(group, ready)
        big, small = self._split(group)
        if big is not None and (ready or any(p.grad is not None for p in big["params"])):
            if self._fused:
                self._q8_fused_step(big, ready)
            else:
                self._q8_per_param_step(big)
        if small is not None and (ready or any(p.grad is not None for p in small["params"])):
            super().group_step(small, ready)

    def _q8_fused_step(self, group, ready):
        fg = self.group_flat(group)
        slots = self.q8_slots(group)
        if not ready and not self._q8_bind(group, fg, slots):
            return self._q8_per_param_step(group)
        step = self._advance(fg, group["params"])
        grad = fg.flat["grad"]
        fold = self.q8_fold(group)
        if folds(fold):
            grad = self._folded(fold_grad(fg.buffer("grad_folded"), grad, fg.flat["var"], **fold),
                                fg.dtype, lambda: self._low_buffer(fg))
        self.q8_call(self.q8_kernel(group, self._q8_storage(group)), fg.flat["var"], grad,
                     {arg: fg.flat["codes:" + arg] for arg, _ in slots},
                     {arg: fg.flat["absmax:" + arg] for arg, _ in slots}, group, step,
                     model=fg.flat["model"] if fg.master else None)

    @staticmethod
    def _low_buffer(fg):
        buf = fg.flat.get("grad_folded_low")
        if buf is None:
            buf = fg.flat["grad_folded_low"] = torch.zeros(fg.layout.total_elements,
                                                           dtype=fg.dtype)
        return buf

    @staticmethod
    def _folded(folded, dtype, low):
        """The folded gradient (fp32) as the kernel reads it: rounded once into low() (a
        buffer of the parameters' dtype) for a bf16mq8s kernel, whose gradient is bf16."""
        if dtype == torch.float32:
            return folded
        return low().copy_(folded)

    def _q8_buffers(self, fg, arg, key):
        """The group's flat codes and absmax buffers of kernel argument arg (made as zeros:
        the code of 0, absmax 0), and the code of 0."""
        zero = int(torch.nonzero(self._table(key) == 0)[0])
        if "codes:" + arg not in fg.flat:
            n = fg.layout.total_elements
            fg.flat["codes:" + arg] = torch.full((n,), zero, dtype=torch.uint8)
            fg.flat["absmax:" + arg] = torch.zeros(blocks(n))
        return fg.flat["codes:" + arg], fg.flat["absmax:" + arg], zero

    def _q8_bind(self, group, fg, slots):
        """Binds every parameter with a gradient (data, gradient, codes, absmaxes, step) to
        the flat buffers; whether one call can update the whole group (every parameter has a
        gradient, all at the same step)."""
        steps, complete = set(), True
        for i, p in enumerate(group["params"]):
            fg.bind_param(i)
            if p.grad is None:
                complete = False
                continue
            fg.bind_grad(i)
            state = self.state[p]
            if fg.master:  # the fp32 master: the parameter's value when new
                fg.bind_state(state, "master_param", "var", i, "param")
            off, n = fg.layout.offsets[i], fg.layout.elements[i]
            for arg, key in slots:
                codes, absmax, zero = self._q8_buffers(fg, arg, key)
                for name, buf, lo, size, init in (
                        (key + "_codes", codes, off, n, zero),
                        (key + "_absmax", absmax, off // BLOCK, blocks(n), 0.0)):
                    v, t = buf[lo:lo + size], state.get(name)
                    if t is None:  # new: zeros
                        v.fill_(init)
                    elif t.data_ptr() != v.data_ptr():
                        if t.numel() != size:
                            raise ValueError(f"{type(self).__name__}: state '{name}' of "
                                             f"parameter {i} has {t.numel()} elements; its "
                                             f"{n} elements take {size}")
                        v.copy_(t.reshape(-1))
                    state[name] = v
            if self.step_type is torch.Tensor:
                steps.add(fg.bind_step(state, i))
        if not complete or len(steps) > 1:
            return False
        fg.mark_bound(self.state, self._q8_keys(group))
        return True

    def _q8_per_param_step(self, group):
        fold = self.q8_fold(group)
        kernel = self.q8_kernel(group, self._q8_storage(group))
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
            master = p.dtype != torch.float32
            if master and "master_param" not in state:
                state["master_param"] = p.detach().float().contiguous()
            var = state["master_param"] if master else p
            grad = p.grad.contiguous()
            if folds(fold):
                grad = self._folded(fold_grad(torch.empty(p.shape), grad, var, **fold), p.dtype,
                                    lambda: torch.empty_like(p))
            # flat: the codes and absmaxes are 1-D, elementwise ops flatten every tensor
            self.q8_call(kernel, var.view(-1), grad.view(-1), codes, absmax, group, step,
                         model=p.view(-1) if master else None)

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
        """A torch-layout state dict (torch's optimizer's, or an 8-bit opforge one's), or a
        bitsandbytes 8-bit optimizer's (its blockwise codes read with its own map and
        absmaxes: _from_bitsandbytes); with state_bits=8 the fp32 states are quantized
        blockwise."""
        state_dict = self._from_bitsandbytes(state_dict)
        if self._state_bits == 8:
            # checked before anything is loaded: a state must cover its parameter
            saved = [i for g in state_dict["param_groups"] for i in g["params"]]
            params = [p for g in self.param_groups for p in g["params"]]
            for pi, (i, p) in enumerate(zip(saved, params)):
                for key, value in state_dict["state"].get(i, {}).items():
                    if key in SIGNED and torch.is_tensor(value) and value.numel() != p.numel():
                        raise ValueError(f"{type(self).__name__}.load_state_dict: state "
                                         f"'{key}' of parameter {pi} has {value.numel()} "
                                         f"elements, the parameter {p.numel()}")
        super().load_state_dict(state_dict)
        if self._state_bits == 32:
            return
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state.get(p)
                if state is None or not self.eight_bit(p, group):
                    continue
                for key in SIGNED:
                    if key in state:
                        state[key + "_codes"], state[key + "_absmax"] = quantize(
                            state.pop(key), self._table(key))
