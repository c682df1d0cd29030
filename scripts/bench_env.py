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
- BLAS: Debian's torch calls whatever BLAS the libblas.so.3 alternative points at: netlib's
  untuned reference BLAS with libblas3 alone, OpenBLAS once libopenblas0-pthread is installed
  (scripts/setup.sh installs it so that torch's matmul is a tuned peer). OpenBLAS picks its
  kernels from the CPU's features unless OPENBLAS_CORETYPE names them: an environment that
  pins it (some set Haswell, AVX2) holds the peer below its best on an AVX-512 host (1024^3 at
  2 threads 57 ms vs 40 ms on an AMD EPYC family 26), so blas_summary() names the library
  and the kernels that a header should print.
- Page faults: a forward pass allocates its activations fresh (torch.empty: glibc mmaps
  anything over 32 MB and unmaps it on free), so every call faults its output in 4 KB pages.
  On a VM with slow faults that swamps the kernels (AMD EPYC family 26 guest: a 50 MB
  torch.empty(...).fill_(1) 148 ms, 10 ms with glibc.malloc.hugetlb=1, which madvises
  transparent huge pages; torch's gelu on 12.6M elements 160 ms vs 20 ms). use_thp()
  re-executes the script with that tunable (both sides of a comparison get it), unless
  GLIBC_TUNABLES is already set or THP is off.
- The opforge package is this source tree's (runtime/python); a script's --lib picks the
  library it loads.
"""

import importlib
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "passive")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime",
                                "python"))


def loaded_blas():
    """The BLAS libraries this process mapped (torch links libblas.so.3), resolved."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return ""
    hits = sorted(p for p in paths if "blas" in os.path.basename(p).lower()
                  or os.path.basename(p).startswith("libmkl_"))
    return ", ".join(sorted({os.path.realpath(p) for p in hits}))


def blas_summary():
    """What torch's matmul runs on, for a header line: the library, and OpenBLAS's kernels
    and thread count. Call after torch has run a matmul (the library loads with torch)."""
    blas = loaded_blas()
    if "/blas/libblas.so" in blas:
        return "netlib reference BLAS (libblas3): torch.matmul is untuned here"
    if "openblas" in blas:
        import ctypes
        try:
            lib = ctypes.CDLL("libopenblas.so.0")
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return (f"OpenBLAS, {lib.openblas_get_corename().decode()} kernels, "
                    f"{lib.openblas_get_num_threads()} threads")
        except (OSError, AttributeError):
            return "OpenBLAS"
    return blas or "unknown"


def use_thp(enable=True):
    """Re-executes this script with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 when `enable`, THP
    is available (madvise or always) and the variable is unset; returns what malloc runs
    with, for a header line. (Reads the THP mode itself, as opforge.torch.nn._alloc.thp_mode
    does: this module runs before torch, which that one imports.)"""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            thp = f.read().split("[", 1)[1].split("]", 1)[0]
    except (OSError, IndexError):
        thp = "unknown"
    tunables = os.environ.get("GLIBC_TUNABLES")
    if enable and tunables is None and thp in ("madvise", "always"):
        os.environ["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
        os.execv(sys.executable, [sys.executable] + sys.argv)
    return f"THP {thp}, GLIBC_TUNABLES={tunables or '(unset)'}"


def set_blas_threads(n):
    """OpenBLAS keeps its own thread pool (torch.set_num_threads does not reach it with
    Debian's generic-BLAS build): give it the same count as the torch and opforge sides."""
    import ctypes
    try:
        ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(int(n))
    except (OSError, AttributeError):
        pass  # another BLAS: nothing to set


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
