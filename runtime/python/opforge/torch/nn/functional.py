"""The functional core of opforge.torch.nn: torch.nn.functional's signatures, run by opforge
NN kernels on fp32 CPU tensors (eager inference: `_require_inference`). Each returns a fresh
tensor (on transparent huge pages when large: _alloc.py says why); inputs are made
contiguous when they are not (a copy, as torch's CPU kernels do).

The memory-bound ops (norms, softmax, gelu, silu, silu_mul) also take bfloat16 activations:
a bf16 input selects the kernel variant with bf16 activations (attr "dtype"), which computes
in fp32 and returns bf16 rounded to nearest even, as torch's bf16 CPU ops do; their small
per-channel parameters (weight, bias) are used in fp32 whatever their dtype."""

import math
import os

import torch

from opforge.torch.nn._alloc import empty
from opforge.torch.optim._base import default_registry

_kernels = {}  # (op, attrs, registry id) -> Kernel: selection once per op and attrs


class GradientsNotSupported(RuntimeError):
    """An opforge NN kernel was asked for a result autograd would differentiate."""


def needs_grad(*tensors):
    """Whether autograd would differentiate a result computed from `tensors`."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _require_inference(what, *tensors):
    """The preconditions of a kernel call: eager mode, and no gradient to compute."""
    if torch.jit.is_tracing() or torch.jit.is_scripting():
        # A trace would record the output's allocation but not the kernel call (ctypes, not
        # an aten op): the traced graph would return uninitialised memory.
        raise RuntimeError(
            f"opforge.torch.nn.{what} cannot be traced or scripted: its kernel is called "
            "outside TorchScript's view; trace or script the unpatched model, or run the "
            "patched one eagerly")
    if needs_grad(*tensors):
        raise GradientsNotSupported(
            f"opforge.torch.nn.{what} runs inference kernels, which have no backward: run the "
            "model under torch.no_grad() or torch.inference_mode(), or build the module with "
            "fallback=True (opforge.torch.patch(model, fallback=True)) to use torch's op "
            "whenever gradients are needed")


def _cpu_tensor(name, t, dtypes, takes):
    """t detached and contiguous when it is a CPU tensor of one of `dtypes`; else a TypeError
    naming the argument and saying what the kernel `takes`."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if not t.is_cpu or t.dtype not in dtypes:
        raise TypeError(f"{name}: {takes} CPU tensors, got {t.dtype} on {t.device}")
    if t.requires_grad:
        t = t.detach()
    return t if t.is_contiguous() else t.contiguous()


def _f32(name, t):
    return _cpu_tensor(name, t, (torch.float32,), "opforge NN kernels take float32")


_ACTIVATION_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}


def _act(name, t):
    """An activation of a memory-bound op: float32 or bfloat16, on the CPU, contiguous."""
    return _cpu_tensor(name, t, _ACTIVATION_DTYPES,
                       "this opforge NN kernel takes float32 or bfloat16")


def _same_dtype(what, *named):
    """The activation dtype shared by every (name, tensor) in `named`, as the kernel attr."""
    dtypes = {t.dtype for _, t in named}
    if len(dtypes) > 1:
        listed = ", ".join(f"{n} {t.dtype}" for n, t in named)
        raise TypeError(f"{what}: the activations must share one dtype, got {listed}")
    return {"dtype": _ACTIVATION_DTYPES[dtypes.pop()]}


def _param(name, t):
    """A per-channel parameter (weight, bias) as the fp32 the kernels take."""
    if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or not t.is_floating_point():
        raise TypeError(f"{name}: expected a floating-point CPU tensor, got "
                        f"{getattr(t, 'dtype', type(t).__name__)}")
    if t.dtype == torch.float32 and t.is_contiguous():
        return t  # read in place (_require_inference made sure autograd is not recording)
    return t.detach().to(torch.float32).contiguous()


def _kernel(op, attrs=None, registry=None):
    reg = registry or default_registry()
    key = (op, tuple(sorted((attrs or {}).items())), id(reg))
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = reg.select(op, attrs or {})
    return k


_by_shape = {}  # (op, attrs, registry id, $OPFORGE_ISA, shapes, scalars) -> Kernel
_BY_SHAPE_MAX = 4096  # a model's distinct call shapes are far fewer; past this, start over


