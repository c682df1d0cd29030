"""opforge.torch.distributed.ZeroOptimizer on 2 and 4 local ranks (spawned processes, gloo,
127.0.0.1 only; each run bounded by a deadline): equal to one process's opforge step on the
averaged gradients, bit-identical parameters on every rank, checkpoints across world sizes
and into torch.optim, a killed or hung rank named on the others, and its refusals."""

import os
import time

import numpy as np
import pytest
import torch

import opforge.torch.optim as oo
from dist_harness import run_ranks, values

if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

# The kernel is the single-process optimizer's kernel on the same fp32 values; only the
# averaged gradient's rounding can differ (a sum in rank order divided by K, as the
# reference does), so parameters agree to a few ulp.
RTOL, ATOL = 1e-6, 1e-7


def model():
    torch.manual_seed(0)  # odd sizes: 33*17, 17, 17*5, 5 (and a 1-element tensor below)
    m = torch.nn.Sequential(torch.nn.Linear(33, 17), torch.nn.Tanh(), torch.nn.Linear(17, 5))
    m.register_parameter("scale", torch.nn.Parameter(torch.ones(1)))
    return m


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(7, 33, generator=g), torch.randn(7, 5, generator=g)


def loss_of(m, x, y):
    return ((m(x) * m.scale - y) ** 2).mean()


def groups(m):
    """Two param groups with their own lr and weight decay."""
    ps = list(m.parameters())
    return [{"params": ps[:2], "lr": 3e-2}, {"params": ps[2:], "weight_decay": 0.0}]


def snapshot(m):
    return [p.detach().numpy().copy() for p in m.parameters()]


def train_zero(rank, world, stage, steps, bucket_mb, clip=None):
    from opforge.torch.distributed import ZeroOptimizer
    m = model()
    opt = ZeroOptimizer(groups(m), "adamw", stage=stage, bucket_mb=bucket_mb, lr=1e-2,
                        weight_decay=0.05, timeout=30, max_grad_norm=clip)
    out, stats = [], []
    for step in range(steps):
        opt.zero_grad()
        loss_of(m, *batch(step, rank)).backward()
        grads_left = [p.grad is not None for p in m.parameters()]
        opt.step()
        out.append(snapshot(m))
        stats.append(dict(opt.last_step, grads_left=grads_left, norm=opt.last_grad_norm))
    shard_sizes = [int(v.numel()) for s in opt._inner.state.values() for k, v in s.items()
                   if k == "exp_avg"]
    return out, stats, shard_sizes


def reference(world, steps, clip=None):
    """One process: opforge.torch.optim.AdamW on the gradients averaged over the ranks
    (clipped by torch.nn.utils.clip_grad_norm_ when clip is set)."""
    m = model()
    opt = oo.AdamW(groups(m), lr=1e-2, weight_decay=0.05)
    out = []
    for step in range(steps):
        grads = []
        for r in range(world):
            m.zero_grad()
            loss_of(m, *batch(step, r)).backward()
            grads.append([p.grad.clone() for p in m.parameters()])
        for i, p in enumerate(m.parameters()):
            total = grads[0][i].clone()
            for r in range(1, world):
                total.add_(grads[r][i])
            p.grad = total.div_(world)
        if clip is not None:
            norm = float(torch.nn.utils.clip_grad_norm_(m.parameters(), clip))
            assert norm > clip  # the test clips
        opt.step()
        out.append(snapshot(m))
    return out


@pytest.mark.parametrize("stage,world,clip", [(1, 2, None), (2, 2, None), (1, 4, None),
                                              (2, 4, None), (2, 2, 0.05)])
def test_equals_one_process_on_averaged_gradients(stage, world, clip):
    steps = 3
    # ~130-element buckets: several per parameter and parameters across buckets
    res = values(run_ranks(train_zero, world, stage, steps, 0.0005, clip))
    ref = reference(world, steps, clip)
    for step in range(steps):
        for r in range(1, world):
            for a, b in zip(res[0][0][step], res[r][0][step]):
                assert np.array_equal(a, b), f"rank {r} differs from rank 0 at step {step}"
        for i, (got, want) in enumerate(zip(res[0][0][step], ref[step])):
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL,
                                       err_msg=f"step {step} parameter {i}")
    for r in range(world):
        stats = res[r][1]
        # buckets were exchanged from the hooks, during backward
        assert all(s["buckets_in_backward"] > 0 for s in stats), stats
        assert all(any(s["grads_left"]) for s in stats) == (stage == 1)
        total = sum(p.numel() for p in model().parameters())
        assert sum(res[r][2]) <= total // world + 2 * 16 * world * 2, res[r][2]


