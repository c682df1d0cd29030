"""FP8 gradients through the Python package: uint8 arrays and tensors carry OCP FP8 bits
where a descriptor wants float8_e4m3fn / float8_e5m2 (NumPy and torch 1.13 have no such
dtype). opforge.fp8's decode against the spec's value formula for every code and its encode
against a nearest-value search over those values (ties to the even code, saturation); AdamW
(e4m3g, e5m2g) against an fp64 NumPy AdamW on the values the spec's formula gives each code,
in place, at odd sizes, and a torch gradient encoded with an amax scale; refusals name the
argument."""

import math

import numpy as np
import pytest

import opforge

SIZES = [1, 5, 17, 1000, 65543]
FORMATS = {"e4m3g": ("float8_e4m3fn", 3, 7), "e5m2g": ("float8_e5m2", 2, 15)}
SCALARS = dict(lr=1e-2, beta1=0.9, beta2=0.999, epsilon=1e-8, weight_decay=0.1, step=3.0)
RTOL, ATOL = 2e-6, 1e-7  # one fp32 step: a few ulps of var, and of the update near zero


def fp8_values(mantissa, bias):
    """The value of every code, from the spec: (-1)^S 2^(E-bias) (1 + M/2^m), subnormals
    2^(1-bias) M/2^m; E4M3's S.1111.111 NaN, E5M2's exponent 31 inf (M = 0) or NaN."""
    out = np.empty(256)
    for c in range(256):
        s, e, m = c >> 7, (c >> mantissa) & ((1 << (7 - mantissa)) - 1), c & ((1 << mantissa) - 1)
        if mantissa == 3 and e == 15 and m == 7:
            v = math.nan
        elif mantissa == 2 and e == 31:
            v = math.inf if m == 0 else math.nan
        elif e == 0:
            v = 2.0 ** (1 - bias) * m / 2 ** mantissa
        else:
            v = 2.0 ** (e - bias) * (1 + m / 2 ** mantissa)
        out[c] = -v if s else v
    return out


def nearest_codes(x, mantissa, bias):
    """The reference encoding of float64 x: the finite code whose value is nearest, ties to the
    even code; beyond the largest finite value, that value; inf -> E5M2 inf / E4M3 NaN."""
    values = fp8_values(mantissa, bias)
    pos = [c for c in range(128) if np.isfinite(values[c])]
    table = values[pos]
    out = np.empty(x.shape, np.uint8)
    for i, xi in enumerate(x):
        sign = 0x80 if math.copysign(1, xi) < 0 else 0
        if math.isnan(xi):
            out[i] = sign | 0x7F
            continue
        if math.isinf(xi):
            out[i] = sign | (0x7F if mantissa == 3 else 0x7C)
            continue
        d = np.abs(table - abs(xi))
        best = np.flatnonzero(d == d.min())
        out[i] = sign | pos[best[0] if len(best) == 1 or pos[best[0]] % 2 == 0 else best[1]]
    return out


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_codec_matches_the_spec(fmt):
    mantissa, bias = {"e4m3": (3, 7), "e5m2": (2, 15)}[fmt]
    values = fp8_values(mantissa, bias)
    codes = np.arange(256, dtype=np.uint8)
    got = opforge.fp8.decode(codes, fmt)
    assert got.dtype == np.float32
    assert np.array_equal(np.isnan(got), np.isnan(values))
    ok = ~np.isnan(values)
    assert np.array_equal(got[ok].astype(np.float64), values[ok])
    # Random magnitudes across the whole range, the midpoints between neighbours (ties), and
    # the specials.
    rng = np.random.default_rng(3)
    x = rng.choice([-1.0, 1.0], 3000) * np.exp2(rng.uniform(-20, 17, 3000))
    finite = values[:127][np.isfinite(values[:127])]
    mids = (finite[1:] + finite[:-1]) / 2
    x = np.concatenate([x, mids, -mids, [0.0, -0.0, 1e9, -1e9, math.inf, -math.inf, math.nan]])
    x = x.astype(np.float32)
    got = opforge.fp8.encode(x, fmt)
    want = nearest_codes(x.astype(np.float64), mantissa, bias)
    assert got.dtype == np.uint8 and got.shape == x.shape
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(float(x[i]), int(got[i]), int(want[i])) for i in bad[:5]]
    # scale multiplies before rounding; torch tensors in, torch tensors out
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x[:3000].copy())
    bits = opforge.fp8.encode(t, fmt, scale=0.5)
    assert bits.dtype == torch.uint8
    assert np.array_equal(bits.numpy(), nearest_codes(x[:3000].astype(np.float64) * 0.5,
                                                      mantissa, bias))
    assert opforge.fp8.decode(bits, fmt).dtype == torch.float32
    # A finite value whose product with the scale overflows fp32 saturates as well.
    huge = np.array([1e38, -1e38, 3e38], dtype=np.float32)
    top = finite.max()  # the largest finite FP8 value
    assert np.array_equal(opforge.fp8.encode(huge, fmt, scale=10.0),
                          nearest_codes(np.array([top, -top, top]), mantissa, bias))


