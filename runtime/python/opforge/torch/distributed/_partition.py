"""Where a parameter group's tensors live in its flat buffer, and which rank owns what.

The flat buffer holds the group's parameters back to back in reverse order (backward
produces gradients roughly last parameter first, so the first buckets fill first), each
starting on an ALIGN-element boundary. It is cut into buckets of about `bucket_elems`; each
bucket is split into `world` equal slices and rank k owns slice k of every bucket. A rank's
shard is its slices of all buckets, back to back: the contiguous tensor its optimizer states
and its one kernel call cover. The tail of the last bucket is padding (zeros, whose update
leaves them zero)."""

import torch

# Elements: every slice starts on a 64-byte line, so no two ranks write one cache line.
ALIGN = 16


def round_up(n, m):
    return (n + m - 1) // m * m


class Partition:
    """The layout of one group for `world` ranks; `numels` are the parameters' sizes in
    the group's order."""

    def __init__(self, numels, world, bucket_elems):
        if world < 1:
            raise ValueError(f"world size {world} < 1")
        self.numels = list(numels)
        self.world = world
        self.offsets = [0] * len(self.numels)
        end = 0
        for i in reversed(range(len(self.numels))):
            self.offsets[i] = end
            end = round_up(end + self.numels[i], ALIGN)
        unit = world * ALIGN
        step = round_up(max(int(bucket_elems), 1), unit)
        self.buckets = []  # (start, length): length a multiple of world * ALIGN
        start = 0
        while start < max(end, 1):
            self.buckets.append((start, min(step, round_up(max(end, 1) - start, unit))))
            start += self.buckets[-1][1]
        self.total = start
        self.slice_len = [length // world for _, length in self.buckets]
        self.shard_offsets = []
        off = 0
        for s in self.slice_len:
            self.shard_offsets.append(off)
            off += s
        self.shard_elems = off
        # Which parameters each bucket holds (parts of), and the buckets of each parameter.
        self.bucket_params = [[] for _ in self.buckets]
        self.param_buckets = [[] for _ in self.numels]
        for i, (off, n) in enumerate(zip(self.offsets, self.numels)):
            for b, (start, length) in enumerate(self.buckets):
                if n and off < start + length and start < off + n:
                    self.bucket_params[b].append(i)
                    self.param_buckets[i].append(b)

    def bucket_view(self, flat, b):
        start, length = self.buckets[b]
        return flat[start:start + length]

    def owned_view(self, flat, b, rank):
        """Rank's slice of bucket b in the flat buffer."""
        start, _ = self.buckets[b]
        s = self.slice_len[b]
        return flat[start + rank * s:start + (rank + 1) * s]

    def shard_view(self, shard, b):
        """Bucket b's part of a shard."""
        off = self.shard_offsets[b]
        return shard[off:off + self.slice_len[b]]

    def param_view(self, flat, i, shape):
        off = self.offsets[i]
        return flat[off:off + self.numels[i]].view(shape)

    def part(self, i, b):
        """(offset in bucket b, offset in parameter i, count) of i's elements in b."""
        start, length = self.buckets[b]
        lo = max(self.offsets[i], start)
        hi = min(self.offsets[i] + self.numels[i], start + length)
        return lo - start, lo - self.offsets[i], hi - lo

    def shard_of(self, flat, rank, out=None):
        """Rank's shard gathered from a full flat buffer."""
        out = torch.empty(self.shard_elems, dtype=flat.dtype) if out is None else out
        for b in range(len(self.buckets)):
            self.shard_view(out, b).copy_(self.owned_view(flat, b, rank))
        return out

    def flat_of(self, shards, out=None):
        """The flat buffer from every rank's shard (rank order)."""
        out = torch.zeros(self.total, dtype=shards[0].dtype) if out is None else out
        for b in range(len(self.buckets)):
            for k, shard in enumerate(shards):
                self.owned_view(out, b, k).copy_(self.shard_view(shard, b))
        return out