def _kernel_for(op, args, attrs=None, registry=None):
    """registry.select_for(op, args, attrs): the variant whose algorithm applies to these
    tensors' shapes and these scalars, remembered per shape here (the runtime remembers too,
    but converting the arguments to reach it cost ~10 us a call, a decode step's Linear)."""
    reg = registry or default_registry()
    shapes = tuple((n, v.shape, v.dtype) if isinstance(v, torch.Tensor) else (n, v)
                   for n, v in args.items())
    key = (op, tuple(sorted(attrs.items())) if attrs else (), id(reg),
           os.environ.get("OPFORGE_ISA"), shapes)
    k = _by_shape.get(key)
    if k is None:
        k = reg.select_for(op, args, attrs)
        if len(_by_shape) >= _BY_SHAPE_MAX:
            _by_shape.clear()
        _by_shape[key] = k
    return k


def _call(kernel, out_shape, out_name, dtype=torch.float32, **args):
    out = empty(out_shape, dtype)
    kernel.call(args, **{out_name: out})
    return out


def _rows(x, normalized):
    """x as [R, C] with C the product of the last `normalized` dims (a view of contiguous x)."""
    if normalized == 1 and x.dim() == 2:
        return x
    c = math.prod(x.shape[x.dim() - normalized:]) if normalized else 1
    return x.reshape(-1, c)


def _norm_rows(what, x, normalized_shape, weight, bias=None):
    """x as [R, C] rows over the last len(normalized_shape) dims, and weight (ones when None)
    and bias (zeros) as [C]."""
    x = _act(f"{what}: input", x)
    shape = tuple(normalized_shape)
    if tuple(x.shape[x.dim() - len(shape):]) != shape:
        raise ValueError(f"{what}: input shape {tuple(x.shape)} does not end in "
                         f"normalized_shape {shape}")
    rows = _rows(x, len(shape))
    c = rows.shape[1]

    def per_column(name, t, fill):
        if t is None:
            return torch.full((c,), fill)
        p = _param(f"{what}: {name}", t)
        return p if p.shape == (c,) else p.reshape(c)

    return x, rows, per_column("weight", weight, 1.0), per_column("bias", bias, 0.0)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, registry=None):
    """torch.nn.functional.layer_norm (biased variance, over the last len(normalized_shape)
    dims)."""
    _require_inference("layer_norm", x, weight, bias)
    x, rows, gamma, beta = _norm_rows("layer_norm", x, normalized_shape, weight, bias)
    y = _call(_kernel("layer_norm", _same_dtype("layer_norm", ("input", x)), registry),
              rows.shape, "y", x.dtype, x=rows, gamma=gamma, beta=beta, eps=float(eps))
    return y.view(x.shape)


