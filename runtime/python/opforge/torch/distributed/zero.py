"""ZeroOptimizer: DeepSpeed ZeRO stage 1/2 on torch.distributed with opforge kernels.

Each parameter group is one flat buffer (the parameters become views of it) cut into
buckets, each bucket split into world-size slices (`_partition.py`). Rank k owns slice k of
every bucket: the optimizer states of those elements, and their update. A step is:
  1. gradients reduce-scattered (averaged) bucket by bucket, launched from the gradient
     accumulation hooks during backward so the exchange overlaps the rest of backward
     (`_buckets.py`); stage 2 copies each gradient into its bucket and drops it;
  2. the rank's shard updated by one opforge kernel call per group: an `opforge.torch.optim`
     optimizer holds the shard as its one parameter, so its hyperparameters, conventions
     and state layout are exactly that class's;
  3. the updated slices all-gathered into every rank's flat buffer (so every rank holds
     bit-identical parameters).
Compression (fp16/bf16 with error feedback; 1-bit Adam) changes what step 1 sends
(`_codecs.py`, `_onebit.py`)."""

import contextlib
import time

import torch
import torch.distributed as dist

from .. import optim as _optim
from ._buckets import GroupBuckets
from ._comm import Comm, DistributedStepError
from ._health import Health
from ._partition import Partition

# The elementwise optimizers: a shard's update needs nothing from other elements. LAMB and
# LARS take per-tensor norms (a shard holds parts of tensors) and SparseAdam sparse rows.
OPTIMIZERS = {
    "adam": _optim.Adam, "adamw": _optim.AdamW, "sgd": _optim.SGD, "lion": _optim.Lion,
    "rmsprop": _optim.RMSprop, "adagrad": _optim.Adagrad, "adadelta": _optim.Adadelta,
    "adamax": _optim.Adamax,
}
COMPRESSIONS = (None, "fp16", "bf16", "onebit")


def clip_factor(max_norm, norm):
    """torch.nn.utils.clip_grad_norm_'s scale: max_norm / (norm + 1e-6), used when < 1."""
    return max_norm / (norm + 1e-6)


def _optimizer_class(optimizer):
    if isinstance(optimizer, str):
        cls = OPTIMIZERS.get(optimizer.lower())
        if cls is None:
            raise ValueError(f"ZeroOptimizer: unknown optimizer '{optimizer}'; one of "
                             f"{', '.join(sorted(OPTIMIZERS))}")
        return cls
    if optimizer in OPTIMIZERS.values():
        return optimizer
    raise ValueError(f"ZeroOptimizer: optimizer {optimizer!r} cannot be sharded; pass one of "
                     f"{', '.join(sorted(OPTIMIZERS))} (LAMB and LARS need whole-tensor "
                     "norms)")


