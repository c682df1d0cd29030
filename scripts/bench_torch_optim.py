#!/usr/bin/env python3
"""One optimizer step over a whole model: opforge.torch.optim vs torch.optim.

    /usr/bin/python3 scripts/bench_torch_optim.py [--models gpt2-small,resnet-1001]
        [--optims adam,adamw,sgd] [--states f32,q8s,q8ls] [--reps N] [--threads 2] [--quick]
        [--write-docs]

The library and registry come from OPFORGE_LIBRARY / OPFORGE_REGISTRY (as for the package).
For each model (parameter shapes from the runtime's presets: gpt2-small is "transformer-small",
148 tensors, 124,439,808 elements; resnet-1001 has 3005 tensors) and each optimizer (Adam,
AdamW, SGD with momentum 0.9), one process holds:

  opforge    opforge.torch.optim.<Opt> (fused, the default): optimizer.step()
  foreach    torch.optim.<Opt>(foreach=True): optimizer.step()
  for-loop   torch.optim.<Opt>(foreach=False): optimizer.step()
  kernel     the raw kernel opforge's step runs (Kernel.call_model) on opforge's flat buffers
  bandwidth  the same-traffic bandwidth kernel on the same flat buffers (Adam/AdamW: 4 fp32
             reads + 3 writes, bandwidth_s3_g1; SGD momentum: 3 reads + 2 writes,
             bandwidth_s2_g1), states = var/state buffers, g0 = a zero buffer (so values stay)
  unchecked  opforge's step with check_bindings = False (no per-parameter check that the
             gradients and data are still the flat buffers' views)
  python     opforge's optimizer.step() with its kernel call replaced by a no-op: the Python
             side alone
  q8s, q8ls  with --states: opforge's step with state_bits=8 (quant_map dynamic / linear;
             SGD: dynamic only), the default min_8bit_size (4096: smaller tensors keep fp32
             states); a second table gives their medians against the fp32-state step's

Parameters and gradients are generated once and copied for each contender, so all start
equal. Each rep times one step of every contender (time.perf_counter_ns), the order rotated
every rep; medians, min and max over reps are reported. "% bw" is bandwidth median /
contender median (100% = as fast as the same-traffic ceiling). "step - kernel" is opforge's
step minus the raw kernel, as % of the kernel (all of the Python side and whatever the
kernel loses by not running back to back); "Python alone" is the python contender.
Gradients are set once: after opforge's first step every p.grad is a view of its flat
gradient buffer (as in a training loop whose backward accumulates into the gradients
zero_grad() kept), so a timed step copies no gradient.

--write-docs also writes the table, with the date, command, CPU and ISA, into this script's
section of scripts/BENCHMARKS.md (between <!-- begin bench_torch_optim --> and its end).
"""

import argparse
import gc
import os
import statistics
import sys
import time

import bench_env  # noqa: E402  (first: OMP_WAIT_POLICY before torch; runtime/python on sys.path)

torch = bench_env.require("torch")
import bench_docs  # noqa: E402  (this directory: sys.path[0] when run as a script)
import opforge  # noqa: E402
import opforge.torch.optim as of_optim  # noqa: E402
from opforge import OpforgeError  # noqa: E402

MODELS = {"gpt2-small": "transformer-small", "resnet-1001": "resnet-1001"}
OPTIMS = {
    # name: (torch class, opforge class, kwargs, same-traffic bandwidth op)
    "adam": (torch.optim.Adam, of_optim.Adam, dict(lr=1e-3), "bandwidth_s3_g1"),
    "adamw": (torch.optim.AdamW, of_optim.AdamW, dict(lr=1e-3, weight_decay=0.01),
              "bandwidth_s3_g1"),
    "sgd": (torch.optim.SGD, of_optim.SGD, dict(lr=1e-3, momentum=0.9), "bandwidth_s2_g1"),
}
CONTENDERS = ("opforge", "unchecked", "foreach", "for-loop", "kernel", "bandwidth", "python")
# --states: 8-bit contender -> quant_map (the optimizers that have it)
EIGHT_BIT = {"q8s": "dynamic", "q8ls": "linear"}


def eight_bit_contenders(name, states):
    return [s for s in states if s in EIGHT_BIT and (name != "sgd" or s == "q8s")]


def make_params(shapes, seed):
    g = torch.Generator().manual_seed(seed)
    params, grads = [], []
    for shape in shapes:
        params.append(torch.randn(shape, generator=g) * 0.02)
        grads.append(torch.randn(shape, generator=g) * 0.01)
    return params, grads


def clone_params(params, grads):
    out = []
    for p0, g0 in zip(params, grads):
        p = torch.nn.Parameter(p0.clone())
        p.grad = g0.clone()
        out.append(p)
    return out


