"""opforge.torch.nn: each module against the torch module it replaces, evaluated in fp64 on
the same weights, at odd shapes; state_dicts both ways; patch(model) and its report; the
inference-only contract (a clear error, or torch's forward with fallback=True)."""

import pytest

torch = pytest.importorskip("torch")

import opforge.torch as ot  # noqa: E402
from opforge.torch import nn as onn  # noqa: E402


def run_both(torch_module, opforge_cls, x, atol, rtol):
    """torch_module in fp64 vs the same state in opforge_cls, fp32, on x."""
    mod = opforge_cls.__new__(opforge_cls)
    mod.__dict__.update(torch_module.__dict__)
    with torch.no_grad():
        want = torch_module.double()(x.double())
        torch_module.float()
        got = mod(x)
    assert got.dtype == torch.float32 and got.shape == want.shape
    err = (got.double() - want).abs()
    bound = atol + rtol * want.abs()
    assert bool((err <= bound).all()), f"max err {err.max().item()}, worst excess " \
        f"{(err - bound).max().item()}"
    return got


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shape,normalized", [((1, 1), (1,)), ((5, 17), (17,)),
                                              ((3, 5, 1000), (1000,)), ((2, 5, 17), (5, 17))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(reg, shape, normalized, affine):
    torch.manual_seed(1)
    m = torch.nn.LayerNorm(normalized, eps=1e-5, elementwise_affine=affine)
    if affine:
        with torch.no_grad():
            m.weight.normal_()
            m.bias.normal_()
    # fp32 two-pass statistics: |err| <= 1e-4 + 1e-4*|ref| (as tests/python/test_nn.py).
    run_both(m, onn.LayerNorm, randn(*shape), 1e-4, 1e-4)


@pytest.mark.parametrize("shape", [(1, 1), (5, 17), (3, 2, 1000)])
def test_rms_norm_matches_its_formula(reg, shape):
    x = randn(*shape, seed=2)
    m = onn.RMSNorm(shape[-1], eps=1e-6)
    with torch.no_grad():
        m.weight.copy_(randn(shape[-1], seed=3))
        got = m(x)
    xd = x.double()
    want = xd / torch.sqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * m.weight.double()
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-5)
    assert list(m.state_dict()) == ["weight"]
    # torch's own forward (fallback path) computes the same formula.
    with torch.no_grad():
        assert torch.allclose(m._torch_forward(x).double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows,inf,outf,bias", [(1, 1, 1, True), (5, 17, 33, True),
                                                (17, 5, 1, False), (2 * 7, 64, 100, True)])
