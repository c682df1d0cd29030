"""python -m opforge list | describe OP [--json] | version: the CLI's list and describe
through the Python package."""

import argparse
import json
import sys

from . import OpforgeError, default_registry, library_path, open, version


def _attrs_summary(descs):
    """attr=value/value... over the variants, as `opforge list` prints them."""
    values = {}
    for d in descs:
        for a in d["attrs"]:
            v = a["value"]
            v = str(v).lower() if isinstance(v, bool) else str(v)
            values.setdefault(a["name"], [])
            if v not in values[a["name"]]:
                values[a["name"]].append(v)
    return " ".join(f"{k}={'/'.join(sorted(v))}" for k, v in values.items()) or "-"


def _isas(descs):
    return ",".join(sorted({d["target"]["isa"] for d in descs}))


def cmd_list(reg, out):
    rows = []
    for op in reg.ops():
        descs = reg.variants(op)
        rows.append((op, descs[0]["kind"], _isas(descs), _attrs_summary(descs),
                     descs[0]["summary"]))
    widths = [max(len(r[i]) for r in rows + [("op", "kind", "isas", "attrs", "")])
              for i in range(4)]
    header = ("op", "kind", "isas", "attrs", "summary")
    for r in [header] + rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] + "\n")


def _dims(t):
    if t.get("role") == "scalar":
        return "scalar"
    if "dims" in t and t["dims"]:
        return "[" + ", ".join(t["dims"]) + "]"
    return "any shape" if t["rank"] < 0 else f"rank {t['rank']}"


def cmd_describe(reg, op, out):
    descs = reg.variants(op)
    d = descs[0]
    out.write(f"{d['op']} (v{d['op_version']}, {d['kind']}): {d['summary']}\n")
    out.write(f"  reference: {d['reference']}\n  formula:   {d['formula']}\n\n")
    out.write("arguments (in order):\n")
    for t in d["inputs"]:
        out.write(f"  {t['name']:<12} {t['dtype']:<9} {t['role']:<9} {_dims(t):<22} "
                  f"{t.get('description', '')}\n")
    out.write("outputs:\n")
    for t in d["outputs"]:
        where = f"in place over {t['aliases']}" if t["aliases"] else "fresh buffer"
        out.write(f"  {t['name']:<12} {t['dtype']:<9} {where}\n")
    out.write("attrs:\n")
    if not d["attrs"]:
        out.write("  (none)\n")
    for a in d["attrs"]:
        choices = f" (choices: {', '.join(a['choices'])})" if a["choices"] else ""
        out.write(f"  {a['name']} ({a['type']}, default {json.dumps(a['default'])}){choices}: "
                  f"{a['description']}\n")
    shape = d["shape"]
    out.write(f"shape: elementwise={shape['elementwise']} splittable={shape['splittable']} "
              f"multi_tensor={shape['multi_tensor']} max_elements={shape['max_elements']}\n")
    for c in shape.get("checks", []):
        out.write(f"  check: {c['condition']}  ({c['message']})\n")
    algos = {}
    for v in descs:
        a = v.get("algorithm") or {}
        if a.get("name") or a.get("applies_when"):
            algos.setdefault(a.get("name"), a)
    for name, a in algos.items():
        out.write(f"algorithm {name or '(default)'}: priority {a.get('priority', 0)}, when "
                  f"{a.get('applies_when') or 'always'}; {a.get('description', '')}\n")
    cost = d.get("cost") or {}
    if cost.get("flops") or cost.get("bytes"):
        out.write(f"cost per call: flops {cost.get('flops') or '-'}; bytes "
                  f"{cost.get('bytes') or '-'}\n")
    out.write("\nvariants:\n")
    for v in descs:
        attrs = ",".join(f"{a['name']}={json.dumps(a['value']).strip(chr(34))}"
                         for a in v["attrs"]) or "-"
        tol = v.get("tolerance", {})
        out.write(f"  {v['variant']:<60} {v['target']['isa']:<11} attrs {attrs}\n")
        out.write(f"      {v['schedule']['summary']}\n")
        if tol:
            out.write(f"      tolerance vs fp64: |err| <= {tol.get('atol')} + "
                      f"{tol.get('rtol')}*|ref|\n")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m opforge", description=__doc__.split("\n")[0])
    ap.add_argument("--registry", default=None,
                    help="registry directory (default: the runtime's default registry)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="every op: kind, ISAs, attrs, summary")
    p = sub.add_parser("describe", help="an op's arguments, attrs and variants")
    p.add_argument("op")
    p.add_argument("--json", action="store_true", help="the variants' descriptors as JSON")
    sub.add_parser("version", help="library version, path and default registry")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "version":
            print(f"opforge {version()}\nlibrary {library_path()}\n"
                  f"registry {args.registry or default_registry()}")
            return 0
        with open(args.registry) as reg:
            if args.cmd == "list":
                cmd_list(reg, sys.stdout)
            elif args.json:
                json.dump(reg.variants(args.op), sys.stdout, indent=2)
                sys.stdout.write("\n")
            else:
                cmd_describe(reg, args.op, sys.stdout)
    except OpforgeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
