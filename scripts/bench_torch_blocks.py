#!/usr/bin/env python3
"""End to end: whole model blocks patched with opforge.torch.patch vs torch eager vs torch with
oneDNN modules, side by side in one process.

    /usr/bin/python3 scripts/bench_torch_blocks.py [--block gpt2|unet|all] [--reps 7]
        [--threads 2] [--small] [--modules] [--json]

Blocks (inference, fp32, torch.inference_mode):
  gpt2  a GPT-2-small transformer block: LayerNorm, causal self-attention
        (torch.nn.MultiheadAttention, 12 heads, d 64, the causal mask as a bool attn_mask),
        LayerNorm, MLP 768 -> 3072 -> 768 with GELU(tanh); batch 8, sequence 512.
  unet  Stable Diffusion's UNet ResBlock (GroupNorm(32) -> SiLU -> Conv3x3, twice, plus the
        skip) and self-attention block (GroupNorm, 1x1 proj in, 8-head MultiheadAttention over
        the 64x64 = 4096 positions, proj out, residual) at 64x64 latents, 320 channels, batch 1.
  --small shrinks both (sequence 64, 16x16 latents) for a quick look.

Variants, each on its own deep copy of the same weights:
  eager    torch fp32 as written: Linear and matmul on the BLAS Debian's libblas.so.3 points
           at (OpenBLAS, installed by scripts/setup.sh; netlib's reference BLAS without it),
           Conv2d on oneDNN (torch's mkldnn).
  onednn   torch.utils.mkldnn.to_mkldnn on the copy's Linear and Conv2d modules (oneDNN
           modules, dense tensors in and out; MultiheadAttention's own projections and its
           attention matmuls stay on the BLAS, its forward reads them as dense weights), the
           rest eager.
  opforge  opforge.torch.patch(copy): every module opforge has a kernel for (the report is
           printed), the rest eager.
Every variant is checked against eager in fp64 (max |err| / max |ref| printed); timing is
interleaved (the order rotates between reps), medians of --reps forwards, with the Python
overhead of each path included. Unless --no-thp, the script re-executes itself with
glibc's malloc on transparent huge pages (bench_env.use_thp: fresh activations fault 2 MB
pages, not 4 KB ones), the same for all three variants. The header names the CPU model, the
ISA opforge selects, torch's thread and BLAS configuration (OpenBLAS gets the same thread
count) and the malloc setting.
"""

import argparse
import copy
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_env  # noqa: E402  (first: OMP_WAIT_POLICY, this tree's opforge package)

torch = bench_env.require("torch")
import torch.utils.mkldnn  # noqa: E402  (not imported by torch itself)

import opforge  # noqa: E402
import opforge.torch as ot  # noqa: E402
from bench_docs import cpu_model  # noqa: E402

nn = torch.nn


class GPT2Block(nn.Module):
    def __init__(self, dim=768, heads=12):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * dim, dim))

    def forward(self, x):
        h = self.ln_1(x)
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        x = x + self.attn(h, h, h, need_weights=False, attn_mask=causal)[0]
        return x + self.mlp(self.ln_2(x))


class ResBlock(nn.Module):
    def __init__(self, ch=320):
        super().__init__()
        self.in_layers = nn.Sequential(nn.GroupNorm(32, ch), nn.SiLU(),
                                       nn.Conv2d(ch, ch, 3, padding=1))
        self.out_layers = nn.Sequential(nn.GroupNorm(32, ch), nn.SiLU(),
                                        nn.Conv2d(ch, ch, 3, padding=1))

    def forward(self, x):
        return x + self.out_layers(self.in_layers(x))


