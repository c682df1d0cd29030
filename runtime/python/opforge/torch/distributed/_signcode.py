"""1-bit Adam's sign code in torch ops (until its DSL kernels exist, see the closing notes of
issue 19): per chunk of `chunk` elements of s = x + err, one fp32 scale mean(|s|) (the
least-squares scale of a sign code; DeepSpeed uses the RMS) and one bit per element (1 where
s >= 0), packed 8 per byte, element 8 i + j in bit j of byte i (numpy.packbits(...,
bitorder="little")); err = s - scale * (bit ? 1 : -1), the error fed back next time.

Packing: the 8 flags of a byte, as 0/1 bytes, are one little-endian int64; times
0x0102040810204080 its top byte holds flag j in bit j (each flag's product lands in its own
bit, no carries). Unpacking: a 256 x 8 table of +-1 indexed by the byte."""

import torch

_MAGIC = 0x0102040810204080
_SIGNS = ((torch.arange(256, dtype=torch.int32)[:, None] >> torch.arange(8, dtype=torch.int32))
          & 1).to(torch.float32).mul_(2).sub_(1)  # [byte, j]: +1 where bit j is set


def _check(chunk, n):
    if chunk < 8 or chunk % 8 or n % chunk:
        raise ValueError(f"1-bit code: {n} elements in chunks of {chunk}: the chunk must be a "
                         "multiple of 8 that divides the length")


def onebit_compress_ef(x, err, chunk, bits, scale):
    """bits (uint8, n/8), scale (fp32, n/chunk) of s = x + err; err updated in place."""
    _check(chunk, x.numel())
    s = err.add_(x).view(-1, chunk)  # err now holds s
    torch.mean(s.abs(), dim=1, out=scale)
    flags = (s >= 0).view(torch.uint8).view(-1, 8).view(torch.int64).view(-1)
    bits.copy_(flags.mul_(_MAGIC).bitwise_right_shift_(56))
    decoded = _SIGNS[bits.long()].view(-1, chunk).mul_(scale[:, None])
    s.sub_(decoded)  # err = s - decoded
    return bits, scale


def onebit_decompress(bits, scale, chunk, out, accumulate=False, weight=1.0):
    """out (+)= weight * scale[chunk] * (bit ? 1 : -1)."""
    _check(chunk, out.numel())
    value = _SIGNS[bits.long()].view(-1, chunk).mul_((scale * weight)[:, None]).view(-1)
    if accumulate:
        out.add_(value)
    else:
        out.copy_(value)
    return out
