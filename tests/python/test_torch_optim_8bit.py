"""opforge.torch.optim.Adam / AdamW / Lion with state_bits=8 (8-bit blockwise states,
Dettmers et al. 2022) against an fp64 NumPy version of the algorithm written here from its
definition: decode each state (map[code] * block absmax), torch.optim.Adam's / AdamW's update
in fp64, each block's new absmax = max |new state|, the code of the nearest map value. Step by
step, fused (one call per group over 256-aligned flat buffers) and per parameter: each step
starts the reference from the optimizer's own parameter, codes and absmaxes, so a step's
error never carries into the next (min_8bit_size=0: every parameter in 8 bits). Then
checkpoints in torch's layout, GradScaler, a 500-step training against fp32 states,
min_8bit_size's split into 8-bit and fp32 parameters, and refusals."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import opforge  # noqa: E402
import opforge.torch as ot  # noqa: E402
import opforge.torch.optim as oo  # noqa: E402
from optim_common import count_calls  # noqa: E402

SIZES = [1, 5, 17, 1000, 65543]
BLOCK = 256
STORAGE = {"dynamic": "q8s", "linear": "q8ls"}

# Parameter tolerance of the step-by-step check: |got - want| <= P_ATOL + P_RTOL * |p_old|
# + S_RTOL * |want - p_old|. The kernel computes in fp32 from the same codes: storing the new
# parameter rounds it by half an ulp (6e-8 relative); the step's own error is dominated by
# 1 - beta2^t in fp32 (as in torch's fp32 Adam), which cancels in early steps: at t = 2 an
# ulp of 1 is 3e-5 of 1 - 0.999^2, 1.5e-5 of the step after the square root. Measured
# (AMD EPYC, AVX-512 and AVX2, 20 steps, every configuration below): at most 0.58 of this
# bound; with the reference's lr 0.1% off, 2 steps already exceed it 50-fold.
P_ATOL, P_RTOL, S_RTOL = 1e-9, 1e-6, 2e-5
# A code may differ from the nearest one (by one) only where the fp64 value lies within
# MID_TOL (relative to the block's absmax) of a decision midpoint: fp32 and fp64 round there
# to different sides. Measured (20 steps, 2.7M-4.0M codes a configuration, AVX-512 and
# AVX2): 5-8 flips in each, all within 1e-7 of a midpoint; bounded at 1 in 10^5.
MID_TOL = 1e-5
MAX_FLIP_RATE = 1e-5


def ref_map(kind, signed):
    """The map from its definition (registry/SCHEMA.md), fp64 rounded to fp32, sorted."""
    if kind == "linear":
        v = ([(c - 127) / 127 for c in range(255)] + [1.0] if signed else
             [c / 255 for c in range(256)])
    else:
        v = []
        for i in range(7):
            per = 2 ** i if signed else 2 ** (i + 1)
            for j in range(per):
                x = 10.0 ** (i - 6) * (0.1 + 0.9 * (j + 0.5) / per)
                v += [x, -x] if signed else [x]
        v = sorted(v + [0.0, 1.0])
    assert len(v) == 256
    return np.array(v, dtype=np.float32).astype(np.float64)


def ref_quantize(x, table):
    """Blockwise absmax and nearest codes; also the distance of each value to its nearest
    decision midpoint, relative to the absmax (a kernel may take the neighbour there)."""
    n = x.size
    nb = math.ceil(n / BLOCK)
    pad = np.zeros(nb * BLOCK)
    pad[:n] = x
    absmax = np.abs(pad.reshape(nb, BLOCK)).max(axis=1).astype(np.float32).astype(np.float64)
    scale = np.where(absmax > 0, absmax, 1.0)
    y = x / np.repeat(scale, BLOCK)[:n]
    mid = (table[1:] + table[:-1]) / 2
    at = np.searchsorted(mid, y)
    codes = np.clip(at, 0, 255)
    below = np.abs(y - mid[np.clip(at - 1, 0, 254)])
    above = np.abs(y - mid[np.clip(at, 0, 254)])
    return codes, absmax, np.minimum(below, above)


def ref_step(p, codes, absmax, grad, group, step, kind, decoupled, lr_scale=1.0):
    """One fp64 step of the 8-bit Adam / AdamW from the optimizer's fp32 values."""
    # The scalars as the kernel sees them, fp32: 1 - 0.999 in fp32 is 1.3e-5 off fp64's, which
    # a v decoded as 0 (a new second moment from one small gradient) shows in the step.
    f32 = lambda x: float(np.float32(x))  # noqa: E731
    lr, eps, wd = f32(group["lr"]) * lr_scale, f32(group["eps"]), f32(group["weight_decay"])
    b1, b2 = f32(group["betas"][0]), f32(group["betas"][1])
    p = p.astype(np.float64)
    g = grad.astype(np.float64)
    if group["maximize"]:
        g = -g
    if wd and not decoupled:
        g = g + wd * p
    deq = {k: ref_map(kind, k == "exp_avg")[codes[k]] * np.repeat(absmax[k], BLOCK)[:p.size]
           for k in codes}
    m = b1 * deq["exp_avg"] + (1 - b1) * g
    v = b2 * deq["exp_avg_sq"] + (1 - b2) * g * g
    vv = v
    new = {"exp_avg": m, "exp_avg_sq": v}
    if "max_exp_avg_sq" in deq:
        vv = np.maximum(deq["max_exp_avg_sq"], v)
        new["max_exp_avg_sq"] = vv
    if wd and decoupled:
        p = p * (1 - lr * wd)
    p = p - lr / (1 - b1 ** step) * m / (np.sqrt(vv) / math.sqrt(1 - b2 ** step) + eps)
    return p, new


def need(op, attrs):
    """Skips where the registry under test lacks the variant (a partial test registry)."""
    try:
        oo._base.default_registry().select(op, attrs)
    except opforge.OpforgeError as e:
        pytest.skip(f"the registry has no {op} variant {attrs}: {e}")


def need_adam(kind, amsgrad):
    need("apply_adamw", dict(amsgrad=amsgrad, maximize=False, convention="torch",
                             epsilon_mode="torch", storage=STORAGE[kind]))


CONFIGS = {  # class, decoupled, amsgrad, maximize (Adam's L2 term in every Adam case)
    "adam": (oo.Adam, False, False, False),
    "adam_amsgrad_maximize": (oo.Adam, False, True, True),
    "adamw": (oo.AdamW, True, False, False),
    "adamw_amsgrad": (oo.AdamW, True, True, False),
}


