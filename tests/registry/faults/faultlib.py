"""Shared pieces of the fault suites (kill -9, byte flips, small disk): running the opforge CLI
in a private scratch area, small .npy inputs, registry and cache checks, the summary table.

Python 3 standard library only (run with /usr/bin/python3)."""

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
RULE_FILE = os.path.join(SOURCE_DIR, "generators", "rules", "sign_sqrt_momentum.rule")

# A few cheap ops (2 to 4 variants each, plus their bandwidth kernels): what the suites build.
# BASE: what an "existing" registry holds before the build under test; NEW: what that build adds
# (a C++ op and a rule-file op). RUN_OP: the op every suite calls, with its small inputs.
BASE_OPS = ["apply_add_sign"]
NEW_OPS = ["apply_sign_sqrt", "sign_sqrt_momentum"]
RULES = [RULE_FILE]

WORK_MARKER = ".opforge-fault-work"


def common_args(description, default_trials, long_trials):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--opforge", required=True, help="the opforge CLI to test")
    p.add_argument("--work", required=True,
                   help="scratch directory (created; emptied first if an earlier run made it)")
    p.add_argument("--trials", type=int, default=default_trials,
                   help="trials per case (default %d, CI; %d or more by hand)"
                        % (default_trials, long_trials))
    p.add_argument("--seed", type=int, default=None, help="RNG seed (default: random, printed)")
    p.add_argument("--source-cache", default=None,
                   help="an existing compile cache to take the seed entries from (read by a "
                        "build; only the entries the suite needs are copied); default: compile "
                        "them cold")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    return p


def seeded(args, derived=False):
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    if derived:
        print("seed %d (derived from the run's seed)" % seed, flush=True)
    else:
        print("seed %d (rerun with --seed %d)" % (seed, seed), flush=True)
    return random.Random(seed), seed


def prepare_work(path):
    """An empty scratch directory: refuses to empty one this harness did not make."""
    path = os.path.abspath(path)
    if os.path.exists(path):
        if os.listdir(path) and not os.path.exists(os.path.join(path, WORK_MARKER)):
            sys.exit("%s: exists, is not empty and is not a fault-suite scratch directory; "
                     "refusing to empty it" % path)
        shutil.rmtree(path)
    os.makedirs(path)
    open(os.path.join(path, WORK_MARKER), "w").close()
    return path


class Result:
    def __init__(self, argv, rc, out, err, secs):
        self.argv, self.rc, self.out, self.err, self.secs = argv, rc, out, err, secs

    def text(self):
        return "$ %s\nrc %s\n%s%s" % (" ".join(self.argv), self.rc, self.out, self.err)


class Opforge:
    """The CLI under test, run with TMPDIR inside the scratch area and none of the user's
    OPFORGE_* settings (every registry and cache is given explicitly)."""

    def __init__(self, exe, work):
        self.exe = os.path.abspath(exe)
        self.tmp = os.path.join(work, "tmp")
        os.makedirs(self.tmp, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OPFORGE_")}
        self.env["TMPDIR"] = self.tmp
        self.env["OPFORGE_CACHE_MAXSIZE"] = "0"  # no prune after builds: entries stay countable

    def argv(self, args):
        return [self.exe] + [str(a) for a in args]

    def run(self, args, timeout=300, preexec_fn=None, env=None):
        argv = self.argv(args)
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=timeout, env=env or self.env,
                               preexec_fn=preexec_fn)
        except subprocess.TimeoutExpired as e:
            return Result(argv, "timeout", (e.stdout or b"").decode(errors="replace"),
                          (e.stderr or b"").decode(errors="replace"), time.monotonic() - t0)
        return Result(argv, p.returncode, p.stdout.decode(errors="replace"),
                      p.stderr.decode(errors="replace"), time.monotonic() - t0)

    def popen(self, args, **kw):
        return subprocess.Popen(self.argv(args), stdin=subprocess.DEVNULL, env=self.env, **kw)


def build_args(registry, cache, ops, rules=(), jobs=2, extra=()):
    a = ["build", "--registry", registry, "--cache-dir", cache, "--jobs", str(jobs), "--quiet"]
    for r in rules:
        a += ["--rules", r]
    for o in ops:
        a += ["--only", o]
    return a + list(extra)


def must(res, what):
    if res.rc != 0:
        sys.exit("setup failed: %s\n%s" % (what, res.text()))
    return res


# ---------------------------------------------------------------------------------------------
# .npy files (float32, 1-D): the inputs of RUN_OP.