def checkpoint_then_continue(rank, world, state_dict, steps):
    """Loads state_dict (None: a fresh start) and params, trains `steps` more steps on the
    same data on every rank (so the average is exact at any world size)."""
    from opforge.torch.distributed import ZeroOptimizer
    m = model()
    if state_dict is not None:
        with torch.no_grad():
            for p, v in zip(m.parameters(), state_dict["params"]):
                p.copy_(torch.from_numpy(v))
    opt = ZeroOptimizer(groups(m), "adamw", stage=2 if world == 2 else 1, bucket_mb=0.0005,
                        lr=1e-2, weight_decay=0.05, timeout=30)
    if state_dict is not None:
        opt.load_state_dict(state_dict["optim"])
    first = 0 if state_dict is None else state_dict["steps"]
    for step in range(first, first + steps):
        opt.zero_grad()
        loss_of(m, *batch(step, 0)).backward()
        opt.step()
    sd = opt.state_dict()
    return snapshot(m), sd


def continue_single(cls, sd, steps, **kw):
    m = model()
    with torch.no_grad():
        for p, v in zip(m.parameters(), sd["params"]):
            p.copy_(torch.from_numpy(v))
    opt = cls(groups(m), lr=1e-2, weight_decay=0.05, **kw)
    opt.load_state_dict(sd["optim"])
    for step in range(sd["steps"], sd["steps"] + steps):
        opt.zero_grad()
        loss_of(m, *batch(step, 0)).backward()
        opt.step()
    return snapshot(m)


def test_checkpoint_moves_between_world_sizes_and_to_torch():
    whole = values(run_ranks(checkpoint_then_continue, 4, None, 4))[0][0]
    first = values(run_ranks(checkpoint_then_continue, 4, None, 2))
    assert all(sd is None for _, sd in first[1:])  # consolidated to rank 0 only
    params, sd = first[0]
    assert sorted(sd["state"]) == list(range(5))
    for i, p in enumerate(model().parameters()):
        assert sd["state"][i]["exp_avg"].shape == p.shape
    ckpt = {"params": params, "optim": sd, "steps": 2}
    for world in (2, 1):
        got = values(run_ranks(checkpoint_then_continue, world, ckpt, 2))
        for a, b in zip(got[0][0], whole):
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=f"K={world}")
    for cls in (oo.AdamW, torch.optim.AdamW):
        got = continue_single(cls, ckpt, 2)
        # torch's own AdamW rounds differently from the kernel: its tolerance
        tol = (RTOL, ATOL) if cls is oo.AdamW else (1e-5, 1e-6)
        for a, b in zip(got, whole):
            np.testing.assert_allclose(a, b, rtol=tol[0], atol=tol[1], err_msg=cls.__module__)


def accumulate(rank, world):
    """no_sync over two micro-batches equals one backward on their summed loss."""
    from opforge.torch.distributed import ZeroOptimizer
    out = []
    for micro in (True, False):
        m = model()
        opt = ZeroOptimizer(m.parameters(), "sgd", stage=2, lr=0.1, momentum=0.9,
                            bucket_mb=0.0005, timeout=30)
        x, y = batch(0, rank)
        if micro:
            with opt.no_sync():
                loss_of(m, x[:3], y[:3]).mul(3 / 7).backward()
            loss_of(m, x[3:], y[3:]).mul(4 / 7).backward()
        else:
            loss_of(m, x, y).backward()
        opt.step()
        out.append(snapshot(m))
    with pytest.raises(RuntimeError, match="second gradient before step"):
        loss_of(m, x, y).backward()
        loss_of(m, x, y).backward()
    return out


def test_no_sync_accumulates_and_a_second_backward_is_refused():
    for got in values(run_ranks(accumulate, 2)):
        for a, b in zip(*got):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def dies_mid_step(rank, world, victim, how):
    from opforge.torch.distributed import DistributedStepError, ZeroOptimizer
    m = model()
    opt = ZeroOptimizer(m.parameters(), "adam", bucket_mb=0.0005, timeout=6, lr=1e-3)
    loss_of(m, *batch(0, rank)).backward()
    opt.step()
    opt.zero_grad()
    if rank == victim:
        if how == "killed":
            os._exit(7)  # mid-step: after the first step, before this backward's exchanges
        time.sleep(60)  # hung: alive, never reaches the exchange
    t0 = time.monotonic()
    try:
        loss_of(m, *batch(1, rank)).backward()
        opt.step()
    except DistributedStepError as e:
        with pytest.raises(DistributedStepError, match="unusable"):
            opt.step()
        return time.monotonic() - t0, str(e)
    return None


