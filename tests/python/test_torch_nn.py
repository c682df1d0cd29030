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


@pytest.mark.parametrize("cfg", [
    dict(in_channels=3, out_channels=8, kernel_size=3, padding=1),            # winograd
    dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1),  # direct, strided
    dict(in_channels=5, out_channels=7, kernel_size=1, stride=2, bias=False),
    dict(in_channels=6, out_channels=6, kernel_size=3, padding=1, groups=6),  # depthwise
    dict(in_channels=4, out_channels=4, kernel_size=3, padding="same", dilation=2, groups=2),
])
def test_conv2d(reg, cfg):
    torch.manual_seed(6)
    m = torch.nn.Conv2d(**cfg)
    # Winograd's transform-domain rounding: the conv2d descriptor's widest tolerance.
    run_both(m, onn.Conv2d, randn(2, cfg["in_channels"], 17, 13, seed=7), 3e-3, 1e-3)


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