def npy_bytes(values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") +
            struct.pack("<%df" % len(values), *values))


RUN_OP = "apply_sign_sqrt"  # var, m, grad; scalars lr, alpha, beta (read from its descriptor)


def make_inputs(directory, op_descriptor, n=37, seed=1):
    """One .npy per tensor input of an elementwise f32 descriptor, and its scalars' values
    (the midpoint of a safe range): --in and --scalar options for `opforge run`."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    opts = []
    for inp in op_descriptor["inputs"]:
        name = inp["name"]
        if inp["role"] == "scalar":
            opts += ["--scalar", "%s=%s" % (name, {"lr": "0.01", "alpha": "1.0", "beta": "0.9"}
                                            .get(name, "0.5"))]
            continue
        vals = [rng.uniform(0.1, 1.0) if inp["role"] == "state" else rng.uniform(-1, 1)
                for _ in range(n)]
        path = os.path.join(directory, name + ".npy")
        with open(path, "wb") as f:
            f.write(npy_bytes(vals))
        opts += ["--in", "%s=%s" % (name, path)]
    return opts


def run_outputs(opf, registry, op, input_opts, out_dir, timeout=60, extra=()):
    """`opforge run`: (Result, {output file name: bytes}, variant that ran)."""
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    r = opf.run(["run", op, "--registry", registry, "--out", out_dir, "--threads", "1"] +
                input_opts + list(extra), timeout=timeout)
    outs = {}
    if r.rc == 0 and os.path.isdir(out_dir):
        for name in sorted(os.listdir(out_dir)):
            with open(os.path.join(out_dir, name), "rb") as f:
                outs[name] = f.read()
    m = re.search(r"\((\S+)\): wrote", r.out)
    return r, outs, (m.group(1) if m else None)


# ---------------------------------------------------------------------------------------------
# Registry and cache checks.

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# Registry files are named by their content ("kernels/<variant>-<16 hex>.so"): trees are
# compared by variant, so that a kernel whose bytes differ shows as changed, not as one file
# missing and another extra.
ADDRESSED = re.compile(r"^((?:kernels|ops)/\w+)-[0-9a-f]{16}(\.so|\.json)$")


def tree(directory):
    """{relative path: sha256} of every regular file under `directory` (symlinks and other
    non-files listed with a marker); content-addressed names without their digest."""
    out = {}
    for root, dirs, files in os.walk(directory):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            p = os.path.join(root, name)
            rel = ADDRESSED.sub(r"\1\2", os.path.relpath(p, directory))
            out[rel] = sha256_file(p) if os.path.isfile(p) and not os.path.islink(p) else "<not a file>"
    return out


def tree_diff(got, want):
    """What differs between two tree() results: (missing, extra, changed) relative paths."""
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    changed = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    return missing, extra, changed


def compile_history_only(missing, extra, changed):
    """Whether two registries differ only in kernel bytes and what records them (descriptors'
    kernel.sha256, the index's descriptor digests). Halide's output for one key depends on what
    else the process compiled before it (measured: a kernel recompiled alone after a failed build
    had other register allocation), so a rebuild from a partly filled cache can differ there;
    the suites then compare the ops' outputs instead."""
    return not missing and not extra and bool(changed) and all(
        re.fullmatch(r"kernels/[^/]+\.so|ops/[^/]+\.json|index\.json", c) for c in changed)


def index_problems(registry):
    """None when index.json is absent; else a list of what is wrong with it (empty: it parses
    and every descriptor, kernel and the runtime it names is there)."""
    path = os.path.join(registry, "index.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            idx = json.load(f)
    except Exception as e:  # noqa: BLE001 - any parse failure is a finding
        return ["index.json does not parse: %s" % e]
    problems = []
    if not os.path.isfile(os.path.join(registry, idx.get("runtime_library", "?"))):
        problems.append("runtime %s missing" % idx.get("runtime_library"))
    for v in idx.get("variants", []):
        d = os.path.join(registry, v["descriptor"])
        if not os.path.isfile(d):
            problems.append("%s missing" % v["descriptor"])
            continue
        try:
            with open(d) as f:
                desc = json.load(f)
            if not os.path.isfile(os.path.join(registry, desc["kernel"]["file"])):
                problems.append("%s missing" % desc["kernel"]["file"])
        except Exception as e:  # noqa: BLE001
            problems.append("%s: %s" % (v["descriptor"], e))
    return problems


def indexed_ops(registry):
    with open(os.path.join(registry, "index.json")) as f:
        return sorted({v["op"] for v in json.load(f)["variants"]})


def cache_verify(opf, cache):
    """(intact, corrupt, Result) from `opforge cache verify` (which removes corrupt entries)."""
    r = opf.run(["cache", "verify", "--cache-dir", cache], timeout=120)
    m = re.search(r"(\d+) entries intact, (\d+) corrupt", r.out)
    if not m:
        return None, None, r
    return int(m.group(1)), int(m.group(2)), r


def cache_entries(cache):
    d = os.path.join(cache, "v2")
    if not os.path.isdir(d):
        return []
    return sorted(n for n in os.listdir(d) if n.endswith(".opfc"))


class SuiteBase:
    """What every suite starts from: its arguments, a scratch work dir (or `work`, a sub-run's,
    whose seed is then derived), the seeded RNG and the opforge runner."""

    def __init__(self, args, work=None):
        self.args = args
        self.work = work or prepare_work(args.work)
        self.rng, self.seed = seeded(args, derived=work is not None)
        self.opf = Opforge(args.opforge, self.work)

    def path(self, *p):
        return os.path.join(self.work, *p)


def case_dirs(root, case, seed_cache, registries):
    """A new `root` holding the cache and registry one run of `case` starts from: an empty
    cache ("cold-*") or a copy of `seed_cache`, and no registry ("*-fresh") or a copy of
    `registries[suffix]` (e.g. "existing"). Returns (cache, registry, build argv)."""
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)
    cache, reg = os.path.join(root, "cache"), os.path.join(root, "registry")
    if case.startswith("cold"):
        os.makedirs(cache)
    else:
        copytree(seed_cache, cache)
    suffix = case.split("-", 1)[1]
    if suffix in registries:
        copytree(registries[suffix], reg)
    return cache, reg, build_args(reg, cache, NEW_OPS, RULES)


def copytree(src, dst):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)


