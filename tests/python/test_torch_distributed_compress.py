"""opforge.torch.distributed.compress against NumPy references written from the formulas
(module docstring): s = grad + err in fp32; c = s rounded to nearest even (bf16 from the two
neighbouring bf16 values in fp64; fp16 by NumPy's IEEE float16 cast); err = s - c, 0 where c
is not finite. Bit for bit, over several error-feedback steps, odd sizes, every ISA the host
runs; decompression through accumulate_grad; the refusals. The 1-bit code (onebit_compress,
onebit_decompress) against NumPy fp64: packing (numpy.packbits, little bit order), the
chunks' scales (mean |s|), the error fed back over three rounds, the K-code average."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from opforge.torch.distributed import compress as cz  # noqa: E402

SIZES = [1, 5, 17, 1000, 65543]


def host_isas(reg):
    out = []
    for isa in ("avx512", "avx2"):
        try:
            reg.select("compress_ef", {"format": "bf16"}, isa)
        except Exception:  # an ISA this CPU (or registry) lacks
            continue
        out.append(isa)
    assert "avx2" in out
    return out


@pytest.fixture(scope="module")
def isas(reg):
    return host_isas(reg)


def bf16_bits_ref(x):
    """fp32 -> bf16 bits, round to nearest even: the nearer of the two bf16 neighbours of x
    (truncation and one step up in magnitude), compared in fp64; ties to the even one; past
    the largest bf16 the upper neighbour is 2^128 (inf). NaN: any NaN (checked as NaN)."""
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32)
    lo = (u >> 16).astype(np.uint32)
    hi = lo + 1
    lo_v = np.abs((lo << 16).view(np.float32).astype(np.float64))
    hi_v = np.abs((hi << 16).view(np.float32).astype(np.float64))
    hi_v = np.where((hi & 0x7fff) == 0x7f80, 2.0 ** 128, hi_v)
    a = np.abs(x.astype(np.float64))
    d_lo, d_hi = a - lo_v, hi_v - a
    up = (d_hi < d_lo) | ((d_hi == d_lo) & (lo & 1 == 1))
    out = np.where(up, hi, lo).astype(np.uint16)
    out = np.where(np.isinf(x), lo.astype(np.uint16), out)
    return np.where(np.isnan(x), np.uint16(0x7fc0), out)


def widen(bits, fmt):
    bits = np.asarray(bits, np.uint16)
    if fmt == "f16":
        return bits.view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def round_ref(s, fmt):
    """bits of s (fp32) in the format."""
    if fmt == "f16":
        with np.errstate(over="ignore"):
            return s.astype(np.float16).view(np.uint16)
    return bf16_bits_ref(s)


def compress_ref(grad, err, fmt):
    """(c bits, new err) from the formula."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = (grad.astype(np.float32) + err.astype(np.float32)).astype(np.float32)
        c = round_ref(s, fmt)
        w = widen(c, fmt)
        e = np.where(np.isfinite(w), s - w, np.float32(0)).astype(np.float32)
    return c, e


def bits_of(t):
    return t.view(torch.int16).numpy().view(np.uint16).copy()


def assert_same_bits(c, want, fmt):
    got_nan, want_nan = np.isnan(widen(c, fmt)), np.isnan(widen(want, fmt))
    assert np.array_equal(got_nan, want_nan)
    bad = np.flatnonzero((c != want) & ~want_nan)
    assert bad.size == 0, f"first differences at {bad[:5]}: {c[bad[:5]]} vs {want[bad[:5]]}"


