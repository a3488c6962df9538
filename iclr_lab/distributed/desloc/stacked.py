"""Experiment A's runs stacked: every worker of every seed of one method in one tensor pass.

:func:`~iclr_lab.distributed.desloc.training.train_worker` is one worker of one run, written
against the :class:`~iclr_lab.core.collective.Collective` interface; on the thread simulator a
64-128-10 MLP spends most of its time in per-step overhead (Python, the optimizer's bookkeeping,
the turn passing between threads), not in arithmetic. :func:`train_stacked` runs the same
computation for ``len(seeds) x workers`` models at once: model ``n = g * workers + r`` (seed
``seeds[g]``, worker ``r``) is row ``n`` of every tensor, the gradients are batched matrix
products, and the all-reduce is a mean over the worker rows of each seed
(:class:`StackedCollective`). The optimizer is the chapter's
:class:`~iclr_lab.distributed.desloc.optimizer.DESLOC` itself (or ``torch.optim.SGD`` for Local
SGD), stepping the stacked tensors: Adam is element-wise, so each row is updated exactly as if its
model ran alone.

The result is the serial one **bit for bit** (a test checks every table entry), because every
operation is chosen to do the same float arithmetic per model:

* the batched products (``baddbmm``, ``bmm``) and reductions give each model the same numbers as
  :meth:`~iclr_lab.core.nn.FlatMLP.grad`'s ``addmm``/``mm``/``sum`` on its own rows;
* the all-reduce sums the workers in rank order and then divides, as the simulator's hub does;
* PyTorch's fused Adam kernel treats the last ``numel % vector width`` entries of a tensor on a
  scalar path whose rounding can differ from the vector path: the 10-entry output bias of each
  model goes entirely through it when the model runs alone, so the stacked run hands each model's
  output bias to the optimizer as a tensor of its own (a view into the stack); the three larger
  layers have sizes that are multiples of every vector width;
* minibatch indices are drawn from each worker's own generator exactly as ``train_worker`` draws
  them (one ``randperm`` per pass over the shard), once per seed, and shared by every method;
* evaluations copy the common model of each seed into a :class:`~iclr_lab.core.nn.FlatMLP` and call
  its :meth:`~iclr_lab.core.nn.FlatMLP.evaluate`.

The communication is counted per worker, as one worker of a real run would count it: each
all-reduce is one round, and its payload is one model's share of the stacked tensors.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, Literal

import pandas as pd
import torch

from iclr_lab.core.collective import TENSOR_KINDS, Collective
from iclr_lab.core.nn import FlatMLP
from iclr_lab.core.validation import check_choice, check_int, check_seed
from iclr_lab.core.worker_data import RosenbrockToy, worker_seed
from iclr_lab.distributed.desloc.optimizer import DESLOC
from iclr_lab.distributed.desloc.training import (
    DigitsSetup,
    Method,
    RosenbrockSetup,
    _check_method,
    _shards,
)

__all__ = ["StackedCollective", "rosenbrock_stacked", "train_stacked"]

INF = math.inf


class StackedCollective(Collective):
    """``runs`` independent groups of ``world_size`` workers, stacked along every tensor's first
    dimension (row ``g * world_size + r`` is worker ``r`` of group ``g``).

    An all-reduce replaces each worker's row by the mean (or sum) over the rows of its group,
    summed in rank order and then divided, the arithmetic of
    :func:`~iclr_lab.core.collective.run_simulated`'s hub.
    :meth:`~iclr_lab.core.collective.Collective.counts` is what *one* worker sends: one round per
    call, and one row's bytes of each tensor. The collective plays every rank at once; its
    ``rank`` is 0. ``world_size`` and ``runs`` are integers >= 1.
    """

    def __init__(self, world_size: int, runs: int = 1) -> None:
        super().__init__(0, world_size)
        self.runs = check_int("runs", runs, 1)
        self.models = self.runs * self.world_size

    def _collective(self, tensors: Sequence[torch.Tensor], kind: str,
                    op: Literal["mean", "sum"]) -> None:
        check_choice("kind", kind, TENSOR_KINDS)
        tensors = list(tensors)
        for t in tensors:
            if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != self.models:
                raise ValueError(f"a stacked all-reduce takes tensors of {self.models} rows "
                                 f"({self.runs} runs x {self.world_size} workers)")
        with torch.no_grad():
            self._all_reduce(tensors, op)
        sent = sum(t[0].numel() * t.element_size() for t in tensors)  # one worker's payload
        self.bytes_sent += sent
        self.calls += 1
        self._bytes[kind] += sent
        self._rounds[kind] += 1

    def _all_reduce(self, tensors: list[torch.Tensor], op: Literal["mean", "sum"]) -> None:
        for t in tensors:
            rows = t.view(self.runs, self.world_size, -1)
            total = rows[:, 0].clone()
            for r in range(1, self.world_size):
                total += rows[:, r]
            if op == "mean":
                total.div_(self.world_size)
            rows.copy_(total.unsqueeze(1))


class _StackedDESLOC(DESLOC):
    """DES-LOC over stacked tensors followed by per-model tensors (one per row, in row order).

    Its averages stack the per-model tensors (parameters or their states) into one tensor for the
    collective and copy the rows back; the stacked tensors go as they are.
    """

    def __init__(self, stacked: list[torch.Tensor], per_model: list[torch.Tensor],
                 **kwargs: Any) -> None:
        self._n_stacked = len(stacked)
        super().__init__([*stacked, *per_model], **kwargs)

    def _average(self, tensors: list[torch.Tensor], kind: str) -> None:
        if self.comm is None or not tensors:
            return
        head, rows = tensors[:self._n_stacked], tensors[self._n_stacked:]
        if not rows:
            self.comm.all_reduce_mean(head, kind=kind)  # type: ignore[arg-type]
            return
        stack = torch.stack(rows)
        self.comm.all_reduce_mean([*head, stack], kind=kind)  # type: ignore[arg-type]
        for row, value in zip(rows, stack, strict=True):
            row.copy_(value)


class _StackedMLP:
    """``N`` :class:`~iclr_lab.core.nn.FlatMLP` models as stacked layer tensors, with the same
    written-out gradient (per model, the same float operations)."""

    def __init__(self, models: Sequence[FlatMLP]) -> None:
        self.w1 = torch.stack([m.w1 for m in models])
        self.b1 = torch.stack([m.b1 for m in models])
        self.w2 = torch.stack([m.w2 for m in models])
        self.b2 = torch.stack([m.b2 for m in models])
        self.g1, self.gb1, self.g2, self.gb2 = (torch.zeros_like(p) for p in self.stacked4)
        for p, g in zip(self.stacked4, self.grads, strict=True):
            p.grad = g
        # one tensor per model for the output bias (see the module docstring)
        self.b2_rows = list(self.b2.unbind(0))
        for row, g in zip(self.b2_rows, self.gb2.unbind(0), strict=True):
            row.grad = g

    @property
    def stacked4(self) -> list[torch.Tensor]:
        return [self.w1, self.b1, self.w2, self.b2]

    @property
    def grads(self) -> list[torch.Tensor]:
        return [self.g1, self.gb1, self.g2, self.gb2]

    def grad(self, x: torch.Tensor, onehot: torch.Tensor) -> None:
        """:meth:`FlatMLP.grad <iclr_lab.core.nn.FlatMLP.grad>` for every model: ``x`` is
        ``(N, batch, n_in)``, ``onehot`` ``(N, batch, n_out)``."""
        pre = torch.baddbmm(self.b1.unsqueeze(1), x, self.w1.transpose(1, 2))
        h = pre.clamp_min(0)
        d = torch.softmax(torch.baddbmm(self.b2.unsqueeze(1), h, self.w2.transpose(1, 2)), dim=2)
        d.sub_(onehot).div_(x.shape[1])
        torch.bmm(d.transpose(1, 2), h, out=self.g2)
        torch.sum(d, 1, out=self.gb2)
        dh = torch.bmm(d, self.w2).mul_(pre > 0)
        torch.bmm(dh.transpose(1, 2), x, out=self.g1)
        torch.sum(dh, 1, out=self.gb1)

    def load_into(self, n: int, model: FlatMLP) -> FlatMLP:
        """Copy model ``n``'s weights into ``model`` (a FlatMLP of the same widths); return it."""
        for dst, src in zip(model.params, self.stacked4, strict=True):
            dst.copy_(src[n])
        return model


