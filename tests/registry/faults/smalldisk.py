#!/usr/bin/python3
"""`opforge build` out of disk: under RLIMIT_FSIZE, and on a small tmpfs where mounts are allowed.

RLIMIT_FSIZE is set in the child with SIGXFSZ ignored, so an oversized write fails with EFBIG
("File too large") instead of killing the build (ld and cc, which the build runs, inherit both).
The limits fall below the smallest file the build writes and between successive sizes of the
files it writes (kernels, the runtime, descriptors, the index, cache entries), so the build fails
at different files. The tmpfs sub-case runs in a private mount namespace (`unshare --mount`;
skipped, said so, where that is not permitted): the cache, the registry and TMPDIR on a tmpfs
sized a little over what the build starts with, for a real ENOSPC ("No space left on device").

Cases: cold-fresh (empty cache, new registry), warm-fresh (warm cache, new registry),
warm-existing (warm cache, a registry that holds other ops). Each trial requires:
  - rc != 0 (a limit the build fits under counts "fit" and must give the normal registry);
    no signal, no hang;
  - an error message that gives the reason (the errno text) and names a path;
  - index.json absent (new registry) or the old one byte for byte, naming only files that are
    there;
  - `opforge cache verify`: 0 corrupt entries;
  - then a build without the limit succeeds and leaves exactly a normal build's registry.
Outcome of the limited build: named (reason and path), no-reason, no-path, fit, crash, hang;
then ok / XFAIL / FAIL for the checks after it.
"""

import argparse
import errno
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib as fl  # noqa: E402

CASES = ["cold-fresh", "warm-fresh", "warm-existing"]
CLASSES = ["named", "no-reason", "no-path", "fit", "crash", "hang", "ok", "XFAIL", "FAIL"]
FAILING = ["no-reason", "no-path", "crash", "hang"]  # findings; the trial's status says FAIL

# Findings known on this tree, as (regular expression on the finding, reason): a trial whose
# every finding is known counts XFAIL. Remove an entry once its defect is fixed.
KNOWN_FAILURES = [
    (r"^registry differs from a normal build's in kernel bytes only",
     "a kernel's bytes depend on what else the process compiled before it (Halide's global "
     "name counters): the rebuild compiles the kernels the failed build could not store, a "
     "different set (the ops' outputs are compared, and must be identical)"),
]


def fsize_limit(limit):
    def preexec():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


def written_sizes(before, after, root):
    """Sizes of the files a build created or changed under `root`."""
    return sorted(os.path.getsize(os.path.join(root, rel)) for rel, h in after.items()
                  if before.get(rel) != h and os.path.isfile(os.path.join(root, rel)))