def test_linear(reg, rows, inf, outf, bias):
    torch.manual_seed(4)
    m = torch.nn.Linear(inf, outf, bias=bias)
    x = randn(2, rows // 2, inf, seed=5) if rows % 2 == 0 else randn(rows, inf, seed=5)
    # fp32 dot products of K terms (matmul's descriptor tolerance for K <= 100).
    run_both(m, onn.Linear, x, 1e-5 * inf, 1e-4)


@pytest.mark.parametrize("rows,algorithm", [(1, "small_m"), (3, "small_m"), (16, "small_m"),
                                            (17, "packed")])
def test_linear_decode_rows(reg, rows, algorithm):
    """Up to 16 rows (a decode step's tokens) against 128 or more output features take
    matmul's small_m (b read in place); 17 rows the packed algorithm. Both against fp64, with
    K = 77 (not a whole number of vectors) and 300 outputs (not a whole task)."""
    torch.manual_seed(40)
    m = torch.nn.Linear(77, 300)
    x = randn(rows, 77, seed=41)
    kernel = reg.select_for("matmul", dict(a=x, b=m.weight.detach()), {"transpose_b": True})
    assert f"__{algorithm}__" in kernel.variant
    run_both(m, onn.Linear, x, 1e-5 * 77, 1e-4)


def test_linear_rows_alternating(reg):
    """One Linear called with 1, 17, 1, 17 and 3 rows: the kernel that functional remembers
    per shape is the one selection picks for that shape (small_m, packed), and every output
    matches fp64."""
    from opforge.torch.nn import functional as F
    torch.manual_seed(42)
    m = torch.nn.Linear(77, 300)
    for i, rows in enumerate((1, 17, 1, 17, 3)):
        x = randn(rows, 77, seed=43 + i)
        args, attrs = dict(a=x, b=m.weight.detach()), {"transpose_b": True}
        assert F._kernel_for("matmul", args, attrs).variant == \
            reg.select_for("matmul", args, attrs).variant
        run_both(m, onn.Linear, x, 1e-5 * 77, 1e-4)


@pytest.mark.parametrize("rows,algorithm", [(1, "small_m"), (17, "packed"),
                                            (1030, "packed_b_once")])
def test_linear_with_bias_runs_the_linear_op(reg, rows, algorithm, monkeypatch):
    """With a bias, Linear is the linear op (the bias added in the GEMM's output stage), its
    algorithm by rows; on a registry without linear, matmul and a bias pass: both against
    fp64."""
    from opforge.torch.nn import functional as F
    torch.manual_seed(44)
    m = torch.nn.Linear(33, 130)
    x = randn(rows, 33, seed=45)
    args = dict(x=x, weight=m.weight.detach(), bias=m.bias.detach())
    assert f"linear__{algorithm}__" in F._kernel_for("linear", args).variant
    run_both(m, onn.Linear, x, 1e-5 * 33, 1e-4)
    monkeypatch.setattr(F, "_has_op", lambda reg, op: op != "linear")
    run_both(m, onn.Linear, x, 1e-5 * 33, 1e-4)


def test_linear_bias_of_the_wrong_length_is_named():
    from opforge.torch.nn import functional as F
    with torch.no_grad(), pytest.raises(ValueError, match=r"bias \(5,\) does not match weight"):
        F.linear(torch.ones(2, 3), torch.ones(4, 3), torch.ones(5))


@pytest.mark.parametrize("cfg", [
    dict(in_channels=3, out_channels=8, kernel_size=3, padding=1),            # direct_oc
    dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1),  # .._small_8
    dict(in_channels=5, out_channels=7, kernel_size=1, stride=2, bias=False),  # .._unpadded
    dict(in_channels=6, out_channels=6, kernel_size=3, padding=1, groups=6),  # depthwise
    dict(in_channels=4, out_channels=4, kernel_size=3, padding="same", dilation=2, groups=2),
])
def test_conv2d(reg, cfg):
    torch.manual_seed(6)
    m = torch.nn.Conv2d(**cfg)
    # Winograd's transform-domain rounding: the conv2d descriptor's widest tolerance.
    run_both(m, onn.Conv2d, randn(2, cfg["in_channels"], 17, 13, seed=7), 3e-3, 1e-3)


def test_conv2d_winograd(reg):
    """128 input channels on a 32x33 output (C >= 64, C x output pixels >= 131072):
    Winograd, whose 4x4 tiles leave a tail column, through the module against fp64."""
    torch.manual_seed(8)
    m = torch.nn.Conv2d(128, 5, 3, padding=1)
    x = randn(1, 128, 32, 33, seed=9)
    scalars = dict(stride_h=1, stride_w=1, pad_h=1, pad_w=1, dilation_h=1, dilation_w=1,
                   groups=1)
    kernel = reg.select_for("conv2d", dict(x=x, weight=m.weight.detach(), **scalars))
    assert "__winograd__" in kernel.variant
    run_both(m, onn.Conv2d, x, 3e-3, 1e-3)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(reg, approximate):
    run_both(torch.nn.GELU(approximate), onn.GELU, randn(3, 5, 17, seed=8) * 3, 1e-6, 1e-5)


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_any_dim(reg, dim):
    run_both(torch.nn.Softmax(dim=dim), onn.Softmax, randn(3, 5, 17, seed=9) * 4, 1e-7, 1e-5)


def test_state_dicts_load_both_ways(reg):
    torch.manual_seed(10)
    ref = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.LayerNorm(7),
                              torch.nn.Conv2d(1, 2, 3))
    ours = torch.nn.Sequential(onn.Linear(5, 7), onn.LayerNorm(7), onn.Conv2d(1, 2, 3))
    assert list(ours.state_dict()) == list(ref.state_dict())
    ours.load_state_dict(ref.state_dict())
    fresh = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.LayerNorm(7),
                                torch.nn.Conv2d(1, 2, 3))
    fresh.load_state_dict(ours.state_dict())
    for a, b in zip(fresh.state_dict().values(), ref.state_dict().values()):
        assert torch.equal(a, b)


class MyLinear(torch.nn.Linear):
    pass


def small_model():
    torch.manual_seed(11)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 3, padding=1,
                                                             padding_mode="reflect"),
        torch.nn.Flatten(), torch.nn.Linear(8 * 9 * 9, 33), torch.nn.LayerNorm(33),
        torch.nn.GELU(approximate="tanh"), torch.nn.Dropout(0.1), MyLinear(33, 5),
        torch.nn.Softmax(dim=-1)).eval()