def kernel_args(name, opt, fg):
    """The arguments opforge's step passes to its kernel, on its flat buffers (step 2)."""
    group = opt.param_groups[0]
    f = fg.flat
    if name == "sgd":
        return dict(var=f["var"], accum=f["accum"], grad=f["grad"], lr=group["lr"],
                    momentum=group["momentum"])
    b1, b2 = group["betas"]
    return dict(var=f["var"], m=f["m"], v=f["v"], grad=f["grad"], step=2.0,
                lr=group["lr"], beta1=b1, beta2=b2, epsilon=group["eps"],
                weight_decay=group["weight_decay"] if name == "adamw" else 0.0)


def timed(fn):
    t0 = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - t0


def bench(model, name, reps, reg, seed, states=("f32",)):
    torch_cls, of_cls, kw, bw_op = OPTIMS[name]
    shapes = preset_shapes(model)
    p0, g0 = make_params(shapes, seed)

    of_params = clone_params(p0, g0)
    of_opt = of_cls(of_params, registry=reg, **kw)
    fe_opt = torch_cls(clone_params(p0, g0), foreach=True, **kw)
    fl_opt = torch_cls(clone_params(p0, g0), foreach=False, **kw)
    extra = eight_bit_contenders(name, states)
    q8_opts = {}
    for c in extra:
        q8_kw = dict(kw, state_bits=8)
        if name != "sgd":
            q8_kw["quant_map"] = EIGHT_BIT[c]
        q8_opts[c] = of_cls(clone_params(p0, g0), registry=reg, **q8_kw)
    del p0, g0
    gc.collect()

    for o in [of_opt, fe_opt, fl_opt, *q8_opts.values()]:
        o.step()  # builds the flat groups and the states (the others' lazy state likewise)
    (fg,) = of_opt._flat_groups.values()
    (kernel,) = of_opt._kernels.values()
    kargs = kernel_args(name, of_opt, fg)
    bw = reg.select(bw_op)
    zeros = torch.zeros(fg.layout.total_elements)
    states = [fg.flat[k] for k in (["var", "accum"] if name == "sgd"
                                   else ["var", "m", "v"])]
    bw_args = {f"s{i}": s for i, s in enumerate(states)}
    bw_args["g0"] = zeros

    def python_only():
        of_opt.functional = lambda kernel, args, layout=None: None
        try:
            of_opt.step()
        finally:
            del of_opt.functional

    def unchecked():
        of_opt.check_bindings = False
        try:
            of_opt.step()
        finally:
            del of_opt.check_bindings

    fns = {
        "python": python_only,
        "unchecked": unchecked,
        "opforge": of_opt.step,
        "foreach": fe_opt.step,
        "for-loop": fl_opt.step,
        "kernel": lambda: kernel.call_model(fg.layout, kargs),
        "bandwidth": lambda: bw.call_model(fg.layout, bw_args),
    }
    fns.update({c: o.step for c, o in q8_opts.items()})
    contenders = CONTENDERS + tuple(extra)
    for c in contenders:  # warm-up
        fns[c]()
    times = {c: [] for c in contenders}
    for r in range(reps):
        k = r % len(contenders)
        for c in contenders[k:] + contenders[:k]:
            times[c].append(timed(fns[c]))
    for p in of_params + [p for o in q8_opts.values() for g in o.param_groups
                          for p in g["params"]]:
        if not torch.isfinite(p.detach()).all():
            raise RuntimeError(f"{model} {name}: non-finite parameters after the steps")
    res = {c: {"median": statistics.median(t) / 1e6, "min": min(t) / 1e6,
               "max": max(t) / 1e6} for c, t in times.items()}
    info = {"tensors": len(shapes), "elements": fg.layout.total_elements,
            "variant": kernel.variant, "isa": kernel.isa, "bw_variant": bw.variant}
    return res, info


