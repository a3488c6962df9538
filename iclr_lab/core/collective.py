"""The tiny collective interface that the distributed chapters are written against (DESIGN.md section 5).

A distributed algorithm (Local Adam, DES-LOC, MT-DAO, FedMuon ...) is written once, as a function of
one worker that receives a :class:`Collective`::

    def train(comm: Collective) -> list[float]:
        gen = torch.Generator().manual_seed(100 + comm.rank)   # per-worker randomness
        ...
        comm.all_reduce_mean(list(model.parameters()))           # average across workers, in place
        ...

and runs unchanged on two engines:

* :func:`run_simulated`: ``K`` workers as threads of one process (the default in the book);
* :func:`run_gloo` / :func:`init_from_env`: real ``torch.distributed`` processes (gloo on CPU,
  NCCL on GPUs, e.g. started by ``torchrun``).

Both count the bytes each worker puts into all-reduces (``Collective.bytes_sent``), which is how
the chapters compare communication. For two workers the engines agree bit for bit (the test starts
two gloo processes on loopback); for more, the order of the floating-point sum may differ.

Workers must not share a random number generator: threads would draw from it in an arbitrary order.
Give each worker its own ``torch.Generator`` seeded from its rank.
"""

from __future__ import annotations

import os
import pickle
import socket
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from iclr_lab.core.validation import check_int

__all__ = [
    "Collective",
    "SimulatedCollective",
    "TorchDistributedCollective",
    "init_from_env",
    "run_gloo",
    "run_simulated",
]

T = TypeVar("T")


class Collective(ABC):
    """One worker's view of the group: its rank, the group size, and an in-place all-reduce-mean.

    Attributes:
        rank: this worker's index in ``range(world_size)``.
        world_size: the number of workers.
        bytes_sent: payload bytes this worker has contributed to all-reduces so far (the sum of
            ``numel * element_size`` of the tensors it passed). A ring all-reduce moves about
            ``2 (K - 1) / K`` times this over the wire; papers compare payloads, so we count those.
        calls: how many all-reduces this worker has taken part in.
    """

    def __init__(self, rank: int, world_size: int) -> None:
        self.world_size = check_int("world_size", world_size, 1)
        self.rank = check_int("rank", rank, 0, world_size - 1)
        self.bytes_sent = 0
        self.calls = 0

    def all_reduce_mean(self, tensors: Sequence[torch.Tensor]) -> None:
        """Replace every tensor by its mean over all workers (in place; a collective call: every
        worker must call it with tensors of the same shapes and dtypes, in the same order)."""
        tensors = list(tensors)
        if not all(isinstance(t, torch.Tensor) for t in tensors):
            raise TypeError("tensors must be a sequence of torch.Tensor")
        with torch.no_grad():
            self._all_reduce_mean(tensors)
        self.bytes_sent += sum(t.numel() * t.element_size() for t in tensors)
        self.calls += 1

    @abstractmethod
    def _all_reduce_mean(self, tensors: list[torch.Tensor]) -> None: ...


class _Hub:
    """What the simulated workers of one group share: a slot per rank and a barrier."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.slots: list[list[torch.Tensor]] = [[] for _ in range(world_size)]
        self.means: list[torch.Tensor] = []
        # The barrier's action runs once, in one thread, after every worker has arrived.
        self.arrive = threading.Barrier(world_size, action=self._reduce)
        self.leave = threading.Barrier(world_size)

    def _reduce(self) -> None:
        shapes = {tuple((t.shape, t.dtype) for t in slot) for slot in self.slots}
        if len(shapes) != 1:
            raise ValueError("all_reduce_mean: workers passed tensors of different shapes or dtypes")
        # Sum in rank order, then divide: the same arithmetic as an all-reduce SUM followed by
        # a division, so two workers match torch.distributed bit for bit.
        self.means = []
        for parts in zip(*self.slots, strict=True):
            total = parts[0].clone()
            for p in parts[1:]:
                total += p
            self.means.append(total.div_(self.world_size))

    def abort(self) -> None:
        self.arrive.abort()
        self.leave.abort()


class SimulatedCollective(Collective):
    """A worker of a group simulated with threads in one process (see :func:`run_simulated`)."""

    def __init__(self, rank: int, hub: _Hub) -> None:
        super().__init__(rank, hub.world_size)
        self._hub = hub

    def _all_reduce_mean(self, tensors: list[torch.Tensor]) -> None:
        hub = self._hub
        hub.slots[self.rank] = [t.detach() for t in tensors]
        hub.arrive.wait()  # the last to arrive computes hub.means
        for t, mean in zip(tensors, hub.means, strict=True):
            t.copy_(mean)
        hub.leave.wait()  # nobody overwrites a slot before everyone has copied the means


class TorchDistributedCollective(Collective):
    """A worker of a ``torch.distributed`` process group (the default group unless one is given)."""

    def __init__(self, group: Any = None) -> None:
        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised: call init_from_env() first")
        super().__init__(dist.get_rank(group), dist.get_world_size(group))
        self._group = group

    def _all_reduce_mean(self, tensors: list[torch.Tensor]) -> None:
        for t in tensors:
            dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self._group)
            t.div_(self.world_size)


def run_simulated(fn: Callable[[Collective], T], world_size: int) -> list[T]:
    """Run ``fn(comm)`` for ``world_size`` simulated workers (threads); return their results in
    rank order. An exception in any worker aborts the others and is re-raised here."""
    world_size = check_int("world_size", world_size, 1)
    hub = _Hub(world_size)
    results: list[Any] = [None] * world_size
    errors: list[BaseException] = []

    def work(rank: int) -> None:
        try:
            results[rank] = fn(SimulatedCollective(rank, hub))
        except threading.BrokenBarrierError:
            pass  # another worker failed first; its error is the one to report
        except BaseException as err:  # re-raised in the caller's thread
            errors.append(err)
            hub.abort()

    threads = [threading.Thread(target=work, args=(r,), name=f"worker-{r}") for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def init_from_env(backend: str | None = None) -> TorchDistributedCollective:
    """Join the process group described by the environment (``torchrun`` sets ``RANK``,
    ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) and return this worker's collective.

    ``backend`` defaults to NCCL when CUDA is available and gloo otherwise.
    """
    if not dist.is_initialized():
        dist.init_process_group(backend or ("nccl" if torch.cuda.is_available() else "gloo"))
    return TorchDistributedCollective()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gloo_worker(rank: int, fn: Callable[[Collective], Any], world_size: int, port: int,
                 out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size))
    torch.set_num_threads(1)
    comm = init_from_env("gloo")
    try:
        result = fn(comm)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    Path(out, f"{rank}.pkl").write_bytes(pickle.dumps(result))


def run_gloo(fn: Callable[[Collective], T], world_size: int) -> list[T]:
    """Run ``fn(comm)`` in ``world_size`` real processes joined by a gloo group on loopback; return
    their results in rank order. ``fn`` must be picklable (defined at module level)."""
    import torch.multiprocessing as mp

    world_size = check_int("world_size", world_size, 1)
    with tempfile.TemporaryDirectory() as out:
        mp.spawn(_gloo_worker, args=(fn, world_size, _free_port(), out), nprocs=world_size,
                 join=True)
        return [pickle.loads(Path(out, f"{r}.pkl").read_bytes()) for r in range(world_size)]