def test_patch_swaps_what_it_supports_and_says_why_it_left_the_rest(reg):
    model = small_model()
    x = randn(4, 3, 9, 9, seed=12)
    with torch.no_grad():
        want = small_model().double()(x.double())
    linear_weight = model[3].weight
    patched, report = ot.patch(model)
    assert patched is model
    assert [n for n, _ in report.swapped] == ["0", "3", "4", "5", "8"]
    assert isinstance(model[3], onn.Linear) and model[3].weight is linear_weight  # shared
    left = {name: why for name, _, why in report.left}
    assert set(left) == {"1", "2", "6", "7"}
    assert "padding_mode='reflect'" in left["1"]
    assert "no opforge kernel for torch.nn.modules.flatten.Flatten" in left["2"]
    assert "subclass of torch.nn.Linear" in left["7"]
    assert "swapped 5 modules, left 4" in str(report)
    with torch.no_grad():
        got = model(x)
    assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-5)
    # A supported module as the whole model is replaced, not walked.
    root, rep = ot.patch(torch.nn.LayerNorm(7))
    assert isinstance(root, onn.LayerNorm) and rep.swapped == [("", "LayerNorm")]


def test_gradients_need_no_grad_or_the_fallback(reg):
    model = small_model()
    ot.patch(model)
    x = randn(2, 3, 9, 9, seed=13)
    with pytest.raises(onn.GradientsNotSupported, match="torch.no_grad"):
        model(x)
    # fallback=True: torch's forward (and backward) whenever gradients are needed.
    ref, model = small_model(), small_model()
    ot.patch(model, fallback=True)
    for m in (ref, model):
        m(x).sum().backward()
    for a, b in zip(ref.parameters(), model.parameters()):
        assert torch.allclose(a.grad, b.grad)


def test_bad_inputs_are_refused_by_name(reg):
    m = onn.Linear(5, 3)
    with torch.no_grad():
        with pytest.raises(TypeError, match="linear: input: opforge NN kernels take float32"):
            m(torch.ones(2, 5, dtype=torch.float64))
        with pytest.raises(ValueError, match=r"linear: input \(2, 4\) and weight \(3, 5\)"):
            m(torch.ones(2, 4))


# The ops of the NN issue's second part: silu, silu_mul, group_norm, fused attention.

def test_silu(reg):
    run_both(torch.nn.SiLU(), onn.SiLU, randn(3, 5, 17, seed=14) * 6, 1e-6, 1e-5)


def test_silu_mul(reg):
    a, b = randn(5, 1001, seed=15) * 4, randn(5, 1001, seed=16)
    with torch.no_grad():
        got = onn.functional.silu_mul(a, b)
    want = torch.nn.functional.silu(a.double()) * b.double()
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"silu_mul: a \(5, 1001\) and b \(5, 1000\) differ"):
        with torch.no_grad():
            onn.functional.silu_mul(a, b[:, :1000])


@pytest.mark.parametrize("groups,channels,hw,affine", [(3, 6, (5, 7), True), (1, 1, (1, 1), True),
                                                        (32, 320, (16, 16), True),
                                                        (2, 4, (17, 3), False)])
def test_group_norm(reg, groups, channels, hw, affine):
    torch.manual_seed(17)
    m = torch.nn.GroupNorm(groups, channels, eps=1e-5, affine=affine)
    if affine:
        with torch.no_grad():
            m.weight.normal_()
            m.bias.normal_()
    run_both(m, onn.GroupNorm, randn(2, channels, *hw, seed=18) + 3, 1e-4, 1e-4)


def attention_ref(q, k, v, causal, mask=None):
    """softmax(q k^T / sqrt(D) [+ mask] [causal: s <= l]) v in fp64, K/V heads repeated for
    GQA."""
    q, k, v = q.double(), k.double(), v.double()
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        s = s + mask.double()
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,h,hkv,length,d", [(1, 1, 1, 1, 64), (2, 4, 2, 17, 40),
                                              (1, 2, 2, 100, 64)])
def test_scaled_dot_product_attention(reg, causal, b, h, hkv, length, d):
    q = randn(b, h, length, d, seed=19)
    k, v = randn(b, hkv, length, d, seed=20), randn(b, hkv, length, d, seed=21)
    with torch.no_grad():
        got = onn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert torch.allclose(got.double(), attention_ref(q, k, v, causal), rtol=1e-4, atol=1e-5)