@pytest.mark.parametrize("fmt", ["bf16", "f16"])
@pytest.mark.parametrize("n", SIZES)
def test_error_feedback_steps_match_the_formula(reg, isas, fmt, n):
    rng = np.random.default_rng(n)
    for isa in isas:
        err = torch.zeros(n)
        err_ref = np.zeros(n, np.float32)
        for step in range(4):
            g = rng.standard_normal(n).astype(np.float32) * np.float32(10.0 ** (step - 2))
            if fmt == "f16":
                g[::7] *= np.float32(2.0 ** -18)  # f16 subnormals
            c = cz.compress_ef(torch.from_numpy(g), err, format=fmt, registry=reg, isa=isa)
            assert c.dtype == cz._FORMATS[fmt] and c.shape == (n,)
            want_c, err_ref = compress_ref(g, err_ref, fmt)
            assert_same_bits(bits_of(c), want_c, fmt)
            assert np.array_equal(err.numpy(), err_ref), (isa, step)


@pytest.mark.parametrize("fmt", ["bf16", "f16"])
def test_out_given_and_shapes_kept(reg, isas, fmt):
    g = torch.randn(3, 5, 7)
    err = torch.zeros(3, 5, 7)
    out = torch.full((3, 5, 7), 7.0, dtype=cz._FORMATS[fmt])
    for isa in isas:
        r = cz.compress_ef(g, err.clone(), out, format=fmt, registry=reg, isa=isa)
        assert r is out
        want, _ = compress_ref(g.numpy().ravel(), np.zeros(105, np.float32), fmt)
        assert_same_bits(bits_of(out).ravel(), want, fmt)


def run_pairs(reg, isa, fmt, pairs):
    g = np.array([p[0] for p in pairs], np.float32)
    e = np.array([p[1] for p in pairs], np.float32)
    # 37 elements: the vector body and the tail both see every case
    g, e = np.resize(g, 37), np.resize(e, 37)
    err = torch.from_numpy(e.copy())
    c = cz.compress_ef(torch.from_numpy(g), err, format=fmt, registry=reg, isa=isa)
    want_c, want_e = compress_ref(g, e, fmt)
    assert_same_bits(bits_of(c), want_c, fmt)
    assert np.array_equal(err.numpy(), want_e)
    assert np.array_equal(np.signbit(err.numpy()), np.signbit(want_e))
    return bits_of(c), err.numpy()


def test_bf16_ties_to_even(reg, isas):
    pairs = [(1.0, 2.0 ** -8), (1.0 + 2.0 ** -7, 2.0 ** -8), (-1.0, -(2.0 ** -8)),
             (1.5, 2.0 ** -8 + 2.0 ** -20), (2.0 ** -140, 2.0 ** -141)]
    for isa in isas:
        c, err = run_pairs(reg, isa, "bf16", pairs)
        assert c[0] == 0x3f80 and err[0] == 2.0 ** -8  # tie down to the even 1.0
        assert c[1] == 0x3f82 and err[1] == -(2.0 ** -8)  # tie up to the even 1 + 2^-6
        assert c[3] == 0x3fc1  # just above the tie: up


def test_f16_overflow_and_subnormals(reg, isas):
    pairs = [(65504.0, 0.0), (65504.0, 16.0), (1e5, 0.0), (-1e5, 1.0), (2.0 ** -24, 0.0),
             (2.0 ** -25, 0.0), (2.0 ** -25, 2.0 ** -24), (1.0, 2.0 ** -11)]
    for isa in isas:
        c, err = run_pairs(reg, isa, "f16", pairs)
        assert c[0] == 0x7bff and err[0] == 0
        assert c[1] == 0x7c00 and err[1] == 0  # 65520: the tie above the largest: inf
        assert c[2] == 0x7c00 and c[3] == 0xfc00 and err[2] == 0 and err[3] == 0
        assert c[4] == 0x0001 and c[5] == 0 and err[5] == 2.0 ** -25  # subnormal; tie to 0
        assert c[6] == 0x0002  # 3 * 2^-25: tie to the even 2^-23


