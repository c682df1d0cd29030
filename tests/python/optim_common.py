"""What the per-optimizer tests of opforge.torch.optim share: the MLP, the data, training
loops, tolerances, and checks run once per class (a side-by-side run against a reference
optimizer, param groups, StepLR, checkpoints, one kernel call per group, refusals)."""

import io

import pytest
import torch

import opforge

# fp32 kernels vs torch's fp32 ops: the same formulas with other roundings (e.g. fused
# multiply-adds), a few ulp per step; over 200 steps on this well-conditioned problem the
# drift stays far below these bounds (measured ~1e-6).
LOSS_RTOL = 1e-4
PARAM_RTOL = 1e-4  # relative to the largest |parameter| of each tensor


def mlp():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(13, 17), torch.nn.Tanh(),
                               torch.nn.Linear(17, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))


def data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(256, 13, generator=g), torch.randn(256, 1, generator=g)


def transformer_block():
    """A tiny transformer block (self-attention, layer norms, feed-forward)."""
    torch.manual_seed(2)
    return torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32,
                                            dropout=0.0, batch_first=True)


def transformer_data():
    g = torch.Generator().manual_seed(3)
    return torch.randn(8, 6, 16, generator=g), torch.randn(8, 6, 16, generator=g)


def zero_key_bias(block):
    """The key projection's bias (in_proj_bias[16:32]) cannot change the block's output
    (softmax is invariant to it): its gradient is rounding noise, so comparisons of
    parameters leave it out."""
    with torch.no_grad():
        block.self_attn.in_proj_bias[16:32] = 0


def train(model, opt, steps, X, Y):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X), Y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def assert_close_models(a, b, rtol=PARAM_RTOL):
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        scale = pa.detach().abs().max().item()
        diff = (pa.detach() - pb.detach()).abs().max().item()
        assert diff <= rtol * scale, f"{name}: max diff {diff:.3g} > {rtol} * {scale:.3g}"


def assert_close_losses(ref, got, rtol=LOSS_RTOL):
    for step, (r, g) in enumerate(zip(ref, got)):
        assert abs(r - g) <= rtol * abs(r), f"step {step}: loss {g!r} vs torch {r!r}"


def count_calls(monkeypatch):
    calls = {"call": 0, "call_model": 0}
    for name in calls:
        orig = getattr(opforge.Kernel, name)

        def wrapped(self, *a, _orig=orig, _name=name, **k):
            calls[_name] += 1
            return _orig(self, *a, **k)
        monkeypatch.setattr(opforge.Kernel, name, wrapped)
    return calls


def state_keys(opt):
    return sorted({k for s in opt.state_dict()["state"].values() for k in s})


def side_by_side(ref_cls, cls, kwargs, steps=200, fused=True, groups=None, scheduler=None,
                 ref_dtype=torch.float32):
    """Trains the MLP with ref_cls (on a ref_dtype copy) and cls from the same seed; compares
    the loss at every step and the final parameters. groups: a function (params) -> param
    groups; scheduler: a function (optimizer) -> lr scheduler stepped after each step."""
    X, Y = data()
    ref_model, model = mlp().to(ref_dtype), mlp()
    # maximize: ascend -loss, the same descent through the maximize paths of both.
    sign = -1.0 if kwargs.get("maximize") else 1.0
    runs = []
    for m, c, extra, x, y in ((ref_model, ref_cls, {}, X.to(ref_dtype), Y.to(ref_dtype)),
                              (model, cls, {"fused": fused}, X, Y)):
        params = groups(list(m.parameters())) if groups else m.parameters()
        opt = c(params, **kwargs, **extra)
        sched = scheduler(opt) if scheduler else None
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = sign * torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            if sched:
                sched.step()
            losses.append(loss.item())
        runs.append((losses, opt))
    assert_close_losses(runs[0][0], runs[1][0])
    assert_close_models(ref_model, model)
    assert abs(runs[0][0][-1]) < abs(runs[0][0][0])  # it trained
    return runs[0][1], runs[1][1]


def max_rel_diffs(ref_cls, cls, kwargs, steps=200, ref_dtype=torch.float32):
    """(max relative loss difference, max parameter difference relative to each tensor's
    largest |value|): what the tolerances are set from."""
    X, Y = data()
    a, b = mlp().to(ref_dtype), mlp()
    ra = train(a, ref_cls(a.parameters(), **kwargs), steps, X.to(ref_dtype), Y.to(ref_dtype))
    rb = train(b, cls(b.parameters(), **kwargs), steps, X, Y)
    loss = max(abs(x - y) / abs(x) for x, y in zip(ra, rb))
    par = max(((p.float() - q).abs().max() / p.abs().max()).item()
              for p, q in zip(a.parameters(), b.parameters()))
    return loss, par


