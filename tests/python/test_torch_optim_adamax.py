"""opforge.torch.optim.Adamax against torch.optim.Adamax (1.13) side by side, step by step,
with torch's default eps (1e-8) and larger ones (added to |grad| inside the max, as the
epsilon_mode=torch kernel does)."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
import optim_common as oc  # noqa: E402

CONFIGS = {
    "defaults": dict(),
    "betas_wd": dict(lr=2e-3, betas=(0.8, 0.99), weight_decay=0.01),
    "maximize": dict(lr=1e-3, maximize=True),
    # eps this large changes the trajectory: added to the divisor it would not match torch.
    "large_eps": dict(lr=2e-3, eps=0.05),
    "eps0": dict(lr=2e-3, eps=0),
}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_matches_torch_over_200_steps(reg, config, fused):
    oc.side_by_side(torch.optim.Adamax, oo.Adamax, CONFIGS[config], fused=fused)


def test_two_groups(reg):
    oc.check_two_groups(torch.optim.Adamax, oo.Adamax, dict(lr=2e-3),
                        dict(lr=3e-3, betas=(0.7, 0.95), weight_decay=0.1, eps=1e-3))


def test_step_lr(reg):
    oc.check_step_lr(torch.optim.Adamax, oo.Adamax, dict(lr=2e-3))


def test_checkpoints(reg):
    oc.check_checkpoints(torch.optim.Adamax, oo.Adamax, dict(lr=2e-3),
                         ["exp_avg", "exp_inf", "step"])


def test_one_call_per_group(reg, monkeypatch):
    oc.check_one_call_per_group(monkeypatch, oo.Adamax, dict(lr=2e-3))


def test_refusals(reg):
    oc.check_refusals(oo.Adamax, dict(lr=2e-3))
    p = list(oc.mlp().parameters())
    with pytest.raises(ValueError, match="Invalid epsilon value: -1e-08"):
        oo.Adamax(p, eps=-1e-8)
