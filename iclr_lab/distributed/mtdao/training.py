"""MT-DAO's training function, written once against the collective interface.

:func:`train_worker` is one worker of a digits run, for MT-DAO and every baseline
(:class:`Method`): Local Adam and DDP step with DES-LOC's optimizer
(:class:`~iclr_lab.distributed.desloc.DESLOC`, which *is* Local Adam when its three periods are
equal), MT-DAO and QH-DDP with :class:`~iclr_lab.distributed.mtdao.optimizer.MTDAO`. It takes a
:class:`~iclr_lab.core.collective.Collective` (the simulator's threads or a ``torch.distributed``
process) and returns what rank 0 recorded.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from iclr_lab.core.collective import Collective, CommCounts, TensorKind
from iclr_lab.core.nn import FlatMLP, warmup_cosine
from iclr_lab.core.validation import check_choice, check_int, check_range, check_seed
from iclr_lab.core.worker_data import WorkerShards, digit_shards, worker_seed
from iclr_lab.distributed.desloc import DESLOC
from iclr_lab.distributed.local_sync import check_period
from iclr_lab.distributed.mtdao.optimizer import MTDAO, _check_betas, _check_weights

__all__ = ["DigitsSetup", "Method", "held_out", "model_bytes", "train_worker"]

INF = math.inf


# ---------------------------------------------------------------------------------------------
# Methods: one training function, different settings
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Method:
    """One distributed training method, as settings of :func:`train_worker`.

    Attributes:
        name: the label in tables and charts (a string).
        lr: peak learning rate, in (0, inf).
        betas: ``(beta_1, ..., beta_N, beta2)``, each in [0, 1); with ``weights=None`` exactly
            ``(beta1, beta2)``.
        weights: MT-DAO's ``(omega_1, ..., omega_N)``, each in [0, 1] with sum <= 1, or ``None``
            for Adam (stepped by :class:`~iclr_lab.distributed.desloc.DESLOC`).
        period: the sync period ``K`` of every state (parameters, each first moment, second
            moment): an integer >= 1, or ``math.inf`` for DDP.
        ddp: average the gradients at every step (the replicas stay identical); needs
            ``period = math.inf``.

    Raises:
        TypeError, ValueError: a field outside the range above, naming the field.
    """

    name: str
    lr: float
    betas: tuple[float, ...] = (0.9, 0.999)
    weights: tuple[float, ...] | None = None
    period: float = 32
    ddp: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string, got {type(self.name).__name__}")
        check_range("lr", self.lr, 0, INF, low_open=True, high_open=True)
        betas = _check_betas(self.betas)
        n = 1 if self.weights is None else len(_check_weights(self.weights))
        if len(betas) != n + 1:
            raise ValueError(f"betas must hold {n + 1} values (one per first moment, then beta2), "
                             f"got {self.betas!r}")
        check_period("period", self.period)
        if not isinstance(self.ddp, bool):
            raise TypeError(f"ddp must be True or False, got {type(self.ddp).__name__}")
        if self.ddp and self.period != INF:
            raise ValueError(f"a DDP method averages gradients, not states: period must be inf, "
                             f"got {self.period!r}")
        if not self.ddp and self.period == INF:
            raise ValueError("period must be finite unless ddp=True (the workers would never talk)")

    @property
    def optimizer(self) -> str:
        """``"adam"`` (DES-LOC's optimizer) or ``"mtdao"``."""
        return "adam" if self.weights is None else "mtdao"

    @property
    def sync_periods(self) -> tuple[float, ...]:
        """The period of every state, ``(K, K, K)`` with one first moment."""
        n = 1 if self.weights is None else len(self.weights)
        return (self.period,) * (n + 2)

    def build(self, params: list[torch.Tensor], comm: Collective) -> torch.optim.Optimizer:
        """This method's optimizer on ``params``, averaging through ``comm``."""
        if self.weights is None:
            b1, b2 = self.betas
            return DESLOC(params, lr=self.lr, betas=(b1, b2), sync_periods=self.sync_periods,
                          comm=comm, fused=True)
        return MTDAO(params, lr=self.lr, betas=self.betas, weights=self.weights,
                     sync_periods=self.sync_periods, comm=comm)


# ---------------------------------------------------------------------------------------------
# The digits model: one flat parameter tensor, the gradient written out
# ---------------------------------------------------------------------------------------------

def model_bytes(hidden: int, n_in: int = 64, n_out: int = 10) -> int:
    """Bytes of the digits MLP's parameters (float32): the payload of one model-sized all-reduce.
    ``hidden``, ``n_in`` and ``n_out`` (the layer widths) are integers >= 1."""
    hidden = check_int("hidden", hidden, 1)
    n_in = check_int("n_in", n_in, 1)
    n_out = check_int("n_out", n_out, 1)
    return 4 * (n_in * hidden + hidden + hidden * n_out + n_out)


# ---------------------------------------------------------------------------------------------
# The training function
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DigitsSetup:
    """Everything about a digits run except the method and the seed.

    Attributes:
        steps: local steps ``T`` (>= 1); a multiple of every finite period, so that the run ends on
            an average.
        batch_size: local minibatch per worker and step (>= 1).
        warmup: linear warm-up steps, in [0, steps - 1], then cosine decay to zero at ``steps``.
        hidden: width of the MLP's hidden layer (>= 1).
        split: how the training set is divided among the workers (``"sorted"``: by label, the
            most heterogeneous split; ``"iid"``; see :func:`~iclr_lab.core.worker_data.digit_shards`).
        eval_every: evaluate every this many steps (>= 1), at steps where the parameters are
            averaged.

    Raises:
        TypeError, ValueError: a field outside the range above, naming the field.
    """

    steps: int = 384
    batch_size: int = 16
    warmup: int = 12
    hidden: int = 64
    split: str = "sorted"
    eval_every: int = 32

    def __post_init__(self) -> None:
        check_int("steps", self.steps, 1)
        check_int("batch_size", self.batch_size, 1)
        check_int("warmup", self.warmup, 0, self.steps - 1)
        check_int("hidden", self.hidden, 1)
        check_choice("split", self.split, ("sorted", "iid"))
        check_int("eval_every", self.eval_every, 1)

    def rate(self, t: int, peak: float) -> float:
        """The learning rate of step ``t`` (1-based): linear warm-up, then cosine decay to 0."""
        return warmup_cosine(t, peak, self.warmup, self.steps)


@functools.lru_cache(maxsize=8)
def _shards(n_workers: int, split: str, seed: int) -> WorkerShards:
    return digit_shards(n_workers, split, seed=seed, standardize=True)


def held_out(data: WorkerShards) -> tuple[tuple[torch.Tensor, torch.Tensor],
                                         tuple[torch.Tensor, torch.Tensor]]:
    """The held-out examples cut in two: ``(validation, test)``, each ``(x, y)``.

    The digits test split (360 images, shuffled once with seed 0 and the same for every seed) is
    cut at its middle: the first half validates (the learning rates and configurations are tuned
    on its loss, on the tuning seeds), the second half tests (the claims are judged on its loss,
    on the judging seeds). No run trains on either half.
    """
    x, y = torch.from_numpy(data.split.x_test), torch.from_numpy(data.split.y_test)
    half = len(y) // 2
    return (x[:half], y[:half]), (x[half:], y[half:])


class _Recorder(Collective):
    """Forwards every collective call to ``inner`` (which counts it) and keeps a copy of this
    worker's parameters just before each parameter average, for the alignment diagnostic."""

    def __init__(self, inner: Collective) -> None:
        super().__init__(inner.rank, inner.world_size)
        self.inner = inner
        self.before: list[torch.Tensor] = []

    def all_reduce_mean(self, tensors: Sequence[torch.Tensor], kind: TensorKind = "other") -> None:
        if kind == "parameters":
            self.before = [t.detach().clone() for t in tensors]
        self.inner.all_reduce_mean(tensors, kind)

    def all_reduce_sum(self, tensors: Sequence[torch.Tensor], kind: TensorKind = "other") -> None:
        self.inner.all_reduce_sum(tensors, kind)

    def counts(self) -> CommCounts:
        return self.inner.counts()

    def _all_reduce(self, tensors: list[torch.Tensor], op: Any) -> None:  # pragma: no cover
        raise AssertionError("the recorder forwards every call")


def _check_method(method: Method, setup: DigitsSetup) -> None:
    if not isinstance(method, Method):
        raise TypeError(f"method must be a Method, got {type(method).__name__}")
    if not isinstance(setup, DigitsSetup):
        raise TypeError(f"setup must be an mtdao DigitsSetup, got {type(setup).__name__}")
    if method.period != INF and setup.steps % int(method.period) != 0:
        raise ValueError(f"steps ({setup.steps}) must be a multiple of the period K "
                         f"({method.period}), so that the run ends on an average")


def train_worker(comm: Collective, method: Method, setup: DigitsSetup, seed: int) -> pd.DataFrame:
    """One worker of a digits run: ``setup.steps`` local steps of ``method`` on this worker's shard.

    Every worker starts from the same weights (drawn from ``seed``) and draws its minibatches from
    its own generator (:func:`~iclr_lab.core.worker_data.worker_seed`). DDP methods first average
    the gradients (``mtdao-eq-ddp``); the local methods average their states inside the optimizer
    (``mtdao-eq-sync``). Rank 0 evaluates the common model at every ``eval_every``-th step where the
    parameters have just been averaged, and at the end.

    At each parameter average of a local method, each worker also measures the cosine between its
    own pseudo-gradient ``x_start - x^m`` (how far it moved in the round) and the workers' mean
    ``x_start - mean_m x^m`` (``mtdao-eq-alignment``); their mean over the workers is one extra
    all-reduce of one number, counted under the kind ``other``.

    Returns:
        A table with one row per evaluation on rank 0 (other ranks return an empty table), with
        columns ``method``, ``step``, ``loss`` (cross-entropy on the whole training set),
        ``val_loss`` and ``test_loss`` (cross-entropy on the two halves of the held-out examples,
        :func:`~iclr_lab.distributed.mtdao.training.held_out`), ``test_acc`` (accuracy on the test
        half), ``alignment`` (mean pseudo-gradient cosine of the round that just ended; NaN for
        DDP and at step 0), and the communication of this worker since the run started
        (:meth:`~iclr_lab.core.collective.CommCounts.as_row`).

    Raises:
        TypeError, ValueError: ``comm`` is not a collective, ``method`` or ``setup`` of the wrong
            type, ``setup.steps`` not a multiple of the period, or ``seed`` not an integer in
            [0, 2**32 - 1].
    """
    if not isinstance(comm, Collective):
        raise TypeError(f"comm must be an iclr_lab.core.collective.Collective, "
                        f"got {type(comm).__name__}")
    _check_method(method, setup)
    seed = check_seed(seed)
    data = _shards(comm.world_size, setup.split, seed)
    x_np, y_np = data.worker(comm.rank)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    onehot = torch.nn.functional.one_hot(y, data.split.n_classes).float()
    model = FlatMLP(x.shape[1], setup.hidden, data.split.n_classes,
                      torch.Generator().manual_seed(worker_seed(seed, 10_000)))  # same everywhere
    gen = torch.Generator().manual_seed(worker_seed(seed, comm.rank))
    recorder = _Recorder(comm)
    opt = method.build([model.theta], recorder)
    start = comm.counts()  # the collective may have served earlier runs (launch runs several)
    anchor = model.theta.detach().clone()  # the common point at the start of the round
    alignment = math.nan
    rows: list[dict[str, Any]] = []
    if comm.rank == 0:
        x_all, y_all = torch.from_numpy(data.split.x_train), torch.from_numpy(data.split.y_train)
        (x_val, y_val), (x_test, y_test) = held_out(data)

    def record(step: int) -> None:
        if comm.rank == 0:
            loss, _ = model.evaluate(x_all, y_all)
            val_loss, _ = model.evaluate(x_val, y_val)
            test_loss, acc = model.evaluate(x_test, y_test)
            rows.append({"method": method.name, "step": step, "loss": loss, "val_loss": val_loss,
                         "test_loss": test_loss, "test_acc": acc,
                         "alignment": alignment, **(comm.counts() - start).as_row()})

    record(0)
    n, b, pos = len(y), setup.batch_size, len(y)
    for t in range(1, setup.steps + 1):
        if pos + b > n:  # a new epoch: shuffle once, then take slices (views, no copies)
            order = torch.randperm(n, generator=gen)
            xs, hs, pos = x[order], onehot[order], 0
        xb, hb = xs[pos:pos + b], hs[pos:pos + b]
        pos += b
        for group in opt.param_groups:
            group["lr"] = setup.rate(t, method.lr)
        model.grad(xb, hb)
        if method.ddp:
            comm.all_reduce_mean([model.theta.grad], kind="gradients")  # type: ignore[list-item]
        opt.step()
        synced = method.ddp or t % int(method.period) == 0
        if synced and not method.ddp:
            with torch.no_grad():
                mean_move = anchor - model.theta
                own_move = anchor - recorder.before[0]
                cos = torch.nn.functional.cosine_similarity(own_move, mean_move, dim=0, eps=1e-30)
                share = cos.reshape(1).clone()
            comm.all_reduce_mean([share], kind="other")
            alignment = float(share)
            anchor = model.theta.detach().clone()
        if synced and (t % setup.eval_every == 0 or t == setup.steps):
            record(t)
    return pd.DataFrame(rows)