def run_against_reference(config, kind, fused, steps=20, lr_scale=1.0, master=False):
    """Steps an 8-bit optimizer on SIZES-element parameters, checking each step against
    ref_step. master: bf16 parameters and gradients with fp32 master weights (the bf16mq8s
    kernels), the master checked against ref_step and the parameter as the master rounded to
    nearest even. Returns (max parameter error / its bound, code flips, codes compared,
    largest midpoint distance of a flip, largest absmax relative error)."""
    cls, decoupled, amsgrad, maximize = CONFIGS[config]
    torch.manual_seed(0)
    dtype = torch.bfloat16 if master else torch.float32
    params = [torch.nn.Parameter(torch.randn(n).to(dtype)) for n in SIZES]
    opt = cls(params, lr=1e-2, weight_decay=0.1, amsgrad=amsgrad, maximize=maximize,
              state_bits=8, min_8bit_size=0, quant_map=kind, fused=fused,
              master_weights=master)
    group = opt.param_groups[0]
    keys = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if amsgrad else [])
    worst = flips = total = 0
    flip_margin = absmax_err = 0.0
    for step in range(1, steps + 1):
        before = {}
        for p in params:
            # a large step now and then moves absmaxes up, small ones let them decay
            p.grad = (torch.randn(p.shape) * (10.0 if step % 7 == 3 else 1.0)).to(dtype)
            st = opt.state[p]
            if st:
                codes = {k: st[k + "_codes"].numpy().astype(np.int64) for k in keys}
                absmax = {k: st[k + "_absmax"].numpy().astype(np.float64) for k in keys}
            else:  # zeros: the code of 0, absmax 0
                codes = {k: np.full(p.numel(), np.argmin(np.abs(ref_map(kind, k == "exp_avg"))))
                         for k in keys}
                absmax = {k: np.zeros(math.ceil(p.numel() / BLOCK)) for k in keys}
            # the value the kernel updates: the fp32 master (the parameter's value when new)
            var = st["master_param"] if "master_param" in st else p.detach().float()
            before[p] = (var.numpy().copy(), codes, absmax, p.grad.float().numpy().copy())
        opt.step()
        for p in params:
            want_p, new = ref_step(*before[p], group, step, kind, decoupled, lr_scale)
            p0 = before[p][0].astype(np.float64)
            bound = P_ATOL + P_RTOL * np.abs(p0) + S_RTOL * np.abs(want_p - p0)
            st = opt.state[p]
            got_p = st["master_param"] if master else p.detach()
            if master:
                assert torch.equal(p.detach(), got_p.to(torch.bfloat16)), step
            worst = max(worst, float(np.max(np.abs(got_p.numpy() - want_p) / bound)))
            assert float(st["step"]) == step
            for k, x in new.items():
                table = ref_map(kind, k == "exp_avg")
                codes, absmax, margin = ref_quantize(x, table)
                got_a = st[k + "_absmax"].numpy().astype(np.float64)
                assert got_a.shape == absmax.shape
                absmax_err = max(absmax_err, float(np.max(np.abs(got_a - absmax)
                                                          / np.maximum(absmax, 1e-30))))
                got = st[k + "_codes"].numpy().astype(np.int64)
                assert got.shape == (p.numel(),)
                # linear_signed has 1.0 twice (codes 254 and 255): either is the nearest
                off = table[got] != table[codes]
                # Off the nearest code only by one, next to a midpoint (fp32 vs fp64 values).
                assert np.all(np.abs(got[off] - codes[off]) == 1), (step, k)
                if off.any():
                    flip_margin = max(flip_margin, float(margin[off].max()))
                flips += int(off.sum())
                total += got.size
    return worst, flips, total, flip_margin, absmax_err


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_param"])
@pytest.mark.parametrize("kind", ["dynamic", "linear"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_steps_match_the_fp64_8bit_reference(reg, config, kind, fused):
    need_adam(kind, CONFIGS[config][2])
    worst, flips, total, flip_margin, absmax_err = run_against_reference(config, kind, fused)
    print(f"{config} {kind} fused={fused}: parameter error {worst:.3g} of the bound, "
          f"{flips} code flips in {total} (largest midpoint distance {flip_margin:.2g}), "
          f"absmax relative error {absmax_err:.2g}")
    assert worst <= 1.0, worst
    assert flip_margin < MID_TOL, flip_margin
    assert flips <= MAX_FLIP_RATE * total, (flips, total)
    assert absmax_err <= 1e-6, absmax_err


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_param"])
@pytest.mark.parametrize("config", ["adamw", "adamw_amsgrad"])
def test_bf16_master_weights_steps_match_the_fp64_8bit_reference(reg, config, fused):
    """bf16 parameters, fp32 masters, 8-bit states (bf16mq8s): the master against the same
    fp64 reference from the bf16 gradient, the parameter the master rounded to nearest even.
    (Adam's L2 term and maximize fold the gradient into a bf16 copy, rounded once: checked
    below against the unfolded path, not against the reference.)"""
    need("apply_adamw", dict(amsgrad=CONFIGS[config][2], maximize=False, convention="torch",
                             epsilon_mode="torch", storage="bf16mq8s"))
    worst, flips, total, flip_margin, absmax_err = run_against_reference(
        config, "dynamic", fused, master=True)
    print(f"{config} bf16 master fused={fused}: parameter error {worst:.3g} of the bound, "
          f"{flips} code flips in {total} (largest midpoint distance {flip_margin:.2g})")
    assert worst <= 1.0, worst
    assert flip_margin < MID_TOL, flip_margin
    assert flips <= 10 * MAX_FLIP_RATE * total, (flips, total)
    assert absmax_err <= 1e-6, absmax_err


def test_bf16_master_weights_fold_and_checkpoints(reg):
    """Adam's L2 term with bf16 masters: fused and per parameter agree bit for bit, and
    stay near torch.optim.Adam run in fp32 on the same bf16 gradients; state_dict holds the
    fp32 masters and moments and loads into torch.optim.Adam; float16 parameters and the
    linear map are refused before anything changes."""
    need("apply_adamw", dict(amsgrad=False, maximize=False, convention="torch",
                             epsilon_mode="torch", storage="bf16mq8s"))
    torch.manual_seed(1)
    start = [torch.randn(n).to(torch.bfloat16) for n in (5000, 4100, 17)]
    runs = []
    for fused in (True, False):
        ps = [torch.nn.Parameter(t.clone()) for t in start]
        runs.append((ps, oo.Adam(ps, lr=1e-2, weight_decay=0.1, state_bits=8,
                                 master_weights=True, fused=fused)))
    ref = [torch.nn.Parameter(t.float()) for t in start]
    ref_opt = torch.optim.Adam(ref, lr=1e-2, weight_decay=0.1)
    for _ in range(10):
        grads = [torch.randn(t.shape).to(torch.bfloat16) for t in start]
        for ps, opt in runs:
            for p, g in zip(ps, grads):
                p.grad = g.clone()
            opt.step()
        for p, g in zip(ref, grads):
            p.grad = g.float()
        ref_opt.step()
    (a, oa), (b, ob) = runs
    for pa, pb, pr in zip(a, b, ref):
        ma, mb = oa.state[pa]["master_param"], ob.state[pb]["master_param"]
        # Bit for bit but in a parameter's partial last block, whose elements the kernel's
        # tail path computes (there: within an ulp; measured 14 elements of 9117, AVX-512 and
        # AVX2 alike).
        whole = pa.numel() // BLOCK * BLOCK if pa.numel() >= 4096 else pa.numel()
        assert torch.equal(ma[:whole], mb[:whole]) and torch.equal(pa[:whole], pb[:whole])
        assert torch.allclose(ma, mb, rtol=2.5e-7, atol=0)
        # 10 steps of lr 1e-2: within a few bf16 ulps of fp32 Adam (8-bit moments, bf16
        # rounding of the folded gradient)
        assert float((ma - pr.detach()).abs().max()) < 0.02
    assert "exp_avg_codes" in oa.state[a[0]] and "exp_avg" in oa.state[a[2]]  # 17 < 4096
    sd = oa.state_dict()
    assert sd["state"][0]["master_param"].dtype == torch.float32
    assert sd["state"][0]["exp_avg"].dtype == torch.float32
    twin = [torch.nn.Parameter(t.float()) for t in start]
    torch.optim.Adam(twin, lr=1e-2).load_state_dict(sd)
    half = [torch.nn.Parameter(torch.zeros(5000, dtype=torch.float16))]
    with pytest.raises(ValueError, match="group 0 has float16 parameters of at least "
                                         "min_8bit_size=4096 elements"):
        oo.Adam(half, state_bits=8, master_weights=True)
    with pytest.raises(ValueError, match="master_weights=True takes quant_map='dynamic'"):
        oo.AdamW(a, state_bits=8, master_weights=True, quant_map="linear")


@pytest.mark.parametrize("lr_scale", [1.001, 0.999])
def test_the_reference_check_catches_a_perturbed_lr(reg, lr_scale):
    """The same check with the reference's lr 0.1% off: the parameters leave the bound."""
    need_adam("dynamic", False)
    worst = run_against_reference("adamw", "dynamic", True, steps=2, lr_scale=lr_scale)[0]
    assert worst > 10.0, worst


def test_fused_is_one_call_per_step_on_aligned_buffers_and_matches_per_param(reg,
                                                                             monkeypatch):
    """fused: one Kernel.call per group per step (the q8 kernels are dense, no call_model),
    every parameter on a 256-element block, padding left at zero (codes of 0, absmax 0, zero
    parameters); the same numbers, bit for bit, as one call per parameter."""
    need_adam("dynamic", True)
    calls = count_calls(monkeypatch)
    runs = {}
    for fused in (True, False):
        torch.manual_seed(4)
        params = [torch.nn.Parameter(torch.randn(n)) for n in SIZES]
        opt = oo.AdamW(params, lr=1e-2, amsgrad=True, state_bits=8, min_8bit_size=0, fused=fused)
        calls.update(call=0, call_model=0)
        for _ in range(6):
            opt.zero_grad()
            for p in params:
                p.grad.copy_(torch.randn(p.shape)) if p.grad is not None else \
                    setattr(p, "grad", torch.randn(p.shape))
            opt.step()
        assert calls == {"call": 6 * (1 if fused else len(SIZES)), "call_model": 0}
        runs[fused] = params, opt
    (pa, oa), (pb, ob) = runs[True], runs[False]
    for x, y in zip(pa, pb):
        assert torch.equal(x, y)
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            for part in ("_codes", "_absmax"):
                assert torch.equal(oa.state[x][key + part], ob.state[y][key + part])
    (fg,) = oa._flat_groups.values()
    assert all(off % BLOCK == 0 for off in fg.layout.offsets)
    owned = torch.zeros(fg.layout.total_elements, dtype=torch.bool)
    for off, n in zip(fg.layout.offsets, fg.layout.elements):
        owned[off:off + n] = True
    pad = ~owned
    assert pad.sum() > 0
    assert torch.all(fg.flat["var"][pad] == 0) and torch.all(fg.flat["grad"][pad] == 0)
    signed_zero, unsigned_zero = 127, 0  # the dynamic maps' codes of 0
    assert ref_map("dynamic", True)[signed_zero] == 0 == ref_map("dynamic", False)[0]
    assert torch.all(fg.flat["codes:m"][pad] == signed_zero)
    for arg in ("v", "v_max"):
        assert torch.all(fg.flat["codes:" + arg][pad] == unsigned_zero)
    # the state's codes are the buffers' views, updated in place
    p0 = pa[3]
    assert oa.state[p0]["exp_avg_codes"].data_ptr() == \
        fg.flat["codes:m"][fg.layout.offsets[3]:].data_ptr()


def test_fused_falls_back_per_parameter_when_a_gradient_is_missing(reg):
    """A parameter without a gradient: one call per parameter on the views, its state left
    alone; then the group fuses again, its step counts apart (one call each still)."""
    need_adam("dynamic", False)
    torch.manual_seed(5)
    params = [torch.nn.Parameter(torch.randn(n)) for n in (300, 7)]
    twin = [torch.nn.Parameter(p.detach().clone()) for p in params]
    a = oo.Adam(params, lr=1e-2, state_bits=8, min_8bit_size=0)
    b = oo.Adam(twin, lr=1e-2, state_bits=8, min_8bit_size=0, fused=False)
    for step in range(4):
        for ps in (params, twin):
            g = torch.Generator().manual_seed(step)
            for i, p in enumerate(ps):
                p.grad = None if (step == 1 and i == 1) else torch.randn(p.shape, generator=g)
        a.step()
        b.step()
    for x, y in zip(params, twin):
        assert torch.equal(x, y)
        assert float(a.state[x]["step"]) == float(b.state[y]["step"])
    assert [float(a.state[p]["step"]) for p in params] == [4.0, 3.0]


def train_mlp(opt_for, steps, seed=1):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(37, 300), torch.nn.Tanh(),
                                torch.nn.Linear(300, 5))
    g = torch.Generator().manual_seed(11)
    x, y = torch.randn(64, 37, generator=g), torch.randn(64, 5, generator=g)
    opt = opt_for(model.parameters())
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model, opt, (x, y)


def continue_training(model, opt, data, steps):
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(data[0]), data[1]).backward()
        opt.step()


