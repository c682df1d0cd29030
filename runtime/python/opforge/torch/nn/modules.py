"""torch.nn modules whose forward runs opforge NN kernels: each subclasses the torch module it
replaces, so the constructor, parameters, buffers and state_dict are torch's own, and a
checkpoint loads both ways. Inference only: with gradients needed, forward raises
GradientsNotSupported, or (fallback=True) runs the torch module's own forward."""

import torch

from . import functional as F


class _OpforgeModule:
    """Mixin: `fallback` (class default False, settable per instance) and the dispatch."""

    fallback = False
    ops = ()  # the registry ops forward runs (patch leaves the module when one is missing)
    # The parameter dtypes the kernels take (patch leaves a module holding another).
    param_dtypes = (torch.float32,)

    def __prepare_scriptable__(self):
        # torch.jit.script calls this on each module first: refuse here, by name, rather than
        # fail later on the ctypes call inside forward.
        raise RuntimeError(f"{type(self).__module__}.{type(self).__qualname__} cannot be "
                           "scripted: its forward calls opforge kernels outside TorchScript; "
                           "script the unpatched model, or run the patched one eagerly")

    def _torch_forward(self, x):
        return super().forward(x)  # the torch class after this mixin in the MRO

    def forward(self, x):
        if self.fallback and F.needs_grad(x, *self.parameters()):
            return self._torch_forward(x)
        return self._opforge_forward(x)

    @classmethod
    def supports(cls, module):
        """"" when `module` (an instance of the torch class) can run on opforge, else why not.
        Subclasses with conditions of their own call this too (the parameters' dtype)."""
        for name, p in module.named_parameters(recurse=True):
            if p.device.type != "cpu" or p.dtype not in cls.param_dtypes:
                takes = " or ".join(str(t).replace("torch.", "") for t in cls.param_dtypes)
                return (f"parameter {name} is {str(p.dtype).replace('torch.', '')} on "
                        f"{p.device} (the opforge kernels of {type(module).__name__} take "
                        f"{takes} CPU parameters)")
        return ""


# The norms: parameters in the dtype of the activations they will see, which the kernels take
# in fp32 or bf16 (the parameters themselves are read as fp32).
_NORM_PARAM_DTYPES = (torch.float32, torch.bfloat16)


class LayerNorm(_OpforgeModule, torch.nn.LayerNorm):
    ops = ("layer_norm",)
    param_dtypes = _NORM_PARAM_DTYPES

    def _opforge_forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(_OpforgeModule, torch.nn.Module):
    """RMSNorm as torch.nn.RMSNorm (torch >= 2.4) and LLaMA: y = x / sqrt(mean(x^2) + eps) *
    weight over the last dims; eps None means torch.finfo(float32).eps, as torch."""

    ops = ("rms_norm",)
    param_dtypes = _NORM_PARAM_DTYPES

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.ones(self.normalized_shape, device=device,
                                                        dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")

    def _eps(self):
        return torch.finfo(torch.float32).eps if self.eps is None else self.eps

    def _torch_forward(self, x):
        dims = tuple(range(-len(self.normalized_shape), 0))
        y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + self._eps())
        return y * self.weight if self.weight is not None else y

    def _opforge_forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self._eps())


class Linear(_OpforgeModule, torch.nn.Linear):
    ops = ("matmul",)

    def _opforge_forward(self, x):
        return F.linear(x, self.weight, self.bias)


class Conv2d(_OpforgeModule, torch.nn.Conv2d):
    ops = ("conv2d",)

    def _opforge_forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    @classmethod
    def supports(cls, module):
        why = super().supports(module)
        if why:
            return why
        if module.padding_mode != "zeros":
            return f"padding_mode={module.padding_mode!r} (opforge pads with zeros only)"
        if module.padding == "same" and (module.stride != (1, 1) or any(
                d * (k - 1) % 2 for d, k in zip(module.dilation, module.kernel_size))):
            return "padding='same' with an asymmetric padding"
        return ""


class GELU(_OpforgeModule, torch.nn.GELU):
    ops = ("gelu",)

    def _opforge_forward(self, x):
        return F.gelu(x, self.approximate)


class Softmax(_OpforgeModule, torch.nn.Softmax):
    ops = ("softmax",)

    def _opforge_forward(self, x):
        # dim None: torch's legacy choice (0 for 0-, 1- and 3-D input, else 1).
        dim = self.dim if self.dim is not None else (0 if x.dim() in (0, 1, 3) else 1)
        return F.softmax(x, dim)

    @classmethod
    def supports(cls, module):
        return "" if module.dim is not None else "dim=None (torch's implicit dim is deprecated)"


class SiLU(_OpforgeModule, torch.nn.SiLU):
    ops = ("silu",)

    def _opforge_forward(self, x):
        y = F.silu(x)
        # inplace=True: the result in x itself, as torch's (the kernel writes a new tensor).
        return x.copy_(y) if self.inplace else y


