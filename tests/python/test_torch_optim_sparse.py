"""Sparse gradients (nn.Embedding(sparse=True)) in opforge.torch.optim: Adagrad, SparseAdam
and plain SGD against torch.optim's (1.13) side by side, a step by hand from torch's
formulas, checkpoints both ways, and the refusals of the rest."""

import io

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
import optim_common as oc  # noqa: E402

VOCAB, DIM = 1001, 17  # odd sizes: rows not a multiple of any vector width


def model(mixed):
    """An embedding (sparse gradients); mixed: then a dense linear layer in the same group."""
    torch.manual_seed(3)
    layers = [torch.nn.Embedding(VOCAB, DIM, sparse=True)]
    if mixed:
        layers.append(torch.nn.Linear(DIM, 1))
    return torch.nn.ModuleList(layers)


def forward(m, idx):
    h = m[0](idx).mean(1)
    return m[1](torch.tanh(h)) if len(m) > 1 else h


def batches(steps, mixed):
    """(indices, target) pairs from a random teacher; ids drawn skewed towards 0 so every
    batch repeats some (uncoalesced gradients with duplicate indices)."""
    g = torch.Generator().manual_seed(0)
    teacher = torch.randn(VOCAB, DIM, generator=g)
    w = torch.randn(DIM, 1, generator=g) / DIM ** 0.5
    out = []
    for _ in range(steps):
        idx = (torch.rand(64, 8, generator=g) ** 3 * VOCAB).long()
        y = teacher[idx].mean(1)
        out.append((idx, torch.tanh(y) @ w if mixed else y))
    return out