def clone_model(model):
    twin = torch.nn.Sequential(torch.nn.Linear(37, 300), torch.nn.Tanh(),
                               torch.nn.Linear(300, 5))
    twin.load_state_dict(model.state_dict())
    return twin


@pytest.mark.parametrize("kind", ["dynamic", "linear"])
def test_state_dict_is_torch_layout_and_loads_both_ways(reg, kind):
    need_adam(kind, False)
    model, opt, data = train_mlp(lambda p: oo.Adam(p, lr=1e-3, state_bits=8, min_8bit_size=0,
                                                   quant_map=kind),
                                 5)
    sd = opt.state_dict()
    for i, p in enumerate(model.parameters()):
        st = sd["state"][i]
        assert set(st) == {"step", "exp_avg", "exp_avg_sq"}
        assert float(st["step"]) == 5
        assert st["exp_avg"].dtype == torch.float32 and st["exp_avg"].shape == p.shape
        # the dequantized codes, as the kernels read them
        for key in ("exp_avg", "exp_avg_sq"):
            codes = opt.state[p][key + "_codes"].numpy()
            scale = np.repeat(opt.state[p][key + "_absmax"].numpy(), BLOCK)[:p.numel()]
            np.testing.assert_array_equal(st[key].numpy().reshape(-1),
                                          (ref_map(kind, key == "exp_avg")[codes] * scale)
                                          .astype(np.float32))
    # torch.optim.Adam takes it and continues from the dequantized states; so does a fresh
    # 8-bit optimizer (quantizing them again), and the original continues.
    twin = clone_model(model)
    t_opt = torch.optim.Adam(twin.parameters(), lr=1e-3)
    t_opt.load_state_dict(sd)
    assert float(t_opt.state[next(iter(twin.parameters()))]["step"]) == 5
    q_model = clone_model(model)
    q_opt = oo.Adam(q_model.parameters(), lr=1e-3, state_bits=8, min_8bit_size=0, quant_map=kind)
    q_opt.load_state_dict(sd)
    # Requantizing a dequantized state gives back the same codes and the absmaxes within an
    # ulp: also in a signed dynamic block whose largest |value| was negative (that map has
    # 1.0 but no -1.0; quantize recovers the absmax from the grid the values lie on, where it
    # took the block's largest |value| before and moved its codes by 0.7% of the absmax).
    for p, q in zip(model.parameters(), q_model.parameters()):
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(opt.state[p][key + "_codes"], q_opt.state[q][key + "_codes"])
            assert torch.allclose(opt.state[p][key + "_absmax"], q_opt.state[q][key + "_absmax"],
                                  rtol=2.4e-7, atol=0), key
    q_sd = q_opt.state_dict()
    for i in sd["state"]:
        for key in ("exp_avg", "exp_avg_sq"):
            a, b = sd["state"][i][key], q_sd["state"][i][key]
            assert torch.allclose(a, b, rtol=2.4e-7, atol=0), (i, key)
    # One step from the same states: all three within 1% of lr (a lost state, Adam
    # restarting from zeros, moves weights by about lr). Measured: torch 1.5e-8 (dynamic) /
    # 1.7e-6 (linear) from the original, the reloaded 8-bit 7e-6 / 0. Later steps part as
    # torch's fp32 states and the 8-bit ones differ (a linear-map v decoded as 0 makes a
    # step of lr * m / eps: the paper's case against the linear map).
    for m, o in ((model, opt), (twin, t_opt), (q_model, q_opt)):
        continue_training(m, o, data, 1)
    for a, b, c in zip(model.parameters(), twin.parameters(), q_model.parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=0, atol=1e-5)
        np.testing.assert_allclose(c.detach().numpy(), a.detach().numpy(), rtol=0, atol=1e-5)
    if kind == "linear":  # requantized exactly: the same run, bit for bit
        continue_training(model, opt, data, 4)
        continue_training(q_model, q_opt, data, 4)
        assert all(torch.equal(a, c) for a, c in zip(model.parameters(),
                                                     q_model.parameters()))
    # and back: torch's state_dict into the 8-bit optimizer
    back = oo.Adam(clone_model(twin).parameters(), lr=1e-3, state_bits=8, min_8bit_size=0,
                   quant_map=kind)
    back.load_state_dict(t_opt.state_dict())
    st = back.state[back.param_groups[0]["params"][0]]
    assert float(st["step"]) == 6 and st["exp_avg_codes"].dtype == torch.uint8