def preset_shapes(model):
    """A preset's tensors as 1-D shapes of their element counts: the C ABI gives a layout's
    names, offsets and element counts, not the shapes (every contender is elementwise, so
    the shape does not change the work)."""
    layout = opforge.ModelLayout.preset(MODELS[model])
    return [(n,) for n in layout.elements]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=None,
                    help=f"comma-separated, of {', '.join(MODELS)} (default: all; --quick: "
                    "resnet-1001)")
    ap.add_argument("--optims", default="adam,adamw,sgd",
                    help=f"comma-separated, of {', '.join(OPTIMS)}")
    ap.add_argument("--states", default="f32",
                    help="comma-separated, of f32 (always), q8s, q8ls: also time the step with "
                    "8-bit states (default f32)")
    ap.add_argument("--reps", type=int, default=None, help="timed reps (default 15; quick 3)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both (default 2)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 3 reps, resnet-1001 only unless --models is given")
    ap.add_argument("--write-docs", action="store_true",
                    help="also replace this script's section of scripts/BENCHMARKS.md")
    args = ap.parse_args()
    if args.models is None:
        args.models = "resnet-1001" if args.quick else ",".join(MODELS)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    optims = [o.strip() for o in args.optims.split(",") if o.strip()]
    for m in models:
        if m not in MODELS:
            ap.error(f"unknown model {m!r} (have {', '.join(MODELS)})")
    for o in optims:
        if o not in OPTIMS:
            ap.error(f"unknown optimizer {o!r} (have {', '.join(OPTIMS)})")
    states = [x.strip() for x in args.states.split(",") if x.strip()]
    for x in states:
        if x != "f32" and x not in EIGHT_BIT:
            ap.error(f"unknown --states entry {x!r} (have f32, {', '.join(EIGHT_BIT)})")
    if args.write_docs:
        try:
            bench_docs.check_section("bench_torch_optim")
        except (OSError, ValueError) as e:
            ap.error(f"--write-docs: {bench_docs.BENCHMARKS}: {e}")
    reps = args.reps or (3 if args.quick else 15)
    if reps < 1 or args.threads < 1:
        ap.error("--reps and --threads must be >= 1")

    torch.set_num_threads(args.threads)
    try:
        reg = opforge.open()
        reg.set_num_threads(args.threads)
    except OpforgeError as e:
        sys.exit(f"error: {e}")

    rows, isa = [], None
    try:
        for mi, model in enumerate(models):
            for oi, name in enumerate(optims):
                res, info = bench(model, name, reps, reg, seed=100 + 10 * mi + oi,
                                  states=states)
                isa = info["isa"]
                rows.append((model, name, res, info))
                print(f"  {model} {name}: " + ", ".join(
                    f"{c} {r['median']:.1f} ms" for c, r in res.items()),
                    file=sys.stderr, flush=True)
                gc.collect()
    except (OpforgeError, RuntimeError, ValueError) as e:
        sys.exit(f"error: {e}")

    settings = (f"threads: {args.threads} (torch {torch.get_num_threads()}); torch "
                f"{torch.__version__}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}; "
                f"reps: {reps}; times in ms, median (min-max)")
    table = ["| model | optimizer | opforge | % bw | unchecked | % bw | torch foreach "
             "| torch for-loop "
             "| foreach/opforge | kernel | bandwidth | kernel % bw | step - kernel (% of kernel) "
             "| Python alone (% of kernel) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def cell(r):
        return f"{r['median']:.1f} ({r['min']:.1f}-{r['max']:.1f})"

    for model, name, res, info in rows:
        m = {c: res[c]["median"] for c in CONTENDERS}
        py = m["opforge"] - m["kernel"]
        table.append(
            f"| {model} ({info['tensors']} tensors, {info['elements']:,}) | {name} "
            f"| {cell(res['opforge'])} | {100 * m['bandwidth'] / m['opforge']:.0f}% "
            f"| {cell(res['unchecked'])} | {100 * m['bandwidth'] / m['unchecked']:.0f}% "
            f"| {cell(res['foreach'])} | {cell(res['for-loop'])} "
            f"| {m['foreach'] / m['opforge']:.2f}x | {cell(res['kernel'])} "
            f"| {cell(res['bandwidth'])} | {100 * m['bandwidth'] / m['kernel']:.0f}% "
            f"| {py:.1f} ms ({100 * py / m['kernel']:.1f}%) "
            f"| {m['python']:.2f} ms ({100 * m['python'] / m['kernel']:.1f}%) |")

    q8 = [x for x in EIGHT_BIT if x in states]
    if q8:
        table += ["", "8-bit states (--states): the whole step, against opforge's with fp32 "
                  "states in the same run (x: its elements per second over fp32 states')", "",
                  "| model | optimizer | fp32 states | " + " | ".join(
                      f"{x} | x fp32" for x in q8) + " |",
                  "|---|---|---:|" + "---:|---:|" * len(q8)]
        for model, name, res, info in rows:
            cells = []
            for x in q8:
                r = res.get(x)
                cells.append("— | —" if r is None else
                             f"{cell(r)} | {res['opforge']['median'] / r['median']:.2f}x")
            table.append(f"| {model} | {name} | {cell(res['opforge'])} | "
                         + " | ".join(cells) + " |")

    print(f"\nCPU: {bench_docs.cpu_model()} ({os.cpu_count()} logical CPUs); ISA: {isa}; "
          f"{settings}\n")
    print("\n".join(table))
    if args.write_docs:
        path = bench_docs.write_section("bench_torch_optim", table, isa, notes=[settings])
        print(f"wrote {os.path.relpath(path)}", file=sys.stderr)

if __name__ == "__main__":
    main()
