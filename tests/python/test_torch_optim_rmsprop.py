"""opforge.torch.optim.RMSprop against torch.optim.RMSprop (1.13) side by side, eps=0 (the
only eps both formulas share). Without eps a tiny mean square makes big steps: lr stays
small enough that torch fp32 and torch fp64 agree (~1e-6) on this MLP."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
import optim_common as oc  # noqa: E402

CONFIGS = {
    "plain": dict(lr=1e-3, eps=0),
    "momentum": dict(lr=3e-4, eps=0, momentum=0.9),
    "centered": dict(lr=3e-4, eps=0, centered=True),
    "centered_momentum_wd": dict(lr=1e-4, eps=0, centered=True, momentum=0.5,
                                 weight_decay=0.01),
    "maximize_wd_alpha": dict(lr=3e-4, eps=0, alpha=0.95, maximize=True, weight_decay=0.01),
}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_matches_torch_over_200_steps(reg, config, fused):
    oc.side_by_side(torch.optim.RMSprop, oo.RMSprop, CONFIGS[config], fused=fused)


def test_two_groups(reg):
    oc.check_two_groups(torch.optim.RMSprop, oo.RMSprop, dict(lr=3e-4, eps=0, momentum=0.9),
                        dict(lr=1e-4, momentum=0.5, centered=True))


def test_step_lr_with_momentum(reg):
    """The kernel keeps lr * buffer: a changing lr must still give torch's update."""
    oc.check_step_lr(torch.optim.RMSprop, oo.RMSprop, dict(lr=3e-4, eps=0, momentum=0.9))


@pytest.mark.parametrize("kwargs,keys", [
    (dict(lr=3e-4, eps=0), ["square_avg", "step"]),
    (dict(lr=1e-4, eps=0, momentum=0.9, centered=True),
     ["grad_avg", "momentum_buffer", "square_avg", "step"]),
])
def test_checkpoints(reg, kwargs, keys):
    oc.check_checkpoints(torch.optim.RMSprop, oo.RMSprop, kwargs, keys)


@pytest.mark.parametrize("kwargs", [dict(lr=1e-3, eps=0),
                                    dict(lr=1e-3, eps=0, momentum=0.9, centered=True)])
def test_one_call_per_group(reg, monkeypatch, kwargs):
    oc.check_one_call_per_group(monkeypatch, oo.RMSprop, kwargs)


def test_refusals(reg):
    oc.check_refusals(oo.RMSprop, dict(lr=1e-3, eps=0))
    p = list(oc.mlp().parameters())
    with pytest.raises(ValueError, match="eps=1e-08 is not supported.*inside the square root"):
        oo.RMSprop(p, eps=1e-8)
    with pytest.raises(ValueError, match="eps=0.1 is not supported"):
        oo.RMSprop([{"params": p[:2]}, {"params": p[2:], "eps": 0.1}], eps=0)
    with pytest.raises(ValueError, match="eps=1e-08 is not supported.*pass eps=0"):
        oo.RMSprop(p)  # torch's default eps: refused, never silently replaced by 0
    opt = oo.RMSprop(p, eps=0)
    opt.param_groups[0]["eps"] = 1e-8  # changed after construction: refused at the step
    for q in p:
        q.grad = torch.ones_like(q)
    before = [q.detach().clone() for q in p]
    with pytest.raises(ValueError, match="eps=1e-08 is not supported"):
        opt.step()
    assert all(torch.equal(a, b.detach()) for a, b in zip(before, p))
