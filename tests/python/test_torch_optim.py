"""opforge.torch.optim against torch.optim (1.13) itself, the published reference: a small
MLP trained 200 steps from the same seed by both, losses compared every step and the final
parameters at the end; param groups, state_dict interchange both ways, refusals."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
from optim_common import (assert_close_losses, assert_close_models,  # noqa: E402
                          check_checkpoints, count_calls, data, mlp, train)

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


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
def test_frozen_parameters_are_taken_as_torch_takes_them(reg, fused):
    """model.parameters() with a frozen one (fine-tuning): torch.optim takes it and skips it;
    so does opforge, with a warning that the group loses its fused call."""
    X, Y = data()
    models = [mlp(), mlp()]
    for m in models:
        m[0].bias.requires_grad_(False)
    frozen = models[1][0].bias.detach().clone()
    with pytest.warns(UserWarning, match="parameter 1 of group 0 does not require grad"):
        opt = oo.Adam(models[1].parameters(), lr=3e-3, fused=fused)
    ref = train(models[0], torch.optim.Adam(models[0].parameters(), lr=3e-3), 50, X, Y)
    assert_close_losses(ref, train(models[1], opt, 50, X, Y))
    assert_close_models(*models)
    assert torch.equal(models[1][0].bias.detach(), frozen)
    assert models[1][0].bias not in opt.state


@pytest.mark.parametrize("cls,kwargs,keys", [
    ("Adam", dict(lr=3e-3), ["exp_avg", "exp_avg_sq", "step"]),
    ("Adam", dict(lr=3e-3, amsgrad=True), ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]),
    ("AdamW", dict(lr=3e-3), ["exp_avg", "exp_avg_sq", "step"]),
    ("SGD", dict(lr=0.05, momentum=0.9), ["momentum_buffer"]),
])
def test_checkpoints_interchange_both_ways(reg, cls, kwargs, keys):
    check_checkpoints(getattr(torch.optim, cls), getattr(oo, cls), kwargs, keys)


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

    # fused=False updates parameters in place: a non-contiguous one is refused before the
    # step changes anything (the earlier parameter included).
    a, b = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(4, 2).t())
    opt = oo.AdamW([a, b], fused=False)
    a.grad, b.grad = torch.ones(3), torch.ones(2, 4)
    with pytest.raises(RuntimeError, match="parameter 1 of group 0 is not contiguous"):
        opt.step()
    assert torch.equal(a.detach(), torch.ones(3)) and len(opt.state) == 0

    p, q = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))
    opt = oo.Adam([p, q], lr=0.1)
    p.grad = torch.ones(3)
    q.grad = torch.ones(2).to_sparse()
    with pytest.raises(RuntimeError, match="parameter 1 of group 0 has a sparse gradient"):
        opt.step()
    # Refused before anything changed: p (checked first) was not updated, no state made.
    assert torch.equal(p.detach(), torch.ones(3)) and len(opt.state) == 0