class ZeroOptimizer(torch.optim.Optimizer):
    """A data-parallel optimizer whose states and update are sharded over the ranks of
    `process_group` (default: the default group), as DeepSpeed's ZeRO stage 1 (states
    sharded) or stage 2 (gradients too: a rank keeps only its averaged shard).

    optimizer: "adamw" (default), "adam", "sgd", "lion", "rmsprop", "adagrad", "adadelta",
    "adamax", or the opforge.torch.optim class; **hypers go to it (lr, betas, weight_decay,
    ...), and per-group values in param groups as for any torch optimizer.
    compression: None, "fp16" or "bf16" (gradients sent in 16 bits with error feedback), or
    "onebit" (1-bit Adam: adam/adamw only; see onebit_warmup, onebit_chunk).
    bucket_mb: gradient bucket size in MB of fp32. timeout: seconds any collective may take
    before every rank raises DistributedStepError naming the failed rank(s).
    max_grad_norm: clip the averaged gradient to this global L2 norm (all groups, as
    torch.nn.utils.clip_grad_norm_ over the model; DeepSpeed's gradient_clipping) before the
    update; the norm before clipping is `last_grad_norm`. In 1-bit Adam's compressed phase
    each rank clips its own gradient (no averaged gradient exists there).

    Every rank must construct it with the same parameters (shapes, order, groups): rank 0's
    parameter values are broadcast to the others. Parameters are dense fp32 CPU tensors.
    To accumulate gradients over micro-batches, run all backwards but the last inside
    `with optimizer.no_sync():`."""

    def __init__(self, params, optimizer="adamw", stage=1, process_group=None,
                 compression=None, bucket_mb=25, *, timeout=300.0, onebit_warmup=100,
                 onebit_chunk=2048, max_grad_norm=None, registry=None, isa=None, **hypers):
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("ZeroOptimizer: torch.distributed is not initialized; call "
                               "torch.distributed.init_process_group first")
        cls = _optimizer_class(optimizer)
        if stage not in (1, 2):
            raise ValueError(f"ZeroOptimizer: stage must be 1 or 2, not {stage!r}")
        if compression not in COMPRESSIONS:
            raise ValueError(f"ZeroOptimizer: compression must be one of "
                             f"{', '.join(map(repr, COMPRESSIONS))}, not {compression!r}")
        if compression == "onebit" and cls not in (_optim.Adam, _optim.AdamW):
            raise ValueError(f"ZeroOptimizer: compression='onebit' is 1-bit Adam; it needs "
                             f"optimizer 'adam' or 'adamw', not {cls.__name__}")
        if not bucket_mb > 0:
            raise ValueError(f"ZeroOptimizer: bucket_mb must be > 0, not {bucket_mb!r}")
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise ValueError(f"ZeroOptimizer: max_grad_norm must be > 0, not {max_grad_norm!r}")
        if not timeout > 0:
            raise ValueError(f"ZeroOptimizer: timeout must be > 0 seconds, not {timeout!r}")
        self._constructing = True
        super().__init__(params, {})
        self._constructing = False
        self._cls, self.stage, self.compression = cls, stage, compression
        self._group = process_group
        self._health = Health(process_group, dist.get_rank(process_group),
                              dist.get_world_size(process_group))
        self._comm = Comm(process_group, float(timeout), self._health)
        self.rank, self.world_size = self._comm.rank, self._comm.world
        self._sync = True
        self._steps = 0
        self.max_grad_norm = max_grad_norm
        self.last_grad_norm = None
        self._in_backward = 0  # buckets launched from the hooks since the last step
        self._next = 0  # the next bucket of self._order to launch
        self._gathered_bytes = 0
        self.last_step = {}  # seconds and bytes of the last step (bench_zero.py)
        bucket_elems = max(1, int(bucket_mb * 2 ** 20 // 4))
        self._check_params()
        self._parts, self._flats, self._shards, self._buckets = [], [], [], []
        for gi, group in enumerate(self.param_groups):
            ps = group["params"]
            part = Partition([p.numel() for p in ps], self.world_size, bucket_elems)
            flat = torch.zeros(part.total)
            for i, p in enumerate(ps):
                view = part.param_view(flat, i, p.shape)
                view.copy_(p.data)
                p.data = view
            self._parts.append(part)
            self._flats.append(flat)
        self._comm.at("broadcasting rank 0's parameters")
        src = self._global_rank(0)
        for flat in self._flats:
            self._comm.run(lambda: dist.broadcast(flat, src, group=process_group),
                           "the broadcast of rank 0's parameters")
        inner_groups = []
        for gi, group in enumerate(self.param_groups):
            shard = torch.nn.Parameter(self._parts[gi].shard_of(self._flats[gi], self.rank))
            shard.grad = torch.zeros_like(shard)
            self._shards.append(shard)
            inner_groups.append(dict({k: v for k, v in group.items() if k != "params"},
                                     params=[shard]))
        self._inner = cls(inner_groups, registry=registry, isa=isa, **hypers)
        self.defaults = self._inner.defaults
        for group, inner in zip(self.param_groups, self._inner.param_groups):
            for k, v in inner.items():
                if k != "params":
                    group.setdefault(k, v)
        self._onebit = None
        half = None
        if compression in ("fp16", "bf16"):
            from ._codecs import HalfCodec
            half = HalfCodec(compression, self.world_size, registry, isa)
        for gi, group in enumerate(self.param_groups):
            codec = None if half is None else half.for_group(self._parts[gi])
            self._buckets.append(GroupBuckets(
                group["params"], self._parts[gi], stage, process_group, codec, self._comm,
                (lambda s=self._shards[gi]: s.grad)))
        if compression == "onebit":
            from ._onebit import OneBit
            self._onebit = OneBit(self, onebit_warmup, onebit_chunk, registry, isa)
        self._order = [(gi, b) for gi in reversed(range(len(self.param_groups)))
                       for b in range(len(self._parts[gi].buckets))]
        self._hooks = []
        self._register_hooks()
        self._comm.at("between steps (step 0 next)")

    # -- construction helpers ---------------------------------------------------------
    def add_param_group(self, param_group):
        if not getattr(self, "_constructing", False):
            raise RuntimeError("ZeroOptimizer: param groups are fixed at construction (the "
                               "flat buffers and shards are laid out then); build a new "
                               "optimizer instead")
        super().add_param_group(param_group)

    def _global_rank(self, group_rank):
        if self._group is None:
            return group_rank
        from torch.distributed import distributed_c10d as c10d
        return c10d._get_global_rank(self._group, group_rank)

    def _check_params(self):
        for gi, group in enumerate(self.param_groups):
            for pi, p in enumerate(group["params"]):
                if p.dtype != torch.float32 or p.device.type != "cpu" or p.is_sparse:
                    raise ValueError(f"ZeroOptimizer: parameter {pi} of group {gi} is {p.dtype}"
                                     f" on {p.device}; it takes dense float32 CPU parameters")
                if not p.requires_grad:
                    raise ValueError(f"ZeroOptimizer: parameter {pi} of group {gi} does not "
                                     "require grad; pass the trainable parameters only")
        mine = [[tuple(p.shape) for p in g["params"]] for g in self.param_groups]
        everyone = [None] * self._comm.world
        self._comm.at("comparing parameter shapes")
        self._comm.run(lambda: dist.all_gather_object(everyone, mine, group=self._group),
                       "the comparison of parameter shapes")
        for r, theirs in enumerate(everyone):
            if theirs != mine:
                raise ValueError(f"ZeroOptimizer: rank {r}'s parameters differ from rank "
                                 f"{self.rank}'s (groups of shapes {theirs} vs {mine}); every "
                                 "rank must pass the same parameters in the same order")

    def _register_hooks(self):
        for gi, group in enumerate(self.param_groups):
            for i, p in enumerate(group["params"]):
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(lambda *_, gi=gi, i=i: self._on_grad(gi, i))
                self._hooks.append(acc)  # the accumulator node must outlive this call

    # -- backward ---------------------------------------------------------------------
    @contextlib.contextmanager
    def no_sync(self):
        """Gradients of the backwards run inside accumulate locally (no exchange); the first
        backward after it exchanges the sums."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old

    def _on_grad(self, gi, i):
        if not self._sync or (self._onebit is not None and self._onebit.compressing):
            return
        buckets = self._buckets[gi]
        try:
            if buckets.take(i):
                before = self._next
                self._launch_ready()
                self._in_backward += self._next - before
        except DistributedStepError:
            raise
        except RuntimeError as e:
            self._health.report(e)
            raise

    def _launch_ready(self, force=False):
        """Launches buckets in the one global order every rank follows (groups last to
        first, buckets in order): a bucket waits for the ones before it."""
        while self._next < len(self._order):
            gi, b = self._order[self._next]
            if not (force or self._buckets[gi].ready(b)):
                return
            self._comm.at(f"step {self._steps + 1}: reduce-scatter of group {gi} bucket {b}")
            self._buckets[gi].launch(b)
            self._next += 1

    # -- step ---------------------------------------------------------------------------
    def _sync_hypers(self):
        for group, inner in zip(self.param_groups, self._inner.param_groups):
            for k, v in group.items():
                if k != "params":
                    inner[k] = v

    @torch.no_grad()
    def step(self, closure=None):
        self._comm.check()
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        try:
            if self._onebit is not None and self._onebit.compressing:
                self._onebit.step()
            else:
                self._sharded_step()
        except DistributedStepError:
            raise
        except RuntimeError as e:
            self._health.report(e)
            raise
        self._steps += 1
        self._comm.at(f"between steps (step {self._steps + 1} next)")
        if self._onebit is not None:
            self._onebit.after_step()
        return loss

    def _sharded_step(self):
        t0 = time.perf_counter()
        n = self._steps + 1
        for buckets in self._buckets:
            buckets.fill_missing()
        self._launch_ready(force=True)
        for buckets in self._buckets:
            while buckets.inflight:
                self._comm.at(f"step {n}: waiting for the reduce-scatter of bucket "
                              f"{buckets.inflight[0].bucket}")
                buckets.finish_one()
        if self.max_grad_norm is not None:
            self._clip(n)
        t1 = time.perf_counter()
        self._comm.at(f"step {n}: update")
        self._sync_hypers()
        for gi, shard in enumerate(self._shards):
            # the shard's parameters from the flat buffer: a user's change to p.data since
            # the last step (identical on every rank) is kept
            self._parts[gi].shard_of(self._flats[gi], self.rank, out=shard.data)
        self._inner.step()
        t2 = time.perf_counter()
        self._all_gather(n)
        t3 = time.perf_counter()
        sent = sum(bk.bytes_sent for bk in self._buckets)
        for bk in self._buckets:
            bk.bytes_sent = 0
            bk.reset()
        self._next = 0
        sent += self._gathered_bytes
        self.last_step = dict(reduce_wait=t1 - t0, update=t2 - t1, all_gather=t3 - t2,
                              bytes_sent=sent, buckets_in_backward=self._in_backward)
        self._in_backward = 0

    def _clip(self, n):
        """Scales every shard's averaged gradient so that the global norm is at most
        max_grad_norm (torch's clip_grad_norm_ factor: max / (norm + 1e-6), capped at 1)."""
        sq = torch.zeros(1, dtype=torch.float64)
        for shard in self._shards:
            sq += torch.dot(shard.grad, shard.grad).double()
        self._comm.at(f"step {n}: all-reduce of the gradient norm")
        self._comm.run(lambda: dist.all_reduce(sq, group=self._group),
                       "the all-reduce of the gradient norm")
        self.last_grad_norm = float(sq.sqrt())
        factor = clip_factor(self.max_grad_norm, self.last_grad_norm)
        if factor < 1:
            for shard in self._shards:
                shard.grad.mul_(factor)

    def _all_gather(self, n):
        self._gathered_bytes = 0
        works = []
        for gi in range(len(self._parts)):
            works += self.gather_into(gi, self._shards[gi].data, self._flats[gi],
                                      f"step {n}: all-gather of parameters")
        for what, work in works:
            self._comm.wait(work, what)

    def gather_into(self, gi, shard, flat, what):
        """Starts the all-gather of every rank's `shard` of group gi into `flat`, bucket by
        bucket; returns the (what, work) to wait for."""
        part, works = self._parts[gi], []
        for b in range(len(part.buckets)):
            outs = [part.owned_view(flat, b, k) for k in range(self.world_size)]
            src = part.shard_view(shard, b)
            self._comm.at(f"{what} (group {gi} bucket {b})")
            works.append((f"{what} (group {gi} bucket {b})",
                          dist.all_gather(outs, src, group=self._group, async_op=True)))
            self._gathered_bytes += src.numel() * src.element_size() * (self.world_size - 1)
        return works

    def zero_grad(self, set_to_none=False):
        """Stage 1: the flat gradient buffers zeroed (the gradients stay their views; with
        set_to_none the next backward's gradients are copied in). Stage 2: gradients are
        dropped once exchanged; any left are set to None."""
        for gi, group in enumerate(self.param_groups):
            bk = self._buckets[gi]
            if self.stage == 1 and not set_to_none:
                bk.flat_grad.zero_()
                for i, p in enumerate(group["params"]):
                    if p.grad is not None and p.grad.data_ptr() != bk.grad_view(i).data_ptr():
                        p.grad = bk.grad_view(i)
            else:
                for p in group["params"]:
                    p.grad = None

    # -- checkpoints -------------------------------------------------------------------
    def state_dict(self, to=0):
        """Collective (call it on every rank): the whole optimizer state in the layout of
        the opforge.torch.optim class (torch.optim's), gathered to rank `to` of the group,
        which returns it; the other ranks return None. It loads into ZeroOptimizer at any
        world size, opforge.torch.optim.X and torch.optim.X."""
        from ._checkpoint import consolidate
        self._comm.check()
        return consolidate(self, to)

    def load_state_dict(self, state_dict):
        """Every rank passes the same full state dict (as state_dict() returned it, or
        torch.optim.X's / opforge.torch.optim.X's for the same parameters); each rank keeps
        its shard."""
        from ._checkpoint import load
        load(self, state_dict)

    def __del__(self):
        health = getattr(self, "_health", None)
        if health is not None:
            health.close()