def train(m, opt, data, sign=1.0):
    losses = []
    for idx, y in data:
        opt.zero_grad()
        loss = sign * torch.nn.functional.mse_loss(forward(m, idx), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def side_by_side(ref_cls, cls, kwargs, mixed=False, steps=200, groups=list, **extra):
    """200 steps of ref_cls and cls from the same seed: the loss at every step and the final
    parameters within optim_common's tolerances (relative 1e-4). groups: a function
    (parameters) -> param groups."""
    data = batches(steps, mixed)
    sign = -1.0 if kwargs.get("maximize") else 1.0  # maximize: ascend -loss
    ref_model, got_model = model(mixed), model(mixed)
    ref_opt = ref_cls(groups(list(ref_model.parameters())), **kwargs)
    got_opt = cls(groups(list(got_model.parameters())), **kwargs, **extra)
    ref, got = train(ref_model, ref_opt, data, sign), train(got_model, got_opt, data, sign)
    oc.assert_close_losses(ref, got)
    oc.assert_close_models(ref_model, got_model)
    assert abs(ref[-1]) < 0.9 * abs(ref[0])  # it trained


def test_batches_repeat_indices():
    """The premise of the side-by-side tests: torch hands the optimizer uncoalesced
    gradients with duplicate indices."""
    m = model(False)
    idx, y = batches(1, False)[0]
    torch.nn.functional.mse_loss(forward(m, idx), y).backward()
    g = m[0].weight.grad
    assert g.is_sparse and not g.is_coalesced()
    assert g._indices().shape[1] > g.coalesce()._indices().shape[1]


ADAGRAD = {
    "default": dict(lr=0.5),
    # eps near sqrt(sum) of these small gradients, so its place (added to sqrt(sum)) shows.
    "eps_decay_init": dict(lr=0.5, eps=1e-3, lr_decay=0.01, initial_accumulator_value=1e-6),
    "maximize": dict(lr=0.5, maximize=True),
}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
@pytest.mark.parametrize("config", list(ADAGRAD))
def test_adagrad_embedding_matches_torch(reg, config, fused):
    side_by_side(torch.optim.Adagrad, oo.Adagrad, ADAGRAD[config], fused=fused)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
def test_adagrad_mixed_group_matches_torch(reg, fused):
    """Sparse embedding and dense linear layer in one group."""
    side_by_side(torch.optim.Adagrad, oo.Adagrad, dict(lr=0.1, lr_decay=0.001), mixed=True,
                 fused=fused)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
@pytest.mark.parametrize("config", ["default", "maximize"])
def test_sgd_embedding_matches_torch(reg, config, fused):
    """Plain SGD (momentum 0): p -= lr * g on the rows. torch adds duplicate rows one by one,
    opforge their coalesced sum: the same update up to rounding."""
    side_by_side(torch.optim.SGD, oo.SGD, dict(lr=200.0, maximize=config == "maximize"),
                 fused=fused)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
def test_sgd_mixed_model_matches_torch(reg, fused):
    """Sparse embedding and dense linear layer: the embedding's rows get tiny gradients, so
    it has its own group and lr."""
    def groups(params):
        return [{"params": params[:1], "lr": 200.0}, {"params": params[1:]}]
    side_by_side(torch.optim.SGD, oo.SGD, dict(lr=0.5), mixed=True, groups=groups,
                 fused=fused)


SPARSE_ADAM = {
    "default": dict(lr=0.05),
    "betas_eps": dict(lr=0.05, betas=(0.8, 0.99), eps=1e-3),
    "maximize": dict(lr=0.05, maximize=True),
}


@pytest.mark.parametrize("config", list(SPARSE_ADAM))
def test_sparse_adam_matches_torch(reg, config):
    side_by_side(torch.optim.SparseAdam, oo.SparseAdam, SPARSE_ADAM[config])


def one_sparse_step():
    """A 5 x 3 parameter and an uncoalesced gradient naming row 1 twice, row 3 once."""
    p = torch.nn.Parameter(torch.arange(15, dtype=torch.float32).view(5, 3) / 10 - 0.7)
    i = torch.tensor([[1, 3, 1]])
    v = torch.tensor([[0.5, -1.0, 0.0], [2.0, 0.25, -0.5], [0.25, 0.5, 0.0]])
    p.grad = torch.sparse_coo_tensor(i, v, (5, 3))
    g = torch.zeros(5, 3, dtype=torch.float64)  # the coalesced gradient, by hand
    g[1] = torch.tensor([0.75, -0.5, 0.0], dtype=torch.float64)
    g[3] = torch.tensor([2.0, 0.25, -0.5], dtype=torch.float64)
    return p, p.detach().double().clone(), g


def test_adagrad_one_step_by_hand(reg):
    """torch.optim.Adagrad's sparse update, written out: sum += g^2 on the rows;
    p -= lr * g / (sqrt(sum) + eps) on the rows; other rows and their sums untouched."""
    p, p0, g = one_sparse_step()
    lr, eps, init = 0.1, 0.5, 0.25
    opt = oo.Adagrad([p], lr=lr, eps=eps, initial_accumulator_value=init)
    opt.step()
    rows = [1, 3]
    s = torch.full((5, 3), init, dtype=torch.float64)
    s[rows] += g[rows] ** 2
    want = p0.clone()
    want[rows] -= lr * g[rows] / (s[rows].sqrt() + eps)
    assert torch.allclose(p.detach().double(), want, rtol=1e-6, atol=1e-7)
    assert torch.allclose(opt.state[p]["sum"].double(), s, rtol=1e-6, atol=0)
    assert float(opt.state[p]["step"]) == 1


def test_sparse_adam_one_step_by_hand(reg):
    """torch.optim.SparseAdam, written out for steps 1 and 2 on the same rows:
    m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
    p -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps); rows not named stay (m, v too)."""
    p, p0, g = one_sparse_step()
    grad = p.grad
    lr, b1, b2, eps = 0.1, 0.8, 0.9, 0.3
    opt = oo.SparseAdam([p], lr=lr, betas=(b1, b2), eps=eps)
    m = torch.zeros(5, 3, dtype=torch.float64)
    v = torch.zeros(5, 3, dtype=torch.float64)
    want = p0.clone()
    rows = [1, 3]
    for t in (1, 2):
        p.grad = grad
        opt.step()
        m[rows] = b1 * m[rows] + (1 - b1) * g[rows]
        v[rows] = b2 * v[rows] + (1 - b2) * g[rows] ** 2
        step = lr * (1 - b2 ** t) ** 0.5 / (1 - b1 ** t)
        want[rows] -= step * m[rows] / (v[rows].sqrt() + eps)
        assert torch.allclose(p.detach().double(), want, rtol=1e-6, atol=1e-7)
        assert torch.allclose(opt.state[p]["exp_avg"].double(), m, rtol=1e-6, atol=0)
        assert torch.allclose(opt.state[p]["exp_avg_sq"].double(), v, rtol=1e-6, atol=0)
        assert opt.state[p]["step"] == t and isinstance(opt.state[p]["step"], int)


@pytest.mark.parametrize("names", [("Adagrad", True), ("SparseAdam", False)],
                         ids=["adagrad_mixed", "sparse_adam"])
def test_checkpoints_both_ways(reg, names):
    """20 steps in one implementation, a checkpoint through torch.save, 30 more in the
    other; against 50 steps of torch alone."""
    name, mixed = names
    ref_cls, cls = getattr(torch.optim, name), getattr(oo, name)
    kwargs = dict(lr=0.1) if name == "Adagrad" else dict(lr=0.05)
    keys = ["step", "sum"] if name == "Adagrad" else ["exp_avg", "exp_avg_sq", "step"]
    data = batches(50, mixed)
    ref_model = model(mixed)
    ref = train(ref_model, ref_cls(ref_model.parameters(), **kwargs), data)
    for first, second in ((cls, ref_cls), (ref_cls, cls)):
        m1 = model(mixed)
        o1 = first(m1.parameters(), **kwargs)
        head = train(m1, o1, data[:20])
        assert oc.state_keys(o1) == keys
        buf = io.BytesIO()
        torch.save({"model": m1.state_dict(), "opt": o1.state_dict()}, buf)
        buf.seek(0)
        ckpt = torch.load(buf)
        m2 = model(mixed)
        m2.load_state_dict(ckpt["model"])
        o2 = second(m2.parameters(), **kwargs)
        o2.load_state_dict(ckpt["opt"])
        tail = train(m2, o2, data[20:])
        oc.assert_close_losses(ref, head + tail)
        oc.assert_close_models(ref_model, m2)
        assert oc.state_keys(o2) == keys


def snapshot(opt, params):
    return ([p.detach().clone() for p in params],
            {id(k): {n: v.clone() if torch.is_tensor(v) else v for n, v in s.items()}
             for k, s in opt.state.items()})


def assert_unchanged(before, opt, params):
    ps, states = before
    for a, p in zip(ps, params):
        assert torch.equal(a, p.detach())
    assert states.keys() == {id(k) for k in opt.state}
    for k, s in opt.state.items():
        assert states[id(k)].keys() == s.keys()
        for n, v in s.items():
            w = states[id(k)][n]
            assert torch.equal(w, v) if torch.is_tensor(v) else w == v


def sparse_grads(steps_before, opt_factory):
    """A dense parameter 0 and an embedding-like parameter 1, some steps taken (so state
    exists), then both with gradients: 1 sparse."""
    q = torch.nn.Parameter(torch.ones(4))
    e = torch.nn.Parameter(torch.ones(7, 3))
    opt = opt_factory([q, e])
    for _ in range(steps_before):
        q.grad, e.grad = torch.full((4,), 0.5), torch.full((7, 3), 0.25)
        opt.step()
    q.grad = torch.full((4,), 0.5)
    e.grad = torch.sparse_coo_tensor(torch.tensor([[2, 5, 2]]), torch.ones(3, 3), (7, 3))
    return opt, [q, e]


REFUSING = {
    "SGD_momentum": lambda p: oo.SGD(p, lr=0.1, momentum=0.9),
    "SGD_weight_decay": lambda p: oo.SGD(p, lr=0.1, weight_decay=0.1),
    "Adam": lambda p: oo.Adam(p),
    "AdamW": lambda p: oo.AdamW(p),
    "Adamax": lambda p: oo.Adamax(p, eps=0),
    "Adadelta": lambda p: oo.Adadelta(p),
    "RMSprop": lambda p: oo.RMSprop(p, eps=0),
    "Lion": lambda p: oo.Lion(p),
    "LAMB": lambda p: oo.LAMB(p),
    "from_op": lambda p: oo.from_op("apply_momentum", p, lr=0.1, momentum=0.9),
    "Adagrad_weight_decay": lambda p: oo.Adagrad(p, weight_decay=0.1),
}


@pytest.mark.parametrize("name", list(REFUSING))
def test_sparse_gradient_refused_before_any_change(reg, name):
    opt, params = sparse_grads(2, REFUSING[name])
    cls = type(opt).__name__
    before = snapshot(opt, params)
    why = {"Adagrad_weight_decay": "weight_decay is 0.1", "SGD_weight_decay":
           "weight_decay is 0.1", "SGD_momentum": "momentum is 0.9"}.get(name, "does not take")
    with pytest.raises(RuntimeError, match=f"^{cls}: parameter 1 of group 0 has a sparse "
                       f"gradient.*{why}"):
        opt.step()
    assert_unchanged(before, opt, params)


def test_sparse_adam_refusals(reg):
    p = torch.nn.Parameter(torch.ones(7, 3))
    with pytest.raises(ValueError, match="Invalid learning rate: 0"):
        oo.SparseAdam([p], lr=0)
    with pytest.raises(ValueError, match="Invalid epsilon value: 0"):
        oo.SparseAdam([p], eps=0)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1"):
        oo.SparseAdam([p], betas=(0.9, 1))
    with pytest.raises(ValueError, match="parameter 0 of group 0 is .*sparse"):
        oo.SparseAdam([torch.nn.Parameter(torch.ones(7, 3).to_sparse())])
    # A dense gradient after a sparse one: refused, naming it, before anything moves.
    q = torch.nn.Parameter(torch.ones(4, 2))
    opt = oo.SparseAdam([{"params": [p]}, {"params": [q]}])
    sparse = torch.sparse_coo_tensor(torch.tensor([[1]]), torch.ones(1, 3), (7, 3))
    p.grad = sparse
    q.grad = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.ones(1, 2), (4, 2))
    opt.step()
    p.grad, q.grad = sparse, torch.ones(4, 2)
    before = snapshot(opt, [p, q])
    with pytest.raises(RuntimeError, match="SparseAdam: parameter 0 of group 1 has a dense "
                       "gradient"):
        opt.step()
    assert_unchanged(before, opt, [p, q])


def test_non_contiguous_parameter_refused(reg):
    """Sparse updates write rows of the parameter in place: its storage must be one block."""
    e = torch.nn.Parameter(torch.ones(3, 7).t())
    opt = oo.SparseAdam([e])
    e.grad = torch.sparse_coo_tensor(torch.tensor([[2]]), torch.ones(1, 3), (7, 3))
    with pytest.raises(RuntimeError, match="parameter 0 of group 0 .* not contiguous"):
        opt.step()
    assert opt.state[e] == {} and torch.equal(e.detach(), torch.ones(7, 3))
