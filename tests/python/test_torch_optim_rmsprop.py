"""opforge.torch.optim.RMSprop against torch.optim.RMSprop (1.13) side by side, step by step,
with torch's default eps (1e-8) and larger ones (epsilon outside the square root, as the
epsilon_mode=torch kernels put it). Learning rates where torch fp32 and torch fp64 agree on
this MLP (<~1e-6 at 3e-4; at lr=1e-3 with eps <= 1e-8 they already part by 0.6%, so rounding
alone would decide the comparison)."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
import optim_common as oc  # noqa: E402

CONFIGS = {
    "defaults": dict(),
    "plain_lr": dict(lr=3e-4),
    "momentum": dict(lr=3e-4, momentum=0.9),
    "centered": dict(lr=3e-4, centered=True),
    "centered_momentum_wd": dict(lr=1e-4, centered=True, momentum=0.5, weight_decay=0.01),
    "maximize_wd_alpha": dict(lr=3e-4, alpha=0.95, maximize=True, weight_decay=0.01),
    # eps this large changes the trajectory: inside the sqrt it would not match torch.
    "large_eps": dict(lr=1e-3, eps=0.1, momentum=0.5),
    "eps0": dict(lr=3e-4, eps=0),
}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_matches_torch_over_200_steps(reg, config, fused):
    oc.side_by_side(torch.optim.RMSprop, oo.RMSprop, CONFIGS[config], fused=fused)


def test_two_groups(reg):
    oc.check_two_groups(torch.optim.RMSprop, oo.RMSprop, dict(lr=3e-4, momentum=0.9),
                        dict(lr=1e-4, momentum=0.5, centered=True, eps=1e-3))


def test_step_lr_with_momentum(reg):
    """The buffer is torch's (lr applied after it): a changing lr must give torch's update."""
    oc.check_step_lr(torch.optim.RMSprop, oo.RMSprop, dict(lr=3e-4, momentum=0.9))


@pytest.mark.parametrize("kwargs,keys", [
    (dict(lr=3e-4), ["square_avg", "step"]),
    (dict(lr=1e-4, momentum=0.9, centered=True),
     ["grad_avg", "momentum_buffer", "square_avg", "step"]),
])
def test_checkpoints(reg, kwargs, keys):
    oc.check_checkpoints(torch.optim.RMSprop, oo.RMSprop, kwargs, keys)


@pytest.mark.parametrize("kwargs", [dict(lr=1e-3), dict(lr=1e-3, momentum=0.9, centered=True)])
def test_one_call_per_group(reg, monkeypatch, kwargs):
    oc.check_one_call_per_group(monkeypatch, oo.RMSprop, kwargs)


def test_refusals(reg):
    oc.check_refusals(oo.RMSprop, dict(lr=1e-3))
    p = list(oc.mlp().parameters())
    with pytest.raises(ValueError, match="Invalid epsilon value: -1e-08"):
        oo.RMSprop(p, eps=-1e-8)
    with pytest.raises(ValueError, match="Invalid alpha value: -0.5"):
        oo.RMSprop(p, alpha=-0.5)
