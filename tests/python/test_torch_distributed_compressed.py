"""ZeroOptimizer with compressed gradients (fp16/bf16 with error feedback) and 1-bit Adam on
2 local ranks (spawned, gloo on 127.0.0.1): training converges to the uncompressed loss
within a stated margin, every rank holds bit-identical parameters, the bytes sent shrink as
promised, and 1-bit Adam's steps equal a one-process reference written from the paper."""

import numpy as np
import pytest
import torch

from dist_harness import run_ranks, values

if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

STEPS = 300
# The final loss with compression may exceed the final loss without (same data, seeds and
# steps) by this fraction of the initial loss. Measured (initial loss 0.35, both ranks'
# mean): fp16/bf16 with error feedback 0.000267-0.000268 against 0.000267 (a gap of 3e-6 of
# the initial loss), 1-bit Adam after a 60-step warm-up 0.00058-0.00074 against
# 0.00027-0.00047 (8e-4 of it): the runs end near the data's noise floor (1e-4), where 1-bit
# Adam's sign noise shows. A code that does not converge leaves a gap near the initial loss.
MARGIN = 0.005


def problem(rank):
    """A small regression: a fixed random teacher, each rank its own samples."""
    torch.manual_seed(0)
    teacher = torch.nn.Linear(20, 3)
    g = torch.Generator().manual_seed(10 + rank)
    x = torch.randn(512, 20, generator=g)
    with torch.no_grad():
        y = torch.tanh(teacher(x)) + 0.01 * torch.randn(512, 3, generator=g)
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(20, 31), torch.nn.Tanh(), torch.nn.Linear(31, 3))
    return model, x, y


def train(rank, world, compression, optimizer, stage, warmup=60):
    import torch.distributed as dist
    from opforge.torch.distributed import ZeroOptimizer
    model, x, y = problem(rank)
    opt = ZeroOptimizer(model.parameters(), optimizer, stage=stage, compression=compression,
                        onebit_warmup=warmup, onebit_chunk=64, bucket_mb=0.002, lr=1e-2,
                        weight_decay=1e-3, timeout=60)
    sent = []
    with torch.no_grad():
        initial = torch.nn.functional.mse_loss(model(x), y)
    for step in range(STEPS):
        i = (step * 32) % 512
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[i:i + 32]), y[i:i + 32]).backward()
        opt.step()
        sent.append(opt.last_step["bytes_sent"])
    with torch.no_grad():
        loss = torch.nn.functional.mse_loss(model(x), y)
    both = torch.stack([loss, initial])
    dist.all_reduce(both)
    params = [p.detach().numpy().copy() for p in model.parameters()]
    return float(both[0]) / world, params, sent, float(both[1]) / world


@pytest.mark.parametrize("compression,optimizer,stage", [("fp16", "adamw", 1),
                                                         ("bf16", "adamw", 2),
                                                         ("onebit", "adam", 1),
                                                         ("onebit", "adamw", 2)])
def test_compressed_training_reaches_the_uncompressed_loss(compression, optimizer, stage):
    base = values(run_ranks(train, 2, None, optimizer, stage, timeout=240))
    comp = values(run_ranks(train, 2, compression, optimizer, stage, timeout=240))
    for a, b in zip(comp[0][1], comp[1][1]):
        assert np.array_equal(a, b), "ranks differ"
    initial = base[0][3]
    print(f"{compression} {optimizer} stage {stage}: final loss {comp[0][0]:.3g} vs "
          f"{base[0][0]:.3g} uncompressed, initial {initial:.3g}")
    assert comp[0][0] <= base[0][0] + MARGIN * initial, (comp[0][0], base[0][0], initial)
    assert base[0][0] < 0.01 * initial  # it learned: the margin is small against the gap
    full = base[0][2][-1]  # uncompressed: fp32 reduce-scatter + fp32 all-gather
    n = sum(p.numel() for p in problem(0)[0].parameters())
    ring_allreduce = 2 * (2 - 1) / 2 * 4 * n  # what an fp32 all-reduce sends per rank
    if compression == "onebit":
        after = comp[0][2][-1]
        assert ring_allreduce / after >= 16, (ring_allreduce, after)
        assert comp[0][2][59] >= full * 0.99  # the warm-up is full precision
    else:
        assert comp[0][2][-1] < full * 0.8  # the reduce-scatter half as wide


