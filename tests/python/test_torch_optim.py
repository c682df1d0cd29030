"""opforge.torch.optim against torch.optim (1.13) itself, the published reference: a small
MLP trained 200 steps from the same seed by both, losses compared every step and the final
parameters at the end; param groups, state_dict interchange both ways, refusals."""

import io

import pytest

torch = pytest.importorskip("torch")
import opforge  # noqa: E402
import opforge.torch.optim as oo  # noqa: E402

# fp32 kernels vs torch's fp32 ops: the same formulas with other roundings (e.g. fused
# multiply-adds), a few ulp per step; over 200 steps on this well-conditioned problem the
# drift stays far below these bounds (measured ~1e-6).
LOSS_RTOL = 1e-4
PARAM_RTOL = 1e-4  # relative to the largest |parameter| of each tensor


def mlp():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(13, 17), torch.nn.Tanh(),
                               torch.nn.Linear(17, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))


def data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(256, 13, generator=g), torch.randn(256, 1, generator=g)


def train(model, opt, steps, X, Y):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X), Y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def assert_close_models(a, b, rtol=PARAM_RTOL):
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        scale = pa.detach().abs().max().item()
        diff = (pa.detach() - pb.detach()).abs().max().item()
        assert diff <= rtol * scale, f"{name}: max diff {diff:.3g} > {rtol} * {scale:.3g}"


def assert_close_losses(ref, got, rtol=LOSS_RTOL):
    for step, (r, g) in enumerate(zip(ref, got)):
        assert abs(r - g) <= rtol * abs(r), f"step {step}: loss {g!r} vs torch {r!r}"


CONFIGS = {
    "adam": ("Adam", dict(lr=3e-3)),
    "adam_l2_amsgrad": ("Adam", dict(lr=3e-3, weight_decay=0.1, amsgrad=True)),
    "adam_maximize": ("Adam", dict(lr=1e-3, betas=(0.8, 0.99), eps=1e-6, maximize=True)),
    "adamw": ("AdamW", dict(lr=3e-3)),
    "adamw_amsgrad": ("AdamW", dict(lr=3e-3, weight_decay=0.05, amsgrad=True)),
    "sgd": ("SGD", dict(lr=0.05)),
    "sgd_momentum_dampening_wd": ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1,
                                              weight_decay=1e-3)),
    "sgd_nesterov": ("SGD", dict(lr=0.01, momentum=0.9, nesterov=True)),
    "sgd_maximize_wd": ("SGD", dict(lr=0.02, weight_decay=1e-2, maximize=True, momentum=0.5)),
}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_matches_torch_over_200_steps(reg, config, fused):
    cls, kwargs = CONFIGS[config]
    X, Y = data()
    if kwargs.get("maximize"):
        Y = -Y  # maximize the negated loss: the same descent, through the maximize paths
    ref_model, model = mlp(), mlp()
    ref_opt = getattr(torch.optim, cls)(ref_model.parameters(), **kwargs)
    opt = getattr(oo, cls)(model.parameters(), fused=fused, **kwargs)
    sign = -1.0 if kwargs.get("maximize") else 1.0

    def losses(m, o):
        out = []
        for _ in range(200):
            o.zero_grad()
            loss = sign * torch.nn.functional.mse_loss(m(X), Y)
            loss.backward()
            o.step()
            out.append(loss.item())
        return out

    ref = losses(ref_model, ref_opt)
    got = losses(model, opt)
    assert_close_losses(ref, got)
    assert_close_models(ref_model, model)
    assert abs(ref[-1]) < abs(ref[0])  # it trained (maximize: -loss grew towards 0)


def count_calls(monkeypatch):
    calls = {"call": 0, "call_model": 0}
    for name in calls:
        orig = getattr(opforge.Kernel, name)

        def wrapped(self, *a, _orig=orig, _name=name, **k):
            calls[_name] += 1
            return _orig(self, *a, **k)
        monkeypatch.setattr(opforge.Kernel, name, wrapped)
    return calls


