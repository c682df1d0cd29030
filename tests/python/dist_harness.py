"""Runs a function on K local ranks (torch.multiprocessing spawn, gloo on 127.0.0.1 only),
bounded in time: each rank's return value or error comes back; a rank still running at
the deadline is killed and reported as such."""

import datetime
import os
import pickle
import socket
import traceback

import torch.multiprocessing as mp


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(fn, rank, world, port, queue, args, pg_timeout):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)  # K ranks on a 2-core host
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world,
                                timeout=datetime.timedelta(seconds=pg_timeout))
        # pickled here by value: torch's shared-memory handles die with this process
        queue.put((rank, "ok", pickle.dumps(fn(rank, world, *args))))
    except BaseException as e:  # noqa: B902 - every failure goes back to the test
        queue.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    finally:
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except RuntimeError:
                pass


def _collect(queue, results):
    rank, kind, value = queue.get()
    results[rank] = (kind, pickle.loads(value) if kind == "ok" else value)


def run_ranks(fn, world, *args, timeout=120, pg_timeout=60):
    """fn(rank, world, *args) on `world` processes; returns {rank: ("ok", value) |
    ("error", text) | ("killed", exit code)}. fn must be importable (module level)."""
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=_entry, args=(fn, r, world, port, queue, args, pg_timeout),
                         daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    import time
    deadline = time.monotonic() + timeout
    results = {}
    while len(results) < world and time.monotonic() < deadline:
        while not queue.empty():
            _collect(queue, results)
        if all(not p.is_alive() for p in procs):
            while not queue.empty():
                _collect(queue, results)
            break
        time.sleep(0.05)
    for r, p in enumerate(procs):
        p.join(timeout=max(0.0, deadline - time.monotonic()) if r not in results else 5)
        if p.is_alive():
            p.kill()
            p.join()
        if r not in results:
            results[r] = ("killed", p.exitcode)
    return results


def values(results):
    """The ranks' return values; raises with every failing rank's error otherwise."""
    bad = {r: v for r, v in results.items() if v[0] != "ok"}
    if bad:
        raise AssertionError("\n".join(f"rank {r}: {k}: {v}" for r, (k, v) in sorted(bad.items())))
    return [results[r][1] for r in sorted(results)]


os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
