"""The tiny collective interface that the distributed chapters are written against (DESIGN.md section 5).

A distributed algorithm (Local Adam, DES-LOC, MT-DAO, FedMuon ...) is written once, as a function of
one worker that receives a :class:`Collective`::

    def train(comm: Collective) -> list[float]:
        gen = torch.Generator().manual_seed(100 + comm.rank)   # per-worker randomness
        ...
        comm.all_reduce_mean(list(model.parameters()), kind="parameters")   # in place
        ...

and runs unchanged on two engines:

* :func:`run_simulated`: ``K`` workers as threads of one process (the default in the book);
* :func:`run_gloo` / :func:`run_processes` / :func:`init_from_env`: real ``torch.distributed``
  processes (gloo on CPU, NCCL on GPUs; ``torchrun`` sets up the same environment on many machines).

**Communication is counted, never estimated.** Every all-reduce names the *kind* of tensor it moves
(:data:`TENSOR_KINDS`: parameters, gradients, first moment, second moment, other), and each worker
counts the payload bytes and the rounds (collective calls) per kind. :meth:`Collective.counts`
returns them as a :class:`CommCounts`; the two engines count identically. :func:`comm_seconds` turns
counts into a simulated wall-clock under a stated network model, for charts of loss against time.

For two workers the engines agree bit for bit (a test starts two gloo processes on loopback); for
more, the order of the floating-point sum may differ.

Simulated workers take turns: exactly one thread runs at a time, and the turn passes to the next
rank when a worker enters a collective (or returns). The run is therefore deterministic, uses one
core, and needs no locking in the training code. Workers must still not share a random number
generator (they would draw from it in the turn order, which a real run does not have): give each
worker its own ``torch.Generator`` seeded from its rank.
"""

from __future__ import annotations

import datetime
import math
import os
import pickle
import socket
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import torch
import torch.distributed as dist

from iclr_lab.core.validation import check_choice, check_int, check_range

__all__ = [
    "BACKENDS",
    "BUCKET_CAP_MB",
    "START_METHODS",
    "TENSOR_KINDS",
    "Collective",
    "CollectiveError",
    "CommCounts",
    "SimulatedCollective",
    "TensorKind",
    "TorchDistributedCollective",
    "buckets",
    "comm_seconds",
    "init_from_env",
    "run_gloo",
    "run_processes",
    "run_simulated",
]

T = TypeVar("T")

TensorKind = Literal["parameters", "gradients", "first_moment", "second_moment", "other"]
#: What an all-reduce moves. Counts are kept per kind, so a chapter can say "DES-LOC sends the
#: second moment 6 times less often than the parameters" from the counters, not from a formula.
TENSOR_KINDS: tuple[TensorKind, ...] = ("parameters", "gradients", "first_moment", "second_moment",
                                        "other")
#: ``torch.distributed`` back ends that :func:`run_processes` and :func:`init_from_env` accept.
BACKENDS: tuple[str, ...] = ("gloo", "nccl")

_Op = Literal["mean", "sum"]


def _zeros() -> dict[str, int]:
    return dict.fromkeys(TENSOR_KINDS, 0)


@dataclass(frozen=True)
class CommCounts:
    """What one worker has put into collectives: payload bytes and rounds, per tensor kind.

    A *round* is one collective call (one :meth:`Collective.all_reduce_mean`, whatever the number
    of tensors in it). Bytes are payload bytes, ``numel * element_size`` summed over the tensors;
    a ring all-reduce moves about ``2 (K - 1) / K`` times that over each worker's link
    (:func:`comm_seconds` uses that factor), and papers compare payloads, so we count those.

    Counts subtract (``later - earlier`` is what was sent in between) and add.
    """

    bytes: Mapping[str, int] = field(default_factory=_zeros)
    rounds: Mapping[str, int] = field(default_factory=_zeros)

    def __post_init__(self) -> None:
        for name in ("bytes", "rounds"):
            value = getattr(self, name)
            unknown = set(value) - set(TENSOR_KINDS)
            if unknown:
                raise ValueError(f"{name} has unknown tensor kinds {sorted(unknown)}; "
                                 f"kinds are {TENSOR_KINDS}")
            object.__setattr__(self, name, {k: int(value.get(k, 0)) for k in TENSOR_KINDS})

    @property
    def total_bytes(self) -> int:
        """Payload bytes over all kinds."""
        return sum(self.bytes.values())

    @property
    def total_rounds(self) -> int:
        """Collective calls over all kinds."""
        return sum(self.rounds.values())

    def __sub__(self, other: CommCounts) -> CommCounts:
        return CommCounts({k: self.bytes[k] - other.bytes[k] for k in TENSOR_KINDS},
                          {k: self.rounds[k] - other.rounds[k] for k in TENSOR_KINDS})

    def __add__(self, other: CommCounts) -> CommCounts:
        return CommCounts({k: self.bytes[k] + other.bytes[k] for k in TENSOR_KINDS},
                          {k: self.rounds[k] + other.rounds[k] for k in TENSOR_KINDS})

    def as_row(self) -> dict[str, int]:
        """A flat dict for a table row: ``bytes_<kind>``, ``rounds_<kind>``, ``bytes``, ``rounds``."""
        row = {f"bytes_{k}": self.bytes[k] for k in TENSOR_KINDS}
        row |= {f"rounds_{k}": self.rounds[k] for k in TENSOR_KINDS}
        return row | {"bytes": self.total_bytes, "rounds": self.total_rounds}