def test_quantize_matches_the_reference_definition():
    """_quant8's maps and load_state_dict's quantization against this file's definitions."""
    from opforge.torch.optim import _state8 as q8
    rng = np.random.default_rng(3)
    for kind in ("dynamic", "linear"):
        for signed in (True, False):
            table = ref_map(kind, signed)
            np.testing.assert_array_equal(q8.quant_map(kind, signed).numpy(), table)
            x = rng.standard_normal(1000) * np.exp(rng.uniform(-12, 2, 1000))
            x[256:512] = 0  # an all-zero block
            x = x if signed else np.abs(x)
            codes, absmax = q8.quantize(torch.tensor(x, dtype=torch.float32), q8.quant_map(
                kind, signed))
            want_c, want_a, margin = ref_quantize(x.astype(np.float32).astype(np.float64),
                                                  table)
            np.testing.assert_array_equal(absmax.numpy(), want_a)
            assert absmax[1] == 0 and torch.all(codes[256:512] == int(np.argmin(np.abs(table))))
            off = codes.numpy() != want_c
            assert np.all(margin[off] < 1e-6)


def test_grad_scaler_unscales_then_steps(reg):
    """GradScaler with 8-bit states: no one-pass kernel, so it unscales and steps; a
    power-of-two scale gives the unscaled run's numbers exactly, and an inf skips the
    step (states and step counts untouched)."""
    need_adam("dynamic", False)
    need("amp_update_scale", {})
    torch.manual_seed(6)
    a = [torch.nn.Parameter(torch.randn(n)) for n in (300, 7)]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    oa = oo.AdamW(a, lr=1e-2, state_bits=8, min_8bit_size=0)
    ob = oo.AdamW(b, lr=1e-2, state_bits=8, min_8bit_size=0)
    scaler = ot.GradScaler(init_scale=2.0 ** 10)
    for step in range(4):
        g = torch.Generator().manual_seed(step)
        grads = [torch.randn(p.shape, generator=g) for p in a]
        if step == 2:
            grads[1][3] = math.inf
        for p, q, gr in zip(a, b, grads):
            p.grad = gr * scaler.get_scale()
            q.grad = gr.clone()
        scaler.step(oa)
        scaler.update()
        if step != 2:
            ob.step()
    for p, q in zip(a, b):
        assert torch.equal(p, q)
        assert float(oa.state[p]["step"]) == float(ob.state[q]["step"]) == 3
        assert torch.equal(oa.state[p]["exp_avg_codes"], ob.state[q]["exp_avg_codes"])


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_param"])
def test_lion_steps_match_the_fp64_8bit_reference(reg, fused):
    """Lion (lion_pytorch.py's update) with exp_avg in 8 bits, step by step as above."""
    need("apply_lion", {"storage": "q8s"})
    torch.manual_seed(2)
    params = [torch.nn.Parameter(torch.randn(n)) for n in SIZES]
    lr, (b1, b2), wd = 1e-3, (0.9, 0.99), 0.1
    opt = oo.Lion(params, lr=lr, betas=(b1, b2), weight_decay=wd, state_bits=8,
                  min_8bit_size=0, fused=fused)
    table = ref_map("dynamic", True)
    f32 = lambda x: float(np.float32(x))  # noqa: E731
    for step in range(1, 8):
        before = {}
        for p in params:
            p.grad = torch.randn(p.shape)
            st = opt.state[p]
            if st:
                codes = st["exp_avg_codes"].numpy().astype(np.int64)
                absmax = st["exp_avg_absmax"].numpy().astype(np.float64)
            else:
                codes = np.full(p.numel(), 127)
                absmax = np.zeros(math.ceil(p.numel() / BLOCK))
            before[p] = (p.detach().numpy().astype(np.float64), codes, absmax,
                         p.grad.numpy().astype(np.float64))
        opt.step()
        for p in params:
            p0, codes, absmax, g = before[p]
            m = table[codes] * np.repeat(absmax, BLOCK)[:p.numel()]
            c = f32(b1) * m + (1 - f32(b1)) * g
            want = p0 * (1 - f32(lr) * f32(wd)) - f32(lr) * np.sign(c)
            # sign(c) may flip where c is within fp32 rounding of 0: those few are left out
            sure = np.abs(c) > 1e-5
            assert sure.sum() >= 0.99 * p.numel()
            np.testing.assert_allclose(p.detach().numpy()[sure], want[sure], rtol=1e-6,
                                       atol=1e-7)
            m_new = f32(b2) * m + (1 - f32(b2)) * g
            want_codes, want_absmax, margin = ref_quantize(m_new, table)
            st = opt.state[p]
            np.testing.assert_allclose(st["exp_avg_absmax"].numpy(), want_absmax, rtol=2e-6)
            got = st["exp_avg_codes"].numpy().astype(np.int64)
            off = got != want_codes
            assert np.all(margin[off] < 1e-5)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_param"])