def test_attention_masks(reg):
    q, k, v = randn(2, 4, 17, 40, seed=24), randn(2, 2, 13, 40, seed=25), randn(2, 2, 13, 40,
                                                                             seed=26)
    additive = randn(17, 13, seed=27)
    seen = randn(17, 13, seed=28) > -0.5
    with torch.no_grad():
        got = onn.functional.scaled_dot_product_attention(q, k, v, attn_mask=additive)
        assert torch.allclose(got.double(), attention_ref(q, k, v, False, additive),
                              rtol=1e-4, atol=1e-5)
        got = onn.functional.scaled_dot_product_attention(q, k, v, attn_mask=seen)
        as_float = torch.zeros(17, 13).masked_fill(~seen, float("-inf"))
        assert torch.allclose(got.double(), attention_ref(q, k, v, False, as_float),
                              rtol=1e-4, atol=1e-5)
        with pytest.raises(ValueError, match="not both"):
            onn.functional.scaled_dot_product_attention(q, k, v, attn_mask=seen, is_causal=True)


def test_attention_decode_shapes(reg):
    """A few queries against a longer cache take the decode algorithm (chosen by shape)."""
    q = randn(1, 8, 3, 64, seed=31)
    k, v = randn(1, 2, 50, 64, seed=32), randn(1, 2, 50, 64, seed=33)
    additive = randn(3, 50, seed=34)
    kernel = reg.select_for("scaled_dot_product_attention", dict(q=q, k=k, v=v, scale=0.0),
                            {"causal": False})
    assert "decode" in kernel.variant
    check_attention_forms(q, k, v, additive)


def check_attention_forms(q, k, v, additive):
    """Causal and not, and an additive mask, against the fp64 reference."""
    with torch.no_grad():
        for causal in (False, True):
            got = onn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            assert torch.allclose(got.double(), attention_ref(q, k, v, causal), rtol=1e-4,
                                  atol=1e-5)
        got = onn.functional.scaled_dot_product_attention(q, k, v, attn_mask=additive)
        assert torch.allclose(got.double(), attention_ref(q, k, v, False, additive), rtol=1e-4,
                              atol=1e-5)


def test_attention_decode_queries_shapes(reg):
    """11 to 32 queries (head dim a multiple of 32) take decode_queries: causal, float and
    bool masks against the fp64 reference, with fewer keys (7) than its key block and more."""
    q = randn(1, 4, 12, 64, seed=35)
    for keys in (7, 300):
        k, v = randn(1, 2, keys, 64, seed=36), randn(1, 2, keys, 64, seed=37)
        kernel = reg.select_for("scaled_dot_product_attention", dict(q=q, k=k, v=v, scale=0.0),
                                {"causal": False})
        assert "decode_queries" in kernel.variant
        additive = randn(12, keys, seed=38)
        allowed = randn(12, keys, seed=39) > -1.0
        allowed[:, 0] = True  # no row fully masked
        check_attention_forms(q, k, v, additive)
        with torch.no_grad():
            got = onn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
            as_added = torch.zeros(12, keys, dtype=torch.float64).masked_fill(~allowed,
                                                                              float("-inf"))
            assert torch.allclose(got.double(), attention_ref(q, k, v, False, as_added),
                                  rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention(reg, batch_first):
    torch.manual_seed(22)
    ref = torch.nn.MultiheadAttention(64, 4, batch_first=batch_first).eval()
    x = randn(3, 17, 64, seed=23) if batch_first else randn(17, 3, 64, seed=23)
    causal = torch.ones(17, 17, dtype=torch.bool).triu(1)
    # MultiheadAttention's bool mask: True where a key is NOT allowed (sdpa's opposite); each
    # row keeps its diagonal key, so no row is fully masked.
    banned = (randn(17, 17, seed=30) > 0.3) & ~torch.eye(17, dtype=torch.bool)
    m, report = ot.patch(torch.nn.Sequential(ref))
    mha = m[0]
    assert isinstance(mha, onn.MultiheadAttention)
    with torch.no_grad():
        for mask in (None, causal, randn(17, 17, seed=29), banned):
            got, weights = mha(x, x, x, need_weights=False, attn_mask=mask)
            assert weights is None and mha.torch_calls == 0
            want, _ = torch.nn.MultiheadAttention.forward(
                copy_double(ref), x.double(), x.double(), x.double(), need_weights=False,
                attn_mask=mask)
            assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-5)
        # Attention weights are never formed by the fused kernel: torch's forward, counted.
        _, weights = mha(x, x, x)
        assert weights is not None and mha.torch_calls == 1


