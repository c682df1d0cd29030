"""opforge.torch.clip_grad_norm_ against torch.nn.utils.clip_grad_norm_ (1.13) on the same
gradients: a fused optimizer's flat gradient buffer (one clip_by_global_norm call), two
groups' buffers, loose tensors of odd sizes (fp32, bf16, f16, non-contiguous), non-finite
norms, and the refusals."""

import math

import pytest

torch = pytest.importorskip("torch")
import opforge.torch as ot  # noqa: E402
import opforge.torch.optim as oo  # noqa: E402
from optim_common import count_calls, data, mlp  # noqa: E402

# The kernels sum squares in fp64 and return an fp32 norm: fp32 rounding of the fp64 one.
NORM_RTOL = 1e-5


def grads_of(model):
    X, Y = data()
    model.zero_grad()
    torch.nn.functional.mse_loss(model(X), Y).backward()


def torch_clipped(grads, max_norm, **kw):
    ps = []
    for g in grads:
        p = torch.nn.Parameter(torch.zeros(g.shape, dtype=g.dtype))
        p.grad = g.clone()
        ps.append(p)
    norm = torch.nn.utils.clip_grad_norm_(ps, max_norm, **kw)
    return norm, [p.grad for p in ps]


def assert_clipped_like_torch(params, max_norm, **kw):
    """torch's clip_grad_norm_ on fp64 copies is the reference (for bf16/f16 gradients
    torch's own would compute the norm in that dtype; opforge's is fp32, summed in fp64)."""
    before = [p.grad.clone() for p in params]
    ref_norm, ref = torch_clipped([g.double() for g in before], max_norm, **kw)
    norm = ot.clip_grad_norm_(params, max_norm, **kw)
    assert norm.dtype == torch.float32 and norm.dim() == 0
    assert math.isclose(norm.item(), ref_norm.item(), rel_tol=NORM_RTOL)
    for i, (p, r) in enumerate(zip(params, ref)):
        # one rounding of the result: fp32; bf16/f16 (f16 subnormals: 2^-24 apart)
        rtol, atol = (1e-6, 0) if p.grad.dtype == torch.float32 else (1e-2, 2.0 ** -24)
        assert torch.allclose(p.grad.double(), r, rtol=rtol, atol=atol), f"gradient {i}"
    return norm


@pytest.mark.parametrize("max_norm", [0.05, 1e3])  # clips / leaves them as they are
def test_flat_buffer_takes_one_kernel_call(reg, monkeypatch, max_norm):
    model = mlp()
    opt = oo.Adam(model.parameters(), lr=1e-3)
    grads_of(model)
    opt.step()  # binds the gradients to the flat buffer
    opt.zero_grad()
    grads_of(model)
    calls = count_calls(monkeypatch)
    assert_clipped_like_torch(list(model.parameters()), max_norm)
    assert calls == {"call": 1, "call_model": 0}


def test_two_groups_and_a_subset(reg, monkeypatch):
    model = mlp()
    params = list(model.parameters())
    opt = oo.SGD([{"params": params[:2]}, {"params": params[2:]}], lr=0.01, momentum=0.9)
    grads_of(model)
    opt.step()
    opt.zero_grad()
    grads_of(model)
    calls = count_calls(monkeypatch)
    assert_clipped_like_torch(params, 0.02)
    assert calls == {"call": 2, "call_model": 0}  # one global_norm per buffer
    grads_of(model)
    assert_clipped_like_torch(params[1:4], 0.01)  # a subset: tensor by tensor


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_loose_tensors_of_odd_sizes(reg, dtype):
    g = torch.Generator().manual_seed(7)
    params = []
    for shape in [(1,), (5,), (17,), (1000,), (65543,), (3, 7)]:
        p = torch.nn.Parameter(torch.zeros(shape, dtype=dtype))
        p.grad = (torch.randn(shape, generator=g) * 0.1).to(dtype)
        params.append(p)
    q = torch.nn.Parameter(torch.zeros(5, 3, dtype=dtype))
    q.grad = torch.randn(3, 5, generator=g).to(dtype).t()  # non-contiguous
    params.append(q)
    assert_clipped_like_torch(params, 1.0)


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
@pytest.mark.parametrize("flat", [False, True], ids=["loose", "flat"])
def test_non_finite(reg, bad, flat):
    model = mlp()
    params = list(model.parameters())
    if flat:
        opt = oo.Adam(params, lr=1e-3)
        grads_of(model)
        opt.step()
    grads_of(model)
    params[2].grad[3] = bad
    before = [p.grad.clone() for p in params]
    with pytest.raises(RuntimeError, match="non-finite"):
        ot.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    assert all(torch.equal(p.grad.isnan(), b.isnan())
               and torch.equal(torch.nan_to_num(p.grad), torch.nan_to_num(b))
               for p, b in zip(params, before))  # refused before anything changed
    norm = ot.clip_grad_norm_(params, 1.0)
    ref_norm, ref = torch_clipped(before, 1.0)
    assert str(norm.item()) == str(ref_norm.item())  # inf or nan, as torch
    for p, r in zip(params, ref):  # inf: scaled by 0 (inf * 0 = nan); nan: all nan
        assert torch.equal(p.grad.isnan(), r.isnan())
        assert torch.equal(torch.nan_to_num(p.grad), torch.nan_to_num(r))


def test_other_norms_and_refusals(reg):
    p = torch.nn.Parameter(torch.zeros(5))
    p.grad = torch.tensor([1.0, -4.0, 2.0, 0.5, 3.0])
    assert ot.clip_grad_norm_([p], 2.0, norm_type=float("inf")).item() == 4.0
    assert torch.allclose(p.grad, torch.tensor([1.0, -4.0, 2.0, 0.5, 3.0]) * 2.0 / 4.000001)
    assert ot.clip_grad_norm_([torch.nn.Parameter(torch.zeros(2))], 1.0).item() == 0.0
    d = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    d.grad = torch.ones(3, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="gradient 0 is a torch.float64"):
        ot.clip_grad_norm_([d], 1.0)
    assert torch.equal(d.grad, torch.ones(3, dtype=torch.float64))