@pytest.mark.parametrize("nesterov", [False, True], ids=["heavy_ball", "nesterov"])
def test_sgd_momentum_steps_match_the_fp64_8bit_reference(reg, fused, nesterov):
    """torch.optim.SGD's momentum step (dampening 0; weight decay and maximize folded into
    the gradient) with momentum_buffer in 8 bits, step by step as above: the buffer decoded,
    buf = momentum*buf + g, var -= lr*buf (Nesterov: lr*(g + momentum*buf)), then the new
    buffer's absmax and nearest codes. torch's first step (buf = g) is the same update from
    the zero buffer."""
    need("apply_momentum", {"storage": "q8s", "use_nesterov": nesterov})
    torch.manual_seed(3)
    params = [torch.nn.Parameter(torch.randn(n)) for n in SIZES]
    lr, mom, wd = 1e-2, 0.9, 0.01
    opt = oo.SGD(params, lr=lr, momentum=mom, weight_decay=wd, nesterov=nesterov,
                 maximize=True, state_bits=8, min_8bit_size=0, fused=fused)
    table = ref_map("dynamic", True)
    f32 = lambda x: float(np.float32(x))  # noqa: E731
    worst = 0.0
    for step in range(1, 8):
        before = {}
        for p in params:
            p.grad = torch.randn(p.shape) * (10.0 if step == 4 else 1.0)
            st = opt.state[p]
            if "momentum_buffer_codes" in st:
                codes = st["momentum_buffer_codes"].numpy().astype(np.int64)
                absmax = st["momentum_buffer_absmax"].numpy().astype(np.float64)
            else:
                codes = np.full(p.numel(), 127)
                absmax = np.zeros(math.ceil(p.numel() / BLOCK))
            # the folded gradient as torch forms it in fp32: -g (maximize) + wd * p
            g = (-p.grad + f32(wd) * p.detach()).numpy().astype(np.float64)
            before[p] = (p.detach().numpy().astype(np.float64), codes, absmax, g)
        opt.step()
        for p in params:
            p0, codes, absmax, g = before[p]
            buf = table[codes] * np.repeat(absmax, BLOCK)[:p.numel()]
            new = f32(mom) * buf + g
            upd = g + f32(mom) * new if nesterov else new
            want = p0 - f32(lr) * upd
            err = np.abs(p.detach().numpy() - want) / (1e-7 + 1e-6 * np.abs(p0)
                                                      + 1e-5 * np.abs(want - p0))
            worst = max(worst, float(err.max()))
            want_codes, want_absmax, margin = ref_quantize(new, table)
            st = opt.state[p]
            np.testing.assert_allclose(st["momentum_buffer_absmax"].numpy(), want_absmax,
                                       rtol=2e-6)
            got = st["momentum_buffer_codes"].numpy().astype(np.int64)
            off = got != want_codes
            assert np.all(margin[off] < MID_TOL)
            assert off.sum() <= max(1, MAX_FLIP_RATE * got.size * 10)
    assert worst <= 1.0, worst


