"""The collectives' common part: tensors as the backend takes them, waits bounded by the
optimizer's timeout, and failures turned into one error that says what failed and which
rank."""

import datetime

import torch
import torch.distributed as dist


class DistributedStepError(RuntimeError):
    """A collective of a ZeroOptimizer failed or timed out (a rank died, hung or raised).
    The process group is unusable afterwards: restart the job from a checkpoint."""


class Comm:
    """One optimizer's process group, rank, timeout and failure reporting (`health`)."""

    def __init__(self, group, timeout, health):
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self.backend = dist.get_backend(group)
        self.timeout = timeout
        self.health = health
        self.where = ""
        self.broken = None

    def wire(self, t):
        """gloo moves no bfloat16 (nor int16) in torch 1.13: its bits travel as float16
        (moved, never added)."""
        if t.dtype == torch.bfloat16 and self.backend == "gloo":
            return t.view(torch.float16)
        return t

    def at(self, where):
        """Says where this rank is (the heartbeat carries it to the others)."""
        self.where = where
        self.health.where = where

    def check(self):
        if self.broken is not None:
            raise DistributedStepError(
                f"ZeroOptimizer on rank {self.rank} is unusable after an earlier failure: "
                f"{self.broken}")

    def wait(self, work, what):
        try:
            if not work.wait(datetime.timedelta(seconds=self.timeout)):
                raise RuntimeError("timed out")
        except RuntimeError as e:
            self.fail(e, what)

    def fail(self, error, what):
        """Raises the DistributedStepError for `error` in `what` (and tells the others)."""
        if isinstance(error, DistributedStepError):
            raise error
        where = self.where
        self.at(f"stopped: {what} failed ({where})")
        msg = (f"ZeroOptimizer on rank {self.rank} of {self.world}: {what} ({where}) "
               f"failed after at most {self.timeout:g} s: {' '.join(str(error).split())}. "
               f"{self.health.diagnose(where)}")
        self.broken = msg
        self.health.linger()
        raise DistributedStepError(msg) from error

    def run(self, fn, what):
        """A blocking collective, its failure reported like an async one's."""
        try:
            return fn()
        except RuntimeError as e:
            self.fail(e, what)
