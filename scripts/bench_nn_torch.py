#!/usr/bin/env python3
"""Benchmark opforge's NN ops (opforge Python package) against PyTorch eager on the same tensors.

    /usr/bin/python3 scripts/bench_nn_torch.py [--registry DIR] [--lib PATH] [--op OP ...]
        [--shape NAME=D0,D1,..] [--scalar NAME=VALUE] [--attr NAME=VALUE] [--isa avx2]
        [--threads 2] [--reps 31] [--warm] [--json] [--write-docs]

The PyTorch peer column for `opforge bench nn` (which has oneDNN as its peer), measured in one
process. By default every op of kind "nn" in the registry runs on its descriptor's
`cost.example` call; `--op OP` (repeatable) picks ops, and `--shape NAME=D0,D1,..` /
`--scalar NAME=VALUE` override the example like `opforge bench OP` (they need --op).
`--attr NAME=VALUE` (repeatable) selects the variant, e.g. transpose_b=true, approximate=tanh,
algorithm=direct.

For each op the inputs are seeded uniform [-1, 1) fp32 numpy arrays, 64-byte aligned. opforge
picks its variant by shape (opforge_select_for), gives the outputs' shapes
(opforge_output_shape) and writes into preallocated outputs; torch runs on the SAME arrays
(torch.from_numpy, no copies) and allocates its result per call, as eager code does:

    layer_norm        F.layer_norm(x, (C,), gamma, beta, eps)
    rms_norm          x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma
                      (torch 1.13 has no F.rms_norm: this is LLaMA's RMSNorm.forward, 4 kernels)
    softmax           torch.softmax(x, -1)
    gelu              F.gelu(x, approximate=<the variant's attr>)
    matmul            torch.matmul(a or a.transpose(-1, -2), b or b.transpose(-1, -2)) (views)
    conv2d            F.conv2d(x, weight, None, stride, padding, dilation, groups)
    conv2d_bias_relu  F.relu(F.conv2d(x, weight, bias, ...), inplace=True) (relu on conv's
                      fresh output, as nn.ReLU(inplace=True) does; no second allocation)

Before timing, one call of each is compared: |opforge - torch| <= atol + rtol*|torch| with the
selected variant's tolerance (which is stated against an fp64 reference, so torch's own fp32
error counts against it too); the worst err/tol ratio is printed. A sanity check, not the tests.

Timing: the thread pools get --threads (torch.set_num_threads, OpenBLAS's own,
opforge_set_num_threads), with OMP_WAIT_POLICY=passive set before torch loads (see
bench_env.py). Calls are interleaved (the order alternating between reps), each timed alone with
time.perf_counter_ns; medians of --reps. Caches are cold like `opforge bench`
(registry/cli/bench/bench_nn.cpp): before each timed call a read+write pass over 2 x L3 as
glibc's sysconf reports it, clamped to [64, 256] MB, evicts what the previous call left; --warm
skips it. GFLOP/s counts the descriptor's cost.flops ("-" for memory-bound ops, whose GB/s from
cost.bytes is in --json).

torch.matmul goes to the BLAS that Debian's libblas.so.3 alternative points at (torch is built
with BLAS_INFO=generic): OpenBLAS, which scripts/setup.sh installs (with only libblas3 it is
netlib's untuned reference BLAS); the header line names it (bench_env.blas_summary). conv2d
goes to oneDNN (torch's mkldnn).

--write-docs also writes the table, with the date, command, CPU and ISA, into this script's
section of scripts/BENCHMARKS.md (between <!-- begin bench_nn_torch --> and its end).
"""

import argparse
import ctypes
import gc
import json
import os
import platform
import statistics
import sys
import time

import bench_env  # noqa: E402  (first: OMP_WAIT_POLICY before torch; runtime/python on sys.path)

np, torch, F = bench_env.require("numpy", "torch", "torch.nn.functional")
import bench_docs  # noqa: E402  (this directory: sys.path[0] when run as a script)
import opforge  # noqa: E402
from opforge import OpforgeError  # noqa: E402

SEED = 1234
_SC_LEVEL3_CACHE_SIZE = 194  # glibc <bits/confname.h>; Python's os.sysconf does not know it


