"""Fresh output tensors on transparent huge pages.

Every NN kernel writes a fresh output. glibc serves allocations over its mmap threshold (32 MB
at most) from new mappings and unmaps them when freed, so each forward faults its large
outputs in again, 4 KB at a time. Where faults are slow (a VM guest: about 10 us a page) that
outweighs the kernel: a fresh 50 MB gelu output took 116-120 ms, 11-13 ms after
madvise(MADV_HUGEPAGE) on it (AMD EPYC family 26 guest, THP in madvise mode, same run). So
`empty` advises the 2 MB-aligned part of every output of at least HUGE_MIN bytes. Where THP is
off, or madvise is unavailable, the advice is a no-op or fails silently: the tensor is the same.
"""

import ctypes
import ctypes.util

import torch

_MADV_HUGEPAGE = 14  # linux/mman.h
_HUGE_PAGE = 2 << 20
HUGE_MIN = 4 << 20  # below this, at most one huge page would fit: not worth a system call


def _load_madvise():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_madvise = _load_madvise()


def thp_mode():
    """The kernel's transparent huge page mode: 'always', 'madvise', 'never' (or 'unknown')."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[", 1)[1].split("]", 1)[0]
    except (OSError, IndexError):
        return "unknown"


def advise_huge(t):
    """Asks the kernel to back tensor t's whole 2 MB-aligned pages with huge pages; returns
    whether it was asked and agreed (False: too small, no madvise, or refused)."""
    nbytes = t.numel() * t.element_size()
    if _madvise is None or nbytes < HUGE_MIN:
        return False
    start = (t.data_ptr() + _HUGE_PAGE - 1) & ~(_HUGE_PAGE - 1)
    end = (t.data_ptr() + nbytes) & ~(_HUGE_PAGE - 1)
    return end > start and _madvise(start, end - start, _MADV_HUGEPAGE) == 0


def empty(shape, dtype=torch.float32):
    """torch.empty(shape, dtype=dtype), on huge pages where it is large enough (advise_huge)."""
    out = torch.empty(shape, dtype=dtype)
    advise_huge(out)
    return out
