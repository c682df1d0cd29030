"""What every bench script does before it imports torch or opforge.

    import bench_env  # first: sets OMP_WAIT_POLICY, puts runtime/python on sys.path
    torch = bench_env.require("torch")
    import opforge  # noqa: E402  (this tree's package)

- OpenMP: libgomp (torch's OpenMP runtime) spins its idle workers for a while after each
  parallel region (OMP_WAIT_POLICY=active behaviour, GOMP_SPINCOUNT). With torch and opforge
  interleaved in one process, those spinning threads steal the cores that Halide's thread
  pool needs for the next opforge call (and vice versa), which distorts both timings.
  Passive waiting makes idle OpenMP threads sleep. It must be set before torch (and so
  libgomp) is loaded; an explicit user setting is respected. Caveat (measured on a 2-core
  box, threads=2): passive also slows torch itself, since every one of the ~8 _foreach ops
  in an Adam step then wakes sleeping workers; torch's median was ~2x lower at n=1e5..1e6
  with OMP_WAIT_POLICY=active, while opforge's did not change measurably. Run both ways
  (OMP_WAIT_POLICY=active ...) before quoting a speed-up.
- The opforge package is this source tree's (runtime/python); a script's --lib picks the
  library it loads.
"""

import importlib
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime",
                                "python"))


def require(*names):
    """Imports the named modules (one module, or a tuple of them in order); exits with an
    error naming the one that is missing and a Python that has it."""
    modules = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except ImportError as e:  # pragma: no cover - environment problem
            sys.exit(f"error: cannot import {name} ({e}); run with a Python that has it, "
                     f"e.g. /usr/bin/python3 (scripts/setup.sh --bench installs numpy and "
                     f"torch)")
    return modules[0] if len(modules) == 1 else tuple(modules)