def rms_norm(x, normalized_shape, weight=None, eps=1e-6, registry=None):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last len(normalized_shape) dims (LLaMA's
    RMSNorm; torch.nn.functional.rms_norm of torch >= 2.4)."""
    _require_inference("rms_norm", x, weight)
    x, rows, gamma, _ = _norm_rows("rms_norm", x, normalized_shape, weight)
    y = _call(_kernel("rms_norm", _same_dtype("rms_norm", ("input", x)), registry), rows.shape,
              "y", x.dtype, x=rows, gamma=gamma, eps=float(eps))
    return y.view(x.shape)


def _add_norm(what, x, residual, normalized_shape, weight, bias, eps, registry):
    """(x + residual, norm(x + residual)) over the last dims, in one kernel pass."""
    _require_inference(what, x, residual, weight, bias)
    residual = _act(f"{what}: residual", residual)
    x, rows, gamma, beta = _norm_rows(what, x, normalized_shape, weight, bias)
    if residual.shape != x.shape:
        raise ValueError(f"{what}: input {tuple(x.shape)} and residual "
                         f"{tuple(residual.shape)} differ")
    k = _kernel(what, _same_dtype(what, ("input", x), ("residual", residual)), registry)
    total = empty(rows.shape, x.dtype)
    y = empty(rows.shape, x.dtype)
    args = dict(x=rows, residual=residual.view(rows.shape), gamma=gamma, eps=float(eps))
    if what == "add_layer_norm":
        args["beta"] = beta
    k.call(args, sum=total, y=y)
    return total.view(x.shape), y.view(x.shape)


def add_layer_norm(x, residual, normalized_shape, weight=None, bias=None, eps=1e-5,
                   registry=None):
    """(h, layer_norm(h)) with h = x + residual, in one pass (a transformer block's residual
    add and the next norm): h is the new residual stream."""
    return _add_norm("add_layer_norm", x, residual, normalized_shape, weight, bias, eps,
                     registry)


def add_rms_norm(x, residual, normalized_shape, weight=None, eps=1e-6, registry=None):
    """(h, rms_norm(h)) with h = x + residual, in one pass (LLaMA's residual add + RMSNorm)."""
    return _add_norm("add_rms_norm", x, residual, normalized_shape, weight, None, eps, registry)


def softmax(x, dim, registry=None):
    """torch.nn.functional.softmax over `dim` (a dim other than the last is moved last and
    back: two copies)."""
    _require_inference("softmax", x)
    x = _act("softmax: input", x)
    n = max(x.dim(), 1)  # a 0-dim tensor takes dim 0 or -1, as torch
    if not -n <= dim < n:
        raise IndexError(f"softmax: dimension out of range (expected to be in range of "
                         f"[{-n}, {n - 1}], but got {dim})")
    if x.dim() == 0:
        return torch.ones_like(x)
    dim = dim % x.dim()
    last = dim == x.dim() - 1
    moved = x if last else x.movedim(dim, -1).contiguous()
    rows = _rows(moved, 1)
    k = _kernel("softmax", _same_dtype("softmax", ("input", x)), registry)
    y = _call(k, rows.shape, "y", x.dtype, x=rows).view(moved.shape)
    return y if last else y.movedim(-1, dim).contiguous()


def gelu(x, approximate="none", registry=None):
    """torch.nn.functional.gelu(x, approximate=...)."""
    _require_inference("gelu", x)
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    x = _act("gelu: input", x)
    flat = x.reshape(-1)
    attrs = {"approximate": approximate, **_same_dtype("gelu", ("input", x))}
    y = _call(_kernel("gelu", attrs, registry), flat.shape, "y", x.dtype, x=flat)
    return y.view(x.shape)


def linear(x, weight, bias=None, registry=None):
    """torch.nn.functional.linear: x @ weight^T + bias, over x's last dim (the linear op: one
    GEMM with the bias added as it stores, its algorithm picked by shape; without a bias, or
    on a registry built before linear existed, matmul with transpose_b and a bias pass)."""
    _require_inference("linear", x, weight, bias)
    x = _f32("linear: input", x)
    w = _f32("linear: weight", weight)
    if w.dim() != 2 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"linear: input {tuple(x.shape)} and weight {tuple(w.shape)} do not "
                         "match (in_features is the weight's second dim)")
    b = None if bias is None else _f32("linear: bias", bias)
    if b is not None and b.shape != (w.shape[0],):
        raise ValueError(f"linear: bias {tuple(b.shape)} does not match weight "
                         f"{tuple(w.shape)} (one value per output feature)")
    if w.shape[1] == 0:  # no input features: the empty sums are 0, plus the bias
        y = torch.zeros(*x.shape[:-1], w.shape[0])
        return y + b if b is not None else y
    a = x.reshape(-1, w.shape[1])
    out_shape = (a.shape[0], w.shape[0])
    reg = registry or default_registry()
    if b is not None and _has_op(reg, "linear"):
        args = {"x": a, "weight": w, "bias": b}
        y = _call(_kernel_for("linear", args, registry=reg), out_shape, "y", **args)
    else:
        # By the call's shapes: a few rows (a decode step) take small_m, b read once in place.
        k = _kernel_for("matmul", {"a": a, "b": w}, {"transpose_b": True}, reg)
        y = _call(k, out_shape, "c", a=a, b=w)
        if b is not None:
            y += b
    return y.view(*x.shape[:-1], w.shape[0])


_ops = {}  # registry id -> its ops


def _has_op(reg, op):
    have = _ops.get(id(reg))
    if have is None:
        have = _ops[id(reg)] = frozenset(reg.ops())
    return op in have


