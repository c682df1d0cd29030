"""The flat buffers behind fused steps (opforge.torch.optim._base.FlatGroup): gradients
become views of the group's flat gradient buffer and stay views through zero_grad() and
backward (no copy per step), and whatever breaks the binding (set_to_none, a gradient set
by hand, parameter data replaced, a loaded state_dict) is noticed and still gives torch's
numbers."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
from optim_common import assert_close_losses, assert_close_models, data, mlp  # noqa: E402


def flat_buffer(opt, name):
    (fg,) = opt._flat_groups.values()
    return fg.flat[name]


def inside(t, buf):
    start = buf.data_ptr()
    end = start + buf.numel() * buf.element_size()
    return start <= t.data_ptr() < end


def loss_of(model, X, Y):
    return torch.nn.functional.mse_loss(model(X), Y)


def test_gradients_are_views_that_backward_fills_in_place(reg):
    X, Y = data()
    model = mlp()
    opt = oo.Adam(model.parameters(), lr=1e-3)
    for _ in range(2):
        opt.zero_grad()
        loss_of(model, X, Y).backward()
        opt.step()
    grads = [p.grad for p in model.parameters()]
    buf = flat_buffer(opt, "grad")
    assert all(inside(g, buf) for g in grads)
    assert all(inside(p, flat_buffer(opt, "var")) for p in model.parameters())
    opt.zero_grad()
    assert all(p.grad is g for p, g in zip(model.parameters(), grads))
    assert not buf.any()
    loss_of(model, X, Y).backward()
    # backward accumulated into the views: same tensors, now holding the gradients
    assert all(p.grad is g for p, g in zip(model.parameters(), grads))
    assert buf.abs().sum() > 0
    state = opt.state[next(model.parameters())]
    assert inside(state["exp_avg"], flat_buffer(opt, "m"))
    assert float(state["step"]) == 2


def train_both(ref_opt, opt, models, steps, set_to_none=lambda step: False, between=None):
    """The same loop for torch's optimizer and opforge's, each on its own MLP from one seed:
    zero_grad, backward, then between(step, model, optimizer) (what breaks a binding), then
    step. Checks the losses at every step and the final parameters against each other."""
    X, Y = data()
    runs = []
    for m, o in zip(models, (ref_opt, opt)):
        losses = []
        for step in range(steps):
            o.zero_grad(set_to_none=set_to_none(step))
            loss = loss_of(m, X, Y)
            loss.backward()
            if between is not None:
                between(step, m, o)
            o.step()
            losses.append(loss.item())
        runs.append(losses)
    assert_close_losses(*runs)
    assert_close_models(*models)


@pytest.mark.parametrize("cls,kwargs", [("Adam", dict(lr=3e-3, weight_decay=0.1)),
                                        ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.2))])
def test_rebinding_matches_torch(reg, cls, kwargs):
    """Every way a binding breaks, in one run against torch: zero_grad(set_to_none=True),
    gradients set by hand, parameter data replaced, a state_dict loaded mid-run."""
    models = [mlp(), mlp()]

    def between(step, m, o):
        if step % 9 == 4:  # a gradient set by hand (e.g. clipping out of place)
            for p in m.parameters():
                p.grad = p.grad * 0.5
        if step % 11 == 5:  # parameters moved (e.g. module.to() reassigns .data)
            for p in m.parameters():
                p.data = p.data.clone()
        if step % 13 == 6:
            o.load_state_dict(o.state_dict())

    train_both(getattr(torch.optim, cls)(models[0].parameters(), **kwargs),
               getattr(oo, cls)(models[1].parameters(), **kwargs), models, 40,
               set_to_none=lambda step: step % 7 == 3, between=between)


def test_params_without_grads_then_all(reg):
    """A step where one parameter has no gradient takes the per-parameter path (its step
    count stays behind); later steps keep torch's per-parameter counts."""
    models = [mlp(), mlp()]
    opts = [torch.optim.Adam(models[0].parameters(), lr=3e-3),
            oo.Adam(models[1].parameters(), lr=3e-3)]

    def between(step, m, o):
        if step < 3:
            m[0].bias.grad = None

    train_both(*opts, models, 30, set_to_none=lambda step: True, between=between)
    for p, q in zip(*(m.parameters() for m in models)):
        assert float(opts[0].state[p]["step"]) == float(opts[1].state[q]["step"])


def test_module_apply_replacing_data_of_params_and_grads(reg):
    """Module._apply (.double().float()) assigns new .data to parameters and gradients (the
    same gradient objects): the next step rebinds both, as torch's optimizer sees them."""
    models = [mlp(), mlp()]

    def between(step, m, o):
        if step == 6:
            m.double().float()

    train_both(torch.optim.SGD(models[0].parameters(), lr=0.05, momentum=0.9),
               oo.SGD(models[1].parameters(), lr=0.05, momentum=0.9), models, 12,
               between=between)


@pytest.mark.parametrize("set_to_none", [False, True])
def test_check_bindings_off_in_a_plain_loop(reg, set_to_none):
    """check_bindings = False: a loop that touches gradients only through backward and the
    optimizer's own zero_grad (set_to_none too) still gets torch's numbers, and load_state_dict
    still rebinds."""
    models = [mlp(), mlp()]
    opt = oo.Adam(models[1].parameters(), lr=3e-3)
    opt.check_bindings = False

    def between(step, m, o):
        if step == 11:
            o.load_state_dict(o.state_dict())

    train_both(torch.optim.Adam(models[0].parameters(), lr=3e-3), opt, models, 30,
               set_to_none=lambda step: set_to_none, between=between)
    # after a step the gradients are the buffer's views again (set_to_none: copied, rebound)
    assert all(inside(p.grad, flat_buffer(opt, "grad")) for p in models[1].parameters())
