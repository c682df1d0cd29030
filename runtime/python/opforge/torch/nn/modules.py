"""torch.nn modules whose forward runs opforge NN kernels: each subclasses the torch module it
replaces, so the constructor, parameters, buffers and state_dict are torch's own, and a
checkpoint loads both ways. Inference only: with gradients needed, forward raises
GradientsNotSupported, or (fallback=True) runs the torch module's own forward."""

import torch

from . import functional as F


class _OpforgeModule:
    """Mixin: `fallback` (class default False, settable per instance) and the dispatch."""

    fallback = False

    def _needs_grad(self, *tensors):
        return torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in tensors)

    def _torch_forward(self, x):
        return super().forward(x)  # the torch class after this mixin in the MRO

    def forward(self, x):
        if self.fallback and self._needs_grad(x, *self.parameters()):
            return self._torch_forward(x)
        return self._opforge_forward(x)

    @classmethod
    def supports(cls, module):
        """"" when `module` (an instance of the torch class) can run on opforge, else why not."""
        return ""


class LayerNorm(_OpforgeModule, torch.nn.LayerNorm):
    def _opforge_forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(_OpforgeModule, torch.nn.Module):
    """RMSNorm as torch.nn.RMSNorm (torch >= 2.4) and LLaMA: y = x / sqrt(mean(x^2) + eps) *
    weight over the last dims; eps None means torch.finfo(float32).eps, as torch."""

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
    def _opforge_forward(self, x):
        return F.linear(x, self.weight, self.bias)


class Conv2d(_OpforgeModule, torch.nn.Conv2d):
    def _opforge_forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    @classmethod
    def supports(cls, module):
        if module.padding_mode != "zeros":
            return f"padding_mode={module.padding_mode!r} (opforge pads with zeros only)"
        if module.padding == "same" and (module.stride != (1, 1) or any(
                d * (k - 1) % 2 for d, k in zip(module.dilation, module.kernel_size))):
            return "padding='same' with an asymmetric padding"
        return ""


class GELU(_OpforgeModule, torch.nn.GELU):
    def _opforge_forward(self, x):
        return F.gelu(x, self.approximate)


class Softmax(_OpforgeModule, torch.nn.Softmax):
    def _opforge_forward(self, x):
        # dim None: torch's legacy choice (0 for 0-, 1- and 3-D input, else 1).
        dim = self.dim if self.dim is not None else (0 if x.dim() in (0, 1, 3) else 1)
        return F.softmax(x, dim)

    @classmethod
    def supports(cls, module):
        return "" if module.dim is not None else "dim=None (torch's implicit dim is deprecated)"


# torch class -> its opforge replacement: what patch() swaps.
REPLACEMENTS = {
    torch.nn.LayerNorm: LayerNorm,
    torch.nn.Linear: Linear,
    torch.nn.Conv2d: Conv2d,
    torch.nn.GELU: GELU,
    torch.nn.Softmax: Softmax,
}
