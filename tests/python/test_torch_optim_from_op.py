"""opforge.torch.optim.from_op: optimizers built from a registry op's descriptor alone,
against torch.optim classes with the same formula (apply_adam with epsilon_mode=torch is
torch's Adam: beta powers from the step count; apply_momentum is torch's SGD momentum), and
against references written from the published formulas for the rule-file ops
(generators/rules) and the segmented multi-tensor LAMB."""

import functools

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
import optim_common as oc  # noqa: E402
from optim_refs import RefLAMB, RefSignSqrtMomentum, RefTFAdam  # noqa: E402

F64 = torch.float64


def adam_from_op(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, fused=True):
    return oo.from_op("apply_adam", params, {"epsilon_mode": "torch"}, fused=fused, lr=lr,
                      beta1=betas[0], beta2=betas[1], epsilon=eps)


def sgd_from_op(params, lr, momentum, fused=True):
    return oo.from_op("apply_momentum", params, fused=fused, lr=lr, momentum=momentum)


def sign_sqrt_from_op(params, lr, beta, fused=True):
    return oo.from_op("sign_sqrt_momentum", params, fused=fused, lr=lr, beta=beta)


def adam_rule_from_op(params, lr, betas, eps, fused=True):
    return oo.from_op("adam_rule", params, fused=fused, lr=lr, beta1=betas[0], beta2=betas[1],
                      epsilon=eps)


def lamb_from_op(params, lr, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, fused=True):
    return oo.from_op("multi_tensor_apply_lamb", params, fused=fused, lr=lr, beta1=betas[0],
                      beta2=betas[1], epsilon=eps, weight_decay=weight_decay)


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


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
def test_rule_sign_sqrt_momentum(reg, fused):
    """A rule-file op: states from its descriptor (m), scalars from the hyperparameters."""
    oc.side_by_side(RefSignSqrtMomentum, sign_sqrt_from_op, dict(lr=0.01, beta=0.8),
                    fused=fused, ref_dtype=F64)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
def test_rule_adam(reg, fused):
    """A rule-file op with step powers: beta1_power, beta2_power as beta ** step."""
    oc.side_by_side(RefTFAdam, adam_rule_from_op, dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-4),
                    fused=fused, ref_dtype=F64)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
def test_segmented_lamb(reg, fused, monkeypatch):
    """multi_tensor_apply_lamb: per-tensor trust ratios from the layout's chunk table, one
    call_model per group (fused) or per parameter (a one-tensor layout each)."""
    calls = oc.count_calls(monkeypatch)
    oc.side_by_side(RefLAMB, lamb_from_op, dict(lr=5e-3, betas=(0.8, 0.99), eps=1e-4,
                                                weight_decay=0.01), fused=fused, ref_dtype=F64)
    n = len(list(oc.mlp().parameters()))
    assert calls == {"call": 0, "call_model": 200 * (1 if fused else n)}


def test_segmented_lamb_some_without_grad(reg):
    """Parameters without a gradient stay; the others take per-tensor calls, each with its
    own norms (the reference skips them too)."""
    X, Y = oc.data()
    models = oc.mlp().double(), oc.mlp()
    opts = (RefLAMB(models[0].parameters(), lr=1e-2),
            lamb_from_op(models[1].parameters(), lr=1e-2))
    for m, o in zip(models, opts):
        frozen = m[2].weight.requires_grad_(False)
        before = frozen.detach().clone()
        oc.train(m, o, 20, X.to(frozen.dtype), Y.to(frozen.dtype))
        assert torch.equal(frozen, before)
    oc.assert_close_models(models[0], models[1])


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
    # A rule's defaults fill the hyperparameters not given (its text: hyper beta = 0.9).
    opt = oo.from_op("sign_sqrt_momentum", p, lr=0.1)
    assert opt.param_groups[0]["beta"] == pytest.approx(0.9)
    assert opt.param_groups[0]["lr"] == 0.1
    with pytest.raises(ValueError, match=r"cannot map: found_inf \(result float32\)"):
        oo.from_op("multi_tensor_apply_lamb", p, {"unscale": True, "skip_if_nonfinite": True},
                   lr=0.1, inv_scale=1.0, beta1=0.9, beta2=0.999, epsilon=1e-6,
                   weight_decay=0.0)
    with pytest.raises(ValueError, match=r"cannot map: indices \(tensor int32\)"):
        oo.from_op("sparse_apply_adagrad", p, lr=0.1)
    with pytest.raises(ValueError, match=r"cannot map: global_norm \(result float32\)"):
        oo.from_op("global_norm", p)
    with pytest.raises(ValueError, match="layer_norm is a nn op"):
        oo.from_op("layer_norm", p)
    with pytest.raises(ValueError, match="parameter 0 of group 0 is torch.float64"):
        oo.from_op("apply_momentum", [torch.nn.Parameter(torch.ones(2).double())], lr=0.1,
                   momentum=0.9)
