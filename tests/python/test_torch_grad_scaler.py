"""opforge.torch.GradScaler against a loss-scaling loop written from torch's GradScaler
semantics (torch 1.13's disables itself without CUDA): scale the loss, unscale the
gradients, skip the step when one is inf/NaN, back off / grow the scale
(aten::_amp_update_scale_). A skipped step leaves parameters and states bit-identical."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch as ot  # noqa: E402
import opforge.torch.optim as oo  # noqa: E402
from optim_common import (assert_close_losses, assert_close_models, count_calls,  # noqa: E402
                          data, mlp)

INF_STEPS = {5, 6, 17}  # a gradient element is set to inf after backward at these steps


def reference_update(scale, tracker, found, growth=2.0, backoff=0.5, interval=2000):
    """aten::_amp_update_scale_, from its documentation."""
    if found:
        return scale * backoff, 0
    if tracker + 1 == interval:
        new = scale * growth
        return (new if new != float("inf") else scale), 0
    return scale, tracker + 1


def reference_run(cls, kwargs, steps, interval):
    X, Y = data()
    model = mlp()
    opt = getattr(torch.optim, cls)(model.parameters(), **kwargs)
    scale, tracker, losses, scales = 2.0 ** 10, 0, [], []
    for step in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X), Y)
        (loss * scale).backward()
        if step in INF_STEPS:
            model[0].weight.grad[1, 2] = float("inf")
        found = False
        for p in model.parameters():
            p.grad.mul_(1.0 / scale)
            found = found or not torch.isfinite(p.grad).all()
        if not found:
            opt.step()
        scale, tracker = reference_update(scale, tracker, found, interval=interval)
        losses.append(loss.item())
        scales.append(scale)
    return model, losses, scales


def scaled_run(cls, kwargs, steps, interval, make_opt=None, unscale_first=False,
               snapshots=None):
    X, Y = data()
    model = mlp()
    opt = (make_opt or getattr(oo, cls))(model.parameters(), **kwargs)
    scaler = ot.GradScaler(init_scale=2.0 ** 10, growth_interval=interval)
    losses, scales = [], []
    for step in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X), Y)
        scaler.scale(loss).backward()
        if step in INF_STEPS:
            model[0].weight.grad[1, 2] = float("inf")
        if unscale_first:
            scaler.unscale_(opt)
        before = snapshot(model, opt)
        scaler.step(opt)
        if snapshots is not None and step in INF_STEPS:
            snapshots.append((before, snapshot(model, opt)))
        scaler.update()
        losses.append(loss.item())
        scales.append(scaler.get_scale())
    return model, losses, scales


def snapshot(model, opt):
    params = [p.detach().clone() for p in model.parameters()]
    states = [{k: v.clone() if torch.is_tensor(v) else v for k, v in opt.state[p].items()}
              for p in model.parameters()]
    return params, states


def assert_identical(a, b):
    for x, y in zip(a[0], b[0]):
        assert torch.equal(x, y)
    for s, t in zip(a[1], b[1]):
        assert s.keys() == t.keys()
        for k in s:
            assert (torch.equal(s[k], t[k]) if torch.is_tensor(s[k]) else s[k] == t[k]), k


@pytest.mark.parametrize("unscale_first", [False, True], ids=["fused", "unscale_"])
@pytest.mark.parametrize("cls,kwargs", [("Adam", dict(lr=3e-3)),
                                        ("AdamW", dict(lr=3e-3, weight_decay=0.05)),
                                        ("Adam", dict(lr=3e-3, weight_decay=0.1)),
                                        ("SGD", dict(lr=0.05, momentum=0.9))])
def test_matches_reference_loss_scaling(reg, monkeypatch, cls, kwargs, unscale_first):
    interval = 4  # the scale grows too within the run
    ref_model, ref_losses, ref_scales = reference_run(cls, kwargs, 30, interval)
    calls = count_calls(monkeypatch)
    snaps = []
    model, losses, scales = scaled_run(cls, kwargs, 30, interval,
                                       unscale_first=unscale_first, snapshots=snaps)
    assert scales == ref_scales
    assert_close_losses(ref_losses, losses)
    assert_close_models(ref_model, model)
    assert len(snaps) == len(INF_STEPS)
    for before, after in snaps:
        assert_identical(before, after)
    # Adam/AdamW without an L2 fold, not unscaled by hand: the unscale / skip kernel
    one_pass = not unscale_first and (cls == "AdamW" or
                                      (cls == "Adam" and "weight_decay" not in kwargs))
    if one_pass:  # from the second step on: the unscale / skip kernel, one call per step
        assert calls["call_model"] == 30
    else:
        assert calls["call_model"] == 30 - len(INF_STEPS)


def test_torch_optimizer_and_errors(reg):
    """Any optimizer's gradients (here torch.optim.SGD's); torch's usage errors."""
    ref_model, ref_losses, ref_scales = reference_run("SGD", dict(lr=0.05), 20, 3)
    model, losses, scales = scaled_run("SGD", dict(lr=0.05), 20, 3, make_opt=torch.optim.SGD)
    assert scales == ref_scales
    assert_close_losses(ref_losses, losses)

    model = mlp()
    opt = oo.Adam(model.parameters())
    scaler = ot.GradScaler()
    X, Y = data()
    scaler.scale(torch.nn.functional.mse_loss(model(X), Y)).backward()
    with pytest.raises(RuntimeError, match="No inf checks were recorded"):
        scaler.update()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: None)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 16
    sd = scaler.state_dict()
    assert sd == {"scale": 2.0 ** 16, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 2000, "_growth_tracker": 1}
    other = ot.GradScaler(init_scale=1.0)
    other.load_state_dict(sd)
    assert other.state_dict() == sd
    with pytest.raises(ValueError, match="backoff_factor"):
        ot.GradScaler(backoff_factor=1.5)
    off = ot.GradScaler(enabled=False)
    t = torch.ones(2)
    assert off.scale(t) is t and off.get_scale() == 1.0 and off.state_dict() == {}