def comm_seconds(counts: CommCounts, world_size: int, *, bandwidth: float,
                 latency: float = 0.0) -> float:
    """Seconds that the collectives in ``counts`` take on a ring, under a stated network model.

    Each round costs ``2 (K - 1) latency`` and each payload byte ``2 (K - 1) / K / bandwidth``
    (a ring all-reduce: a reduce-scatter, then an all-gather, each of ``K - 1`` steps). With
    ``K = 1`` nothing is sent and the cost is 0. This is a model of time, used for "loss against
    simulated wall-clock" charts; the bytes and rounds it starts from are counted.

    Args:
        counts: what one worker sent (:meth:`Collective.counts`).
        world_size: the number of workers ``K``.
        bandwidth: bytes per second of each worker's link (> 0).
        latency: seconds per message (>= 0).
    """
    k = check_int("world_size", world_size, 1)
    bandwidth = check_range("bandwidth", bandwidth, 0, math.inf, low_open=True, high_open=True)
    latency = check_range("latency", latency, 0, math.inf, high_open=True)
    if k == 1:
        return 0.0
    return 2 * (k - 1) * (counts.total_rounds * latency + counts.total_bytes / (k * bandwidth))


class Collective(ABC):
    """One worker's view of the group: its rank, the group size, and in-place all-reduces.

    Attributes:
        rank: this worker's index in ``range(world_size)``.
        world_size: the number of workers.
        bytes_sent: payload bytes this worker has contributed to all-reduces so far (the sum of
            ``numel * element_size`` of the tensors it passed), over all kinds.
        calls: how many collective calls (rounds) this worker has taken part in, over all kinds.
    """

    def __init__(self, rank: int, world_size: int) -> None:
        self.world_size = check_int("world_size", world_size, 1)
        self.rank = check_int("rank", rank, 0, world_size - 1)
        self.bytes_sent = 0
        self.calls = 0
        self._bytes = _zeros()
        self._rounds = _zeros()

    def all_reduce_mean(self, tensors: Sequence[torch.Tensor], kind: TensorKind = "other") -> None:
        """Replace every tensor by its mean over all workers (in place; a collective call: every
        worker must call it with tensors of the same shapes and dtypes, in the same order).

        ``kind`` (one of :data:`TENSOR_KINDS`) is what the tensors are; it only labels the counts.
        """
        self._collective(tensors, kind, "mean")

    def all_reduce_sum(self, tensors: Sequence[torch.Tensor], kind: TensorKind = "other") -> None:
        """Replace every tensor by its sum over all workers (in place; a collective call).

        With a weight sent alongside, two sums make a weighted mean (partial participation: a
        worker that sits out a round sends zeros and weight 0).
        """
        self._collective(tensors, kind, "sum")

    def counts(self) -> CommCounts:
        """A snapshot of the bytes and rounds this worker has sent so far, per tensor kind."""
        return CommCounts(dict(self._bytes), dict(self._rounds))

    def _collective(self, tensors: Sequence[torch.Tensor], kind: str, op: _Op) -> None:
        check_choice("kind", kind, TENSOR_KINDS)
        tensors = list(tensors)
        if not all(isinstance(t, torch.Tensor) for t in tensors):
            raise TypeError("tensors must be a sequence of torch.Tensor")
        with torch.no_grad():
            self._all_reduce(tensors, op)
        sent = sum(t.numel() * t.element_size() for t in tensors)
        self.bytes_sent += sent
        self.calls += 1
        self._bytes[kind] += sent
        self._rounds[kind] += 1

    @abstractmethod
    def _all_reduce(self, tensors: list[torch.Tensor], op: _Op) -> None: ...


