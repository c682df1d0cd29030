"""1-bit Adam (Tang et al., "1-bit Adam: Communication Efficient Large-Scale Training with
Adam's Convergence Speed", ICML 2021, Algorithm 1) on ZeroOptimizer's buffers.

Warm-up: `warmup` steps of the optimizer's own sharded Adam/AdamW (gradients averaged in
fp32). Then the variance is frozen (gathered whole on every rank, the warm-up's bias
correction 1 - beta2^t folded in) and each step communicates the momentum in 1 bit:
  worker: m_k = beta1 m + (1 - beta1) g_k (its local gradient); s = m_k + e_k;
          sent: sign bits of s and one scale per chunk (mean |s|), e_k = s - decompressed
          (one onebit_compress kernel pass, `compress.onebit_compress`);
  server (rank j for slice j, after an all-to-all): the mean of the K decompressed slices
          (one onebit_decompress pass over the K codes), compressed the same way with its
          own error e'_j, all-gathered;
  every rank: m = the decompressed result (identical everywhere), then
          var = var (1 - lr wd) - lr / (1 - beta1^t) m / (sqrt(v) + eps)
          (onebit_adam_update, generators/rules; wd only for AdamW; Adam's L2 term is added
          to the gradient first, as torch.optim.Adam does). The flat buffers' padding stays zero
(momentum and both errors): a sign code has no zero, and a padding element's +-scale
would otherwise reach the parameters' chunks through the L2 term and the scales.
Momentum and variance are whole on every rank from then on (the paper's layout: the update
needs v everywhere, and all-gathering fp32 parameters would cost what 1 bit saves). Bytes
per rank and step: 2 (K-1)/K N/8 plus the scales, against 2 (K-1)/K 4N for a ring fp32
all-reduce: 32x fewer. Error-feedback buffers restart at zero after load_state_dict (as
DeepSpeed's do)."""

import torch
import torch.distributed as dist

from . import compress
from ._partition import round_up
from .zero import clip_factor
from .. import optim as _optim