def make_seed(opf, work, source_cache, ops, rules):
    """A private cache holding every entry `ops` need, and the registry they build:
    (cache dir, registry dir, build report). From `source_cache` (its entries copied after a
    warm build reads them there) or, without one, compiled cold."""
    cache = os.path.join(work, "seed-cache")
    registry = os.path.join(work, "seed-registry")
    src = source_cache if source_cache and os.path.isdir(source_cache) else cache
    r = must(opf.run(build_args(registry, src, ops, rules, extra=["--json"]), timeout=1800),
             "seed build")
    report = json.loads(r.out)
    if src != cache:
        os.makedirs(os.path.join(cache, "v2"))
        for key in [report["runtime_key"]] + [v["key"] for v in report["variants"]]:
            name = "llvmcache-%s.opfc" % key
            shutil.copy2(os.path.join(src, "v2", name), os.path.join(cache, "v2", name))
        if os.path.exists(os.path.join(src, "halide-id.json")):
            shutil.copy2(os.path.join(src, "halide-id.json"), cache)
    return cache, registry, report


# ---------------------------------------------------------------------------------------------
# The summary table.

class Table:
    """Per case: trials, a count per outcome class, the failures (printed in full)."""

    def __init__(self, title, classes, failing):
        self.title, self.classes, self.failing = title, classes, set(failing)
        self.rows = []  # [case, trials, {class: count}, [failure lines]]

    def row(self, case):
        for r in self.rows:
            if r[0] == case:
                return r
        r = [case, 0, {c: 0 for c in self.classes}, []]
        self.rows.append(r)
        return r

    def trial(self, case):
        self.row(case)[1] += 1

    def add(self, case, cls, detail=None):
        """Counts one outcome of class `cls`; a failing class records `detail` as a failure."""
        r = self.row(case)
        r[2][cls] = r[2].get(cls, 0) + 1
        if cls in self.failing:
            r[3].append(detail or cls)

    def failures(self):
        return sum(len(r[3]) for r in self.rows)

    def print(self):
        cols = ["case", "trials"] + self.classes + ["failures"]
        rows = [[case, str(n)] + [str(counts.get(c, 0)) for c in self.classes] + [str(len(f))]
                for case, n, counts, f in self.rows]
        widths = [max([len(c)] + [len(r[k]) for r in rows]) for k, c in enumerate(cols)]
        print("\n%s" % self.title)
        print("| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths)) + " |")
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for r in rows:
            print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
        for case, _, _, fails in self.rows:
            for f in fails:
                print("FAILED %s: %s" % (case, f))
        sys.stdout.flush()
