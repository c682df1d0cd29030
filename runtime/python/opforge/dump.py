"""Precision dumps: while a dump directory is set, every kernel call in the process writes its
inputs, scalars and outputs under it (one entry per call, numbered in call order, appended
after what the directory holds); `opforge check --replay DIR` re-runs each call through the
fp64 golden of its op and reports per call and tensor the max abs/rel/ulp error, flagging
the first call past its bound.

    with opforge.dumping("step-dumps"):
        opt.step()
    # or opforge.torch.optim.Adam(..., dump_dir="step-dumps"): its steps' calls only
"""

import contextlib
import os

from ._lib import check, decode, lib


def set_dump_dir(path):
    """Dump every kernel call of this process under path (created if missing); None or ""
    turns dumping off. $OPFORGE_DUMP_DIR sets it at start."""
    check(lib().opforge_set_dump_dir(os.fsencode(path) if path else None))


def dump_dir():
    """The directory calls are dumped to, or None when dumping is off."""
    return decode(lib().opforge_dump_dir()) or None


@contextlib.contextmanager
def dumping(path):
    """Dumps the calls made inside the block under path; the previous setting after it."""
    before = dump_dir()
    set_dump_dir(path)
    try:
        yield os.fspath(path)
    finally:
        set_dump_dir(before)