def limits_between(sizes, n, rng):
    """Below the smallest written size, and between successive sizes, then random ones below
    the largest: the first n (all of the systematic ones when n is large enough)."""
    sizes = [s for s in sizes if s > 0]
    systematic = [max(1, sizes[0] // 2)] + [(a + b) // 2 for a, b in zip(sizes, sizes[1:])
                                            if b - a > 1]
    systematic = sorted(set(systematic))
    if n <= len(systematic):  # spread: lowest, highest, and evenly between
        if n == 1:
            return [systematic[len(systematic) // 2]]
        return sorted({systematic[round(k * (len(systematic) - 1) / (n - 1))] for k in range(n)})
    extra = [rng.randrange(1, sizes[-1]) for _ in range(n - len(systematic))]
    return sorted(set(systematic + extra))


class Suite(fl.SuiteBase):
    def __init__(self, args, work=None):
        super().__init__(args, work)
        self.table = fl.Table("opforge build out of disk (seed %d)" % self.seed, CLASSES, ["FAIL"])

    def setup(self):
        self.seed_cache, _, _ = fl.make_seed(self.opf, self.work, self.args.source_cache,
                                             fl.BASE_OPS + fl.NEW_OPS, fl.RULES)
        self.base_reg = self.path("base-registry")
        fl.must(self.opf.run(fl.build_args(self.base_reg, self.seed_cache, fl.BASE_OPS)),
                "base registry")
        self.pristine_outputs(self.path("seed-registry"))
        self.ref = {}
        for case in CASES:
            root, cache, reg, argv = self.fresh_case(case, "ref", self.path("runs"))
            before = fl.tree(root)
            fl.must(self.opf.run(argv, timeout=1800), "reference build of " + case)
            after = fl.tree(root)
            self.ref[case] = dict(tree=fl.tree(reg), sizes=written_sizes(before, after, root))
            print("reference %-14s writes %d files of %d to %d bytes" % (
                case, len([k for k in after if before.get(k) != after[k]]),
                self.ref[case]["sizes"][0], self.ref[case]["sizes"][-1]), flush=True)
            shutil.rmtree(root)

    def pristine_outputs(self, registry):
        """The outputs of `run` of the C++ op and the rule op on a normal registry."""
        self.ops_run, self.inputs, self.pristine = [fl.RUN_OP, "sign_sqrt_momentum"], {}, {}
        with open(os.path.join(registry, "index.json")) as f:
            index = json.load(f)["variants"]
        for op in self.ops_run:
            with open(os.path.join(registry, next(v for v in index if v["op"] == op)
                                   ["descriptor"])) as f:
                self.inputs[op] = fl.make_inputs(self.path("inputs", op), json.load(f))
            r, self.pristine[op], _ = fl.run_outputs(self.opf, registry, op, self.inputs[op],
                                                     self.path("out-pristine"))
            fl.must(r, "pristine run of " + op)

    def fresh_case(self, case, tag, under):
        """(root, cache, registry, argv) of one run of `case` under `under`, from scratch."""
        root = os.path.join(under, "%s-%s" % (case, tag))
        return (root,) + fl.case_dirs(root, case, self.seed_cache, {"existing": self.base_reg})

    def trial(self, case, kind, limit, under, limited_run, reason_text):
        """One limited build of `case` (limited_run(argv) runs it) and the checks after it.
        Returns (class of the limited build, status, detail)."""
        root, cache, reg, argv = self.fresh_case(case, "%s-%d" % (kind, limit), under)
        idx = os.path.join(reg, "index.json")
        old_index = fl.sha256_file(idx) if os.path.exists(idx) else None
        r = limited_run(argv, root)
        msg = (r.err + r.out).strip()
        problems = []
        if r.rc == "timeout":
            cls = "hang"
        elif r.rc < 0:
            cls = "crash"
        elif r.rc == 0:
            cls = "fit"
        else:
            has_reason = reason_text in msg
            has_path = re.search("(%s|%s)/" % (re.escape(root), re.escape(self.opf.tmp)),
                                 msg) is not None
            cls = "no-reason" if not has_reason else "named" if has_path else "no-path"
        if cls in FAILING:
            problems.append("%s: rc %s: %s" % (cls, r.rc, msg[-300:]))
        # What the failed build left.
        ip = fl.index_problems(reg)
        if ip:
            problems.append("index.json after the failed build: %s" % "; ".join(ip[:5]))
        if cls != "fit":
            if ip is not None and fl.sha256_file(idx) != old_index:
                problems.append("index.json changed by the failed build")
            if ip is None and old_index:
                problems.append("the old index.json is gone")
        intact, corrupt, vr = fl.cache_verify(self.opf, cache)
        if corrupt is None or corrupt:
            problems.append("cache verify after the failed build: %s" % vr.out.strip()[-300:])
        # Then a build without the limit.
        r2 = self.opf.run(argv, timeout=1800, env=self.env_for(root))
        if r2.rc != 0:
            problems.append("the build without the limit failed: " + r2.text()[-600:])
        else:
            missing, extra, changed = fl.tree_diff(fl.tree(reg), self.ref[case]["tree"])
            if fl.compile_history_only(missing, extra, changed):
                problems.append("registry differs from a normal build's in kernel bytes only: "
                                "%s" % changed[:5])
            elif missing or extra or changed:
                problems.append("registry differs from a normal build's: missing %s, extra %s, "
                                "changed %s" % (missing[:5], extra[:5], changed[:5]))
            for op in self.ops_run:
                rr, outs, _ = fl.run_outputs(self.opf, reg, op, self.inputs[op],
                                             os.path.join(root, "out"))
                if rr.rc != 0:
                    problems.append("run %s failed: %s" % (op, rr.err.strip()[-300:]))
                elif outs != self.pristine[op]:
                    problems.append("run %s: output differs from a normal build's" % op)
            intact, corrupt, vr = fl.cache_verify(self.opf, cache)
            if corrupt is None or corrupt:
                problems.append("cache verify after the rebuild: %s" % vr.out.strip()[-300:])
        known = [next((why for pat, why in KNOWN_FAILURES if re.search(pat, p)), None)
                 for p in problems]
        status = "FAIL" if None in known else "XFAIL" if problems else "ok"
        detail = "limit %d: rc %s: %s%s" % (limit, r.rc, msg[-400:],
                                            (" || " + " | ".join(problems)) if problems else "")
        shutil.rmtree(root, ignore_errors=True)
        return cls, status, detail

    def env_for(self, root):
        return None

    def record(self, case, cls, status, detail):
        self.table.trial(case)
        self.table.add(case, cls, detail)
        self.table.add(case, status, detail)
        if self.args.verbose or cls in FAILING or status != "ok":
            print("%-22s %-9s %-5s %s" % (case, cls, status, detail), flush=True)

    # -- RLIMIT_FSIZE --------------------------------------------------------------------
    def run_fsize(self):
        for case in CASES:
            n = self.args.cold_trials if case.startswith("cold") else self.args.trials
            for limit in limits_between(self.ref[case]["sizes"], n, self.rng):
                def limited(argv, root, limit=limit):
                    return self.opf.run(argv, timeout=1800, preexec_fn=fsize_limit(limit))
                cls, status, detail = self.trial(case, "fsize", limit, self.path("runs"), limited,
                                                 os.strerror(errno.EFBIG))
                self.record("fsize " + case, cls, status, detail)

    # -- tmpfs, in a private mount namespace ---------------------------------------------
    def run_tmpfs(self):
        spec = dict(seed_cache=self.seed_cache, base_reg=self.base_reg, ref=self.ref,
                    trials=self.args.tmpfs_trials, seed=self.rng.randrange(1 << 31))
        spec_file = self.path("tmpfs-spec.json")
        with open(spec_file, "w") as f:
            json.dump(spec, f)
        child = [sys.executable, os.path.abspath(__file__), "--opforge", self.args.opforge,
                 "--work", self.work, "--tmpfs-child", spec_file]
        attempts = [["unshare", "--mount", "--propagation", "private"],
                    ["unshare", "--user", "--map-root-user", "--mount", "--propagation",
                     "private"]]
        why = []
        for pre in attempts:
            probe = subprocess.run(pre + ["sh", "-c", "mkdir -p %s && mount -t tmpfs -o size=1m "
                                          "tmpfs %s && umount %s" % ((self.path("probe"),) * 3)],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if probe.returncode == 0:
                p = subprocess.run(pre + child, stdout=subprocess.PIPE, timeout=1800)
                sys.stdout.write(p.stdout.decode(errors="replace").split("@@RESULTS@@")[0])
                if "@@RESULTS@@" not in p.stdout.decode(errors="replace"):
                    self.table.trial("tmpfs")
                    self.table.add("tmpfs", "FAIL", "the tmpfs child failed, rc %s" % p.returncode)
                    return
                for case, cls, status, detail in json.loads(
                        p.stdout.decode().split("@@RESULTS@@")[1]):
                    self.record(case, cls, status, detail)
                return
            why.append("%s: %s" % (" ".join(pre), probe.stdout.decode(errors="replace").strip()))
        print("skipped: tmpfs sub-case, no private tmpfs mount here (%s)" % " / ".join(why))


class TmpfsChild(Suite):
    """Runs inside `unshare --mount`: each trial on its own tmpfs, shrunk to what the build
    starts with plus `limit` bytes."""

    def __init__(self, args):
        with open(args.tmpfs_child) as f:
            self.spec = json.load(f)
        args.seed = self.spec["seed"]
        super().__init__(args, work=args.work)
        self.seed_cache, self.base_reg = self.spec["seed_cache"], self.spec["base_reg"]
        self.ref = self.spec["ref"]
        self.pristine_outputs(self.path("seed-registry"))
        self.mnt = self.path("tmpfs")
        os.makedirs(self.mnt, exist_ok=True)

    def mount(self, size):
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % size, "tmpfs", self.mnt],
                       check=True)

    def remount(self, size):
        subprocess.run(["mount", "-o", "remount,size=%d" % size, self.mnt], check=True)

    def env_for(self, root):
        env = dict(self.opf.env)
        env["TMPDIR"] = os.path.join(root, "tmp")
        return env

    def run_all(self):
        results = []
        page = os.sysconf("SC_PAGE_SIZE")
        for case in ["warm-fresh", "warm-existing", "cold-fresh"]:
            # Free space spread over what the build writes in all (its files, and the scratch
            # copy of the runtime it links against, about the largest of them).
            sizes = self.ref[case]["sizes"]
            total, n = sum(sizes) + sizes[-1], self.spec["trials"]
            for limit in sorted(self.rng.randrange(total * k // n, total * (k + 1) // n)
                                for k in range(n)):
                self.mount(1 << 30)
                try:
                    def limited(argv, root, limit=limit):
                        os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
                        st = os.statvfs(self.mnt)
                        used = (st.f_blocks - st.f_bfree) * st.f_frsize
                        self.remount((used + limit + page - 1) // page * page)
                        try:
                            return self.opf.run(argv, timeout=1800, env=self.env_for(root))
                        finally:
                            self.remount(1 << 30)
                    cls, status, detail = self.trial(case, "tmpfs", limit, self.mnt, limited,
                                                     os.strerror(errno.ENOSPC))
                finally:
                    subprocess.run(["umount", self.mnt])
                results.append(("tmpfs " + case, cls, status, detail))
                if self.args.verbose:
                    print("tmpfs %s %s %s %s" % (case, cls, status, detail), flush=True)
        print("@@RESULTS@@" + json.dumps(results), flush=True)


def main():
    p = fl.common_args(__doc__.split("\n")[0], default_trials=3, long_trials=20)
    p.add_argument("--cold-trials", type=int, default=None,
                   help="limits for the cold case (default --trials)")
    p.add_argument("--tmpfs-trials", type=int, default=None,
                   help="tmpfs sizes per case (default --trials; 0: no tmpfs sub-case)")
    p.add_argument("--tmpfs-child", default=None, help=argparse.SUPPRESS)  # internal
    p.add_argument("--verbose", action="store_true", help="print every trial")
    args = p.parse_args()
    if args.cold_trials is None:
        args.cold_trials = args.trials
    if args.tmpfs_trials is None:
        args.tmpfs_trials = args.trials
    if args.tmpfs_child:
        TmpfsChild(args).run_all()
        return
    s = Suite(args)
    s.setup()
    s.run_fsize()
    if args.tmpfs_trials:
        s.run_tmpfs()
    s.table.print()
    if not args.keep:
        shutil.rmtree(s.work, ignore_errors=True)
    sys.exit(1 if s.table.failures() else 0)


if __name__ == "__main__":
    main()
