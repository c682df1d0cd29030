#!/usr/bin/env python3
"""Benchmark opforge's apply_adam (through the opforge Python package) against torch.optim.Adam.

    /usr/bin/python3 scripts/bench_torch.py --registry DIR [--lib PATH]
        [--sizes 1e4,1e5,1e6,1e7] [--threads 2] [--reps N] [--isa avx2] [--json]
        [--write-docs]

For each size n, one process holds two independent sets of fp32 buffers (torch tensors,
contiguous): var/m/v/grad for opforge, and one parameter (+ its grad and Adam state) for
torch.optim.Adam(foreach=True). Each rep times one opforge_call and one optimizer.step()
with time.perf_counter_ns (the order alternates between reps); medians are reported.

opforge's apply_adam follows TensorFlow's ApplyAdam (epsilon added after the bias correction
is folded into lr_t); torch adds epsilon to the bias-corrected sqrt(v). Before timing, one
step from identical state is compared with a tiny epsilon, where the two agree.

GB/s for opforge counts 28 bytes/element: reads var, m, v, grad and writes var, m, v (fp32).

--write-docs also writes the table, with the date, command, CPU and ISA, into this script's
section of scripts/BENCHMARKS.md (between <!-- begin bench_torch --> and its end).
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

import bench_env  # noqa: E402  (first: OMP_WAIT_POLICY before torch; runtime/python on sys.path)

torch = bench_env.require("torch")
import bench_docs  # noqa: E402  (this directory: sys.path[0] when run as a script)
import opforge  # noqa: E402
from opforge import OpforgeError  # noqa: E402

BYTES_PER_ELEMENT = 28  # 4 reads + 3 writes, fp32

# Hyperparameters used for timing (and, except epsilon, for the correctness check).
LR = 1e-3
BETA1 = 0.9
BETA2 = 0.999
EPS = 1e-8
CHECK_EPS = 1e-12
CHECK_N = 1000
CHECK_TOL = 1e-4


class AdamCall:
    """A prepared apply_adam call over torch fp32 tensors: the arguments are converted once
    (Kernel.prepare), so a timed call is one ctypes call into opforge_call."""

    TENSORS = ("var", "m", "v", "grad")

    def __init__(self, kernel, tensors):
        for name in self.TENSORS:
            t = tensors[name]
            if t.dtype != torch.float32 or not t.is_contiguous() or t.device.type != "cpu":
                raise ValueError(f"{name}: need a contiguous float32 CPU tensor")
        self._call = kernel.prepare({n: tensors[n] for n in self.TENSORS}, beta1_power=0.0,
                                    beta2_power=0.0, lr=0.0, beta1=0.0, beta2=0.0, epsilon=0.0)

    def set_scalars(self, beta1_power, beta2_power, lr, beta1, beta2, epsilon):
        self._call.set_scalars(beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
                               beta1=beta1, beta2=beta2, epsilon=epsilon)

    def __call__(self):
        self._call()


def make_torch_adam(var0, grad, lr, betas, eps):
    p = torch.nn.Parameter(var0.clone())
    p.grad = grad.clone()
    opt = torch.optim.Adam([p], lr=lr, betas=betas, eps=eps, foreach=True)
    return p, opt


# ---------------------------------------------------------------------------------------
# Correctness sanity check
# ---------------------------------------------------------------------------------------

def max_rel_diff(a, b, floor=1e-30):
    a = a.double()
    b = b.double()
    return ((a - b).abs() / b.abs().clamp_min(floor)).max().item()


def check(kernel):
    """One step from identical state (m = v = 0, t = 1) with a tiny epsilon, where TF's and
    torch's epsilon conventions agree to well below the tolerance."""
    g = torch.Generator().manual_seed(1234)
    # var kept small so that the fp32 rounding of var does not swamp the ~lr-sized update.
    var0 = torch.randn(CHECK_N, generator=g, dtype=torch.float32) * 0.1
    grad = torch.randn(CHECK_N, generator=g, dtype=torch.float32)

    of_t = {"var": var0.clone(), "m": torch.zeros(CHECK_N), "v": torch.zeros(CHECK_N),
            "grad": grad.clone()}
    call = AdamCall(kernel, of_t)
    t = 1
    call.set_scalars(BETA1 ** t, BETA2 ** t, LR, BETA1, BETA2, CHECK_EPS)
    call()

    p, opt = make_torch_adam(var0, grad, LR, (BETA1, BETA2), CHECK_EPS)
    opt.step()

    res = {"n": CHECK_N, "t": t, "lr": LR, "beta1": BETA1, "beta2": BETA2,
           "epsilon": CHECK_EPS, "tolerance": CHECK_TOL}
    with torch.no_grad():
        res["var_max_rel_diff"] = max_rel_diff(of_t["var"], p.detach())
        # The update itself (var - var0), in float64: a much stricter comparison than var.
        res["update_max_rel_diff"] = max_rel_diff(of_t["var"].double() - var0.double(),
                                                  p.detach().double() - var0.double())
        st = opt.state.get(p, {})
        compared = ["var"]
        if isinstance(st.get("exp_avg"), torch.Tensor) and st["exp_avg"].shape == var0.shape:
            res["m_max_rel_diff"] = max_rel_diff(of_t["m"], st["exp_avg"])
            compared.append("m")
        if (isinstance(st.get("exp_avg_sq"), torch.Tensor)
                and st["exp_avg_sq"].shape == var0.shape):
            res["v_max_rel_diff"] = max_rel_diff(of_t["v"], st["exp_avg_sq"])
            compared.append("v")
    res["compared"] = compared
    worst = max(res[k] for k in res if k.endswith("_max_rel_diff"))
    res["max_rel_diff"] = worst
    res["ok"] = bool(worst < CHECK_TOL)
    return res


