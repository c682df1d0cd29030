#!/usr/bin/env python3
"""ZeroOptimizer's step on 1, 2 and 4 local ranks against DistributedDataParallel +
torch.optim.AdamW, one run.

    /usr/bin/python3 scripts/bench_zero.py [--ranks 1,2,4] [--steps 4] [--rounds 2]
        [--configs none,fp16,onebit,ddp] [--stage 1] [--scale 1.0] [--threads 1]

The library and registry come from OPFORGE_LIBRARY / OPFORGE_REGISTRY (as for the package).
Parameters: GPT-2 small's 148 tensors (the runtime's "transformer-small" preset, 124,439,808
elements; --scale shrinks every tensor). The backward is synthetic: a chain over the tensors
(x = x + (p * w).sum(), last tensor first in the backward), so each gradient costs one
elementwise product, written tensor by tensor in backward order as a real model's are; a real
model's backward is compute-heavier and hides more of the exchange.

Each config runs `steps` steps on every rank (after one untimed step; onebit: after its
warm-up of 2 steps, so the timed steps are compressed), the configs interleaved over
`rounds`; medians over steps and rounds, rank 0's view:

  backward     loss.backward(): includes the buckets exchanged from the hooks (ZeRO) or
               DDP's all-reduce buckets
  rs wait      ZeroOptimizer.step's wait for the reduce-scatters not finished in backward
  update       the opforge kernel call(s) on the shard (1-bit: the whole compressed step)
  all-gather   the parameters' all-gather
  step         optimizer.step() in all (DDP: torch.optim.AdamW(foreach=True).step())
  MB sent      per rank and step: ZeroOptimizer counts what it sends; DDP's is computed for
               a ring all-reduce, 2 (K-1)/K of the fp32 gradients

All ranks share this host's cores (K processes of `threads` threads each): times measure
this host's contention as much as the algorithms; the bytes are what a network would carry.
The CPU model and ISA head the output.
"""

import argparse
import datetime
import gc
import os
import socket
import statistics
import sys
import time

import bench_env  # noqa: F401  (first: OMP_WAIT_POLICY, this tree's package)

torch = bench_env.require("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import bench_docs  # noqa: E402
import opforge  # noqa: E402

CONFIGS = ("none", "fp16", "bf16", "onebit", "ddp")


def shapes(scale):
    layout = opforge.ModelLayout.preset("transformer-small")
    return [max(1, int(n * scale)) for n in layout.elements]


class Chain(torch.nn.Module):
    """The parameters, and a forward whose backward writes each gradient in turn."""

    def __init__(self, sizes):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.ps = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.randn(n, generator=g) * 0.02) for n in sizes])
        self.ws = [torch.randn(n, generator=g) for n in sizes]

    def forward(self):
        x = torch.zeros(())
        for p, w in zip(self.ps, self.ws):
            x = x + (p * w).sum()
        return x


def run_config(rank, world, config, sizes, steps, stage):
    from opforge.torch.distributed import ZeroOptimizer
    model = Chain(sizes)
    n = sum(sizes)
    if config == "ddp":
        net = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    else:
        net = model
        opt = ZeroOptimizer(model.parameters(), "adamw", stage=stage,
                            compression=None if config == "none" else config,
                            onebit_warmup=2, lr=1e-4, timeout=600)
    rows = []
    warm = 3 if config == "onebit" else 1
    for step in range(warm + steps):
        opt.zero_grad()
        loss = net()
        dist.barrier()
        t0 = time.perf_counter()
        loss.backward()
        t1 = time.perf_counter()
        opt.step()
        t2 = time.perf_counter()
        if step < warm:
            continue
        if config == "ddp":
            rows.append(dict(backward=t1 - t0, step=t2 - t1,
                             sent=2 * (world - 1) / world * 4 * n))
        else:
            ls = opt.last_step
            rows.append(dict(backward=t1 - t0, step=t2 - t1, sent=ls["bytes_sent"],
                             rs_wait=ls.get("reduce_wait"), update=ls.get("update"),
                             all_gather=ls.get("all_gather")))
    del opt, net, model
    gc.collect()  # the optimizer's hooks and the parameters' views form cycles: free it now
    return rows


def rank_main(rank, world, port, args, queue):
    from opforge.torch.optim._base import default_registry
    torch.set_num_threads(args.threads)
    default_registry().set_num_threads(args.threads)  # the kernels' Halide thread pool
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=900))
    sizes = shapes(args.scale)
    results = {c: [] for c in args.configs}
    for _ in range(args.rounds):
        for config in args.configs:
            results[config] += run_config(rank, world, config, sizes, args.steps, args.stage)
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def median(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--configs", default="none,fp16,onebit,ddp")
    ap.add_argument("--stage", type=int, default=1, choices=(1, 2))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    args.configs = args.configs.split(",")
    for c in args.configs:
        if c not in CONFIGS:
            sys.exit(f"error: --configs: unknown config '{c}' (one of {', '.join(CONFIGS)})")
    cpu = bench_docs.cpu_model()
    with opforge.open() as reg:  # the ISA the ranks' kernels are selected for
        isa = reg.select("apply_adamw", {"convention": "torch", "epsilon_mode": "torch"}).isa
    n = sum(shapes(args.scale))
    print(f"CPU: {cpu}, {os.cpu_count()} CPUs; ISA: {isa}; {n:,} parameters "
          f"({n * 4 / 2 ** 20:.0f} MB fp32); stage {args.stage}; {args.threads} thread(s) "
          "per rank; medians in ms")
    print("| ranks | config | backward | rs wait | update | all-gather | step | MB sent "
          "| vs fp32 all-reduce |")
    print("|---|---|---|---|---|---|---|---|---|")
    ctx = mp.get_context("spawn")
    for world in [int(k) for k in args.ranks.split(",")]:
        queue = ctx.SimpleQueue()
        port = free_port()
        procs = [ctx.Process(target=rank_main, args=(r, world, port, args, queue))
                 for r in range(world)]
        for p in procs:
            p.start()
        while queue.empty():  # rank 0's results, unless a rank died (e.g. out of memory)
            if any(p.exitcode not in (None, 0) for p in procs):
                for p in procs:
                    p.kill()
                sys.exit(f"error: a rank of the {world}-rank run died (exit codes "
                         f"{[p.exitcode for p in procs]}); try a smaller --scale")
            time.sleep(0.5)
        results = queue.get()
        for p in procs:
            p.join()
        ring = 2 * (world - 1) / world * 4 * n
        for config, rows in results.items():
            cells = [median(rows, k) for k in ("backward", "rs_wait", "update", "all_gather",
                                               "step")]
            sent = median(rows, "sent")
            ratio = f"{ring / sent:.1f}x fewer" if sent else "-"
            print(f"| {world} | {config} | " + " | ".join(
                "-" if c is None else f"{c * 1e3:.0f}" for c in cells) +
                f" | {sent / 2 ** 20:.1f} | {ratio} |")


if __name__ == "__main__":
    main()
