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
    oc.check_refusals(oo.Adagrad, dict(lr=0.05), sparse_kwargs=dict(weight_decay=0.1))
    with pytest.raises(ValueError, match="Invalid initial_accumulator_value"):
        oo.Adagrad(oc.mlp().parameters(), initial_accumulator_value=-1)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
def test_initial_accumulator_value_in_added_group(reg, fused):
    """State made with the group (as torch's constructor does), also for a group added
    later: sum starts at initial_accumulator_value, then grows by grad^2."""
    p, q = torch.nn.Parameter(torch.ones(5)), torch.nn.Parameter(torch.ones(3))
    opt = oo.Adagrad([p], lr=0.1, initial_accumulator_value=0.25, fused=fused)
    opt.add_param_group({"params": [q], "initial_accumulator_value": 0.5})
    assert torch.equal(opt.state[p]["sum"], torch.full((5,), 0.25))
    assert torch.equal(opt.state[q]["sum"], torch.full((3,), 0.5))
    p.grad, q.grad = torch.full((5,), 0.5), torch.full((3,), 2.0)
    opt.step()
    assert torch.equal(opt.state[p]["sum"], torch.full((5,), 0.5))  # 0.25 + 0.5^2
    assert torch.equal(opt.state[q]["sum"], torch.full((3,), 4.5))  # 0.5 + 2^2
    # var -= 0.1 * g / (sqrt(sum) + 1e-10): 1 - 0.1*0.5/sqrt(0.5), 1 - 0.1*2/sqrt(4.5)
    assert torch.allclose(p.detach(), torch.full((5,), 1 - 0.05 / 0.5 ** 0.5), rtol=1e-6)
    assert torch.allclose(q.detach(), torch.full((3,), 1 - 0.2 / 4.5 ** 0.5), rtol=1e-6)