class _GroupState:
    """One group's 1-bit buffers (n: padded length, a multiple of K * chunk)."""

    def __init__(self, n, world, chunk):
        self.m = torch.zeros(n)
        self.v = torch.zeros(n)
        # The gradient, then (swapped with worker_err) the next error: the compress kernel
        # writes the new error to a buffer of its own.
        self.grad = torch.zeros(n)
        self.work = torch.zeros(n)  # this rank's new momentum, then the server's mean
        self.worker_err = torch.zeros(n)
        self.server_err = torch.zeros(n // world)
        self.server_err_next = torch.zeros(n // world)
        # Sign words: 32 signs per int32 (8 per byte in memory).
        self.bits = torch.zeros(n // 32, dtype=torch.int32)
        self.scale = torch.zeros(n // chunk)
        self.recv_bits = torch.zeros(n // 32, dtype=torch.int32)
        self.recv_scale = torch.zeros(n // chunk)
        self.server_bits = torch.zeros(n // world // 32, dtype=torch.int32)
        self.server_scale = torch.zeros(n // world // chunk)
        self.step = 0.0
        self.bias2 = 1.0  # 1 - beta2^t at the freeze (folded into v)
        self.pad = None  # the padding's positions: kept zero (a sign code has no zero)


class OneBit:
    """The 1-bit Adam phase of a ZeroOptimizer `opt` (adam or adamw)."""

    def __init__(self, opt, warmup, chunk, registry, isa):
        if not isinstance(warmup, int) or warmup < 1:
            raise ValueError(f"ZeroOptimizer: onebit_warmup must be an int >= 1 (the "
                             f"variance is frozen after it), not {warmup!r}")
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 32 or chunk % 32:
            raise ValueError(f"ZeroOptimizer: onebit_chunk must be a positive multiple of 32 "
                             f"(32 signs per word), not {chunk!r}")
        for gi, group in enumerate(opt.param_groups):
            for key in ("amsgrad", "maximize"):
                if group.get(key):
                    raise ValueError(f"ZeroOptimizer: compression='onebit' does not take "
                                     f"{key}=True (group {gi})")
        self.opt, self.warmup, self.chunk = opt, warmup, chunk
        self.decoupled = opt._cls is _optim.AdamW
        self.registry = registry if registry is not None else _optim._base.default_registry()
        self.code = dict(registry=self.registry, isa=isa)  # the sign-code kernels' keywords
        self.update_kernel = self.registry.select("onebit_adam_update", {}, isa)
        self.compressing = False
        self.count = 0
        self.groups = []

    def after_step(self):
        self.count += 1
        if not self.compressing and self.count >= self.warmup:
            self.freeze()

    def loaded(self):
        """After load_state_dict: the warm-up count is the loaded step; errors restart."""
        self.compressing = False
        self.groups = []
        steps = [float(s["step"]) for s in self.opt._inner.state.values() if "step" in s]
        self.count = int(max(steps)) if steps else 0
        if self.count >= self.warmup:
            self.freeze()

    def freeze(self):
        """Gathers the momentum and variance whole on every rank and freezes the variance."""
        opt, comm = self.opt, self.opt._comm
        self.groups = []
        for gi, part in enumerate(opt._parts):
            st = _GroupState(round_up(part.total, opt.world_size * self.chunk),
                             opt.world_size, self.chunk)
            live = torch.zeros(st.m.numel(), dtype=torch.bool)
            for off, n in zip(part.offsets, part.numels):
                live[off:off + n] = True
            st.pad = (~live).nonzero().view(-1)
            state = opt._inner.state.get(opt._shards[gi], {})
            works = []
            for key, flat in (("exp_avg", st.m), ("exp_avg_sq", st.v)):
                if key in state:
                    works += opt.gather_into(gi, state[key], flat[:part.total],
                                             f"1-bit Adam: all-gather of '{key}'")
            for what, work in works:
                comm.wait(work, what)
            st.step = float(state.get("step", 0.0))
            beta2 = opt.param_groups[gi]["betas"][1]
            st.bias2 = 1.0 - beta2 ** st.step if st.step else 1.0
            st.v.div_(st.bias2)
            for key in ("exp_avg", "exp_avg_sq"):
                state.pop(key, None)  # whole on every rank now: the shards are stale
            self.groups.append(st)
        self.compressing = True

    def step(self):
        opt, comm = self.opt, self.opt._comm
        world, chunk = opt.world_size, self.chunk
        sent = 0
        for gi, (group, part, st) in enumerate(zip(opt.param_groups, opt._parts, self.groups)):
            n = opt._steps + 1
            beta1, _ = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            st.step += 1
            for i, p in enumerate(group["params"]):
                view = part.param_view(st.grad, i, p.shape)
                if p.grad is None:
                    view.zero_()
                else:
                    view.copy_(p.grad)
            if opt.max_grad_norm is not None:  # this rank's own gradient (see ZeroOptimizer)
                norm = float(torch.linalg.vector_norm(st.grad))
                opt.last_grad_norm = norm
                factor = clip_factor(opt.max_grad_norm, norm)
                if factor < 1:
                    st.grad.mul_(factor)
            if wd and not self.decoupled:  # torch.optim.Adam's L2 term
                st.grad[:part.total].add_(opt._flats[gi], alpha=wd)
            torch.mul(st.m, beta1, out=st.work)
            st.work.add_(st.grad, alpha=1 - beta1)
            code = self.code
            compress.onebit_compress(st.work, st.worker_err, st.grad, chunk, st.bits, st.scale,
                                     **code)
            st.worker_err, st.grad = st.grad, st.worker_err  # the new error; grad is scratch
            st.worker_err.index_fill_(0, st.pad, 0.0)
            comm.at(f"step {n}: 1-bit Adam all-to-all of group {gi}")
            works = [dist.all_to_all_single(st.recv_bits, st.bits, group=opt._group,
                                            async_op=True),
                     dist.all_to_all_single(st.recv_scale, st.scale, group=opt._group,
                                            async_op=True)]
            for work in works:
                comm.wait(work, "the 1-bit Adam all-to-all of the momentum")
            mean = st.work[:st.work.numel() // world]
            compress.onebit_decompress(st.recv_bits.view(world, -1),
                                       st.recv_scale.view(world, -1), chunk, mean,
                                       weight=1.0 / world, **code)
            compress.onebit_compress(mean, st.server_err, st.server_err_next, chunk,
                                     st.server_bits, st.server_scale, **code)
            st.server_err, st.server_err_next = st.server_err_next, st.server_err
            mine = st.pad - comm.rank * mean.numel()
            st.server_err.index_fill_(0, mine[(mine >= 0) & (mine < mean.numel())], 0.0)
            comm.at(f"step {n}: 1-bit Adam all-gather of group {gi}")
            works = [dist.all_gather(list(st.bits.view(world, -1)), st.server_bits,
                                     group=opt._group, async_op=True),
                     dist.all_gather(list(st.scale.view(world, -1)), st.server_scale,
                                     group=opt._group, async_op=True)]
            for work in works:
                comm.wait(work, "the 1-bit Adam all-gather of the momentum")
            compress.onebit_decompress(st.bits, st.scale, chunk, st.m, **code)
            st.m.index_fill_(0, st.pad, 0.0)
            comm.at(f"step {n}: 1-bit Adam update of group {gi}")
            flat = opt._flats[gi]
            self.update_kernel(var=flat, m=st.m[:part.total], v=st.v[:part.total],
                               lr=lr / (1 - beta1 ** st.step), epsilon=eps,
                               decay=lr * wd if self.decoupled else 0.0)
            per = st.bits.numel() * 4 + st.scale.numel() * 4
            sent += 2 * per * (world - 1) // world
        opt.last_step = dict(bytes_sent=sent, buckets_in_backward=0)

    def full_states(self, gi):
        """Group gi's states whole, in torch's terms (the variance without the folding)."""
        st = self.groups[gi]
        return {"exp_avg": st.m, "exp_avg_sq": st.v * st.bias2}

    def step_value(self, gi):
        return torch.tensor(self.groups[gi].step)
