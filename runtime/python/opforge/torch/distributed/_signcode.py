"""1-bit Adam's sign code in torch ops (until its DSL kernels exist, see the closing notes of
issue 19): per chunk of `chunk` elements of s = x + err, one fp32 scale mean(|s|) (the
least-squares scale of a sign code; DeepSpeed uses the RMS) and one bit per element (1 where
s >= 0), packed 8 per byte, element 8 i + j in bit j of byte i (numpy.packbits(...,
bitorder="little")); err = s - scale * (bit ? 1 : -1), the error fed back next time."""

import torch

_WEIGHTS = 1 << torch.arange(8, dtype=torch.int32)  # bit j of a byte


def _check(chunk, n):
    if chunk < 8 or chunk % 8 or n % chunk:
        raise ValueError(f"1-bit code: {n} elements in chunks of {chunk}: the chunk must be a "
                         "multiple of 8 that divides the length")


def onebit_compress_ef(x, err, chunk, bits, scale):
    """bits (uint8, n/8), scale (fp32, n/chunk) of s = x + err; err updated in place."""
    _check(chunk, x.numel())
    s = torch.add(x, err).view(-1, chunk)
    torch.mean(s.abs(), dim=1, out=scale)
    positive = s >= 0
    bits.copy_((positive.view(-1, 8).to(torch.int32) * _WEIGHTS).sum(dim=1))
    sign = positive.to(torch.float32).mul_(2).sub_(1)
    err.view(-1, chunk).copy_(s.sub_(sign.mul_(scale[:, None])))
    return bits, scale


def onebit_decompress(bits, scale, chunk, out, accumulate=False, weight=1.0):
    """out (+)= weight * scale[chunk] * (bit ? 1 : -1)."""
    _check(chunk, out.numel())
    b = (bits.to(torch.int32)[:, None] >> torch.arange(8, dtype=torch.int32)) & 1
    value = b.view(-1, chunk).to(torch.float32).mul_(2).sub_(1).mul_(
        (scale * weight)[:, None]).view(-1)
    if accumulate:
        out.add_(value)
    else:
        out.copy_(value)
    return out
