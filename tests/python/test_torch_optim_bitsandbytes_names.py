"""opforge.torch.optim's bitsandbytes names (Adam8bit, AdamW8bit, Lion8bit, SGD8bit): each is
the opforge optimizer with state_bits=8, bit for bit, with bitsandbytes' defaults (written
here from bitsandbytes' signatures), and refuses the bitsandbytes arguments opforge does not
implement, naming them."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402

SIZES = [5000, 4096, 17, 65543]  # 17: under min_8bit_size, fp32 states

# class, its opforge twin with state_bits=8, bitsandbytes' defaults, extra constructor args
CASES = {
    "Adam8bit": (oo.Adam8bit, oo.Adam, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                            weight_decay=0, amsgrad=False), {}),
    "AdamW8bit": (oo.AdamW8bit, oo.AdamW, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                               weight_decay=1e-2, amsgrad=False), {}),
    "Lion8bit": (oo.Lion8bit, oo.Lion, dict(lr=1e-4, betas=(0.9, 0.99), weight_decay=0), {}),
    "SGD8bit": (oo.SGD8bit, oo.SGD, dict(lr=0.1, momentum=0.9, dampening=0, weight_decay=0,
                                         nesterov=False), dict(lr=0.1, momentum=0.9)),
}


def step_together(opt, twin, a, b, steps):
    """`steps` steps of opt (over parameters a) and twin (over b) on the same random
    gradients; then a and b must be equal bit for bit."""
    for _ in range(steps):
        grads = [torch.randn(p.shape) for p in a]
        for ps in (a, b):
            for p, g in zip(ps, grads):
                p.grad = g.clone()
        opt.step()
        twin.step()
    for pa, pb in zip(a, b):
        assert torch.equal(pa, pb)


@pytest.mark.parametrize("name", list(CASES))
def test_each_name_is_its_opforge_optimizer_with_8bit_states(reg, name):
    cls, twin_cls, defaults, args = CASES[name]
    torch.manual_seed(0)
    start = [torch.randn(n) for n in SIZES]
    a = [torch.nn.Parameter(t.clone()) for t in start]
    b = [torch.nn.Parameter(t.clone()) for t in start]
    opt = cls(a, **args)
    twin = twin_cls(b, state_bits=8, **dict(defaults, **args))
    for key, value in defaults.items():
        assert opt.defaults[key] == value, (name, key)
    step_together(opt, twin, a, b, 4)
    key = "momentum_buffer" if name == "SGD8bit" else "exp_avg"
    assert key + "_codes" in opt.state[a[0]]  # 8-bit at 4096 elements and above
    assert key + "_codes" not in opt.state[a[2]]  # fp32 states under min_8bit_size


@pytest.mark.parametrize("bad, what", [
    (dict(percentile_clipping=5), "percentile_clipping=5 is not implemented"),
    (dict(block_wise=False), "block_wise=False"),
    (dict(args=object()), "args"),
])
def test_unimplemented_bitsandbytes_arguments_are_refused(bad, what):
    p = [torch.nn.Parameter(torch.zeros(3))]
    with pytest.raises(ValueError, match=f"Adam8bit: {what}"):
        oo.Adam8bit(p, **bad)
    with pytest.raises(ValueError, match=f"SGD8bit: {what}"):
        oo.SGD8bit(p, lr=0.1, momentum=0.9, **bad)
    # Taken at their do-nothing values, however spelled (block_wise=1 is block-wise).
    oo.Adam8bit(p, block_wise=1, percentile_clipping=100.0)
    # bitsandbytes' SGD8bit needs momentum: opforge's 8-bit SGD refuses it likewise
    with pytest.raises(ValueError, match="needs momentum > 0"):
        oo.SGD8bit(p, lr=0.1)


@pytest.mark.parametrize("paged, plain", [("PagedAdam8bit", "Adam8bit"),
                                          ("PagedAdamW8bit", "AdamW8bit"),
                                          ("PagedLion8bit", "Lion8bit")])
def test_paged_classes_are_the_plain_ones_on_the_cpu(reg, paged, plain):
    """Paging moves GPU states to host memory: on the CPU it changes nothing, step for step
    (is_paged=True taken by the plain classes too)."""
    torch.manual_seed(7)
    start = torch.randn(5000)
    runs = []
    for cls, kwargs in ((getattr(oo, paged), {}), (getattr(oo, plain), dict(is_paged=True))):
        p = torch.nn.Parameter(start.clone())
        opt = cls([p], lr=1e-3, **kwargs)
        g = torch.Generator().manual_seed(8)
        for _ in range(3):
            p.grad = torch.randn(5000, generator=g)
            opt.step()
        runs.append(p.detach())
    assert torch.equal(runs[0], runs[1])
    assert isinstance(getattr(oo, paged)([torch.nn.Parameter(start)]), getattr(oo, plain))


def bnb_adam_reference(p, grads, lr, betas, eps, weight_decay):
    """bitsandbytes' Adam step in fp64, written from its published kernels (32-bit and 8-bit
    blockwise alike): correction1 = 1 - b1^t, correction2 = sqrt(1 - b2^t),
    p += -lr*correction2/correction1 * m / (sqrt(v) + correction2*eps), then
    p *= 1 - lr*weight_decay. fp32 states (every parameter under min_8bit_size). Also
    returns how far decaying before the update (AdamW's order) can move from it: the sum
    over steps of lr*weight_decay times the largest |step|."""
    b1, b2 = betas
    p = p.double().clone()
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    order = 0.0
    for t, g in enumerate(grads, 1):
        g = g.double()
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        c1, c2 = 1 - b1 ** t, (1 - b2 ** t) ** 0.5
        step = lr * c2 / c1 * m / (v.sqrt() + c2 * eps)
        order = order * (1 - lr * weight_decay) + lr * weight_decay * float(step.abs().max())
        p = (p - step) * (1 - lr * weight_decay)
    return p, order


@pytest.mark.parametrize("n", [1, 17, 1000])
def test_adam8bit_decays_the_parameter_as_bitsandbytes(reg, n):
    """bitsandbytes' Adam8bit decays the parameter (decoupled), not the gradient (torch's
    L2): against its rule in fp64 within the order term (decay before or after the update)
    plus fp32 rounding, and away from torch.optim.Adam's L2 rule by over 10x that bound (the
    check the L2 term cannot pass)."""
    torch.manual_seed(11)
    start = torch.randn(n)
    grads = [torch.randn(n) * 1e-2 for _ in range(6)]
    hyper = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.5)
    p = torch.nn.Parameter(start.clone())
    opt = oo.Adam8bit([p], min_8bit_size=1 << 30, **hyper)  # fp32 states: an exact reference
    q = torch.nn.Parameter(start.clone())
    l2 = torch.optim.Adam([q], **hyper)
    for g in grads:
        p.grad, q.grad = g.clone(), g.clone()
        opt.step()
        l2.step()
    want, order = bnb_adam_reference(start, grads, **hyper)
    bound = order + 1e-6 * float(want.abs().max())
    err = float((p.detach().double() - want).abs().max())
    assert err <= bound, (err, bound)
    apart = float((q.detach().double() - want).abs().max())
    assert apart > 10 * bound, (apart, bound)


def test_adam8bit_with_weight_decay_is_adamw8bit(reg):
    """With 8-bit states too: Adam8bit(weight_decay=w) steps as AdamW8bit(weight_decay=w),
    bit for bit (the same decoupled kernel)."""
    torch.manual_seed(12)
    start = [torch.randn(n) for n in SIZES]
    a = [torch.nn.Parameter(t.clone()) for t in start]
    b = [torch.nn.Parameter(t.clone()) for t in start]
    opt, twin = oo.Adam8bit(a, weight_decay=0.1), oo.AdamW8bit(b, weight_decay=0.1)
    step_together(opt, twin, a, b, 3)
    assert "exp_avg_codes" in opt.state[a[0]]