class _Aborted(Exception):
    """Raised in a simulated worker when another worker has failed."""


class _Hub:
    """What the simulated workers of one group share: the turn, a slot per rank, the last result.

    Workers run one at a time, in rank order. A worker that enters a collective leaves its tensors
    in its slot and hands the turn to the next rank; the last rank computes the result and hands
    the turn back to rank 0; each worker copies the result when its turn comes back. A worker that
    returns hands the turn on too. Every wait ends when the turn comes, or when a worker fails.
    """

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        # one lock; one condition per rank, so that handing the turn on wakes only its receiver
        self.lock = threading.RLock()
        self.conds = [threading.Condition(self.lock) for _ in range(world_size)]
        self.turn = 0
        self.generation = 0  # how many collectives have completed
        self.slots: list[list[torch.Tensor]] = [[] for _ in range(world_size)]
        self.joined = [-1] * world_size  # the generation each rank last joined
        self.ops: list[_Op] = ["mean"] * world_size
        self.result: list[torch.Tensor] = []
        self.finished = [False] * world_size
        self.error: BaseException | None = None

    # every method below is called with self.lock held

    def wait_turn(self, rank: int) -> None:
        while self.turn != rank and self.error is None:
            self.conds[rank].wait()
        if self.error is not None:
            raise _Aborted

    def pass_turn(self, rank: int) -> None:
        nxt = (rank + 1) % self.world_size
        self.turn = nxt
        if self.finished[nxt] and not all(self.finished):
            # nobody will take the turn: some worker waits in a collective that worker nxt left
            self.fail(RuntimeError(
                f"worker {nxt} returned while others still wait in a collective: every worker must "
                "make the same collective calls in the same order"))
        self.conds[nxt].notify()

    def fail(self, err: BaseException) -> None:
        if self.error is None:
            self.error = err
        for cond in self.conds:
            cond.notify_all()

    def reduce(self) -> None:
        missing = [r for r in range(self.world_size) if self.joined[r] != self.generation]
        if missing:
            raise RuntimeError(f"workers {missing} returned without joining a collective that the "
                               "others joined: every worker must make the same collective calls")
        if len(set(self.ops)) != 1:
            raise ValueError(f"workers called different collectives at once: {self.ops}")
        shapes = {tuple((t.shape, t.dtype) for t in slot) for slot in self.slots}
        if len(shapes) != 1:
            raise ValueError("all_reduce_mean: workers passed tensors of different shapes or dtypes")
        # Sum in rank order, then divide: the same arithmetic as an all-reduce SUM followed by
        # a division, so two workers match torch.distributed bit for bit.
        result = []
        for parts in zip(*self.slots, strict=True):
            total = parts[0].clone()
            for p in parts[1:]:
                total += p
            result.append(total.div_(self.world_size) if self.ops[0] == "mean" else total)
        self.result = result
        self.generation += 1


class SimulatedCollective(Collective):
    """A worker of a group simulated with threads in one process (see :func:`run_simulated`)."""

    def __init__(self, rank: int, hub: _Hub) -> None:
        super().__init__(rank, hub.world_size)
        self._hub = hub

    def _all_reduce(self, tensors: list[torch.Tensor], op: _Op) -> None:
        hub, rank = self._hub, self.rank
        with hub.lock:
            generation = hub.generation
            hub.slots[rank] = [t.detach() for t in tensors]
            hub.joined[rank] = generation
            hub.ops[rank] = op
            if rank == hub.world_size - 1:  # the last to arrive computes the result
                hub.reduce()
            hub.pass_turn(rank)
            hub.wait_turn(rank)
            if hub.generation == generation:
                raise RuntimeError(f"worker {rank} entered a collective that the other workers "
                                   "never joined: every worker must make the same collective calls")
            result = hub.result
        # Only this worker runs until it hands the turn on, and the result is replaced only after
        # every worker has handed the turn on again, so copying outside the lock is safe.
        for t, value in zip(tensors, result, strict=True):
            t.copy_(value)


#: The default size cap of one all-reduce bucket in MiB (DistributedDataParallel's ``bucket_cap_mb``).
BUCKET_CAP_MB = 25.0