def copy_double(module):
    import copy
    return copy.deepcopy(module).double()


# Edge cases torch accepts (or refuses) that a swapped module meets in real models.

def test_softmax_dim_out_of_range_is_refused_as_torch(reg):
    x = randn(2, 3, seed=40)
    with torch.no_grad():
        for dim in (2, -3):
            with pytest.raises(IndexError, match="dimension out of range"):
                onn.Softmax(dim=dim)(x)
        assert torch.allclose(onn.Softmax(dim=-2)(x), torch.softmax(x, 0))


@pytest.mark.parametrize("with_mask", [False, True])
def test_attention_scale_zero_weighs_every_key_alike(reg, with_mask):
    """scale=0.0 is a scale (every score 0, then the mask), not the default 1/sqrt(D)."""
    q, k, v = randn(1, 2, 3, 8, seed=41), randn(1, 2, 5, 8, seed=42), randn(1, 2, 5, 8, seed=43)
    mask = randn(3, 5, seed=44) if with_mask else None
    with torch.no_grad():
        got = onn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.0)
    weights = torch.softmax(mask.double() if with_mask else torch.zeros(3, 5,
                                                                         dtype=torch.float64), -1)
    want = weights @ v.double()
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 1, 17, 13), (2, 4, 1, 13), (1, 1, 17, 13), (4, 17, 13),
                                   (2, 4, 17, 13)])
@pytest.mark.parametrize("kind", ["float", "bool"])
def test_attention_masks_broadcast_over_batches_and_heads(reg, shape, kind):
    """Masks torch broadcasts to [B, H, L, S] (a padding mask [B, 1, 1, S], per-head ones),
    with grouped-query heads (4 query heads on 2 key/value heads)."""
    q = randn(2, 4, 17, 40, seed=45)
    k, v = randn(2, 2, 13, 40, seed=46), randn(2, 2, 13, 40, seed=47)
    if kind == "float":
        mask = randn(*shape, seed=48)
        added = mask
    else:
        mask = randn(*shape, seed=48) > -0.5
        mask[..., 0] = True  # no row fully masked
        added = torch.zeros(shape).masked_fill(~mask, float("-inf"))
    with torch.no_grad():
        got = onn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(got.double(), attention_ref(q, k, v, False, added), rtol=1e-4,
                          atol=1e-5)
    with pytest.raises(ValueError, match=r"attn_mask \(3, 17, 13\) does not broadcast"):
        onn.functional.scaled_dot_product_attention(q, k, v, attn_mask=randn(3, 17, 13))


def test_empty_inputs_give_torch_shapes(reg):
    with torch.no_grad():
        assert onn.GroupNorm(2, 4)(torch.ones(0, 4, 3, 3)).shape == (0, 4, 3, 3)
        for bias in (True, False):
            m = onn.Linear(0, 4, bias=bias)
            want = torch.nn.Linear.forward(m, torch.ones(3, 0))
            assert torch.equal(m(torch.ones(3, 0)), want)
        with pytest.raises(ValueError, match="6 channels do not split into 4 groups"):
            onn.functional.group_norm(torch.ones(0, 6, 2), 4)


def test_unbatched_conv2d_and_attention_as_torch(reg):
    torch.manual_seed(49)
    conv = torch.nn.Conv2d(3, 5, 3, padding=1)
    x = randn(3, 7, 9, seed=50)
    run_both(conv, onn.Conv2d, x, atol=1e-5, rtol=1e-4)
    for batch_first in (True, False):
        ref = torch.nn.MultiheadAttention(16, 4, batch_first=batch_first).eval()
        mha, _ = ot.patch(ref)
        x = randn(5, 16, seed=51)
        with torch.no_grad():
            got, weights = mha(x, x, x, need_weights=False)
            want, _ = torch.nn.MultiheadAttention.forward(
                copy_double(ref), x.double(), x.double(), x.double(), need_weights=False)
        assert weights is None and mha.torch_calls == 0
        assert got.shape == (5, 16)
        assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-5)


def test_silu_in_place_writes_its_input(reg):
    x = randn(4, 33, seed=52)
    want = torch.nn.functional.silu(x.double())
    with torch.no_grad():
        y = onn.SiLU(inplace=True)(x)
    assert y is x
    assert torch.allclose(x.double(), want, rtol=1e-5, atol=1e-6)