def test_sgd_8bit_state_dict_loads_into_torch_sgd_and_refusals(reg):
    need("apply_momentum", {"storage": "q8s", "use_nesterov": False})
    torch.manual_seed(4)
    p = torch.nn.Parameter(torch.randn(700))
    opt = oo.SGD([p], lr=0.1, momentum=0.9, state_bits=8, min_8bit_size=0)
    for _ in range(3):
        p.grad = torch.randn(700)
        opt.step()
    sd = opt.state_dict()
    buf = sd["state"][0]["momentum_buffer"]
    assert buf.dtype == torch.float32 and buf.shape == p.shape
    st = opt.state[p]
    want = (torch.from_numpy(ref_map("dynamic", True)).float()[
        st["momentum_buffer_codes"].long()] * st["momentum_buffer_absmax"].repeat_interleave(
        BLOCK)[:700])
    assert torch.allclose(buf, want, rtol=1e-6, atol=0)
    q = torch.nn.Parameter(p.detach().clone())
    ref = torch.optim.SGD([q], lr=0.1, momentum=0.9)
    ref.load_state_dict(sd)
    assert torch.equal(ref.state[q]["momentum_buffer"], buf)
    # and back: an 8-bit SGD quantizes torch's fp32 buffer, each value within half the
    # map's widest gap (0.9/64 of the block's absmax: the top decade) of what it was (not
    # the same codes: the signed map's most negative value is -0.993, so a block whose
    # largest |value| is negative gets a smaller absmax)
    back = oo.SGD([torch.nn.Parameter(p.detach().clone())], lr=0.1, momentum=0.9,
                  state_bits=8, min_8bit_size=0)
    back.load_state_dict(ref.state_dict())
    again = back.state_dict()["state"][0]["momentum_buffer"]
    block_max = buf.abs().reshape(-1)[:512].reshape(2, BLOCK).amax(dim=1)
    bound = torch.cat([block_max.repeat_interleave(BLOCK),
                       buf.abs()[512:].amax().expand(700 - 512)]) * (0.9 / 128 + 1e-6)
    assert torch.all((again - buf).abs() <= bound)
    for kwargs, what in ((dict(momentum=0.0), "momentum > 0"),
                         (dict(momentum=0.9, dampening=0.1), "dampening 0")):
        with pytest.raises(ValueError, match=what):
            oo.SGD([p], lr=0.1, state_bits=8, min_8bit_size=0, **kwargs)