@pytest.mark.parametrize("how", ["killed", "hung"])
def test_a_failed_rank_is_named_on_every_other_rank(how):
    res = run_ranks(dies_mid_step, 3, 2, how, timeout=60)
    assert res[2][0] == "killed"
    for r in (0, 1):
        kind, value = res[r]
        assert kind == "ok" and value is not None, res[r]
        elapsed, msg = value
        assert elapsed < 6 + 5, (elapsed, msg)  # within the timeout (+ the diagnosis)
        assert "rank 2" in msg and ("stopped" if how == "killed" else "elsewhere") in msg, msg


def refusals(rank, world):
    from opforge.torch.distributed import ZeroOptimizer
    m = model()
    bad = [(dict(optimizer="lamb"), "lamb"), (dict(optimizer="nadam"), "unknown optimizer"),
           (dict(stage=3), "stage must be 1 or 2"),
           (dict(compression="int4"), "compression must be"),
           (dict(optimizer="sgd", compression="onebit", lr=0.1), "needs optimizer 'adam'"),
           (dict(bucket_mb=0), "bucket_mb")]
    for kw, msg in bad:
        with pytest.raises(ValueError, match=msg):
            ZeroOptimizer(m.parameters(), **kw)
    with pytest.raises(ValueError, match="float32"):
        ZeroOptimizer([torch.nn.Parameter(torch.ones(3, dtype=torch.float64))])
    shapes = [torch.nn.Parameter(torch.ones(3 + rank))]  # the ranks disagree
    with pytest.raises(ValueError, match=f"rank {1 - rank}'s parameters differ from rank {rank}'s"):
        ZeroOptimizer(shapes)
    opt = ZeroOptimizer(m.parameters(), timeout=30)
    with pytest.raises(RuntimeError, match="fixed at construction"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.ones(2))]})
    return True


def test_refusals_name_the_offending_argument():
    assert all(values(run_ranks(refusals, 2)))


def test_needs_an_initialized_process_group():
    from opforge.torch.distributed import ZeroOptimizer
    with pytest.raises(RuntimeError, match="init_process_group"):
        ZeroOptimizer(model().parameters())


@pytest.mark.parametrize("numels,world,bucket", [([1], 1, 1), ([5, 17, 1000, 1], 4, 64),
                                                 ([65543, 3], 2, 10000), ([0, 7], 3, 16)])
def test_partition_layout(numels, world, bucket):
    """The flat layout: parameters last to first on 16-element boundaries, buckets split
    into equal slices, a rank's shard its slices back to back."""
    from opforge.torch.distributed._partition import Partition
    part = Partition(numels, world, bucket)
    order = sorted(range(len(numels)), key=lambda i: part.offsets[i])
    assert order == list(reversed(range(len(numels)))) or 0 in numels
    for i in range(len(numels)):
        assert part.offsets[i] % 16 == 0
    covered = sorted((part.offsets[i], part.offsets[i] + n) for i, n in enumerate(numels))
    for (_, end), (start, _) in zip(covered, covered[1:]):
        assert end <= start  # no overlap
    assert part.buckets[0][0] == 0
    for (s0, l0), (s1, _) in zip(part.buckets, part.buckets[1:]):
        assert s0 + l0 == s1
    assert sum(length for _, length in part.buckets) == part.total >= max(e for _, e in covered)
    assert all(length % (16 * world) == 0 for _, length in part.buckets)
    flat = torch.arange(part.total, dtype=torch.float32)
    shards = [part.shard_of(flat, r) for r in range(world)]
    assert sum(s.numel() for s in shards) == part.total
    assert torch.equal(part.flat_of(shards), flat)
    for i, n in enumerate(numels):  # a parameter's elements in the buckets it lists
        got = torch.cat([part.bucket_view(flat, b)[at:at + k]
                         for b in part.param_buckets[i]
                         for at, _, k in [part.part(i, b)]]) if n else torch.zeros(0)
        assert torch.equal(got, flat[part.offsets[i]:part.offsets[i] + n])
