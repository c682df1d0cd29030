"""bf16/f16 parameters with fp32 master weights (master_weights=True, the kernels'
bf16m/f16m variants) against torch.optim on fp32 parameters: both are fed the same
gradients (torch's fp32 gradients rounded to the low-precision dtype, as a bf16/f16 model's
backward would give them), so the masters must follow torch's fp32 parameters to fp32
rounding, and each parameter must be its master rounded to nearest even."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
from optim_common import data, mlp  # noqa: E402

CONFIGS = {
    "adam": ("Adam", dict(lr=3e-3)),
    "adam_l2_amsgrad": ("Adam", dict(lr=3e-3, weight_decay=0.1, amsgrad=True)),
    "adam_maximize": ("Adam", dict(lr=1e-3, maximize=True)),
    "adamw": ("AdamW", dict(lr=3e-3, weight_decay=0.05)),
    "sgd": ("SGD", dict(lr=0.05)),
    "sgd_momentum": ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3)),
    "sgd_nesterov": ("SGD", dict(lr=0.02, momentum=0.9, nesterov=True)),
}
# fp32 kernel math vs torch's fp32 ops on identical inputs: a few ulp per step; 100 steps
# of this problem stay below 1e-5 of each tensor's largest value (measured ~1e-6).
MASTER_RTOL = 2e-5


def run(cls, kwargs, dtype, fused, steps=100):
    X, Y = data()
    ref = mlp()
    with torch.no_grad():  # start both from values the low-precision dtype holds exactly
        for p in ref.parameters():
            p.copy_(p.to(dtype).float())
    params = [torch.nn.Parameter(p.detach().to(dtype)) for p in ref.parameters()]
    ref_opt = getattr(torch.optim, cls)(ref.parameters(), **kwargs)
    opt = getattr(oo, cls)(params, master_weights=True, fused=fused, **kwargs)
    for _ in range(steps):
        ref_opt.zero_grad()
        opt.zero_grad()
        torch.nn.functional.mse_loss(ref(X), Y).backward()
        for p, q in zip(ref.parameters(), params):
            low = p.grad.to(dtype)
            p.grad.copy_(low.float())
            if q.grad is None:
                q.grad = low.clone()
            else:
                q.grad.copy_(low)
        ref_opt.step()
        opt.step()
    return ref, params, opt


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_masters_follow_torch_fp32(reg, config, dtype, fused):
    cls, kwargs = CONFIGS[config]
    ref, params, opt = run(cls, kwargs, dtype, fused)
    for i, (p, q) in enumerate(zip(ref.parameters(), params)):
        master = opt.state[q]["master_param"]
        assert master.dtype == torch.float32 and q.dtype == dtype
        scale = p.detach().abs().max().item()
        diff = (master - p.detach()).abs().max().item()
        assert diff <= MASTER_RTOL * scale, f"tensor {i}: master off by {diff:.3g}"
        assert torch.equal(q.detach(), master.to(dtype)), f"tensor {i}: not master rounded"
    # the parameters really moved in low precision (not just the masters)
    assert not torch.equal(params[0].detach().float(), mlp()[0].weight.detach())


def test_checkpoint_keeps_fp32_states(reg):
    ref, params, opt = run("Adam", dict(lr=3e-3), torch.bfloat16, True, steps=5)
    sd = opt.state_dict()
    params2 = [torch.nn.Parameter(q.detach().clone()) for q in params]
    opt2 = oo.Adam(params2, lr=3e-3, master_weights=True)
    opt2.load_state_dict(sd)
    for q, q2 in zip(params, params2):
        for key in ("master_param", "exp_avg", "exp_avg_sq"):
            assert opt2.state[q2][key].dtype == torch.float32
            assert torch.equal(opt2.state[q2][key], opt.state[q][key])
    for o, ps in ((opt, params), (opt2, params2)):
        for q in ps:
            q.grad = torch.full_like(q, 0.01)
        o.step()
    for q, q2 in zip(params, params2):
        assert torch.equal(q, q2)
        assert torch.equal(opt.state[q]["master_param"], opt2.state[q2]["master_param"])


def test_refusals(reg):
    bf = torch.nn.Parameter(torch.ones(3, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"parameter 0 of group 0 is torch.bfloat16.*"
                                         "master_weights=True"):
        oo.Adam([bf])
    with pytest.raises(ValueError, match="group 0 mixes parameter dtypes"):
        oo.Adam([bf, torch.nn.Parameter(torch.ones(2))], master_weights=True)
    with pytest.raises(ValueError, match="parameter 0 of group 0 is torch.float64"):
        oo.SGD([torch.nn.Parameter(torch.ones(2, dtype=torch.float64))], lr=0.1,
               master_weights=True)
    opt = oo.Adam([bf], master_weights=True)
    bf.grad = torch.ones(3, dtype=torch.bfloat16).to_sparse()
    with pytest.raises(RuntimeError, match="parameter 0 of group 0 has a sparse gradient"):
        opt.step()
    assert len(opt.state) == 0


# Lion (no torch.optim class) and SGD with momentum, whose bf16 parameters with 8-bit states
# run the bf16mq8s kernels: against opforge's own fp32-parameter runs fed the same gradients
# (bf16-representable), from the same values. The master's arithmetic is the fp32 kernel's,
# so the masters equal the fp32 parameters bit for bit, states in 8 bits or in fp32.
OWN_RUNS = {
    "lion": (oo.Lion, dict(lr=1e-3, weight_decay=0.1)),
    "sgd_momentum": (oo.SGD, dict(lr=0.01, momentum=0.9)),
    "sgd_nesterov": (oo.SGD, dict(lr=0.01, momentum=0.9, nesterov=True)),
}


def run_own(cls, kwargs, dtype, state_bits, fused, steps=12):
    """Two parameters (one of them in an 8-bit part's tail block) as fp32 or as `dtype` with
    master weights, each step the same gradients; returns the parameters and optimizer."""
    g = torch.Generator().manual_seed(5)
    start = [torch.randn(n, generator=g).to(dtype).float() for n in (3001, 17)]
    out = []
    for low in (None, dtype):
        params = [torch.nn.Parameter(s.clone() if low is None else s.to(low)) for s in start]
        opt = cls(params, master_weights=low is not None, fused=fused, state_bits=state_bits,
                  min_8bit_size=0, **kwargs)
        grads = torch.Generator().manual_seed(6)
        for _ in range(steps):
            for p in params:
                low_grad = torch.randn(p.shape, generator=grads).to(dtype)
                p.grad = low_grad if low is not None else low_grad.float()
            opt.step()
        out.append((params, opt))
    return out


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
@pytest.mark.parametrize("state_bits,dtype", [(8, torch.bfloat16), (32, torch.bfloat16),
                                              (32, torch.float16)],
                         ids=["bf16_8bit", "bf16", "f16"])
@pytest.mark.parametrize("config", list(OWN_RUNS))
def test_lion_and_sgd_masters_are_their_fp32_runs(reg, config, state_bits, dtype, fused):
    cls, kwargs = OWN_RUNS[config]
    (ref, _), (params, opt) = run_own(cls, kwargs, dtype, state_bits, fused)
    for p, q in zip(ref, params):
        master = opt.state[q]["master_param"]
        assert master.dtype == torch.float32 and torch.equal(master, p.detach())
        assert q.dtype == dtype and torch.equal(q.detach(), master.to(dtype))