def test_500_steps_of_training_end_near_fp32_states(reg):
    """An MLP regression (4096 noisy samples, more than its 5.3k weights can memorize, so
    the final loss is a stable number rather than the chaotic tail of memorization), 500
    full-batch steps, fixed seeds: 8-bit states against torch.optim.Adam's fp32 states.
    Measured (AMD EPYC, AVX-512 and AVX2 alike): initial loss 1.63; final fp32 0.05245,
    dynamic 0.05170 (-1.4%), linear 0.05876 (+12%). Over model seeds 1, 2, 3 as well:
    dynamic -3%..+3% of fp32 (opforge's own fp32 Adam -2%..+0.3%), linear +3%..+59% (the
    linear map is the coarse one for second moments, as the paper finds). One ulp in the
    denominator (sqrt(v) times 1/sqrt(1 - beta2^t) instead of a divide, 2026-12-04) moved
    seed 7's linear run from +12% to +53% (seeds 1, 2, 3: +21%, +23%, +39%; dynamic -3%..-1%):
    a single linear trajectory is chaotic at this level. Margins: dynamic within 6% of fp32,
    linear at most 75% above it (a run that does not learn stays near the initial loss,
    30x)."""
    need_adam("dynamic", False)
    need_adam("linear", False)
    losses, initial = {}, None
    for name in ["fp32", "dynamic", "linear"]:
        torch.manual_seed(7)
        model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(),
                                    torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                    torch.nn.Linear(64, 1))
        g = torch.Generator().manual_seed(3)
        x = torch.randn(4096, 16, generator=g)
        y = (torch.sin(x[:, :1] * 2) + x[:, 1:2] * x[:, 2:3]
             + 0.3 * torch.randn(4096, 1, generator=g))
        opt = (torch.optim.Adam(model.parameters(), lr=3e-3) if name == "fp32" else
               oo.Adam(model.parameters(), lr=3e-3, state_bits=8, min_8bit_size=0, quant_map=name))
        for _ in range(500):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            if initial is None:
                initial = float(loss)
            loss.backward()
            opt.step()
        losses[name] = float(torch.nn.functional.mse_loss(model(x), y))
    print("initial loss", initial, "final losses", losses)
    assert losses["fp32"] < 0.05 * initial  # the task is learned at all
    assert abs(losses["dynamic"] / losses["fp32"] - 1) <= 0.06, losses
    assert losses["linear"] <= 1.75 * losses["fp32"], losses


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_param"])
def test_min_8bit_size_keeps_small_parameters_in_fp32(reg, fused):
    """bitsandbytes' min_8bit_size (default 4096): parameters of fewer elements keep fp32
    states and step exactly as opforge's fp32 Adam on them alone; the others exactly as an
    8-bit Adam on them alone (same kernels, same flat layouts), also after the learning rate
    changes between steps; state_dict loads into torch.optim.Adam, and load_state_dict
    quantizes only the 8-bit parameters' states."""
    need_adam("dynamic", False)
    torch.manual_seed(0)
    sizes = [4096, 4095, 5000, 17]  # at the threshold, just below, above, small
    start = [torch.randn(n) for n in sizes]
    big, small = [0, 2], [1, 3]

    def params(which):
        return [torch.nn.Parameter(start[i].clone()) for i in which]

    mixed = params(range(4))
    alone8, alone32 = params(big), params(small)
    opts = [oo.AdamW(mixed, lr=1e-2, state_bits=8, fused=fused),
            oo.AdamW(alone8, lr=1e-2, state_bits=8, min_8bit_size=0, fused=fused),
            oo.AdamW(alone32, lr=1e-2, fused=fused)]
    for step in range(1, 11):
        grads = [torch.randn(n) for n in sizes]
        for p, g in zip(mixed, grads):
            p.grad = g.clone()
        for ps, which in ((alone8, big), (alone32, small)):
            for p, i in zip(ps, which):
                p.grad = grads[i].clone()
        if step == 6:  # a scheduler's change reaches both parts
            for o in opts:
                o.param_groups[0]["lr"] = 3e-3
        for o in opts:
            o.step()
        for ps, which in ((alone8, big), (alone32, small)):
            for p, i in zip(ps, which):
                assert torch.equal(mixed[i].detach(), p.detach()), (step, sizes[i])
    if fused:  # zero_grad fills each part's flat gradient buffer; the binding holds
        fills = []
        for part in opts[0]._split(opts[0].param_groups[0]):
            fg = opts[0].group_flat(part)
            fg.zero_grad = (lambda fill: lambda: (fills.append(fill), fill()))(fg.zero_grad)
        opts[0].zero_grad()
        assert len(fills) == 2
        assert all(not p.grad.any() for p in mixed)
        assert opts[0].group_ready(opts[0].param_groups[0])
    st = opts[0].state
    for i in big:
        assert "exp_avg_codes" in st[mixed[i]] and "exp_avg" not in st[mixed[i]]
    for i, p in zip(small, alone32):
        assert "exp_avg_codes" not in st[mixed[i]]
        assert torch.equal(st[mixed[i]]["exp_avg"], opts[2].state[p]["exp_avg"])
        assert torch.equal(st[mixed[i]]["exp_avg_sq"], opts[2].state[p]["exp_avg_sq"])
    sd = opts[0].state_dict()
    twin = params(range(4))
    torch.optim.AdamW(twin, lr=1e-2).load_state_dict(sd)
    back = oo.AdamW(twin, lr=1e-2, state_bits=8, fused=fused)
    back.load_state_dict(sd)
    for i in range(4):
        state = back.state[twin[i]]
        assert ("exp_avg_codes" in state) == (i in big), sizes[i]
        if i in small:
            assert torch.equal(state["exp_avg"], st[mixed[i]]["exp_avg"])


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_param"])
def test_param_groups_override_state_bits_and_min_8bit_size(reg, fused):
    """A group's own state_bits=32 keeps its parameters' states in fp32 (bitsandbytes'
    override_config for an embedding), its own min_8bit_size moves its threshold; each group
    steps bit for bit as an optimizer over it alone, and a checkpoint loads back with the
    same split. Bad group values are refused naming the group."""
    need_adam("dynamic", False)
    torch.manual_seed(2)
    start = [torch.randn(n) for n in (5000, 6000, 300)]

    def params():
        return [torch.nn.Parameter(t.clone()) for t in start]

    mixed = params()
    groups = [{"params": [mixed[0]]}, {"params": [mixed[1]], "state_bits": 32},
              {"params": [mixed[2]], "min_8bit_size": 0}]
    opt = oo.Adam(groups, lr=1e-2, state_bits=8, fused=fused)
    alone = params()
    twins = [oo.Adam([alone[0]], lr=1e-2, state_bits=8, fused=fused),
             oo.Adam([alone[1]], lr=1e-2, fused=fused),
             oo.Adam([alone[2]], lr=1e-2, state_bits=8, min_8bit_size=0, fused=fused)]
    for _ in range(5):
        grads = [torch.randn(t.shape) for t in start]
        for ps in (mixed, alone):
            for p, g in zip(ps, grads):
                p.grad = g.clone()
        opt.step()
        for t in twins:
            t.step()
    for a, b in zip(mixed, alone):
        assert torch.equal(a, b)
    eight = [True, False, True]
    assert [("exp_avg_codes" in opt.state[p]) for p in mixed] == eight
    sd = opt.state_dict()
    assert [g.get("state_bits") for g in sd["param_groups"]] == [None, 32, None]
    twin = params()
    back = oo.Adam([{"params": [twin[0]]}, {"params": [twin[1]], "state_bits": 32},
                    {"params": [twin[2]], "min_8bit_size": 0}], lr=1e-2, state_bits=8)
    back.load_state_dict(sd)
    assert [("exp_avg_codes" in back.state[p]) for p in twin] == eight
    assert torch.equal(back.state[twin[1]]["exp_avg"], opt.state[mixed[1]]["exp_avg"])
    p = [torch.nn.Parameter(torch.zeros(3))]
    with pytest.raises(ValueError, match="group 0's state_bits must be 32 or 8, got 16"):
        oo.Adam([{"params": p, "state_bits": 16}], state_bits=8)
    with pytest.raises(ValueError, match="group 0 asks for state_bits=8, the optimizer has 32"):
        oo.Adam([{"params": p, "state_bits": 8}])
    with pytest.raises(ValueError, match="group 0's min_8bit_size must be an int >= 0, got -5"):
        oo.Adam([{"params": p, "min_8bit_size": -5}], state_bits=8)


