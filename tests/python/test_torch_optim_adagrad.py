"""opforge.torch.optim.Adagrad against torch.optim.Adagrad (1.13) side by side."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
import optim_common as oc  # noqa: E402

CONFIGS = {
    "default": dict(lr=0.05),
    "decay_wd_init": dict(lr=0.05, lr_decay=0.01, weight_decay=0.01,
                          initial_accumulator_value=0.1, eps=1e-6),
    "maximize": dict(lr=0.03, maximize=True),
}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_matches_torch_over_200_steps(reg, config, fused):
    oc.side_by_side(torch.optim.Adagrad, oo.Adagrad, CONFIGS[config], fused=fused)


def test_two_groups(reg):
    oc.check_two_groups(torch.optim.Adagrad, oo.Adagrad, dict(lr=0.05),
                        dict(lr=0.02, lr_decay=0.05, weight_decay=0.1))


def test_step_lr(reg):
    oc.check_step_lr(torch.optim.Adagrad, oo.Adagrad, dict(lr=0.05))


def test_checkpoints(reg):
    oc.check_checkpoints(torch.optim.Adagrad, oo.Adagrad, dict(lr=0.05, lr_decay=0.01),
                         ["step", "sum"])


def test_one_call_per_group(reg, monkeypatch):
    oc.check_one_call_per_group(monkeypatch, oo.Adagrad, dict(lr=0.05))


def test_refusals(reg):
    oc.check_refusals(oo.Adagrad, dict(lr=0.05))
    with pytest.raises(ValueError, match="Invalid initial_accumulator_value"):
        oo.Adagrad(oc.mlp().parameters(), initial_accumulator_value=-1)