# ---------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------

def bench_size(kernel, n, reps, target_s, seed):
    g = torch.Generator().manual_seed(seed)
    var0 = torch.randn(n, generator=g, dtype=torch.float32)
    grad = torch.randn(n, generator=g, dtype=torch.float32)

    # opforge's buffers; torch gets its own copies (no sharing of memory between the two).
    of_t = {"var": var0.clone(), "m": torch.zeros(n), "v": torch.zeros(n), "grad": grad.clone()}
    call = AdamCall(kernel, of_t)
    p, opt = make_torch_adam(var0, grad, LR, (BETA1, BETA2), EPS)

    step = [0]  # opforge's step count, advanced like torch's

    def of_step():
        step[0] += 1
        t = step[0]
        call.set_scalars(BETA1 ** t, BETA2 ** t, LR, BETA1, BETA2, EPS)
        t0 = time.perf_counter_ns()
        call()
        return time.perf_counter_ns() - t0

    def torch_step():
        t0 = time.perf_counter_ns()
        opt.step()
        return time.perf_counter_ns() - t0

    # Warm-up (page faults, thread pools, torch's lazy state init), also used to size reps.
    warm_of, warm_th = [], []
    warm_deadline = time.perf_counter() + 0.2
    for i in range(200):
        warm_of.append(of_step())
        warm_th.append(torch_step())
        if i >= 4 and time.perf_counter() > warm_deadline:
            break
    if reps is None:
        per_rep_s = (statistics.median(warm_of) + statistics.median(warm_th)) * 1e-9
        reps = int(min(max(21, math.ceil(target_s / max(per_rep_s, 1e-9))), 200000))

    t_of = [0] * reps
    t_th = [0] * reps
    for r in range(reps):
        if r & 1:
            t_th[r] = torch_step()
            t_of[r] = of_step()
        else:
            t_of[r] = of_step()
            t_th[r] = torch_step()

    if not (torch.isfinite(of_t["var"]).all() and torch.isfinite(p.detach()).all()):
        raise RuntimeError(f"n={n}: non-finite values after the benchmark steps")

    of_us = statistics.median(t_of) / 1e3
    th_us = statistics.median(t_th) / 1e3
    return {
        "n": n,
        "reps": reps,
        "opforge_median_us": of_us,
        "torch_median_us": th_us,
        "speedup": th_us / of_us,
        "opforge_gbps": BYTES_PER_ELEMENT * n / (of_us * 1e-6) / 1e9,
        "opforge_min_us": min(t_of) / 1e3,
        "torch_min_us": min(t_th) / 1e3,
    }


# ---------------------------------------------------------------------------------------

def parse_sizes(s):
    out = []
    for tok in s.split(","):
        tok = tok.strip()
        if not tok:
            continue
        try:
            x = float(tok)
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad size {tok!r}")
        if not x.is_integer() or x < 1 or x > 2147483647:
            raise argparse.ArgumentTypeError(f"size {tok!r} must be an integer in [1, 2^31-1]")
        out.append(int(x))
    if not out:
        raise argparse.ArgumentTypeError("no sizes given")
    return out


