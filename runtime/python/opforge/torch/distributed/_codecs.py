"""What a bucket's exchange sends when ZeroOptimizer compresses gradients to 16 bits: the
gradient plus the error kept from the last step, rounded to fp16/bf16 (compress_ef, one
kernel pass that also keeps this rounding's error), and on the owner the K ranks' slices
widened and averaged into fp32 (accumulate_grad, bf16g/f16g, scaled by 1/K). Error feedback
makes the rounding errors cancel over steps instead of biasing the update."""

import torch

from . import compress

_DTYPES = {"fp16": (torch.float16, "f16"), "bf16": (torch.bfloat16, "bf16")}


class HalfCodec:
    """The fp16 / bf16 codec of one optimizer; for_group gives each group its error
    buffer."""

    def __init__(self, compression, world, registry, isa):
        self.wire_dtype, self.format = _DTYPES[compression]
        self.world = world
        self.kw = dict(registry=registry, isa=isa)

    def for_group(self, part):
        return GroupHalfCodec(self, part)


class GroupHalfCodec:
    """A group's error-feedback buffer (one fp32 value per element of the flat buffer:
    what this rank's last rounding of that element lost)."""

    def __init__(self, codec, part):
        self.codec, self.part = codec, part
        self.wire_dtype = codec.wire_dtype
        self.err = torch.zeros(part.total)

    def compress(self, grad, b, out):
        """Bucket b's gradient (plus its kept error) into `out`, 16 bits."""
        c = self.codec
        compress.compress_ef(grad, self.part.bucket_view(self.err, b), out, c.format, **c.kw)
        return out

    def average(self, dst, chunks):
        """dst = the mean of the K ranks' slices (rows of chunks), in fp32."""
        dst.zero_()
        for k in range(chunks.shape[0]):
            compress.decompress_accumulate(dst, chunks[k], 1.0 / self.codec.world,
                                           **self.codec.kw)
