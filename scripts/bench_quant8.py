#!/usr/bin/env python3
"""8-bit blockwise optimizer states and FP8 gradients against fp32: elements/s in one run.

    /usr/bin/python3 scripts/bench_quant8.py [--n 1e7] [--reps 25] [--threads 2]
        [--isa avx512,avx2]
        [--ops apply_adamw,apply_adam,apply_lion,apply_momentum,accumulate_grad]
        [--storages f32,q8s,q8ls,e4m3g,e5m2g,e4m3gq8s (also: bf16m,bf16mq8s)]
        [--write-docs]

The library and registry come from OPFORGE_LIBRARY / OPFORGE_REGISTRY (as for the package).
For each op, one process holds on its own buffers of N elements:

  f32        the fp32-state kernel (storage f32)
  q8s        8-bit states, dynamic map (storage q8s), blocks of 256
  q8ls       8-bit states, linear map (storage q8ls), where the op has it
  e4m3g      FP8 gradients (OCP E4M3 bits, a per-tensor scale), fp32 states; e5m2g: E5M2
  e4m3gq8s   FP8 gradients and 8-bit states
  bf16m      bf16 parameters and gradients, fp32 masters and states (not in the default
             --storages); bf16mq8s: with 8-bit states (its fp32-state peer is bf16m)
  bw f32     the bandwidth kernel with the fp32 kernel's traffic (its descriptor's bandwidth_op)
  bw q8      the bandwidth kernel with the 8-bit kernel's traffic (byte states)

Each rep calls every contender once, the order rotated every rep (interleaved, so a noisy
neighbour hits all of them); medians over reps. "x f32" is the contender's elements/s over the
fp32 kernel's (the issue's goal for 8-bit Adam: >= 1.6x); "% own bw" is its own bandwidth
kernel's median over its median. Bytes per element come from the descriptors (codes 1 byte;
the absmaxes, 4 bytes per 256 elements, are left out). Every table names the CPU and the ISA.
--storages keeps fewer contenders in the process (each holds its own buffers and its bandwidth
kernel's: at N = 1e8 all six need more than 24 GB); f32 is always one. --write-docs writes
the table into this script's section of scripts/BENCHMARKS.md.
"""

import argparse
import os
import statistics
import sys
import time

import bench_env  # noqa: E402  (first: runtime/python on sys.path)

np = bench_env.require("numpy")
import bench_docs  # noqa: E402
import opforge  # noqa: E402

SCALARS = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "beta1_power": 0.9,
           "beta2_power": 0.999, "weight_decay": 0.01, "step": 10.0, "momentum": 0.9,
           "grad_scale_inv": 2.0 ** -9, "scale": 0.5}
STORAGES = ("f32", "q8s", "q8ls", "e4m3g", "e5m2g", "e4m3gq8s", "bf16m", "bf16mq8s")
# The largest finite code's magnitude bits of each FP8 format (E4M3 0x7e = 448, E5M2 0x7b).
FP8_MAX_CODE = {"float8_e4m3fn": 0x7e, "float8_e5m2": 0x7b}


def buffers(desc, n, rng):
    """Arguments for one kernel: codes over all 256 values, absmaxes in [0.1, 1), states in
    [0.1, 1) (second moments stay positive), gradients in [-1, 1), FP8 gradients any finite
    code."""
    block = desc["shape"].get("block", 0)
    args = {}
    for inp in desc["inputs"]:
        name, role, dtype = inp["name"], inp["role"], inp["dtype"]
        if role == "scalar":
            if name in SCALARS:
                args[name] = SCALARS[name]
            continue
        if role == "block_scale":
            args[name] = rng.uniform(0.1, 1, (n + block - 1) // block).astype(np.float32)
        elif dtype in FP8_MAX_CODE:
            mag = rng.integers(0, FP8_MAX_CODE[dtype] + 1, n, dtype=np.uint8)
            args[name] = mag | (rng.integers(0, 2, n, dtype=np.uint8) << 7)
        elif dtype == "uint8":
            args[name] = rng.integers(0, 256, n, dtype=np.uint8)
        elif dtype == "bfloat16":
            args[name] = (rng.uniform(0.1, 1, n).astype(np.float32).view(np.uint32) >> 16
                          ).astype(np.uint16)
        else:
            lo = 0.1 if role == "state" else -1
            args[name] = rng.uniform(lo, 1, n).astype(np.float32)
    return args


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e7)
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--isa", default=None, help="ISAs, comma-separated (default: the best)")
    ap.add_argument("--ops",
                    default="apply_adamw,apply_adam,apply_lion,apply_momentum,accumulate_grad")
    ap.add_argument("--storages", default=",".join(STORAGES[:6]),
                    help="contenders, comma-separated (f32 is always timed)")
    ap.add_argument("--write-docs", action="store_true")
    a = ap.parse_args()
    storages = list(dict.fromkeys(["f32"] + a.storages.split(",")))  # in order, once each
    unknown = [s for s in storages if s not in STORAGES]
    if unknown:
        ap.error(f"--storages: unknown storage {unknown[0]!r} (known: {', '.join(STORAGES)})")
    n = int(a.n)
    reg = opforge.open()
    reg.set_num_threads(a.threads)
    rng = np.random.default_rng(1)
    lines = ["| op | ISA | contender | B/elem | median ms | Gelem/s | x f32 | % own bw |",
             "|---|---|---|---|---|---|---|---|"]
    isa_seen = set()
    for op, isa in [(op, isa) for op in a.ops.split(",")
                    for isa in (a.isa.split(",") if a.isa else [None])]:
        contenders = []
        for storage in storages:
            try:
                k = reg.select(op, {"storage": storage}, isa)
            except opforge.OpforgeError:
                continue
            d = k.descriptor
            isa_seen.add(d["target"]["isa"])
            bw = reg.select(d["bandwidth_op"], {}, d["target"]["isa"])
            traffic = d["traffic"]
            contenders.append((storage, k, buffers(d, n, rng), bw, buffers(bw.descriptor, n, rng),
                               traffic["bytes_read_per_element"]
                               + traffic["bytes_written_per_element"]))
        if not contenders:
            sys.exit(f"{op}: no variant in the registry")
        calls = []
        for storage, k, args, bw, bw_args, _ in contenders:
            calls.append((storage, k, args))
            calls.append(("bw " + storage, bw, bw_args))
        times = {name: [] for name, _, _ in calls}
        for name, k, args in calls:  # warm up: first-touch page faults, thread pool
            k.call(args)
        for r in range(a.reps):
            order = calls[r % len(calls):] + calls[:r % len(calls)]
            for name, k, args in order:
                t0 = time.perf_counter_ns()
                k.call(args)
                times[name].append((time.perf_counter_ns() - t0) / 1e6)
        med = {name: statistics.median(v) for name, v in times.items()}
        for storage, _, _, _, _, nbytes in contenders:
            ms = med[storage]
            lines.append(f"| {op} | {contenders[0][1].isa} | {storage} | {nbytes} | {ms:.2f} | "
                         f"{n / ms / 1e6:.2f} | "
                         f"{med['f32'] / ms:.2f}x | {100 * med['bw ' + storage] / ms:.0f}% |")
    isa = ", ".join(sorted(isa_seen))
    print(f"CPU: {bench_docs.cpu_model()} ({os.cpu_count()} logical CPUs); ISA: {isa}; "
          f"N = {n}, {a.threads} threads, {a.reps} interleaved reps (medians)")
    print("\n".join(lines))
    if a.write_docs:
        bench_docs.write_section("bench_quant8", lines, isa)


if __name__ == "__main__":
    main()