@pytest.mark.parametrize("fmt", ["bf16", "f16"])
def test_nan_and_inf_travel_in_c_and_reset_err(reg, isas, fmt):
    inf, nan = float("inf"), float("nan")
    pairs = [(nan, 0.5), (inf, -1.0), (-inf, 0.0), (1.0, nan), (3e38, 3e38), (0.25, 0.0)]
    for isa in isas:
        c, err = run_pairs(reg, isa, fmt, pairs)
        w = widen(c, fmt)
        assert np.isnan(w[0]) and np.isnan(w[3])
        assert w[1] == inf and w[2] == -inf and w[4] == inf
        assert np.all(err[:5] == 0) and w[5] == 0.25


@pytest.mark.parametrize("fmt", ["bf16", "f16"])
def test_decompress_accumulate_averages_ranks(reg, isas, fmt):
    """K ranks' compressed gradients averaged into fp32 with scale 1/K (accumulate_grad): each
    call is one fp32 rounding of acc + scale * c (fma), or two without one."""
    n, k = 1003, 4
    rng = np.random.default_rng(3)
    cs = [torch.from_numpy(rng.standard_normal(n).astype(np.float32)).to(cz._FORMATS[fmt])
          for _ in range(k)]
    scale = np.float32(1.0 / k)
    for isa in isas:
        acc = torch.zeros(n)
        ref = np.zeros(n, np.float64)
        for c in cs:
            assert cz.decompress_accumulate(acc, c, scale, registry=reg, isa=isa) is acc
            ref = (ref + c.float().numpy().astype(np.float64) * np.float64(scale))
            ref = ref.astype(np.float32).astype(np.float64)  # one rounding per call
        assert np.allclose(acc.numpy(), ref, rtol=2.0 ** -22, atol=0)


def test_refusals_name_the_argument(reg):
    g, e = torch.zeros(8), torch.zeros(8)
    with pytest.raises(TypeError, match="^grad:"):
        cz.compress_ef(g.double(), e, registry=reg)
    with pytest.raises(ValueError, match="^err:"):
        cz.compress_ef(g, torch.zeros(9), registry=reg)
    with pytest.raises(ValueError, match="^grad:"):
        cz.compress_ef(torch.zeros(8, 2).t(), torch.zeros(2, 8), registry=reg)
    with pytest.raises(TypeError, match="^out:"):
        cz.compress_ef(g, e, torch.zeros(8, dtype=torch.float16), format="bf16", registry=reg)
    with pytest.raises(ValueError, match="^format:"):
        cz.compress_ef(g, e, format="fp8", registry=reg)
    with pytest.raises(TypeError, match="^c:"):
        cz.decompress_accumulate(g, torch.zeros(8), 0.5, registry=reg)
    with pytest.raises(ValueError, match="^c:"):
        cz.decompress_accumulate(g, torch.zeros(9, dtype=torch.bfloat16), 0.5, registry=reg)
    with pytest.raises(TypeError, match="^acc:"):
        cz.decompress_accumulate(g.half(), torch.zeros(8, dtype=torch.bfloat16), 0.5,
                                 registry=reg)


# (n, chunk): one word, one chunk of several words, 17 chunks, the parallel path (G * C >=
# 32768) with a ragged last block of chunks.
ONEBIT = [(32, 32), (96, 32), (17 * 64, 64), (3 * 2048, 2048), (33 * 2048, 2048)]


def onebit_ref(s, chunk):
    """(packed bytes, scales, decoded) of fp64 s: 1 where s >= 0, scale = mean |s|."""
    c = s.reshape(-1, chunk)
    scale = np.abs(c).mean(axis=1)
    decoded = np.where(c >= 0, 1.0, -1.0) * scale[:, None]
    return np.packbits(s >= 0, bitorder="little"), scale, decoded.reshape(-1)


