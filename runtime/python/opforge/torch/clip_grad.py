"""clip_grad_norm_ (torch.nn.utils.clip_grad_norm_'s signature and result) on opforge's
clip_by_global_norm and global_norm kernels."""

import torch

from .optim._base import default_registry, flat_group_of_grads

_STORAGE = {torch.float32: None, torch.bfloat16: "bf16g"}


def _kernel(op, attrs, registry, isa):
    return (registry or default_registry()).select(op, attrs, isa)


def _norm_kernel(dtype, registry, isa):
    storage = _STORAGE[dtype]
    return _kernel("global_norm", {"storage": storage} if storage else {}, registry, isa)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, *,
                    registry=None, isa=None):
    """Scales the gradients of `parameters` in place so that their global 2-norm is at
    most max_norm: g *= min(max_norm / (norm + 1e-6), 1), torch's formula; returns the norm
    before clipping (a 0-dim fp32 tensor). Gradients that are a fused opforge optimizer's
    flat buffer (every view of it) take one pass per buffer: clip_by_global_norm when it is
    the only one, else global_norm per buffer and one scale each. Other gradients: one
    global_norm call each (fp32, bf16; f16 by torch). norm_type other than 2: torch's own
    clip_grad_norm_. Non-finite norms scale as torch's (inf: by 0; NaN: by NaN), or with
    error_if_nonfinite raise before anything changes. The norm is fp32 whatever the
    gradients' dtype (torch's is in their dtype)."""
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    if float(norm_type) != 2.0:
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type,
                                              error_if_nonfinite)
    max_norm = float(max_norm)
    grads = [p.grad for p in parameters if p.grad is not None]
    for i, g in enumerate(grads):
        if g.is_sparse or g.device.type != "cpu" or g.dtype not in (
                torch.float32, torch.bfloat16, torch.float16):
            raise RuntimeError(f"clip_grad_norm_: gradient {i} is a {g.dtype} "
                               f"{'sparse ' if g.is_sparse else ''}tensor on {g.device}; "
                               "opforge clips dense float32/bfloat16/float16 CPU gradients")
    if not grads:
        return torch.tensor(0.0)
    groups, loose = flat_group_of_grads(grads)
    buffers = [fg.flat["grad"] for fg in groups]
    norm = torch.zeros(1)
    if (len(buffers) == 1 and not loose and buffers[0].dtype == torch.float32
            and not error_if_nonfinite):
        # The whole buffer is one tensor to the kernel: its padding is zero.
        _kernel("clip_by_global_norm", {"convention": "torch"}, registry, isa).call(
            grad=buffers[0], clip_norm=max_norm, global_norm=norm)
        total = float(norm)
        if total != total:  # torch scales by clamp(max_norm / nan, max=1), which is nan
            buffers[0].mul_(total)
        return norm[0]
    # Sum of squares over every part (the kernel accumulates: norm = sqrt(norm^2 + sum)).
    kernels = {}  # dtype -> global_norm variant, selected once per call
    for t in buffers + [g if g.is_contiguous() else g.contiguous() for g in loose]:
        if t.dtype == torch.float16:  # no f16 norm kernel: torch's, folded in
            n = torch.linalg.vector_norm(t.float()).reshape(1)
            norm.copy_(torch.sqrt(norm * norm + n * n))
            continue
        if t.dtype not in kernels:
            kernels[t.dtype] = _norm_kernel(t.dtype, registry, isa)
        kernels[t.dtype].call(grad=t.reshape(-1), global_norm=norm)
    total = float(norm)
    if error_if_nonfinite and not torch.isfinite(norm).all():
        raise RuntimeError(f"The total norm of order 2.0 for gradients from `parameters` is "
                           f"non-finite ({total}), so it cannot be clipped. To disable this "
                           "error and scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`")
    coef = min(max_norm / (total + 1e-6), 1.0)  # (nan stays nan: min keeps its first)
    if coef != 1.0:
        for g in buffers + loose:
            g.mul_(coef)  # (loose non-contiguous: the original, not the copy)
    return norm[0]
