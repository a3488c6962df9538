"""DES-LOC's training functions, written once against the collective interface.

* :func:`train_worker`: one worker of a digits run (Experiment A of the chapter), for DES-LOC and
  every baseline (:class:`Method`);
* :func:`rosenbrock_worker`: one worker on the Rosenbrock toy (Experiment B);
* :func:`drift_run`: one worker, no averaging, recording how far Adam's moments move in ``K``
  steps (Experiment C, ``desloc-eq-drift``).

Each takes a :class:`~iclr_lab.core.collective.Collective` (the simulator's threads or a
``torch.distributed`` process) and returns what that worker recorded.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from iclr_lab.core.collective import Collective
from iclr_lab.core.datasets import Split
from iclr_lab.core.nn import FlatMLP, warmup_cosine
from iclr_lab.core.validation import check_choice, check_int, check_range, check_seed
from iclr_lab.core.worker_data import (
    RosenbrockToy,
    WorkerShards,
    digit_shards,
    shard_iid,
    shard_sorted,
    worker_seed,
)
from iclr_lab.distributed.desloc.optimizer import DESLOC, _check_betas, _check_flag, check_periods

__all__ = [
    "DDP",
    "DESLOC_NAME",
    "KEEP",
    "LOCAL_ADAM",
    "LOCAL_ADAM_2",
    "LOCAL_SGD",
    "METHODS",
    "RESET",
    "SWEEP",
    "DigitsSetup",
    "Method",
    "RosenbrockSetup",
    "drift_run",
    "main_methods",
    "model_bytes",
    "rosenbrock_worker",
    "sweep_methods",
    "train_worker",
]

INF = math.inf


# ---------------------------------------------------------------------------------------------
# Methods: one training function, different settings
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Method:
    """One distributed training method, as settings of the shared training function.

    Attributes:
        name: the label in tables and charts (a string).
        sync_periods: ``(Kx, Ku, Kv)`` of
            :class:`~iclr_lab.distributed.desloc.optimizer.DESLOC`, each an integer >= 1 or
            ``math.inf`` (never).
        optimizer: ``"adam"`` (DES-LOC) or ``"sgd"`` (plain SGD, parameters averaged on ``Kx``:
            Local SGD).
        reset_states: the reset heuristic (DES-LOC's ``reset_states``).
        ddp: average the gradients at every step (DDP; the replicas stay identical).
        lr: this method's peak learning rate, in (0, inf) (``None``: the setup's ``lr`` for Adam
            methods, ``sgd_lr`` for Local SGD); ``reproduce`` sets the rate that tuning chose.

    Raises:
        TypeError, ValueError: a field outside the range above, naming the field.
    """

    name: str
    sync_periods: tuple[float, float, float]
    optimizer: str = "adam"
    reset_states: bool = False
    ddp: bool = False
    lr: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string, got {type(self.name).__name__}")
        check_periods(self.sync_periods)
        check_choice("optimizer", self.optimizer, ("adam", "sgd"))
        _check_flag("reset_states", self.reset_states)
        _check_flag("ddp", self.ddp)
        if self.lr is not None:
            check_range("lr", self.lr, 0, INF, low_open=True, high_open=True)

    def peak(self, setup: DigitsSetup) -> float:
        """The peak learning rate of this method in ``setup`` (its own ``lr``, else the setup's)."""
        if self.lr is not None:
            return self.lr
        return setup.lr if self.optimizer == "adam" else setup.sgd_lr

    @property
    def kx(self) -> float:
        return self.sync_periods[0]


DESLOC_NAME = "DES-LOC"
LOCAL_ADAM = "Local Adam (Kx)"
LOCAL_ADAM_2 = "Local Adam (2Kx, same bytes)"
KEEP = "keep states local"
RESET = "reset states"
LOCAL_SGD = "Local SGD"
DDP = "DDP"
#: Experiment A's methods in the order of the tables and legends, the paper's method first.
METHODS = (DESLOC_NAME, LOCAL_ADAM, LOCAL_ADAM_2, KEEP, RESET, LOCAL_SGD, DDP)
#: multipliers of the period sweeps (``Kx`` and ``Kv`` each times 1, 2, 4, the others fixed)
SWEEP = (1, 2, 4)


def main_methods(kx: int) -> list[Method]:
    """Experiment A's methods at base period ``kx`` (an integer >= 1): DES-LOC ``(kx, 3 kx, 6 kx)``
    and its baselines, each through :func:`train_worker`."""
    kx = check_int("kx", kx, 1)
    return [
        Method(DESLOC_NAME, (kx, 3 * kx, 6 * kx)),
        Method(LOCAL_ADAM, (kx, kx, kx)),
        Method(LOCAL_ADAM_2, (2 * kx, 2 * kx, 2 * kx)),
        Method(KEEP, (kx, INF, INF)),
        Method(RESET, (kx, INF, INF), reset_states=True),
        Method(LOCAL_SGD, (kx, INF, INF), optimizer="sgd"),
        Method(DDP, (INF, INF, INF), ddp=True),
    ]


def sweep_methods(kx: int) -> list[tuple[str, int, Method]]:
    """DES-LOC with ``Kx`` multiplied by 2 and 4 (``Ku``, ``Kv`` fixed), and with ``Kv`` multiplied
    by 2 and 4 (``Kx``, ``Ku`` fixed): ``(swept, multiplier, method)``. Multiplier 1 is the base
    DES-LOC run, shared by both sweeps. ``kx``: an integer >= 1."""
    kx = check_int("kx", kx, 1)
    ku, kv = 3 * kx, 6 * kx
    out = []
    for m in SWEEP[1:]:
        out.append(("Kx", m, Method(f"DES-LOC, Kx × {m}", (m * kx, ku, kv))))
        out.append(("Kv", m, Method(f"DES-LOC, Kv × {m}", (kx, ku, m * kv))))
    return out


# The digits model is iclr_lab.core.nn.FlatMLP (shared with MT-DAO): autograd gives the same
# numbers but costs twice as much time on a model this small, and Experiment A takes a hundred
# thousand worker steps.

# ---------------------------------------------------------------------------------------------
# Experiment A: the training function
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DigitsSetup:
    """Everything about a digits run except the method and the seed.

    Attributes:
        steps: local steps ``T`` (>= 1); a multiple of every finite parameter period, so that the
            model is averaged at the end.
        batch_size: local minibatch per worker and step (>= 1).
        lr: Adam's peak learning rate (every Adam method), in (0, inf); ``sgd_lr`` (the same
            range) is Local SGD's.
        betas: Adam's ``(beta1, beta2)``, each in [0, 1).
        clip: per-coordinate gradient clipping radius ``rho``, in (0, inf] (``inf``: off).
        warmup: linear warm-up steps, in [0, steps - 1], then cosine decay to zero at ``steps``.
        hidden: width of the MLP's hidden layer (>= 1).
        split: how the training set is divided (``"sorted"``: by label; ``"iid"``).
        standardize: standardise the pixels (:func:`~iclr_lab.core.worker_data.digit_shards`).
            On raw pixels some coordinates of a label-sorted worker's gradient are exactly zero,
            and DES-LOC with ``Ku < Kv`` then divides an averaged first moment by a second moment
            that is zero on this worker (the chapter shows the blow-up).
        eval_every: evaluate every this many steps (>= 1), at steps where the parameters are
            averaged.
        validation: hold out a validation split cut from the training set (``True``; the tuning
            runs): a fixed, class-stratified fifth (``VALIDATION_FRACTION``) of the training images
            (cut with seed 0, the same for every seed) is taken out, the shards are cut from the
            rest, and the ``test_loss`` and ``test_acc`` columns then read that validation split,
            never the test images. ``False`` (the default): the whole training set is sharded and
            the test split is evaluated.

    Raises:
        TypeError, ValueError: a field outside the range above, naming the field.
    """

    steps: int = 384
    batch_size: int = 16
    lr: float = 3e-3
    sgd_lr: float = 0.1
    betas: tuple[float, float] = (0.9, 0.999)
    clip: float = 1.0
    warmup: int = 12
    hidden: int = 128
    split: str = "sorted"
    standardize: bool = True
    eval_every: int = 16
    validation: bool = False

    def __post_init__(self) -> None:
        check_int("steps", self.steps, 1)
        check_int("batch_size", self.batch_size, 1)
        check_range("lr", self.lr, 0, INF, low_open=True, high_open=True)
        check_range("sgd_lr", self.sgd_lr, 0, INF, low_open=True, high_open=True)
        _check_betas(self.betas)
        check_range("clip", self.clip, 0, INF, low_open=True, high_open=False)
        check_int("warmup", self.warmup, 0, self.steps - 1)
        check_int("hidden", self.hidden, 1)
        check_choice("split", self.split, ("sorted", "iid"))
        _check_flag("standardize", self.standardize)
        check_int("eval_every", self.eval_every, 1)
        _check_flag("validation", self.validation)

    def rate(self, t: int, peak: float) -> float:
        """The learning rate of step ``t`` (1-based): linear warm-up, then cosine decay to 0."""
        return warmup_cosine(t, peak, self.warmup, self.steps)


#: the fraction of the training images a validation setup (``DigitsSetup.validation``) holds out
VALIDATION_FRACTION = 0.2


@functools.lru_cache(maxsize=8)
def _shards(n_workers: int, split: str, seed: int, standardize: bool,
            validation: bool = False) -> WorkerShards:
    data = digit_shards(n_workers, split, seed=seed, standardize=standardize)
    if not validation:
        return data
    from sklearn.model_selection import train_test_split

    # a fixed cut of the training images (seed 0, stratified, as core's train/test split is), so
    # that every tuning seed validates on the same images; the pixels keep the whole training
    # set's statistics, which hold no test image
    full = data.split
    keep, held = train_test_split(np.arange(len(full.y_train)), test_size=VALIDATION_FRACTION,
                                  stratify=full.y_train, random_state=0)
    keep, held = np.sort(keep), np.sort(held)
    sub = Split(full.x_train[keep], full.y_train[keep], full.x_train[held], full.y_train[held])
    shards = (shard_iid(sub.y_train, n_workers, seed) if split == "iid"
              else shard_sorted(sub.y_train, n_workers))
    return WorkerShards(sub, tuple(shards), split, None, standardize)


def _check_method(method: Method, setup: DigitsSetup) -> None:
    if not isinstance(method, Method):
        raise TypeError(f"method must be a desloc Method, got {type(method).__name__}")
    if not isinstance(setup, DigitsSetup):
        raise TypeError(f"setup must be a desloc DigitsSetup, got {type(setup).__name__}")
    kx = method.kx
    if kx != INF and setup.steps % int(kx) != 0:
        raise ValueError(f"steps ({setup.steps}) must be a multiple of Kx ({kx}), so that the "
                         "parameters are averaged at the end")


def train_worker(comm: Collective, method: Method, setup: DigitsSetup, seed: int) -> pd.DataFrame:
    """One worker of a digits run: ``setup.steps`` local steps of ``method`` on this worker's shard.

    Every worker starts from the same weights (drawn from ``seed``) and draws its minibatches from
    its own generator (:func:`~iclr_lab.core.worker_data.worker_seed`). Adam methods step with
    :class:`~iclr_lab.distributed.desloc.optimizer.DESLOC` (``desloc-eq-adam``, ``desloc-eq-sync``);
    DDP first averages the gradients; Local SGD averages the parameters every ``Kx`` steps. Rank 0
    evaluates the common model at every ``eval_every``-th step where the parameters have just been
    averaged, and at the end.

    Returns:
        A table with one row per evaluation on rank 0 (other ranks return an empty table), with
        columns ``method``, ``step``, ``loss`` (cross-entropy on the whole training set),
        ``test_loss`` and ``test_acc`` (cross-entropy and accuracy on the held-out test split, or
        on the validation split when ``setup.validation``),
        and the communication of this worker since the run started
        (:meth:`~iclr_lab.core.collective.CommCounts.as_row`).

    Raises:
        TypeError, ValueError: ``comm`` is not a collective, ``method`` or ``setup`` of the wrong
            type, ``setup.steps`` not a multiple of ``Kx``, or ``seed`` not an integer in
            [0, 2**32 - 1].
    """
    _check_comm(comm)
    _check_method(method, setup)
    seed = check_seed(seed)
    data = _shards(comm.world_size, setup.split, seed, setup.standardize, setup.validation)
    x_np, y_np = data.worker(comm.rank)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    onehot = torch.nn.functional.one_hot(y, data.split.n_classes).float()
    model = FlatMLP(x.shape[1], setup.hidden, data.split.n_classes,
                 torch.Generator().manual_seed(worker_seed(seed, 10_000)))  # same on every worker
    gen = torch.Generator().manual_seed(worker_seed(seed, comm.rank))
    peak = method.peak(setup)
    if method.optimizer == "adam":
        opt: torch.optim.Optimizer = DESLOC(
            model.params, lr=peak, betas=setup.betas, sync_periods=method.sync_periods,
            comm=comm, clip=setup.clip, reset_states=method.reset_states, fused=True)
    else:
        opt = torch.optim.SGD(model.params, lr=peak, foreach=True)
    rows: list[dict[str, Any]] = []
    start = comm.counts()  # the collective may have served earlier runs (launch runs several)
    if comm.rank == 0:
        x_all = torch.from_numpy(data.split.x_train)
        y_all = torch.from_numpy(data.split.y_train)
        x_test, y_test = torch.from_numpy(data.split.x_test), torch.from_numpy(data.split.y_test)

    def record(step: int) -> None:
        if comm.rank == 0:
            loss, _ = model.evaluate(x_all, y_all)
            test_loss, acc = model.evaluate(x_test, y_test)
            rows.append({"method": method.name, "step": step, "loss": loss,
                         "test_loss": test_loss, "test_acc": acc,
                         **(comm.counts() - start).as_row()})

    record(0)
    order, pos = torch.randperm(len(y), generator=gen), 0
    for t in range(1, setup.steps + 1):
        if pos + setup.batch_size > len(y):
            order, pos = torch.randperm(len(y), generator=gen), 0
        idx = order[pos:pos + setup.batch_size]
        pos += setup.batch_size
        for group in opt.param_groups:
            group["lr"] = setup.rate(t, peak)
        model.grad(x[idx], onehot[idx])
        if method.ddp:
            comm.all_reduce_mean([p.grad for p in model.params if p.grad is not None],
                                 kind="gradients")
        opt.step()
        synced = method.ddp or (method.kx != INF and t % int(method.kx) == 0)
        if method.optimizer == "sgd" and synced and not method.ddp:
            comm.all_reduce_mean(model.params, kind="parameters")
        if synced and (t % setup.eval_every == 0 or t == setup.steps):
            record(t)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Experiment B: the Rosenbrock toy
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RosenbrockSetup:
    """The Rosenbrock picture: ``workers`` workers, ``steps`` local steps of Adam at ``lr`` with
    cosine decay, gradient noise ``noise`` (IID over workers), the averaged iterate recorded every
    ``record_every`` steps.

    Attributes:
        workers: the number of workers (>= 1).
        steps: local steps (>= 1).
        lr: Adam's peak learning rate, in (0, inf).
        noise: the gradient noise's standard deviation, in [0, inf).
        kx: the parameter period of the chapter's methods (>= 1; ``Ku = 3 kx``, ``Kv = 6 kx``).
        record_every: record the iterate every this many steps (>= 1).

    Raises:
        TypeError, ValueError: a field outside the range above, naming the field.
    """

    workers: int = 4
    steps: int = 480
    lr: float = 0.1
    noise: float = 1.5
    kx: int = 16
    record_every: int = 4

    def __post_init__(self) -> None:
        check_int("workers", self.workers, 1)
        check_int("steps", self.steps, 1)
        check_range("lr", self.lr, 0, INF, low_open=True, high_open=True)
        check_range("noise", self.noise, 0, INF, high_open=True)
        check_int("kx", self.kx, 1)
        check_int("record_every", self.record_every, 1)


def _check_comm(comm: Any) -> Collective:
    if not isinstance(comm, Collective):
        raise TypeError(f"comm must be an iclr_lab.core.collective.Collective, "
                        f"got {type(comm).__name__}")
    return comm


def rosenbrock_worker(comm: Collective, method: Method, setup: RosenbrockSetup,
                      seed: int) -> np.ndarray:
    """One worker on the Rosenbrock toy (:class:`~iclr_lab.core.worker_data.RosenbrockToy`).

    It runs :class:`~iclr_lab.distributed.desloc.optimizer.DESLOC` with ``method``'s periods on a
    2-d point started at ``(-1.5, 2)`` and returns this worker's point every ``record_every`` steps
    (shape ``(records, 2)``). Averaging the rows over workers gives the averaged iterate.

    Raises:
        TypeError, ValueError: ``comm``, ``method`` or ``setup`` of the wrong type, or ``seed`` not
            an integer in [0, 2**32 - 1].
    """
    _check_comm(comm)
    if not isinstance(method, Method):
        raise TypeError(f"method must be a desloc Method, got {type(method).__name__}")
    if not isinstance(setup, RosenbrockSetup):
        raise TypeError(f"setup must be a RosenbrockSetup, got {type(setup).__name__}")
    seed = check_seed(seed)
    toy = RosenbrockToy(noise=setup.noise)
    x = torch.tensor(toy.x0, dtype=torch.float64)
    x.grad = torch.zeros_like(x)
    gen = torch.Generator().manual_seed(worker_seed(seed, comm.rank))
    opt = DESLOC([x], lr=setup.lr, sync_periods=method.sync_periods, comm=comm,
                 reset_states=method.reset_states)
    out = [x.detach().clone()]
    for t in range(1, setup.steps + 1):
        opt.param_groups[0]["lr"] = setup.lr * 0.5 * (1 + math.cos(math.pi * (t - 1) / setup.steps))
        g = toy.stochastic_grad(x.detach(), comm.rank, gen)
        if method.ddp:
            comm.all_reduce_mean([g], kind="gradients")
        x.grad.copy_(g)
        opt.step()
        if t % setup.record_every == 0:
            out.append(x.detach().clone())
    return torch.stack(out).numpy()


# ---------------------------------------------------------------------------------------------
# Experiment C: drift of the moments between averages
# ---------------------------------------------------------------------------------------------

def drift_run(setup: DigitsSetup, seed: int, windows: Sequence[int]) -> pd.DataFrame:
    """How far Adam's moments move in ``K`` local steps, against ``desloc-eq-drift``.

    One worker trains on the whole training set with clipping ``setup.clip`` (no averaging, which
    is what a state does between two of its averages). For each window length ``K`` it keeps the
    largest change of any coordinate over any ``K`` consecutive steps,
    ``max_t ||u_{t+K} - u_t||_inf`` and the same for ``v``, next to the bounds
    ``2 rho (1 - beta1^K)`` and ``rho^2 (1 - beta2^K)``, and the state's own size
    ``max_t ||u_t||_inf`` (``scale``), so that the two moments can be compared without their units.

    Raises:
        TypeError, ValueError: ``setup`` is not a :class:`DigitsSetup`, ``seed`` not an integer in
            [0, 2**32 - 1], or a window not an integer in [1, setup.steps].
    """
    if not isinstance(setup, DigitsSetup):
        raise TypeError(f"setup must be a desloc DigitsSetup, got {type(setup).__name__}")
    seed = check_seed(seed)
    if isinstance(windows, str) or not isinstance(windows, Sequence):
        raise TypeError(f"windows must be a sequence of integers, got {type(windows).__name__}")
    windows = [check_int(f"windows[{i}]", k, 1, setup.steps) for i, k in enumerate(windows)]
    data = _shards(1, "iid", seed, setup.standardize)
    x, y = torch.from_numpy(data.split.x_train), torch.from_numpy(data.split.y_train)
    onehot = torch.nn.functional.one_hot(y, data.split.n_classes).float()
    model = FlatMLP(x.shape[1], setup.hidden, data.split.n_classes,
                 torch.Generator().manual_seed(worker_seed(seed, 10_000)))
    gen = torch.Generator().manual_seed(worker_seed(seed, 0))
    opt = DESLOC(model.params, lr=setup.lr, betas=setup.betas, sync_periods=(INF, INF, INF),
                 clip=setup.clip, fused=True)
    n = sum(p.numel() for p in model.params)
    us = torch.zeros(setup.steps + 1, n)  # row t: the state after t steps (row 0: zero)
    vs = torch.zeros(setup.steps + 1, n)
    order, pos = torch.randperm(len(y), generator=gen), 0
    for t in range(1, setup.steps + 1):
        if pos + setup.batch_size > len(y):
            order, pos = torch.randperm(len(y), generator=gen), 0
        idx = order[pos:pos + setup.batch_size]
        pos += setup.batch_size
        opt.param_groups[0]["lr"] = setup.rate(t, setup.lr)
        model.grad(x[idx], onehot[idx])
        opt.step()
        torch.cat([opt.state[p]["exp_avg"].reshape(-1) for p in model.params], out=us[t])
        torch.cat([opt.state[p]["exp_avg_sq"].reshape(-1) for p in model.params], out=vs[t])
    b1, b2 = setup.betas
    rho = setup.clip
    scale_u, scale_v = float(us.abs().max()), float(vs.abs().max())
    rows = []
    for k in windows:
        du = float((us[k:] - us[:-k]).abs().max())
        dv = float((vs[k:] - vs[:-k]).abs().max())
        rows.append({"K": k, "state": "first moment u", "drift": du,
                     "bound": 2 * rho * (1 - b1**k), "scale": scale_u, "seed": seed})
        rows.append({"K": k, "state": "second moment v", "drift": dv,
                     "bound": rho**2 * (1 - b2**k), "scale": scale_v, "seed": seed})
    return pd.DataFrame(rows)


def model_bytes(setup: DigitsSetup) -> int:
    """Bytes of the digits MLP's parameters (float32): the payload of one model-sized all-reduce."""
    if not isinstance(setup, DigitsSetup):
        raise TypeError(f"setup must be a desloc DigitsSetup, got {type(setup).__name__}")
    return 4 * (64 * setup.hidden + setup.hidden + setup.hidden * 10 + 10)