def test_codec_refuses_bad_arguments_by_name():
    x = np.ones(4, np.float32)
    with pytest.raises(opforge.OpforgeError, match="FP8 format 'e3m4'"):
        opforge.fp8.encode(x, "e3m4")
    with pytest.raises(opforge.OpforgeError, match="scale must be positive"):
        opforge.fp8.encode(x, "e4m3", scale=0.0)
    with pytest.raises(opforge.OpforgeError, match="encode: x: a C-contiguous numpy float32"):
        opforge.fp8.encode(np.ones(4), "e4m3")
    with pytest.raises(opforge.OpforgeError, match="decode: bits: a C-contiguous numpy uint8"):
        opforge.fp8.decode(x, "e5m2")


def test_torch_gradient_encoded_with_an_amax_scale_steps_adamw(reg):
    """The recipe of opforge.fp8's docstring: a torch gradient, scale = 448 / amax, the
    kernel given 1 / scale; the step against fp64 AdamW on the decoded gradient."""
    torch = pytest.importorskip("torch")
    try:
        k = reg.select("apply_adamw", {"storage": "e4m3g"})
    except opforge.OpforgeError as e:
        pytest.skip(f"no apply_adamw e4m3g in the registry: {e}")
    g = torch.Generator().manual_seed(2)
    var, grad = torch.randn(1000, generator=g), torch.randn(1000, generator=g) * 1e-3
    m, v = torch.zeros(1000), torch.zeros(1000)
    scale = 448 / float(grad.abs().max())
    bits = opforge.fp8.encode(grad, "e4m3", scale=scale)
    seen = opforge.fp8.decode(bits, "e4m3").double() / scale  # what the kernel should use
    assert float((seen - grad.double()).abs().max()) <= 2 ** -4 * float(grad.abs().max())
    want = adamw_ref(var.double().numpy(), m.double().numpy(), v.double().numpy(),
                     seen.numpy(), dict(SCALARS, step=1.0))
    k.call(dict(var=var, m=m, v=v, grad=bits, grad_scale_inv=1 / scale,
                **dict(SCALARS, step=1.0)))
    for name, got, w in zip(("var", "m", "v"), (var, m, v), want):
        err = np.abs(got.numpy() - w) - (ATOL + RTOL * np.abs(w))
        assert err.max() <= 0, (name, int(err.argmax()))


def adamw_ref(var, m, v, g, s):
    """torch.optim.AdamW's step in fp64 (decoupled decay, bias corrections at `step`), from
    the fp32 scalars the kernel reads (0.999 in fp32 makes 1 - beta2 1.3e-5 off fp64's)."""
    s = {name: float(np.float32(x)) for name, x in s.items()}
    b1, b2, t = s["beta1"], s["beta2"], s["step"]
    var = var * (1 - s["lr"] * s["weight_decay"])
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    denom = np.sqrt(v) / math.sqrt(1 - b2 ** t) + s["epsilon"]
    return var - s["lr"] / (1 - b1 ** t) * m / denom, m, v


@pytest.mark.parametrize("storage", list(FORMATS))
@pytest.mark.parametrize("as_torch", [False, True], ids=["numpy", "torch"])
def test_adamw_step_matches_fp64_on_the_codes_values(reg, storage, as_torch):
    dtype, mantissa, bias = FORMATS[storage]
    try:
        k = reg.select("apply_adamw", {"storage": storage})
    except opforge.OpforgeError as e:
        pytest.skip(f"no apply_adamw {storage} in the registry: {e}")
    assert [i["dtype"] for i in k.descriptor["inputs"] if i["name"] == "grad"] == [dtype]
    values = fp8_values(mantissa, bias)
    finite = np.flatnonzero(np.isfinite(values))
    rng = np.random.default_rng(7)
    for n in SIZES:
        var = rng.uniform(-1, 1, n).astype(np.float32)
        m = rng.uniform(-0.1, 0.1, n).astype(np.float32)
        v = rng.uniform(0, 0.01, n).astype(np.float32)
        codes = rng.choice(finite, n).astype(np.uint8)
        scale_inv = 2.0 ** -8
        want = adamw_ref(var.astype(np.float64), m.astype(np.float64), v.astype(np.float64),
                         values[codes] * scale_inv, SCALARS)
        args = dict(var=var, m=m, v=v, grad=codes)
        if as_torch:
            torch = pytest.importorskip("torch")
            args = {name: torch.from_numpy(x) for name, x in args.items()}
        k.call(dict(args, grad_scale_inv=scale_inv, **SCALARS))
        for name, got, w in zip(("var", "m", "v"), (var, m, v), want):
            err = np.abs(got - w) - (ATOL + RTOL * np.abs(w))
            assert err.max() <= 0, (storage, n, name, int(err.argmax()))


def test_a_float32_gradient_or_a_bad_scale_is_refused_by_name(reg):
    try:
        k = reg.select("apply_adamw", {"storage": "e4m3g"})
    except opforge.OpforgeError as e:
        pytest.skip(f"no apply_adamw e4m3g in the registry: {e}")
    n = 17
    var = np.ones(n, np.float32)
    base = dict(var=var, m=np.zeros(n, np.float32), v=np.zeros(n, np.float32), **SCALARS)
    with pytest.raises(opforge.OpforgeError, match="grad"):
        k.call(dict(base, grad=np.ones(n, np.float32), grad_scale_inv=1.0))
    with pytest.raises(opforge.OpforgeError, match="grad_scale_inv"):
        k.call(dict(base, grad=np.full(n, 0x38, np.uint8), grad_scale_inv=0.0))
    assert np.all(var == 1)