class SpatialSelfAttention(nn.Module):
    def __init__(self, ch=320, heads=8):
        super().__init__()
        self.norm = nn.GroupNorm(32, ch)
        self.proj_in = nn.Conv2d(ch, ch, 1)
        self.attn = nn.MultiheadAttention(ch, heads, batch_first=True)
        self.proj_out = nn.Conv2d(ch, ch, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        t = self.proj_in(self.norm(x)).flatten(2).transpose(1, 2)  # [B, HW, C]
        t = self.attn(t, t, t, need_weights=False)[0].transpose(1, 2).reshape(b, c, h, w)
        return x + self.proj_out(t)


class UNetBlock(nn.Module):
    def __init__(self, ch=320):
        super().__init__()
        self.res = ResBlock(ch)
        self.attn = SpatialSelfAttention(ch)

    def forward(self, x):
        return self.attn(self.res(x))


def blocks(small):
    torch.manual_seed(0)
    seq, side = (64, 16) if small else (512, 64)
    g = torch.Generator().manual_seed(1)
    return {
        "gpt2": (GPT2Block().eval(), torch.randn(8, seq, 768, generator=g),
                 f"GPT-2-small block, batch 8, sequence {seq}"),
        "unet": (UNetBlock().eval(), torch.randn(1, 320, side, side, generator=g),
                 f"SD UNet ResBlock + self-attention, 320 channels, {side}x{side} latents"),
    }


def to_onednn(model):
    """torch.utils.mkldnn.to_mkldnn on every Linear and Conv2d, except those a
    MultiheadAttention owns (its forward reads their weights as dense tensors)."""
    for name, child in list(model.named_children()):
        if isinstance(child, nn.MultiheadAttention):
            continue
        if type(child) in (nn.Linear, nn.Conv2d):
            setattr(model, name, torch.utils.mkldnn.to_mkldnn(child))
        else:
            to_onednn(child)
    return model


def module_times(model):
    """Forward hooks on `model`'s leaf modules (a MultiheadAttention counts whole, its
    projections inside it): {qualified name: [seconds per call]}, filled as the model runs."""
    times = {}

    def leaves(module, prefix):
        for name, child in module.named_children():
            if isinstance(child, nn.MultiheadAttention) or not list(child.children()):
                yield prefix + name, child
            else:
                yield from leaves(child, prefix + name + ".")

    for name, module in leaves(model, ""):
        start = {}
        module.register_forward_pre_hook(
            lambda m, inp, s=start: s.__setitem__("t", time.perf_counter()))
        module.register_forward_hook(
            lambda m, inp, out, s=start, n=name:
                times.setdefault(n, []).append(time.perf_counter() - s["t"]))
    return times


def timed(fn, x):
    t0 = time.perf_counter()
    fn(x)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--block", default="all", choices=["gpt2", "unet", "all"])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--modules", action="store_true",
                    help="also time each leaf module (forward hooks; MultiheadAttention whole) "
                         "and print a per-module table: where each variant's time goes")
    ap.add_argument("--no-thp", action="store_true",
                    help="keep glibc's default malloc (4 KB page faults on every fresh "
                         "activation; see bench_env.use_thp)")
    args = ap.parse_args()
    malloc = bench_env.use_thp(not args.no_thp)
    torch.set_num_threads(args.threads)
    bench_env.set_blas_threads(args.threads)
    reg = opforge.open()
    reg.set_num_threads(args.threads)
    isa = reg.select("layer_norm").isa
    results = {}
    print(f"# CPU: {cpu_model()}; opforge ISA {isa}; torch {torch.__version__}, "
          f"{args.threads} threads; torch BLAS: {bench_env.blas_summary()}; malloc: {malloc}")
    for name, (model, x, what) in blocks(args.small).items():
        if args.block not in ("all", name):
            continue
        with torch.inference_mode():
            ref = copy.deepcopy(model).double()(x.double())
            variants = {"eager": copy.deepcopy(model)}
            variants["onednn"] = to_onednn(copy.deepcopy(model))
            patched, report = ot.patch(copy.deepcopy(model))
            variants["opforge"] = patched
            err = {}
            for v, m in variants.items():
                y = m(x)
                err[v] = ((y.double() - ref).abs().max() / ref.abs().max()).item()
            per_module = {v: module_times(m) for v, m in variants.items()} if args.modules else {}
            times = {v: [] for v in variants}
            order = list(variants)
            for r in range(args.reps):
                for v in order[r % len(order):] + order[:r % len(order)]:
                    times[v].append(timed(variants[v], x))
        med = {v: statistics.median(t) for v, t in times.items()}
        results[name] = {"what": what, "ms": {v: 1e3 * t for v, t in med.items()},
                         "rel_err_vs_fp64": err,
                         "opforge_vs_onednn": med["onednn"] / med["opforge"],
                         "opforge_vs_eager": med["eager"] / med["opforge"],
                         "swapped": [n for n, _ in report.swapped],
                         "left": [f"{n}: {why}" for n, _, why in report.left]}
        module_ms = {v: {n: 1e3 * statistics.median(t) for n, t in per.items()}
                     for v, per in per_module.items()}
        if module_ms:
            results[name]["modules_ms"] = module_ms
        if not args.json:
            print(f"\n## {what}")
            print(f"| variant | ms per forward (median of {args.reps}) | max rel err vs fp64 |")
            print("|---|---|---|")
            for v in variants:
                print(f"| {v} | {1e3 * med[v]:.1f} | {err[v]:.1e} |")
            print(f"opforge: {med['onednn'] / med['opforge']:.2f}x the oneDNN-backed torch, "
                  f"{med['eager'] / med['opforge']:.2f}x eager")
            print(report)
            if module_ms:
                print(f"\n| module (ms, median of {args.reps}) | " + " | ".join(variants) + " |")
                print("|---|" + "---|" * len(variants))
                for n in module_ms["eager"]:
                    print(f"| {n} | " + " | ".join(f"{module_ms[v].get(n, float('nan')):.2f}"
                                                  for v in variants) + " |")
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