@functools.lru_cache(maxsize=4)
def _batches(workers: int, setup: DigitsSetup, seeds: tuple[int, ...],
             standardize: bool | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every worker's shard of every seed, concatenated (``x``, one-hot labels), and the row
    indices of every minibatch, ``(steps, N * batch)``: what ``train_worker`` draws, step by step.

    Shared by every method of a reproduction (the draws depend only on the seed and the rank).
    ``standardize`` defaults to ``setup.standardize``; MT-DAO, whose setup always standardizes
    and has no such field, passes ``True``.
    """
    xs, ys, index = [], [], []
    offset, bs = 0, setup.batch_size
    scaled = setup.standardize if standardize is None else standardize
    # MT-DAO's setup has no validation field: it always trains on the whole training set
    validation = bool(getattr(setup, "validation", False))
    for s in seeds:
        data = _shards(workers, setup.split, s, scaled, validation)
        for r in range(workers):
            x_np, y_np = data.worker(r)
            xs.append(torch.from_numpy(x_np))
            ys.append(torch.nn.functional.one_hot(torch.from_numpy(y_np), data.split.n_classes).float())
            n = len(y_np)
            if bs > n:
                raise ValueError(f"batch_size ({bs}) exceeds worker {r}'s shard ({n} examples)")
            gen = torch.Generator().manual_seed(worker_seed(s, r))
            per_pass = n // bs  # train_worker draws a new permutation when a batch would not fit
            passes = -(-setup.steps // per_pass)
            perms = [torch.randperm(n, generator=gen)[:per_pass * bs] for _ in range(passes)]
            index.append(torch.cat(perms).view(-1, bs)[:setup.steps] + offset)
            offset += n
    idx = torch.stack(index, dim=1).reshape(setup.steps, -1)
    return torch.cat(xs), torch.cat(ys), idx


def train_stacked(method: Method, setup: DigitsSetup, seeds: Sequence[int],
                  workers: int) -> list[pd.DataFrame]:
    """:func:`~iclr_lab.distributed.desloc.training.train_worker` for every worker of every seed
    at once: the table of rank 0 of each seed, ``[seed_0's, seed_1's, ...]``, equal bit for bit
    to ``run_simulated(partial(train_worker, method=method, setup=setup, seed=s), workers)[0]``.

    Raises:
        TypeError, ValueError: ``method`` or ``setup`` of the wrong type, ``setup.steps`` not a
            multiple of ``Kx``, ``seeds`` empty or holding a value that is not an integer in
            [0, 2**32 - 1], or ``workers`` not an integer >= 1.
    """
    _check_method(method, setup)
    if isinstance(seeds, str) or not isinstance(seeds, Sequence):
        raise TypeError(f"seeds must be a sequence of integers, got {type(seeds).__name__}")
    seeds = tuple(check_seed(s, f"seeds[{i}]") for i, s in enumerate(seeds))
    workers = check_int("workers", workers, 1)
    if not seeds:
        raise ValueError("seeds must not be empty")
    x_all, onehot_all, idx = _batches(workers, setup, seeds)
    g, n_models, bs = len(seeds), len(seeds) * workers, setup.batch_size
    evals, inits = [], []
    for s in seeds:
        data = _shards(workers, setup.split, s, setup.standardize, setup.validation)
        n_in, n_out = data.split.x_train.shape[1], data.split.n_classes
        init = FlatMLP(n_in, setup.hidden, n_out,
                       torch.Generator().manual_seed(worker_seed(s, 10_000)))
        inits += [init] * workers
        evals.append((torch.from_numpy(data.split.x_train), torch.from_numpy(data.split.y_train),
                      torch.from_numpy(data.split.x_test), torch.from_numpy(data.split.y_test)))
    model = _StackedMLP(inits)
    scratch = FlatMLP(n_in, setup.hidden, n_out, torch.Generator().manual_seed(0))
    comm = StackedCollective(workers, g)
    peak = method.peak(setup)
    if method.optimizer == "adam":
        opt: torch.optim.Optimizer = _StackedDESLOC(
            [model.w1, model.b1, model.w2], model.b2_rows, lr=peak, betas=setup.betas,
            sync_periods=method.sync_periods, comm=comm, clip=setup.clip,
            reset_states=method.reset_states, fused=True)
    else:
        opt = torch.optim.SGD(model.stacked4, lr=peak, foreach=True)
    rows: list[list[dict[str, Any]]] = [[] for _ in seeds]

    def record(step: int) -> None:
        counts = comm.counts().as_row()
        for k, (x_tr, y_tr, x_te, y_te) in enumerate(evals):
            m = model.load_into(k * workers, scratch)  # rank 0 of seed k
            loss, _ = m.evaluate(x_tr, y_tr)
            test_loss, acc = m.evaluate(x_te, y_te)
            rows[k].append({"method": method.name, "step": step, "loss": loss,
                            "test_loss": test_loss, "test_acc": acc,
                            **counts})

    record(0)
    n_in = x_all.shape[1]
    for t in range(1, setup.steps + 1):
        batch = idx[t - 1]
        xb = x_all.index_select(0, batch).view(n_models, bs, n_in)
        yb = onehot_all.index_select(0, batch).view(n_models, bs, -1)
        for group in opt.param_groups:
            group["lr"] = setup.rate(t, peak)
        model.grad(xb, yb)
        if method.ddp:
            comm.all_reduce_mean(model.grads, kind="gradients")
        opt.step()
        synced = method.ddp or (method.kx != INF and t % int(method.kx) == 0)
        if method.optimizer == "sgd" and synced and not method.ddp:
            comm.all_reduce_mean(model.stacked4, kind="parameters")
        if synced and (t % setup.eval_every == 0 or t == setup.steps):
            record(t)
    return [pd.DataFrame(r) for r in rows]


def rosenbrock_stacked(method: Method, setup: RosenbrockSetup, seed: int) -> torch.Tensor:
    """:func:`~iclr_lab.distributed.desloc.training.rosenbrock_worker` for every worker at once.

    Row ``r`` of one ``(workers, 2)`` tensor is worker ``r``'s point, stepped by the same
    :class:`~iclr_lab.distributed.desloc.optimizer.DESLOC` over a :class:`StackedCollective`;
    each worker draws its noise from its own generator, as the threaded run does. Returns the points
    every ``record_every`` steps, shape ``(records, workers, 2)``: the threaded runs stacked
    (equal to rounding; a test checks it).

    Raises:
        TypeError, ValueError: ``method`` or ``setup`` of the wrong type, a DDP ``method``, or
            ``seed`` not an integer in [0, 2**32 - 1].
    """
    if not isinstance(method, Method):
        raise TypeError(f"method must be a desloc Method, got {type(method).__name__}")
    if not isinstance(setup, RosenbrockSetup):
        raise TypeError(f"setup must be a RosenbrockSetup, got {type(setup).__name__}")
    seed = check_seed(seed)
    if method.ddp:
        raise ValueError("rosenbrock_stacked runs local methods only (ddp=False)")
    toy = RosenbrockToy(noise=setup.noise)
    w = check_int("workers", setup.workers, 1)
    x = torch.tensor(toy.x0, dtype=torch.float64).repeat(w, 1)
    x.grad = torch.zeros_like(x)
    gens = [torch.Generator().manual_seed(worker_seed(seed, r)) for r in range(w)]
    opt = DESLOC([x], lr=setup.lr, sync_periods=method.sync_periods, comm=StackedCollective(w),
                 reset_states=method.reset_states)
    out = [x.detach().clone()]
    for t in range(1, setup.steps + 1):
        opt.param_groups[0]["lr"] = setup.lr * 0.5 * (1 + math.cos(math.pi * (t - 1) / setup.steps))
        rows = x.detach()
        x.grad.copy_(torch.stack([toy.stochastic_grad(rows[r], r, gens[r]) for r in range(w)]))
        opt.step()
        if t % setup.record_every == 0:
            out.append(x.detach().clone())
    return torch.stack(out)