def _pair(v, name):
    if isinstance(v, int):
        return v, v
    t = tuple(v)
    if len(t) != 2 or not all(isinstance(i, int) for i in t):
        raise ValueError(f"conv2d: {name} must be an int or a pair of ints, got {v!r}")
    return t


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, registry=None):
    """torch.nn.functional.conv2d on NCHW (padding: ints, 'valid', or 'same' where the
    padding is symmetric). The kernel's algorithm (direct, direct_oc, Winograd, depthwise) is
    picked by shape, as `opforge run` does."""
    _require_inference("conv2d", x, weight, bias)
    x = _f32("conv2d: input", x)
    w = _f32("conv2d: weight", weight)
    if x.dim() == 3 and w.dim() == 4:  # unbatched CHW, as torch takes it
        return conv2d(x[None], w, bias, stride, padding, dilation, groups, registry)[0]
    if x.dim() != 4 or w.dim() != 4:
        raise ValueError(f"conv2d: expected NCHW (or CHW) input and OIHW weight, got "
                         f"{tuple(x.shape)} and {tuple(w.shape)}")
    sh, sw = _pair(stride, "stride")
    dh, dw = _pair(dilation, "dilation")
    kh, kw = w.shape[2], w.shape[3]
    if padding == "valid":
        ph = pw = 0
    elif padding == "same":
        eh, ew = dh * (kh - 1), dw * (kw - 1)
        if eh % 2 or ew % 2 or (sh, sw) != (1, 1):
            raise ValueError("conv2d: padding='same' needs stride 1 and a symmetric padding")
        ph, pw = eh // 2, ew // 2
    else:
        ph, pw = _pair(padding, "padding")
    oh = (x.shape[2] + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (x.shape[3] + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    args = dict(x=x, weight=w, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw, dilation_h=dh,
                dilation_w=dw, groups=groups)
    kernel = _kernel_for("conv2d", args, registry=registry)
    y = empty((x.shape[0], w.shape[0], oh, ow))
    kernel.call(args, y=y)
    if bias is not None:
        y += _f32("conv2d: bias", bias).view(1, -1, 1, 1)
    return y


def silu(x, registry=None):
    """torch.nn.functional.silu: x * sigmoid(x)."""
    _require_inference("silu", x)
    x = _act("silu: input", x)
    flat = x.reshape(-1)
    k = _kernel("silu", _same_dtype("silu", ("input", x)), registry)
    return _call(k, flat.shape, "y", x.dtype, x=flat).view(x.shape)


def silu_mul(a, b, registry=None):
    """silu(a) * b in one pass (LLaMA's SwiGLU: silu(x W_gate) * (x W_up))."""
    _require_inference("silu_mul", a, b)
    a = _act("silu_mul: a", a)
    b = _act("silu_mul: b", b)
    if a.shape != b.shape:
        raise ValueError(f"silu_mul: a {tuple(a.shape)} and b {tuple(b.shape)} differ")
    k = _kernel("silu_mul", _same_dtype("silu_mul", ("a", a), ("b", b)), registry)
    fa, fb = a.reshape(-1), b.reshape(-1)
    return _call(k, fa.shape, "y", a.dtype, a=fa, b=fb).view(a.shape)


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5, registry=None):
    """torch.nn.functional.group_norm on [N, C, *] (spatial dims flattened into one)."""
    _require_inference("group_norm", x, weight, bias)
    x = _act("group_norm: input", x)
    if x.dim() < 2:
        raise ValueError(f"group_norm: expected [N, C, *] input, got {tuple(x.shape)}")
    n, c = x.shape[0], x.shape[1]
    if int(num_groups) <= 0 or c % int(num_groups):
        raise ValueError(f"group_norm: {c} channels do not split into {num_groups} groups")
    if x.numel() == 0:
        return torch.empty_like(x)
    x4 = x.reshape(n, c, 1, -1)
    w = _param("group_norm: weight", weight) if weight is not None else torch.ones(c)
    b = _param("group_norm: bias", bias) if bias is not None else torch.zeros(c)
    k = _kernel("group_norm", _same_dtype("group_norm", ("input", x)), registry)
    y = _call(k, x4.shape, "y", x.dtype, x=x4, weight=w, bias=b, groups=int(num_groups),
              eps=float(eps))
    return y.view(x.shape)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, registry=None):
    """torch.nn.functional.scaled_dot_product_attention (torch >= 2.0's signature) on
    [B, H, L, D] queries and [B, Hkv, S, D] keys/values (H a multiple of Hkv: grouped-query
    heads), fused (no L x S matrix; flash, or decode for a few queries, by shape). is_causal:
    query l sees keys s <= l, as torch. attn_mask: added to the scores (float), or True where
    a key is seen (bool, read as bytes by the kernel); not with is_causal. The kernel takes
    one [L, S] mask; a mask broadcast over batches or heads as torch's ([B, 1, L, S],
    [B, H, 1, S], ...) runs one call per batch (and head) that has its own."""
    _require_inference("scaled_dot_product_attention", query, key, value)
    if dropout_p:
        raise ValueError("scaled_dot_product_attention: dropout_p must be 0 (inference)")
    q = _f32("scaled_dot_product_attention: query", query)
    k = _f32("scaled_dot_product_attention: key", key)
    v = _f32("scaled_dot_product_attention: value", value)
    if q.dim() == 3:  # [H, L, D] as torch allows: one batch
        if isinstance(attn_mask, torch.Tensor) and attn_mask.dim() == 4:
            raise ValueError("scaled_dot_product_attention: a 4-D attn_mask needs 4-D query, "
                             "key and value")
        return scaled_dot_product_attention(q[None], k[None], v[None], attn_mask, 0.0,
                                            is_causal, scale, registry)[0]
    if scale is not None and scale == 0:
        # Every score 0 (the kernel reads scale 0 as 1 / sqrt(D)): the same from zero queries.
        q, scale = torch.zeros_like(q), None
    if isinstance(attn_mask, torch.Tensor) and attn_mask.dim() > 2:
        return _sdpa_broadcast_mask(q, k, v, attn_mask, scale, registry)
    args = dict(q=q, k=k, v=v, scale=0.0 if scale is None else scale)
    if attn_mask is None:
        op, attrs = "scaled_dot_product_attention", {"causal": bool(is_causal)}
    else:
        if is_causal:
            raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal, not "
                             "both (as torch)")
        if isinstance(attn_mask, torch.Tensor) and attn_mask.dtype == torch.bool:
            args["mask"] = attn_mask.detach().contiguous()  # a byte per element, as the kernel
            mask_dtype = "bool"
        else:
            args["mask"] = _f32("scaled_dot_product_attention: attn_mask", attn_mask)
            mask_dtype = "float32"
        op, attrs = "scaled_dot_product_attention_masked", {"mask_dtype": mask_dtype}
    # By the call's shapes: a few queries (decode) take the decode algorithm, others flash.
    kernel = _kernel_for(op, args, attrs, registry)
    return _call(kernel, q.shape, "o", **args)