def onebit_steps(rank, world, steps):
    from opforge.torch.distributed import ZeroOptimizer
    model, x, y = problem(rank)
    opt = ZeroOptimizer(model.parameters(), "adamw", compression="onebit", onebit_warmup=2,
                        onebit_chunk=64, lr=1e-2, weight_decay=1e-2, timeout=60)
    out = []
    for step in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[:32]), y[:32]).backward()
        opt.step()
        out.append([p.detach().numpy().copy() for p in model.parameters()])
    return out


def sign_code(s, chunk):
    """The 1-bit code of the paper, as a NumPy fp64 reference: per chunk the scale
    mean |s| and the signs (s >= 0 -> +1); returns the decompressed values."""
    c = s.reshape(-1, chunk)
    scale = np.abs(c).mean(axis=1, keepdims=True)
    return (scale * np.where(c >= 0, 1.0, -1.0)).reshape(-1)


def test_onebit_adam_equals_the_paper_in_one_process():
    world, steps, chunk, lr, wd, b1, b2, eps = 2, 5, 64, 1e-2, 1e-2, 0.9, 0.999, 1e-8
    got = values(run_ranks(onebit_steps, world, steps, timeout=120))
    models = [problem(r) for r in range(world)]
    shapes = [p.shape for p in models[0][0].parameters()]
    # ZeroOptimizer's flat layout (its chunks, so its scales): parameters last to first,
    # each starting at a multiple of 16 elements, padded to a multiple of world * chunk.
    offsets, end = [0] * len(shapes), 0
    for i in reversed(range(len(shapes))):
        offsets[i] = end
        end = -(-(end + int(np.prod(shapes[i]))) // 16) * 16
    npad = -(-end // (world * chunk)) * world * chunk
    pad = np.ones(npad, dtype=bool)  # padding: momentum and errors kept zero
    for off, shape in zip(offsets, shapes):
        pad[off:off + int(np.prod(shape))] = False

    def flat(tensors):
        out = np.zeros(npad)
        for off, t in zip(offsets, tensors):
            out[off:off + t.numel()] = t.detach().numpy().astype(np.float64).ravel()
        return out

    m, v = np.zeros(npad), np.zeros(npad)
    werr = [np.zeros(npad) for _ in range(world)]
    serr = np.zeros(npad)
    var = flat(list(models[0][0].parameters()))
    for t in range(1, steps + 1):
        grads = []
        for r in range(world):
            model, x, y = models[r]
            with torch.no_grad():
                for off, p in zip(offsets, model.parameters()):
                    p.copy_(torch.from_numpy(var[off:off + p.numel()].reshape(p.shape)))
            model.zero_grad()
            torch.nn.functional.mse_loss(model(x[:32]), y[:32]).backward()
            grads.append(flat([p.grad for p in model.parameters()]))
        if t <= 2:  # warm-up: AdamW on the averaged gradient
            g = sum(grads) / world
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            var = var * (1 - lr * wd) - lr / (1 - b1 ** t) * m / (
                np.sqrt(v / (1 - b2 ** t)) + eps)
            vfrozen = v / (1 - b2 ** t)
        else:
            sent = []
            for r in range(world):
                s = b1 * m + (1 - b1) * grads[r] + werr[r]
                d = sign_code(s, chunk)
                werr[r] = np.where(pad, 0.0, s - d)
                sent.append(d)
            mean = sum(sent) / world + serr
            m = np.where(pad, 0.0, sign_code(mean, chunk))
            serr = np.where(pad, 0.0, mean - sign_code(mean, chunk))
            var = var * (1 - lr * wd) - lr / (1 - b1 ** t) * m / (np.sqrt(vfrozen) + eps)
        for i, (off, shape) in enumerate(zip(offsets, shapes)):
            k = int(np.prod(shape))
            np.testing.assert_allclose(got[0][t - 1][i].ravel(), var[off:off + k],
                                       rtol=1e-4, atol=1e-6, err_msg=f"step {t} param {i}")