def aligned_empty(shape, align=64):
    """A C-contiguous float32 array whose data starts on an `align`-byte boundary (like the
    64-byte aligned buffers of `opforge bench`), so neither side is favoured by alignment."""
    n = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(n + align // 4, dtype=np.float32)
    off = (-raw.ctypes.data % align) // 4
    return raw[off:off + n].reshape(shape)


# ---------------------------------------------------------------------------------------
# Shape expressions (registry/format/shape_expr.h), for cost.flops / cost.bytes
# ---------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------
# The torch equivalents
# ---------------------------------------------------------------------------------------

def attr_value(desc, name):
    for a in desc.get("attrs", []):
        if a["name"] == name:
            return a["value"]
    raise KeyError(f"{desc['variant']}: no attr {name!r}")


def torch_equivalent(op, desc, t, s):
    """A no-argument callable computing op on the torch views `t` with scalars `s`, or None."""
    if op == "layer_norm":
        x, gamma, beta, eps = t["x"], t["gamma"], t["beta"], s["eps"]
        return lambda: F.layer_norm(x, tuple(gamma.shape), gamma, beta, eps)
    if op == "rms_norm":
        x, gamma, eps = t["x"], t["gamma"], s["eps"]
        return lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma
    if op == "softmax":
        x = t["x"]
        return lambda: torch.softmax(x, -1)
    if op == "gelu":
        x, approximate = t["x"], str(attr_value(desc, "approximate"))
        return lambda: F.gelu(x, approximate=approximate)
    if op == "matmul":
        a = t["a"].transpose(-1, -2) if attr_value(desc, "transpose_a") else t["a"]
        b = t["b"].transpose(-1, -2) if attr_value(desc, "transpose_b") else t["b"]
        return lambda: torch.matmul(a, b)
    if op in ("conv2d", "conv2d_bias_relu"):
        x, w = t["x"], t["weight"]
        stride = (int(s["stride_h"]), int(s["stride_w"]))
        padding = (int(s["pad_h"]), int(s["pad_w"]))
        dilation = (int(s["dilation_h"]), int(s["dilation_w"]))
        groups = int(s["groups"])
        if op == "conv2d":
            return lambda: F.conv2d(x, w, None, stride, padding, dilation, groups)
        bias = t["bias"]
        return lambda: F.relu(F.conv2d(x, w, bias, stride, padding, dilation, groups),
                              inplace=True)
    return None


# ---------------------------------------------------------------------------------------
# One op
# ---------------------------------------------------------------------------------------

def parse_example(text):
    out = {}
    for tok in (text or "").split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    return out


def parse_dims(name, text):
    try:
        dims = [int(d) for d in text.split(",")]
    except ValueError:
        dims = None
    if not dims or any(d < 0 for d in dims):
        raise ValueError(f"--shape {name}={text}: expected D0,D1,... (integers >= 0)")
    return dims


def make_evictor(warm):
    """`opforge bench`'s cold-cache pass: read and write one byte per 64-byte line of a buffer
    of max(2 x L3, 64 MB). None with --warm."""
    if warm:
        return None, 0
    try:
        libc = ctypes.CDLL(None)
        libc.sysconf.argtypes = [ctypes.c_int]
        libc.sysconf.restype = ctypes.c_long
        l3 = max(int(libc.sysconf(_SC_LEVEL3_CACHE_SIZE)), 0)
    except (OSError, AttributeError):
        l3 = 0
    size = min(max(2 * l3, 64 << 20), 256 << 20)  # as opforge bench: glibc says 320 MiB here
    lines = np.ones(size, dtype=np.uint8)[::64]

    def evict():
        np.add(lines, 1, out=lines)  # in place on the strided view: reads and writes each line

    return evict, size


def bench_op(of, registry, op, args, evict, seed):
    """Runs one op on its example (with the overrides); returns its result dict."""
    descs = registry["by_op"][op]
    d0 = descs[0]
    values = parse_example(d0.get("cost", {}).get("example", ""))
    inputs = {i["name"]: i for i in d0["inputs"]}
    for text in args.shape:
        name, _, dims = text.partition("=")
        if name not in inputs or inputs[name]["role"] == "scalar":
            raise ValueError(f"--shape {name}: op '{op}' has no tensor input '{name}'")
        values[name] = dims
    given = {}
    for text in args.scalar:
        name, _, v = text.partition("=")
        if name not in inputs or inputs[name]["role"] != "scalar":
            raise ValueError(f"--scalar {name}: op '{op}' has no such scalar")
        try:
            given[name] = float(v)
        except ValueError:
            raise ValueError(f"--scalar {text}: expected NAME=NUMBER")

    rng = np.random.default_rng(seed)
    tensors, scalars, shapes, problem = {}, {}, {}, []
    for inp in d0["inputs"]:
        name = inp["name"]
        if inp["role"] == "scalar":
            if name in given:
                scalars[name] = given[name]
            elif name in values:
                scalars[name] = float(values[name])
            else:
                raise ValueError(f"op '{op}': give --scalar {name}=VALUE (the example has none)")
            problem.append(f"{name}={scalars[name]:g}")
            continue
        if inp["dtype"] != "float32":
            raise ValueError(f"op '{op}': input {name} is {inp['dtype']}; only float32 is handled")
        if name not in values:
            raise ValueError(f"op '{op}': give --shape {name}=D0,D1,... (the example has none)")
        dims = parse_dims(name, values[name])
        a = aligned_empty(dims)
        a[...] = rng.random(a.shape, dtype=np.float32) * 2 - 1  # uniform [-1, 1)
        tensors[name] = a
        shapes[name] = dims
        problem.append(f"{name}={values[name]}")

    attrs = ",".join(args.attr) if args.attr else None
    in_args = {**tensors, **scalars}
    kernel = of.select_for(op, in_args, attrs=attrs, isa=args.isa)
    variant = kernel.variant
    desc = registry["by_variant"][variant]
    outputs = {}
    for j, out in enumerate(desc["outputs"]):
        if out["dtype"] != "float32":
            raise ValueError(f"op '{op}': output {out['name']} is {out['dtype']}")
        o = aligned_empty(kernel.output_shape(j, in_args))
        o.fill(0)  # first-touch the pages, like `opforge bench`'s memset
        outputs[out["name"]] = o
    call_args = {**tensors, **outputs, **scalars}
    # Arguments converted once: a timed call is one ctypes call into opforge_call.
    of_call = kernel.prepare(call_args)

    t_views = {n: torch.from_numpy(a) for n, a in tensors.items()}  # shares memory
    th_call = torch_equivalent(op, desc, t_views, scalars)

    # The descriptor's cost expressions, evaluated by the runtime for this call.
    cost = desc.get("cost", {})
    flops = kernel.shape_value(cost["flops"], call_args) if cost.get("flops") else 0
    nbytes = kernel.shape_value(cost["bytes"], call_args) if cost.get("bytes") else 0
    tol = desc["tolerance"]
    res = {"op": op, "problem": " ".join(problem), "variant": variant, "isa": kernel.isa,
           "algorithm": (desc.get("algorithm") or {}).get("name", ""),
           "flops": flops, "bytes": nbytes, "rtol": tol["rtol"], "atol": tol["atol"]}

    # Check (also the first warm-up call of each).
    with torch.no_grad():
        of_call()
        if th_call is None:
            res["torch_error"] = f"no torch equivalent of {op} in this script"
        else:
            ref = th_call()
            got = next(iter(outputs.values()))
            if tuple(ref.shape) != got.shape:
                raise RuntimeError(f"{op}: torch gives shape {tuple(ref.shape)}, opforge "
                                   f"{got.shape}")
            r = ref.numpy().astype(np.float64)
            err = np.abs(got.astype(np.float64) - r)
            ratio = err / (tol["atol"] + tol["rtol"] * np.abs(r))
            worst = int(np.argmax(ratio)) if ratio.size else 0
            res["worst_err_over_tol"] = float(ratio.flat[worst]) if ratio.size else 0.0
            res["max_abs_err"] = float(err.max()) if err.size else 0.0
            res["check_ok"] = bool(np.isfinite(got).all() and res["worst_err_over_tol"] <= 1)
            del ref, r, err, ratio
            th_call()  # second warm-up call for torch (its allocator, oneDNN primitives)
        of_call()

        def timed(f):
            if evict is not None:
                evict()
            t0 = time.perf_counter_ns()
            f()
            return time.perf_counter_ns() - t0

        t_of, t_th = [], []
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            for r in range(args.reps):
                if th_call is None:
                    t_of.append(timed(of_call))
                elif r & 1:
                    t_th.append(timed(th_call))
                    t_of.append(timed(of_call))
                else:
                    t_of.append(timed(of_call))
                    t_th.append(timed(th_call))
        finally:
            if gc_was_enabled:
                gc.enable()

    of_s = statistics.median(t_of) * 1e-9
    res["reps"] = args.reps
    res["opforge_ms"] = of_s * 1e3
    res["opforge_gflops"] = flops / of_s / 1e9 if flops else None
    res["opforge_gbps"] = nbytes / of_s / 1e9 if nbytes else None
    if t_th:
        th_s = statistics.median(t_th) * 1e-9
        res["torch_ms"] = th_s * 1e3
        res["torch_gflops"] = flops / th_s / 1e9 if flops else None
        res["torch_gbps"] = nbytes / th_s / 1e9 if nbytes else None
        res["torch_over_opforge"] = th_s / of_s
    return res


# ---------------------------------------------------------------------------------------

def load_registry(reg_dir):
    with open(os.path.join(reg_dir, "index.json")) as f:
        index = json.load(f)
    by_op, by_variant = {}, {}
    for e in index["variants"]:
        with open(os.path.join(reg_dir, e["descriptor"])) as f:
            d = json.load(f)
        by_variant[d["variant"]] = d
        by_op.setdefault(d["op"], []).append(d)
    nn_ops = sorted(op for op, ds in by_op.items() if ds[0]["kind"] == "nn")
    return {"by_op": by_op, "by_variant": by_variant, "nn_ops": nn_ops}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, ".."))
    default_lib = os.path.join(root, "build", "runtime", "libopforge_runtime.so")
    default_reg = os.path.join(root, "build", "oplib")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--registry", default=default_reg,
                    help=f"registry dir (default: {default_reg}, from scripts/regenerate.sh)")
    ap.add_argument("--lib", default=default_lib,
                    help=f"libopforge_runtime.so (default: {default_lib})")
    ap.add_argument("--op", action="append", default=[],
                    help="an NN op to run (repeatable; default: every NN op in the registry)")
    ap.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,..",
                    help="override a tensor input's shape from the example (needs --op)")
    ap.add_argument("--scalar", action="append", default=[], metavar="NAME=VALUE",
                    help="override a scalar from the example (needs --op)")
    ap.add_argument("--attr", action="append", default=[], metavar="NAME=VALUE",
                    help="variant attrs for opforge_select_for, e.g. transpose_b=true, "
                         "algorithm=direct (needs --op)")
    ap.add_argument("--isa", default=None, help="opforge ISA (default: best for this CPU)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both (default 2)")
    ap.add_argument("--reps", type=int, default=31, help="timed reps per op (default 31)")
    ap.add_argument("--warm", action="store_true",
                    help="skip the cold-cache eviction before each timed call")
    ap.add_argument("--json", action="store_true", help="also print a JSON object")
    ap.add_argument("--write-docs", action="store_true",
                    help="also replace this script's section of scripts/BENCHMARKS.md")
    args = ap.parse_args()

    if args.write_docs:
        try:
            bench_docs.check_section("bench_nn_torch")
        except (OSError, ValueError) as e:
            ap.error(f"--write-docs: {bench_docs.BENCHMARKS}: {e}")
    if args.threads < 1:
        ap.error("--threads must be >= 1")
    if args.reps < 1:
        ap.error("--reps must be >= 1")
    if (args.shape or args.scalar or args.attr) and not args.op:
        ap.error("--shape, --scalar and --attr need --op")

    lib = os.path.abspath(args.lib)
    if not os.path.isfile(lib):
        sys.exit(f"error: opforge runtime library not found: {lib}\n"
                 f"  build it with: ninja -C build  (or pass --lib PATH)")
    reg_dir = os.path.abspath(args.registry)
    if not os.path.isfile(os.path.join(reg_dir, "index.json")):
        sys.exit(f"error: {reg_dir} is not an opforge registry (no index.json)\n"
                 f"  create one with: scripts/regenerate.sh  (or pass --registry DIR)")
    try:
        registry = load_registry(reg_dir)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"error: reading {reg_dir}: {e}")
    ops = args.op or registry["nn_ops"]
    if not ops:
        sys.exit(f"error: {reg_dir} has no NN ops")
    for op in ops:
        if op not in registry["by_op"]:
            sys.exit(f"error: unknown op '{op}' (NN ops here: {', '.join(registry['nn_ops'])})")
        if op not in registry["nn_ops"]:
            sys.exit(f"error: op '{op}' is not an NN op (for apply_adam see bench_torch.py)")

    # Halide's pool is sized lazily by its first parallel call; the env var covers a runtime
    # that reads it when the pool starts, opforge_set_num_threads the rest.
    os.environ.setdefault("HL_NUM_THREADS", str(args.threads))
    torch.set_num_threads(args.threads)
    bench_env.set_blas_threads(args.threads)  # OpenBLAS's own pool (torch's matmul)

    os.environ["OPFORGE_LIBRARY"] = lib  # read when the package first loads the library
    of = None
    evict, evict_bytes = make_evictor(args.warm)
    results = []
    info = {
        "registry": reg_dir,
        "lib": lib,
        "threads": args.threads,
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "caches": "warm" if args.warm else "cold",
        "evict_bytes": evict_bytes,
        "reps": args.reps,
        "blas": bench_env.blas_summary(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    try:
        of = opforge.open(reg_dir)
        of.set_num_threads(args.threads)
        print(f"opforge vs torch {torch.__version__} eager, same tensors; threads={args.threads}"
              f" (torch reports {info['torch_threads']}), OMP_WAIT_POLICY="
              f"{info['omp_wait_policy']}, "
              + (f"cold caches ({evict_bytes >> 20} MB eviction before each timed call)"
                 if evict else "warm caches")
              + f", medians of {args.reps} interleaved reps; torch BLAS: "
              f"{info['blas']}", flush=True)
        for i, op in enumerate(ops):
            r = bench_op(of, registry, op, args, evict, seed=SEED + i)
            results.append(r)
            msg = f"  {op}: {r['variant']} {r['opforge_ms']:.3f} ms"
            if "torch_ms" in r:
                msg += (f", torch {r['torch_ms']:.3f} ms, worst err/tol "
                        f"{r['worst_err_over_tol']:.4g}"
                        + ("" if r["check_ok"] else " -> MISMATCH"))
            else:
                msg += f", torch: {r['torch_error']}"
            print(msg, file=sys.stderr, flush=True)
    except (OpforgeError, RuntimeError, ValueError) as e:
        sys.exit(f"error: {e}")
    finally:
        if of is not None:
            of.close()

    table = ["| op | problem | algorithm | opforge ms | torch ms | torch/opforge "
             "| GFLOP/s opforge | worst err/tol |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        th = f"{r['torch_ms']:.3f}" if "torch_ms" in r else "-"
        ratio = f"{r['torch_over_opforge']:.2f}x" if "torch_ms" in r else "-"
        gf = f"{r['opforge_gflops']:.1f}" if r["opforge_gflops"] else "-"
        chk = "-"
        if "worst_err_over_tol" in r:
            chk = f"{r['worst_err_over_tol']:.4g}" + ("" if r["check_ok"] else " (FAIL)")
        table.append(f"| {r['op']} | {r['problem']} | {r['algorithm'] or '-'} "
                     f"| {r['opforge_ms']:.3f} | {th} | {ratio} | {gf} | {chk} |")
    print()
    print("\n".join(table))
    if args.write_docs:
        isas = sorted({r["isa"] for r in results if r.get("isa")}) or [args.isa or "best"]
        notes = [f"torch {info['torch_version']} eager, same tensors; threads: {args.threads} "
                 f"(torch {info['torch_threads']}); OMP_WAIT_POLICY={info['omp_wait_policy']}; "
                 f"{info['caches']} caches; medians of {args.reps} interleaved reps; "
                 f"torch BLAS: {info['blas']}"]
        path = bench_docs.write_section("bench_nn_torch", table, ", ".join(isas), notes=notes)
        print(f"wrote {os.path.relpath(path)}", file=sys.stderr)

    if args.json:
        print(json.dumps({"info": info, "results": results}, indent=2))
    if any(not r.get("check_ok", True) for r in results):
        sys.exit("error: opforge and torch disagree beyond the descriptor's tolerance "
                 "(worst err/tol > 1; the tolerance is stated against fp64, so torch's own "
                 "fp32 error counts too)")


if __name__ == "__main__":
    main()