def buckets(tensors: Sequence[torch.Tensor], cap_bytes: int) -> list[list[torch.Tensor]]:
    """Split ``tensors`` into runs of consecutive tensors of one device and dtype, each at most
    ``cap_bytes`` of payload (a tensor larger than the cap is a bucket of its own; ``cap_bytes=0``
    gives one bucket per tensor). The order of the tensors is kept."""
    cap_bytes = check_int("cap_bytes", cap_bytes, 0)
    out: list[list[torch.Tensor]] = []
    size = 0
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        last = out[-1] if out else None
        if (last is not None and cap_bytes > 0 and size + nbytes <= cap_bytes
                and (last[0].device, last[0].dtype) == (t.device, t.dtype)):
            last.append(t)
            size += nbytes
        else:
            out.append([t])
            size = nbytes
    return out


class CollectiveError(RuntimeError):
    """A collective call failed in a ``torch.distributed`` group: usually another rank died, left,
    or did not join within the group's timeout."""


class TorchDistributedCollective(Collective):
    """A worker of a ``torch.distributed`` process group (the default group unless one is given).

    The tensors of one call are flattened into buckets of at most ``bucket_cap_mb`` MiB (consecutive
    tensors of one device and dtype, as DistributedDataParallel buckets its gradients), and each
    bucket takes one ``all_reduce``; the results are copied back into the tensors. Element by
    element this is the same sum as one all-reduce per tensor (``bucket_cap_mb=0``), so for two
    ranks the two paths agree bit for bit (a test checks it). Tensors are reduced on the device
    they live on: CUDA tensors with NCCL in place on their GPU. CPU tensors in an NCCL group go
    through one CUDA buffer per bucket (NCCL reduces only GPU tensors), so the same CPU training
    code runs on either back end. The byte and round counters count the call as the algorithm
    makes it (one round per call, its payload bytes), whatever the bucketing.

    A failed all-reduce (a rank that died or left) raises :class:`CollectiveError` naming this
    rank and the tensors' kind, within the process group's ``timeout`` at the latest.

    Args:
        group: the process group (``None``: the default group).
        bucket_cap_mb: the largest bucket, in MiB (>= 0; 0 sends one tensor per all-reduce).
    """

    def __init__(self, group: Any = None, *, bucket_cap_mb: float = BUCKET_CAP_MB) -> None:
        cap = check_range("bucket_cap_mb", bucket_cap_mb, 0, math.inf, high_open=True)
        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised: call init_from_env() first")
        super().__init__(dist.get_rank(group), dist.get_world_size(group))
        self.bucket_cap_bytes = int(cap * 2**20)
        self._group = group
        self._staged = dist.get_backend(group) == "nccl"

    def _collective(self, tensors: Sequence[torch.Tensor], kind: str, op: _Op) -> None:
        try:
            super()._collective(tensors, kind, op)
        except (RuntimeError, dist.DistError) as err:
            if isinstance(err, CollectiveError):
                raise
            raise CollectiveError(
                f"rank {self.rank} of {self.world_size}: an all-reduce of {kind} failed: another "
                f"rank has probably died, left the group, or not joined within the process "
                f"group's timeout ({type(err).__name__}: {str(err).splitlines()[0][:300]})") from err

    def _all_reduce(self, tensors: list[torch.Tensor], op: _Op) -> None:
        for bucket in buckets(tensors, self.bucket_cap_bytes):
            if len(bucket) == 1 and bucket[0].is_contiguous():
                flat = bucket[0]
            else:
                flat = torch.cat([t.reshape(-1) for t in bucket])
            buf = flat.cuda() if self._staged and flat.device.type == "cpu" else flat
            dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=self._group)
            if op == "mean":
                buf.div_(self.world_size)
            if buf is bucket[0]:
                continue
            offset = 0
            for t in bucket:
                n = t.numel()
                t.copy_(buf[offset:offset + n].view_as(t))
                offset += n


