"""One parameter group's gradient buckets: filled during backward (stage 1: the gradients
are views of a full flat buffer; stage 2: each gradient is copied into its bucket's staging
buffer and dropped), exchanged as soon as they are complete, and averaged into the rank's
shard.

The exchange is a reduce-scatter done as `all_to_all_single`: torch 1.13's gloo has no
reduce_scatter, and all-to-all sends each rank the K slices of its part of the bucket, the
same bytes as a ring reduce-scatter ((K-1)/K of the bucket out and in per rank); the owner
sums them in rank order and divides by K. A codec may compress what is sent (fp16/bf16 with
error feedback)."""

import torch
import torch.distributed as dist


class Exchange:
    """A bucket's all-to-all in flight: the send buffer kept alive, the receive buffer."""

    def __init__(self, bucket, work, send, recv, staging):
        self.bucket, self.work, self.send, self.recv, self.staging = \
            bucket, work, send, recv, staging


class GroupBuckets:
    """The buckets of one group. `params` the group's parameters (views of the flat
    parameter buffer), `part` its Partition, `codec` None or a compressing codec,
    `shard_grad` returns the tensor the averaged shard goes to,
    `max_inflight` how many exchanges may be in flight before the oldest is finished (it
    bounds the receive and staging buffers to that many buckets)."""

    def __init__(self, params, part, stage, group, codec, comm, shard_grad, max_inflight=2):
        self.params, self.part, self.stage = params, part, stage
        self.shard_grad = shard_grad  # () -> the tensor the averaged shard goes to
        self.group, self.codec, self.comm = group, codec, comm
        self.world = part.world
        self.max_inflight = max_inflight
        self.flat_grad = None
        self._grad_views = []
        if stage == 1:  # the gradients live here; backward accumulates into the views
            self.flat_grad = torch.zeros(part.total)
            # made once: a slice and view cost ~1 us each, every parameter, every backward
            self._grad_views = [part.param_view(self.flat_grad, i, p.shape)
                                for i, p in enumerate(params)]
            for p, view in zip(params, self._grad_views):
                p.grad = view
        self._pool = []  # free bucket-sized buffers (receive, staging)
        self.bytes_sent = 0
        self.reset()

    def grad_view(self, i):
        return self._grad_views[i]

    def reset(self):
        """Before a backward: nothing seen, nothing launched."""
        self.pending = [len(ps) for ps in self.part.bucket_params]
        self.seen = [False] * len(self.params)
        self.staging = {}
        self.next_launch = 0
        self.inflight = []
        self.finished = 0

    # -- filling -------------------------------------------------------------------
    def _buffer(self, dtype):
        for k, buf in enumerate(self._pool):
            if buf.dtype == dtype:
                return self._pool.pop(k)
        return torch.empty(max(length for _, length in self.part.buckets), dtype=dtype)

    def _staging(self, b):
        buf = self.staging.get(b)
        if buf is None:
            buf = self._buffer(torch.float32)[:self.part.buckets[b][1]]
            buf.zero_()  # alignment gaps and the tail stay zero
            self.staging[b] = buf
        return buf

    def take(self, i):
        """Parameter i's gradient is complete (its accumulation hook ran, or step() found
        it): move it where the exchange reads it. Returns the buckets it completed."""
        p = self.params[i]
        if self.seen[i]:
            raise RuntimeError(
                f"ZeroOptimizer: parameter {i} got a second gradient before step(); "
                "accumulate gradients over micro-batches inside `with optimizer.no_sync():` "
                "for all but the last one")
        self.seen[i] = True
        g = p.grad
        if self.stage == 1:
            view = self.grad_view(i)
            if g is None:
                view.zero_()
            elif g is not view:
                view.copy_(g)
            p.grad = view
        else:
            for b in self.part.param_buckets[i]:
                at, src, n = self.part.part(i, b)
                dst = self._staging(b)[at:at + n]
                if g is None:
                    dst.zero_()
                else:
                    dst.copy_(g.reshape(-1)[src:src + n])
            p.grad = None  # stage 2 keeps only the averaged shard
        done = []
        for b in self.part.param_buckets[i]:
            self.pending[b] -= 1
            if self.pending[b] == 0:
                done.append(b)
        return done

    def ready(self, b):
        return b < len(self.pending) and self.pending[b] == 0

    def unlaunched(self):
        return self.next_launch < len(self.part.buckets)

    def fill_missing(self):
        """step() without a backward hook for some parameters (unused in this backward, or
        gradients set by hand): take every gradient not taken yet (None counts as zeros)."""
        for i in range(len(self.params)):
            if not self.seen[i]:
                self.take(i)

    # -- exchanging ----------------------------------------------------------------
    def launch(self, b):
        """Starts bucket b's exchange (the caller keeps the global order)."""
        assert b == self.next_launch
        if self.stage == 1:
            send = self.part.bucket_view(self.flat_grad, b)
        else:  # (a bucket of empty parameters only has no staging buffer yet)
            send = self.staging.pop(b, None)
            if send is None:
                send = self._buffer(torch.float32)[:self.part.buckets[b][1]].zero_()
        staging = send if self.stage == 2 else None
        if self.codec is not None:
            send = self.codec.compress(send, b, self._buffer(self.codec.wire_dtype)[:send.numel()])
        recv = self._buffer(send.dtype)[:send.numel()]
        while len(self.inflight) >= self.max_inflight:
            self.finish_one()
        work = dist.all_to_all_single(self.comm.wire(recv), self.comm.wire(send),
                                      group=self.group, async_op=True)
        self.bytes_sent += send.numel() * send.element_size() * (self.world - 1) // self.world
        self.inflight.append(Exchange(b, work, send, recv, staging))
        self.next_launch += 1

    def finish_one(self):
        """Waits for the oldest exchange and averages it into the shard's gradient."""
        ex = self.inflight.pop(0)
        self.comm.wait(ex.work, f"the reduce-scatter of bucket {ex.bucket}")
        dst = self.part.shard_view(self.shard_grad(), ex.bucket)
        chunks = ex.recv.view(self.world, -1)
        if self.codec is not None:
            self.codec.average(dst, chunks)
        else:
            dst.copy_(chunks[0])
            for k in range(1, self.world):
                dst.add_(chunks[k])
            dst.div_(self.world)
        self._pool.append(ex.recv._base if ex.recv._base is not None else ex.recv)
        for used in (ex.staging, ex.send if self.codec is not None else None):
            if used is not None:
                self._pool.append(used._base if used._base is not None else used)
        self.finished += 1