@pytest.mark.parametrize("n,chunk", ONEBIT)
def test_onebit_code_and_error_feedback(reg, isas, n, chunk):
    for isa in isas:
        rng = np.random.default_rng(n)
        err, err_next = torch.zeros(n), torch.empty(n)
        want_err = np.zeros(n)
        for step in range(3):
            x = rng.standard_normal(n).astype(np.float32)
            x[::7] = 0.0  # zeros count as positive
            x[1::11] = -0.0  # so does -0 (s >= 0)
            if step == 0:
                err.copy_(torch.from_numpy(-x[:n]))  # s = x - x = +0 exactly: positive
            bits, scale = cz.onebit_compress(torch.from_numpy(x), err, err_next, chunk,
                                             registry=reg, isa=isa)
            s = x.astype(np.float64) + err.numpy()
            want_bits, want_scale, decoded = onebit_ref(s, chunk)
            np.testing.assert_array_equal(bits.view(torch.uint8).numpy(), want_bits,
                                          err_msg=f"{isa} step {step}")
            np.testing.assert_allclose(scale.numpy(), want_scale, rtol=2e-6, atol=0)
            # s - decoded cancels where |s| is near the scale: atol of a few ulp of it.
            np.testing.assert_allclose(err_next.numpy(), s - decoded, rtol=2e-6,
                                       atol=4e-7 * max(1.0, want_scale.max()))
            out = cz.onebit_decompress(bits, scale, chunk, registry=reg, isa=isa)
            np.testing.assert_allclose(out.numpy(), decoded, rtol=1e-6, atol=0)
            err, err_next = err_next, err


@pytest.mark.parametrize("codes", [1, 2, 3, 4])
def test_onebit_decompress_averages_codes(reg, isas, codes):
    n, chunk = 5 * 64, 64
    rng = np.random.default_rng(codes)
    words = rng.integers(-2 ** 31, 2 ** 31, size=(codes, n // 32), dtype=np.int64)
    bits = torch.from_numpy(words.astype(np.int32))
    scale = torch.from_numpy(rng.uniform(0.1, 3.0, (codes, n // chunk)).astype(np.float32))
    signs = np.unpackbits(bits.numpy().view(np.uint8), axis=1, bitorder="little")
    want = (np.where(signs == 1, 1.0, -1.0).reshape(codes, -1, chunk)
            * scale.numpy()[:, :, None].astype(np.float64)).sum(axis=0).reshape(-1) / codes
    for isa in isas:
        out = torch.full((n,), 7.0)
        cz.onebit_decompress(bits, scale, chunk, out, weight=1.0 / codes, registry=reg, isa=isa)
        # K fp32 terms of size <= 3 that may cancel: atol in ulps of the largest.
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=3e-7 * codes,
                                   err_msg=isa)


def test_onebit_refusals_name_the_argument(reg):
    x, e, o = torch.zeros(64), torch.zeros(64), torch.zeros(64)
    with pytest.raises(ValueError, match="chunk: expected a positive multiple of 32"):
        cz.onebit_compress(x, e, o, 48, registry=reg)
    with pytest.raises(ValueError, match="x: 64 elements are not whole chunks of 128"):
        cz.onebit_compress(x, e, o, 128, registry=reg)
    with pytest.raises(ValueError, match="err_out: overlaps err"):
        cz.onebit_compress(x, e, e, 32, registry=reg)
    with pytest.raises(ValueError, match="err: expected shape"):
        cz.onebit_compress(x, torch.zeros(32), o, 32, registry=reg)
    with pytest.raises(TypeError, match="bits: expected dtype torch.int32"):
        cz.onebit_compress(x, e, o, 32, bits=torch.zeros(8, dtype=torch.uint8), registry=reg)
    bits, scale = cz.onebit_compress(x, e, o, 32, registry=reg)
    with pytest.raises(ValueError, match="scale: expected 2 elements"):
        cz.onebit_decompress(bits, torch.zeros(3), 32, registry=reg)
    with pytest.raises(ValueError, match="out: expected 64 elements"):
        cz.onebit_decompress(bits, scale, 32, torch.zeros(65), registry=reg)
    with pytest.raises(ValueError, match="bits, scale: expected"):
        cz.onebit_decompress(bits.view(1, 1, -1), scale, 32, registry=reg)