def run_simulated(fn: Callable[[Collective], T], world_size: int) -> list[T]:
    """Run ``fn(comm)`` for ``world_size`` simulated workers (threads that take turns); return their
    results in rank order. An exception in any worker stops the others and is re-raised here."""
    world_size = check_int("world_size", world_size, 1)
    hub = _Hub(world_size)
    results: list[Any] = [None] * world_size

    def work(rank: int) -> None:
        try:
            with hub.lock:
                hub.wait_turn(rank)
            results[rank] = fn(SimulatedCollective(rank, hub))
        except _Aborted:
            return  # another worker failed first; its error is the one to report
        except BaseException as err:  # re-raised in the caller's thread
            with hub.lock:
                hub.fail(err)
            return
        with hub.lock:
            hub.finished[rank] = True
            hub.pass_turn(rank)

    threads = [threading.Thread(target=work, args=(r,), name=f"worker-{r}") for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if hub.error is not None:
        raise hub.error
    return results


def init_from_env(backend: str | None = None, *, timeout: float = 300.0, threads: int | None = 1,
                  bucket_cap_mb: float = BUCKET_CAP_MB) -> TorchDistributedCollective:
    """Join the process group described by the environment (``torchrun`` sets ``RANK``,
    ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) and return this worker's collective.

    ``backend`` defaults to NCCL when CUDA is available and gloo otherwise. With NCCL each process
    uses the GPU ``LOCAL_RANK`` (``torchrun`` sets it), or ``RANK`` modulo the number of GPUs.

    Args:
        backend: ``"gloo"`` or ``"nccl"`` (``None``: NCCL if CUDA is available, else gloo).
        timeout: seconds a collective may wait for the other ranks before it fails (> 0): a rank
            that dies makes the others stop with a :class:`CollectiveError` within it, not hang.
        threads: torch's intra-op threads in this process (>= 1; ``None`` leaves torch's setting).
            The default, one, keeps ``N`` ranks on a node from oversubscribing its cores; ask for
            more when a node runs fewer ranks than it has cores.
        bucket_cap_mb: the all-reduce bucket cap (see :class:`TorchDistributedCollective`).
    """
    if backend is not None:
        check_choice("backend", backend, BACKENDS)
    check_range("bucket_cap_mb", bucket_cap_mb, 0, math.inf, high_open=True)
    timeout = check_range("timeout", timeout, 0, math.inf, low_open=True, high_open=True)
    if threads is not None:
        torch.set_num_threads(check_int("threads", threads, 1))
    if not dist.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl":
            local = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
            torch.cuda.set_device(local % max(torch.cuda.device_count(), 1))
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    return TorchDistributedCollective(bucket_cap_mb=bucket_cap_mb)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _process_worker(rank: int, fn: Callable[[Collective], Any], world_size: int, port: int,
                    out: str, backend: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size))
    comm = init_from_env(backend)  # one thread per process
    try:
        result = fn(comm)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    Path(out, f"{rank}.pkl").write_bytes(pickle.dumps(result))


#: How :func:`run_processes` starts its processes (see :mod:`multiprocessing`).
START_METHODS: tuple[str, ...] = ("spawn", "fork", "forkserver")


def run_processes(fn: Callable[[Collective], T], world_size: int, backend: str = "gloo", *,
                  start_method: str = "spawn") -> list[T]:
    """Run ``fn(comm)`` in ``world_size`` real processes joined by a ``backend`` group on loopback
    (127.0.0.1); return their results in rank order.

    ``fn`` must be picklable (a module-level function, or a :func:`functools.partial` of one).
    NCCL needs one GPU per process. ``start_method="spawn"`` (the default) starts fresh
    interpreters. ``"forkserver"`` starts one fresh server that imports torch and ``fn``'s module
    once, then forks the workers from it: much faster when the workers are started again and
    again, and as safe as spawn. ``"fork"`` copies this process; avoid it once this process has
    run torch from several threads (the simulator does): MKL's allocator can then hang the child.
    """
    import torch.multiprocessing as mp

    world_size = check_int("world_size", world_size, 1)
    check_choice("backend", backend, BACKENDS)
    check_choice("start_method", start_method, START_METHODS)
    if start_method == "forkserver":
        target = getattr(fn, "func", fn)  # a functools.partial's function
        mp.get_context("forkserver").set_forkserver_preload(
            ["torch", "iclr_lab.core.collective", getattr(target, "__module__", "") or "torch"])
    with tempfile.TemporaryDirectory() as out:
        mp.start_processes(_process_worker, args=(fn, world_size, _free_port(), out, backend),
                           nprocs=world_size, join=True, start_method=start_method)
        return [pickle.loads(Path(out, f"{r}.pkl").read_bytes()) for r in range(world_size)]


def run_gloo(fn: Callable[[Collective], T], world_size: int, *,
             start_method: str = "spawn") -> list[T]:
    """Run ``fn(comm)`` in ``world_size`` real processes joined by a gloo group on loopback; return
    their results in rank order (:func:`run_processes` with ``backend="gloo"``)."""
    return run_processes(fn, world_size, "gloo", start_method=start_method)
