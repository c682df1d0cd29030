"""opforge.torch.optim.from_op: optimizers built from a registry op's descriptor alone,
against torch.optim classes with the same formula (apply_adam with epsilon_mode=torch is
torch's Adam: beta powers from the step count; apply_momentum is torch's SGD momentum)."""

import functools

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
import optim_common as oc  # noqa: E402


def adam_from_op(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, fused=True):
    return oo.from_op("apply_adam", params, {"epsilon_mode": "torch"}, fused=fused, lr=lr,
                      beta1=betas[0], beta2=betas[1], epsilon=eps)


def sgd_from_op(params, lr, momentum, fused=True):
    return oo.from_op("apply_momentum", params, fused=fused, lr=lr, momentum=momentum)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
def test_apply_adam_is_torch_adam(reg, fused):
    # beta1_power / beta2_power reach the kernel as fp32 scalars: 1 - beta2^t loses digits
    # early on (measured max 3.5e-6 loss, 5.8e-6 parameter difference vs torch, against
    # 5e-7 / 1.3e-6 for opforge.torch.optim.Adam, which passes the step), inside 1e-4.
    oc.side_by_side(torch.optim.Adam, adam_from_op, dict(lr=1e-3),
                    fused=fused)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
def test_apply_momentum_is_torch_sgd(reg, fused):
    oc.side_by_side(torch.optim.SGD, sgd_from_op, dict(lr=0.05, momentum=0.9), fused=fused)


def test_step_lr(reg):
    oc.check_step_lr(torch.optim.Adam, adam_from_op, dict(lr=1e-3))


def test_state_and_calls(reg, monkeypatch):
    """States under the descriptor's names, a step count only where a scalar needs it; one
    call per group for multi-tensor ops."""
    model = oc.mlp()
    X, Y = oc.data()
    opt = adam_from_op(model.parameters())
    oc.train(model, opt, 2, X, Y)
    assert oc.state_keys(opt) == ["m", "step", "v"]
    opt = sgd_from_op(model.parameters(), lr=0.1, momentum=0.5)
    oc.train(model, opt, 2, X, Y)
    assert oc.state_keys(opt) == ["accum"]
    oc.check_one_call_per_group(monkeypatch, functools.partial(sgd_from_op, momentum=0.5),
                                dict(lr=0.05))


def test_refusals(reg):
    p = list(oc.mlp().parameters())
    with pytest.raises(ValueError, match=r"unknown hyperparameters \['betas'\]"):
        oo.from_op("apply_momentum", p, lr=0.1, momentum=0.9, betas=(0.9, 0.9))
    with pytest.raises(ValueError, match=r"no value for scalars \['momentum'\]"):
        oo.from_op("apply_momentum", p, lr=0.1)
    with pytest.raises(ValueError, match=r"cannot map: indices \(tensor int32\)"):
        oo.from_op("sparse_apply_adagrad", p, lr=0.1)
    with pytest.raises(ValueError, match=r"cannot map: global_norm \(result float32\)"):
        oo.from_op("global_norm", p)
    with pytest.raises(ValueError, match="layer_norm is a nn op"):
        oo.from_op("layer_norm", p)
    with pytest.raises(ValueError, match="parameter 0 of group 0 is torch.float64"):
        oo.from_op("apply_momentum", [torch.nn.Parameter(torch.ones(2).double())], lr=0.1,
                   momentum=0.9)
