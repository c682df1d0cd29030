"""Naming the rank that failed. A collective that fails or times out tells a rank only that
a peer is gone ("Connection closed by peer", "Operation timed out"). So each rank's
heartbeat thread writes a beat counter, where its step is, and the error it raised, if any,
to the process group's key-value store over its own connection; after a failed collective
the survivors read every rank's entry twice and name the ranks whose beats stopped (dead or
hung) or that reported an error.

The store comes from torch.distributed's record of the group (a private table in torch
1.13); where it cannot be found, or is not a TCPStore, errors still come but name no rank."""

import datetime
import threading
import time

import torch.distributed as dist

_instances = [0]


def _tcp_store(group):
    try:
        from torch.distributed import distributed_c10d as c10d
        pg = group if group is not None else c10d._get_default_group()
        store = c10d._pg_map[pg][1]
        while hasattr(store, "underlying_store"):
            store = store.underlying_store
        if isinstance(store, dist.TCPStore):
            return store.host, store.port
    except (AttributeError, KeyError, RuntimeError, TypeError):
        pass
    return None


class Health:
    """The heartbeat of this rank and the diagnosis of the others. `where` is what this
    rank is doing (set by the optimizer at each phase)."""

    def __init__(self, group, rank, world, interval=0.25):
        self.rank, self.world, self.interval = rank, world, interval
        _instances[0] += 1
        self.prefix = f"opforge_zero/{_instances[0]}"
        self.where = "constructed"
        self.error = ""
        self._beats = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._store = None
        addr = _tcp_store(group)
        if addr is not None:
            try:
                wait = datetime.timedelta(seconds=max(5.0, 8 * interval))
                self._store = dist.TCPStore(addr[0], addr[1], is_master=False, timeout=wait,
                                            wait_for_workers=False)
            except RuntimeError:
                self._store = None
        if self._store is not None:
            self._beat()
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"opforge-zero-heartbeat-{rank}")
            self._thread.start()

    def _beat(self):
        with self._lock:
            self._beats += 1
            self._store.set(f"{self.prefix}/{self.rank}",
                            f"{self._beats}\t{self.where}\t{self.error}")

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self._beat()
            except RuntimeError:  # the store's host is gone: nothing left to tell
                return

    def report(self, error):
        """This rank raised `error` in a step (not a failed collective: that is the others'
        fault): tell the others (best effort)."""
        self.error = " ".join(str(error).split())[:500]
        if self._store is not None:
            try:
                self._beat()
            except RuntimeError:
                pass

    def linger(self):
        """Rank 0 hosts the store (init_process_group's TCPStore): after a failure it stays
        a while before raising, so that the others' diagnoses (two reads 4 beats apart) can
        still read the store if rank 0's process exits on the error."""
        if self.rank == 0 and self._store is not None:
            time.sleep(8 * self.interval)

    def close(self):
        self._stop.set()

    def _read(self):
        out = {}
        for r in range(self.world):
            if r == self.rank:
                continue
            with self._lock:
                raw = self._store.get(f"{self.prefix}/{r}").decode()
            beats, where, error = (raw.split("\t") + ["", "", ""])[:3]
            out[r] = (int(beats), where, error)
        return out

    def diagnose(self, mine):
        """A sentence naming the failed ranks, or saying why none can be named. `mine`:
        where this rank was when the collective failed."""
        if self._store is None:
            return "(no key-value store to ask which rank failed)"
        try:
            first = self._read()
            time.sleep(4 * self.interval)
            second = self._read()
        except RuntimeError:
            return ("rank 0, which hosts the process group's store, is unreachable (it "
                    "exited or hung)" if self.rank != 0 else "the store is unreachable")
        failed = []
        for r in sorted(second):
            beats, where, error = second[r]
            if error:
                failed.append(f"rank {r} raised an error ({error}; it was at: {where})")
            elif beats == first[r][0]:
                failed.append(f"rank {r} stopped (no heartbeat for "
                              f"{4 * self.interval:.1f} s; it was last at: {where})")
        if not failed:  # all alive: the ones not where this rank was are holding it up
            failed = [f"rank {r} is alive but elsewhere: {second[r][1]}" for r in sorted(second)
                      if not second[r][1].startswith("stopped") and second[r][1] != mine]
        if not failed:
            return "every other rank is alive (the collective itself failed or timed out)"
        return "; ".join(failed)