@pytest.mark.parametrize("cls", ["Adam", "AdamW", "SGD"])
def test_one_kernel_call_per_group_per_step(reg, monkeypatch, cls):
    model = mlp()
    params = list(model.parameters())
    kwargs = {"lr": 0.01, "momentum": 0.9} if cls == "SGD" else {"lr": 0.01}
    opt = getattr(oo, cls)([{"params": params[:3]}, {"params": params[3:]}], **kwargs)
    calls = count_calls(monkeypatch)
    X, Y = data()
    train(model, opt, 3, X, Y)
    assert calls == {"call": 0, "call_model": 2 * 3}
    opt = getattr(oo, cls)(model.parameters(), fused=False, **kwargs)
    calls = count_calls(monkeypatch)
    train(model, opt, 2, X, Y)
    assert calls == {"call": 2 * len(params), "call_model": 0}


def test_param_groups_and_params_without_grads(reg):
    """Two groups with their own lr and weight decay; a parameter without a gradient is left
    alone (torch skips it), which takes the per-parameter path of a fused group."""
    X, Y = data()
    models = [mlp(), mlp()]
    opts = []
    for M, m in zip((torch.optim, oo), models):
        p = list(m.parameters())
        opts.append(M.AdamW([{"params": p[:4], "lr": 1e-2},
                             {"params": p[4:], "weight_decay": 0.3}], lr=3e-3))
    for m in models:
        m[4].bias.requires_grad_(False)  # no gradient: stays put
    frozen = models[1][4].bias.detach().clone()
    ref, got = (train(m, o, 100, X, Y) for m, o in zip(models, opts))
    assert_close_losses(ref, got)
    assert_close_models(*models)
    assert torch.equal(models[1][4].bias.detach(), frozen)
    assert models[1][4].bias not in opts[1].state


def state_keys(opt):
    return sorted({k for s in opt.state_dict()["state"].values() for k in s})


@pytest.mark.parametrize("cls,kwargs,keys", [
    ("Adam", dict(lr=3e-3), ["exp_avg", "exp_avg_sq", "step"]),
    ("Adam", dict(lr=3e-3, amsgrad=True), ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]),
    ("AdamW", dict(lr=3e-3), ["exp_avg", "exp_avg_sq", "step"]),
    ("SGD", dict(lr=0.05, momentum=0.9), ["momentum_buffer"]),
])
def test_checkpoints_interchange_both_ways(reg, cls, kwargs, keys):
    """20 steps in one implementation, a checkpoint (model and optimizer, through
    torch.save), 30 more steps in the other; against 50 steps in torch alone."""
    X, Y = data()
    ref_model = mlp()
    ref_opt = getattr(torch.optim, cls)(ref_model.parameters(), **kwargs)
    ref = train(ref_model, ref_opt, 50, X, Y)

    for first, second in ((oo, torch.optim), (torch.optim, oo)):
        m1 = mlp()
        o1 = getattr(first, cls)(m1.parameters(), **kwargs)
        head = train(m1, o1, 20, X, Y)
        assert state_keys(o1) == keys
        buf = io.BytesIO()
        torch.save({"model": m1.state_dict(), "opt": o1.state_dict()}, buf)
        buf.seek(0)
        ckpt = torch.load(buf)
        m2 = mlp()
        m2.load_state_dict(ckpt["model"])
        o2 = getattr(second, cls)(m2.parameters(), **kwargs)
        o2.load_state_dict(ckpt["opt"])
        tail = train(m2, o2, 30, X, Y)
        assert_close_losses(ref, head + tail)
        assert_close_models(ref_model, m2)
        assert state_keys(o2) == keys


def test_refusals(reg):
    model = mlp()
    with pytest.raises(ValueError, match="parameter 1 of group 0 is torch.float64"):
        oo.Adam([torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3).double())])
    with pytest.raises(ValueError, match="capturable=True is not supported"):
        oo.Adam(model.parameters(), capturable=True)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        oo.SGD(model.parameters(), lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        oo.AdamW(model.parameters(), betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        oo.SGD(model.parameters(), lr=0.1, nesterov=True)

    p, q = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))
    opt = oo.Adam([p, q], lr=0.1)
    p.grad = torch.ones(3)
    q.grad = torch.ones(2).to_sparse()
    with pytest.raises(RuntimeError, match="parameter 1 of group 0 has a sparse gradient"):
        opt.step()
    # Refused before anything changed: p (checked first) was not updated, no state made.
    assert torch.equal(p.detach(), torch.ones(3)) and len(opt.state) == 0