class GroupNorm(_OpforgeModule, torch.nn.GroupNorm):
    ops = ("group_norm",)
    param_dtypes = _NORM_PARAM_DTYPES

    def _opforge_forward(self, x):
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


def _is_causal_mask(mask, query, key, batch_first):
    """Whether `mask` ([L, S]) is the causal one: True (bool) or -inf (float) exactly above
    the diagonal; the fused kernel then takes it as is_causal."""
    length = query.shape[1 if batch_first else 0]
    if mask.dim() != 2 or mask.shape != (length, key.shape[1 if batch_first else 0]):
        return False
    above = torch.ones(mask.shape, dtype=torch.bool).triu(1)
    if mask.dtype == torch.bool:
        return bool(torch.equal(mask, above))
    if not mask.is_floating_point():
        return False
    return bool(torch.isneginf(mask[above]).all()) and bool((mask[~above] == 0).all())


class MultiheadAttention(_OpforgeModule, torch.nn.MultiheadAttention):
    """torch.nn.MultiheadAttention whose attention runs the fused kernel (a causal attn_mask as
    is_causal, another [L, S] mask added to the scores). Calls the kernel cannot serve
    (attention weights asked for, which it never forms; a key padding mask; a per-head mask)
    run torch's forward; `torch_calls` counts them."""

    ops = ("matmul", "scaled_dot_product_attention", "scaled_dot_product_attention_masked")
    torch_calls = 0

    @classmethod
    def supports(cls, module):
        why = super().supports(module)
        if why:
            return why
        if not module._qkv_same_embed_dim:
            return "kdim/vdim differ from embed_dim (separate q, k, v projection weights)"
        if module.bias_k is not None or module.dropout:
            return "add_bias_kv or dropout"
        return ""

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        if query.dim() == 2:  # unbatched [L, E], as torch takes it: a batch of one
            at = 0 if self.batch_first else 1
            out, weights = self.forward(
                query.unsqueeze(at), key.unsqueeze(at), value.unsqueeze(at),
                None if key_padding_mask is None else key_padding_mask.unsqueeze(0),
                need_weights, attn_mask, average_attn_weights, is_causal)
            return out.squeeze(at), None if weights is None else weights.squeeze(0)
        if attn_mask is not None and _is_causal_mask(attn_mask, query, key, self.batch_first):
            attn_mask, is_causal = None, True
        use_torch = need_weights or key_padding_mask is not None or (
            self.fallback and F.needs_grad(query, key, value, *self.parameters()))
        if attn_mask is not None and (attn_mask.dim() != 2 or attn_mask.dtype not in (
                torch.bool, torch.float32)):
            use_torch = True  # a per-head (3-D) or other mask
        if use_torch:
            self.torch_calls += 1
            if is_causal and attn_mask is None:  # torch 1.13's forward has no is_causal
                length = query.shape[1 if self.batch_first else 0]
                attn_mask = torch.ones(length, key.shape[1 if self.batch_first else 0],
                                       dtype=torch.bool).triu(1)
            return torch.nn.MultiheadAttention.forward(
                self, query, key, value, key_padding_mask=key_padding_mask,
                need_weights=need_weights, attn_mask=attn_mask,
                average_attn_weights=average_attn_weights)
        return self._attention(query, key, value, is_causal, attn_mask), None

    def _attention(self, query, key, value, is_causal, attn_mask):
        if not self.batch_first:  # [L, B, E] -> [B, L, E]
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        e, h = self.embed_dim, self.num_heads
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = (self.in_proj_bias.chunk(3) if self.in_proj_bias is not None
                         else (None, None, None))

        def heads(t, w, b):
            y = F.linear(t, w, b)
            return y.view(y.shape[0], y.shape[1], h, e // h).transpose(1, 2).contiguous()

        if attn_mask is not None and attn_mask.dtype == torch.bool:
            attn_mask = ~attn_mask  # MultiheadAttention's True = not allowed; sdpa's = attend
        o = F.scaled_dot_product_attention(heads(query, w_q, b_q), heads(key, w_k, b_k),
                                           heads(value, w_v, b_v), attn_mask=attn_mask,
                                           is_causal=is_causal)
        o = o.transpose(1, 2).reshape(query.shape[0], query.shape[1], e)
        out = F.linear(o, self.out_proj.weight, self.out_proj.bias)
        return out if self.batch_first else out.transpose(0, 1)


# torch class -> its opforge replacement: what patch() swaps.
REPLACEMENTS = {
    torch.nn.LayerNorm: LayerNorm,
    torch.nn.Linear: Linear,
    torch.nn.Conv2d: Conv2d,
    torch.nn.GELU: GELU,
    torch.nn.Softmax: Softmax,
    torch.nn.SiLU: SiLU,
    torch.nn.GroupNorm: GroupNorm,
    torch.nn.MultiheadAttention: MultiheadAttention,
}