def test_bad_arguments(reg):
    p = [torch.nn.Parameter(torch.zeros(3))]
    with pytest.raises(ValueError, match="state_bits must be 32 or 8, got 4"):
        oo.Adam(p, state_bits=4)
    with pytest.raises(ValueError, match="state_bits must be 32 or 8, got '8'"):
        oo.AdamW(p, state_bits="8")
    with pytest.raises(ValueError, match="quant_map must be 'dynamic' or 'linear', got 'nf4'"):
        oo.AdamW(p, state_bits=8, min_8bit_size=0, quant_map="nf4")
    with pytest.raises(ValueError, match="state_bits must be 32 or 8, got 16"):
        oo.Lion(p, state_bits=16)
    for bad in (-1, "4096", 4096.0, True):
        with pytest.raises(ValueError, match=f"min_8bit_size must be an int >= 0, got {bad!r}"):
            oo.SGD(p, lr=0.1, momentum=0.9, state_bits=8, min_8bit_size=bad)
    with pytest.raises(ValueError, match="SGD: group 0 has float16 parameters .*no f16mq8s"):
        oo.SGD([torch.nn.Parameter(torch.zeros(3, dtype=torch.float16))], lr=0.1,
               momentum=0.9, state_bits=8, min_8bit_size=0, master_weights=True)
    with pytest.raises(ValueError, match="parameter 0 of group 0 is torch.float64"):
        oo.Adam([torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))], state_bits=8,
                min_8bit_size=0)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        oo.AdamW(p, lr=-1, state_bits=8, min_8bit_size=0)
    # torch's refusal of an unordered set of parameters, and a generator read once
    for bits in (8, 32):
        opt = oo.Adam([torch.nn.Parameter(torch.zeros(3))], state_bits=bits)
        with pytest.raises(TypeError, match="ordered collections"):
            opt.add_param_group({"params": {torch.nn.Parameter(torch.zeros(2))}})
        opt.add_param_group({"params": (torch.nn.Parameter(torch.zeros(n)) for n in (2, 5))})
        assert [p.numel() for p in opt.param_groups[1]["params"]] == [2, 5]
    # A gradient refused before any state exists or a parameter moves.
    need_adam("dynamic", False)
    q, r = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))
    opt = oo.Adam([q, r], state_bits=8, min_8bit_size=0)
    q.grad, r.grad = torch.ones(3), torch.ones(2).to_sparse()
    with pytest.raises(RuntimeError, match="parameter 1 of group 0 has a sparse gradient"):
        opt.step()
    assert torch.equal(q.detach(), torch.ones(3)) and not opt.state
    # A checkpoint whose state does not fit its parameter.
    opt = oo.Adam([q], state_bits=8, min_8bit_size=0)
    sd = opt.state_dict()
    sd["state"] = {0: {"step": torch.tensor(1.0), "exp_avg": torch.zeros(700),
                       "exp_avg_sq": torch.zeros(700)}}
    with pytest.raises(ValueError, match="load_state_dict: state 'exp_avg' of parameter 0 "
                                         "has 700 elements, the parameter 3"):
        opt.load_state_dict(sd)
    assert not opt.state


@pytest.mark.parametrize("cls,keys", [(oo.Adam8bit, ["exp_avg", "exp_avg_sq"]),
                                      (oo.Lion8bit, ["exp_avg"]),
                                      (oo.SGD8bit, ["momentum_buffer"])])
def test_bitsandbytes_checkpoints_load_through_their_own_map(reg, cls, keys):
    """A bitsandbytes 8-bit optimizer's state dict (state1/state2 codes, qmap1/qmap2,
    absmax1/absmax2 per 256, an int step, its own param group keys): each state dequantized
    with the checkpoint's map and absmaxes, then held in opforge's codes, within half of the
    map's widest step of each block's absmax; a per-tensor (non-blockwise) one is refused."""
    n = 5000
    g = torch.Generator().manual_seed(11)
    kwargs = dict(lr=0.1, momentum=0.9) if cls is oo.SGD8bit else {}
    opt = cls([torch.nn.Parameter(torch.randn(n, generator=g))], **kwargs)
    saved, want = {"step": 5}, {}
    for k, key in enumerate(keys):
        table = torch.from_numpy(ref_map("dynamic", k == 0)).float()
        codes = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)
        absmax = torch.rand(math.ceil(n / BLOCK), generator=g) + 0.1
        saved.update({f"state{k + 1}": codes, f"qmap{k + 1}": table, f"absmax{k + 1}": absmax})
        want[key] = (table[codes.long()] * absmax.repeat_interleave(BLOCK)[:n], table, absmax)
    group = dict(opt.param_groups[0], params=[0], optim_bits=32, percentile_clipping=100,
                 block_wise=True, max_unorm=0.0, skip_zeros=False, is_paged=False)
    opt.load_state_dict({"state": {0: saved}, "param_groups": [group]})
    assert "optim_bits" not in opt.param_groups[0] and "is_paged" not in opt.param_groups[0]
    got = opt.state_dict()["state"][0]
    for key, (values, table, absmax) in want.items():
        half_step = float((table[1:] - table[:-1]).max()) / 2
        bound = absmax.repeat_interleave(BLOCK)[:n] * (half_step + 1e-6)
        assert bool(((got[key] - values).abs() <= bound).all()), key
    if "step" in got:
        assert float(got["step"]) == 5
    clipped = dict(group, percentile_clipping=5)
    with pytest.raises(ValueError, match="param group 0's percentile_clipping=5 is not impl"):
        opt.load_state_dict({"state": {0: dict(saved)}, "param_groups": [clipped]})
    saved["max1"] = torch.ones(1)
    with pytest.raises(ValueError, match="'max1'.*per-tensor"):
        opt.load_state_dict({"state": {0: saved}, "param_groups": [group]})


@pytest.mark.parametrize("cls", [oo.AdamW8bit, oo.Adam8bit, oo.Lion8bit, oo.SGD8bit])
def test_a_nonfinite_gradient_element_is_skipped_not_its_block(reg, cls):
    """Without loss scaling's skip, an inf or NaN gradient element counts as 0 (as
    torch.nan_to_num(grad, 0, 0, 0)): its block's absmax stays finite, so the block's other
    255 elements train on (they would decode to NaN for good), and so does that element,
    exactly as a twin fed 0 there."""
    kwargs = dict(lr=0.01, momentum=0.9) if cls is oo.SGD8bit else {}
    g = torch.Generator().manual_seed(12)
    start = torch.randn(600, generator=g)
    grads = [torch.randn(600, generator=g) for _ in range(3)]
    p, twin = torch.nn.Parameter(start.clone()), torch.nn.Parameter(start.clone())
    opt, twin_opt = (cls([x], min_8bit_size=0, **kwargs) for x in (p, twin))
    for step, grad in enumerate(grads):
        bad, zeroed = grad.clone(), grad.clone()
        if step == 1:
            bad[10], bad[300] = float("nan"), float("-inf")
            zeroed[10] = zeroed[300] = 0.0
        p.grad, twin.grad = bad, zeroed
        opt.step()
        twin_opt.step()
    assert torch.equal(p.detach(), twin.detach()) and bool(torch.isfinite(p).all())
    state = opt.state[p]
    for key in [k for k in state if k.endswith("_absmax")]:
        assert bool(torch.isfinite(state[key]).all()), key
    for key, value in opt.state_dict()["state"][0].items():
        if torch.is_tensor(value) and value.numel() == 600:
            assert bool(torch.isfinite(value).all()), key