def fmt_n(n):
    e = int(round(math.log10(n))) if n > 0 else 0
    return f"1e{e}" if 10 ** e == n else str(n)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_lib = os.path.normpath(os.path.join(here, "..", "build", "runtime",
                                                "libopforge_runtime.so"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--registry", required=True, help="registry dir written by `opforge build`")
    ap.add_argument("--lib", default=default_lib,
                    help=f"libopforge_runtime.so (default: {default_lib})")
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1e4,1e5,1e6,1e7"),
                    help="comma-separated element counts (default 1e4,1e5,1e6,1e7)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both (default 2)")
    ap.add_argument("--reps", type=int, default=None,
                    help="timed reps per size (default: ~1.5 s per size, at least 21)")
    ap.add_argument("--target-seconds", type=float, default=1.5,
                    help="time per size when --reps is not given (default 1.5)")
    ap.add_argument("--isa", default=None, help="opforge ISA (default: best for this CPU)")
    ap.add_argument("--json", action="store_true", help="also print a JSON object")
    ap.add_argument("--write-docs", action="store_true",
                    help="also replace this script's section of scripts/BENCHMARKS.md")
    args = ap.parse_args()

    if args.write_docs:
        try:
            bench_docs.check_section("bench_torch")
        except (OSError, ValueError) as e:
            ap.error(f"--write-docs: {bench_docs.BENCHMARKS}: {e}")
    if args.threads < 1:
        ap.error("--threads must be >= 1")
    if args.reps is not None and args.reps < 1:
        ap.error("--reps must be >= 1")

    lib = os.path.abspath(args.lib)
    if not os.path.isfile(lib):
        sys.exit(f"error: opforge runtime library not found: {lib}\n"
                 f"  build it with: ninja -C build  (or pass --lib PATH)")
    reg_dir = os.path.abspath(args.registry)
    if not os.path.isdir(reg_dir):
        sys.exit(f"error: registry directory not found: {reg_dir}\n"
                 f"  create one with: ./build/registry/cli/opforge build --registry {reg_dir}")
    if not os.path.isfile(os.path.join(reg_dir, "index.json")):
        sys.exit(f"error: {reg_dir} is not an opforge registry (no index.json)\n"
                 f"  create one with: ./build/registry/cli/opforge build --registry {reg_dir}")

    torch.set_num_threads(args.threads)

    os.environ["OPFORGE_LIBRARY"] = lib  # read when the package first loads the library
    try:
        of = opforge.open(reg_dir)
        of.set_num_threads(args.threads)
        kernel = of.select("apply_adam", {"use_nesterov": False}, args.isa)
    except OpforgeError as e:
        sys.exit(f"error: {e}")

    try:
        info = {
            "op": "apply_adam",
            "variant": kernel.variant,
            "isa": kernel.isa,
            "registry": reg_dir,
            "lib": lib,
            "threads": args.threads,
            "torch_threads": torch.get_num_threads(),
            "torch_version": torch.__version__,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "cpu": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "lr": LR, "beta1": BETA1, "beta2": BETA2, "epsilon": EPS,
            "bytes_per_element": BYTES_PER_ELEMENT,
        }
        print(f"opforge {info['variant']} ({info['isa']}) vs torch {torch.__version__} "
              f"Adam(foreach=True); threads={args.threads} (torch reports "
              f"{info['torch_threads']}), OMP_WAIT_POLICY={info['omp_wait_policy']}",
              flush=True)

        chk = check(kernel)
        parts = [f"{k[:-len('_max_rel_diff')]} {chk[k]:.3g}"
                 for k in ("var_max_rel_diff", "update_max_rel_diff", "m_max_rel_diff",
                           "v_max_rel_diff") if k in chk]
        print(f"check (n={CHECK_N}, one step t=1, eps={CHECK_EPS:g}): max rel diff "
              f"{', '.join(parts)} (tol {CHECK_TOL:g}) -> {'OK' if chk['ok'] else 'FAIL'}",
              flush=True)
        if not chk["ok"]:
            if args.json:
                print(json.dumps({"info": info, "check": chk, "results": []}, indent=2))
            sys.exit("error: opforge apply_adam and torch Adam disagree beyond tolerance")

        results = []
        for i, n in enumerate(args.sizes):
            r = bench_size(kernel, n, args.reps, args.target_seconds, seed=100 + i)
            results.append(r)
            print(f"  n={fmt_n(n)}: reps={r['reps']} opforge {r['opforge_median_us']:.1f} us, "
                  f"torch {r['torch_median_us']:.1f} us", file=sys.stderr, flush=True)
    except (OpforgeError, RuntimeError, ValueError) as e:
        sys.exit(f"error: {e}")
    finally:
        of.close()

    table = ["| n | reps | opforge median (µs) | torch median (µs) | speed-up (torch/opforge) "
             "| opforge GB/s |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        table.append(f"| {fmt_n(r['n'])} | {r['reps']} | {r['opforge_median_us']:.1f} "
                     f"| {r['torch_median_us']:.1f} | {r['speedup']:.2f}x "
                     f"| {r['opforge_gbps']:.1f} |")
    print()
    print("\n".join(table))
    if args.write_docs:
        notes = [f"opforge {info['variant']} vs torch {info['torch_version']} "
                 f"Adam(foreach=True); threads: {args.threads} (torch {info['torch_threads']}); "
                 f"OMP_WAIT_POLICY={info['omp_wait_policy']}; medians"]
        path = bench_docs.write_section("bench_torch", table, info["isa"], notes=notes)
        print(f"wrote {os.path.relpath(path)}", file=sys.stderr)

    if args.json:
        print(json.dumps({"info": info, "check": chk, "results": results}, indent=2))


if __name__ == "__main__":
    main()