def _sdpa_broadcast_mask(q, k, v, mask, scale, registry):
    """scaled_dot_product_attention with a mask of 3 or 4 dims broadcast to [B, H, L, S] as
    torch's: one kernel call per (batch, head) slice where the mask differs, each with its
    [L, S] slice (batches or heads the mask broadcasts over share a call)."""
    (b, h, length, _), s_len = q.shape, k.shape[2]
    try:
        full = mask.expand(b, h, length, s_len)  # also refuses more than 4 dims
    except RuntimeError:
        raise ValueError(f"scaled_dot_product_attention: attn_mask {tuple(mask.shape)} does "
                         f"not broadcast to [B, H, L, S] = {(b, h, length, s_len)}") from None
    m4 = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
    per_batch, per_head = m4.shape[0] != 1, m4.shape[1] != 1
    if h % k.shape[1]:
        raise ValueError(f"scaled_dot_product_attention: {h} query heads are not a multiple "
                         f"of {k.shape[1]} key/value heads")
    group = h // k.shape[1]  # query heads per key/value head
    out = empty(q.shape)
    for bi in range(b if per_batch else 1):
        rows = slice(bi, bi + 1) if per_batch else slice(None)
        for hi in range(h if per_head else 1):
            heads = slice(hi, hi + 1) if per_head else slice(None)
            kv = slice(hi // group, hi // group + 1) if per_head else slice(None)
            out[rows, heads] = scaled_dot_product_attention(
                q[rows, heads], k[rows, kv], v[rows, kv],
                full[bi, hi].contiguous(), scale=scale, registry=registry)
    return out