def check_two_groups(ref_cls, cls, kwargs, group_kwargs, ref_dtype=torch.float32):
    """Two groups, the second with its own hyperparameters."""
    side_by_side(ref_cls, cls, kwargs, steps=100, ref_dtype=ref_dtype,
                 groups=lambda p: [{"params": p[:3]}, {"params": p[3:], **group_kwargs}])


def check_step_lr(ref_cls, cls, kwargs, ref_dtype=torch.float32):
    """torch's StepLR changes group['lr'] between steps; the opforge class reads it anew."""
    ref, got = side_by_side(ref_cls, cls, kwargs, steps=60, ref_dtype=ref_dtype,
                            scheduler=lambda o: torch.optim.lr_scheduler.StepLR(o, 20, 0.3))
    assert got.param_groups[0]["lr"] == pytest.approx(kwargs["lr"] * 0.3 ** 3)


def check_checkpoints(ref_cls, cls, kwargs, keys):
    """50 steps in one implementation, a checkpoint (model and optimizer, through
    torch.save), 50 more in the other; against 100 steps in the reference alone."""
    X, Y = data()
    ref_model = mlp()
    ref = train(ref_model, ref_cls(ref_model.parameters(), **kwargs), 100, X, Y)
    for first, second in ((cls, ref_cls), (ref_cls, cls)):
        m1 = mlp()
        o1 = first(m1.parameters(), **kwargs)
        head = train(m1, o1, 50, X, Y)
        assert state_keys(o1) == keys
        buf = io.BytesIO()
        torch.save({"model": m1.state_dict(), "opt": o1.state_dict()}, buf)
        buf.seek(0)
        ckpt = torch.load(buf)
        m2 = mlp()
        m2.load_state_dict(ckpt["model"])
        o2 = second(m2.parameters(), **kwargs)
        o2.load_state_dict(ckpt["opt"])
        tail = train(m2, o2, 50, X, Y)
        assert_close_losses(ref, head + tail)
        assert_close_models(ref_model, m2)
        assert state_keys(o2) == keys


def check_one_call_per_group(monkeypatch, cls, kwargs):
    """fused: one call_model per group per step; fused=False: one call per parameter."""
    model = mlp()
    params = list(model.parameters())
    X, Y = data()
    opt = cls([{"params": params[:3]}, {"params": params[3:]}], **kwargs)
    calls = count_calls(monkeypatch)
    train(model, opt, 3, X, Y)
    assert calls == {"call": 0, "call_model": 2 * 3}
    opt = cls(model.parameters(), fused=False, **kwargs)
    calls = count_calls(monkeypatch)
    train(model, opt, 2, X, Y)
    assert calls == {"call": 2 * len(params), "call_model": 0}


def check_refusals(cls, kwargs, sparse_kwargs=None):
    """Bad input refused with a clear error before any state exists or a parameter moves.
    sparse_kwargs: for an optimizer that takes sparse gradients, constructor arguments under
    which it refuses them (e.g. Adagrad's weight_decay)."""
    model = mlp()
    with pytest.raises(TypeError, match="no_such_hyper"):
        cls(model.parameters(), no_such_hyper=1, **kwargs)
    p = list(model.parameters())
    with pytest.raises(ValueError, match="more than one parameter group"):
        cls([{"params": p[:2]}, {"params": p[1:]}], **kwargs)
    with pytest.raises(ValueError, match="parameter 1 of group 0 is torch.float64"):
        cls([torch.nn.Parameter(torch.ones(3)),
             torch.nn.Parameter(torch.ones(3, dtype=torch.float64))], **kwargs)
    with pytest.raises(ValueError, match="parameter 0 of group 0 is torch.float16"):
        cls([torch.nn.Parameter(torch.ones(3, dtype=torch.float16))], **kwargs)
    # A frozen parameter is taken, as torch takes it, with a warning (no fused call).
    with pytest.warns(UserWarning, match="parameter 1 of group 0 does not require grad"):
        cls([torch.nn.Parameter(torch.ones(3)),
             torch.nn.Parameter(torch.ones(3), requires_grad=False)], **kwargs)
    # meta: a non-CPU device that exists without a GPU.
    with pytest.raises(ValueError, match="parameter 0 of group 0 is torch.float32 on meta"):
        cls([torch.nn.Parameter(torch.ones(3, device="meta"))], **kwargs)
    q, r = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))
    opt = cls([q, r], **kwargs, **(sparse_kwargs or {}))
    before = {k: [t.clone() if torch.is_tensor(t) else t for t in s.values()]
              for k, s in opt.state.items()}
    q.grad = torch.ones(3)
    r.grad = torch.ones(2).to_sparse()  # torch refuses other dtypes on assignment
    with pytest.raises(RuntimeError, match="parameter 1 of group 0 has a sparse gradient"):
        opt.step()
    assert torch.equal(q.detach(), torch.ones(3))
    after = {k: list(s.values()) for k, s in opt.state.items()}
    assert before.keys() == after.keys()
    for k in before:
        for x, y in zip(before[k], after[k]):
            assert torch.equal(x, y) if torch.is_tensor(x) else x == y
