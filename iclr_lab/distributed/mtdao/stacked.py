"""Experiment B's runs stacked: every worker of many runs in one tensor pass.

:func:`~iclr_lab.distributed.mtdao.training.train_worker` is one worker of one run, written against
the :class:`~iclr_lab.core.collective.Collective` interface; on the thread simulator the 64-64-10
MLP spends most of its time in per-step overhead (Python, the optimizer's bookkeeping, the turn
passing between threads), not in arithmetic. :func:`train_stacked` runs the same computation for
many runs ``(method, seed)`` at once, ``workers`` models each: the models are the rows of stacked
layer tensors, the gradients of all of them are batched matrix products
(DES-LOC's ``_StackedMLP`` in :mod:`iclr_lab.distributed.desloc.stacked`), and each method (with its
learning rate) gets one optimizer, the chapter's own, over the rows of its runs:

* MT-DAO and QH-DDP: :class:`~iclr_lab.distributed.mtdao.optimizer.MTDAO` on the stacked layer
  tensors (its update is element-wise, so each row is updated exactly as if its model ran alone);
* Local Adam and DDP: DES-LOC's optimizer with fused Adam, each model's 10-entry output bias a
  tensor of its own (DES-LOC's ``_StackedDESLOC``: the fused kernel rounds a tensor's scalar tail
  differently);
* the all-reduce is a mean over the worker rows of each run, summed in rank order and then divided,
  as the simulator's hub does (:class:`~iclr_lab.distributed.desloc.stacked.StackedCollective`);
  bytes and rounds are counted per worker, as one worker of a real run counts them;
* the alignment diagnostic (``mtdao-eq-alignment``) takes each model's flat parameters just before
  the parameter average and calls the same ``cosine_similarity`` on each model's own row;
* minibatch indices are drawn from each worker's generator exactly as ``train_worker`` draws them
  (one ``randperm`` per pass over the shard), once per seed, and shared by every method;
* evaluations copy the common model of each run into a :class:`~iclr_lab.core.nn.FlatMLP` and call
  its :meth:`~iclr_lab.core.nn.FlatMLP.evaluate`.

The tables equal ``run_simulated(partial(train_worker, ...), workers)[0]`` **bit for bit** (the
tests check every entry).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from iclr_lab.core.nn import FlatMLP
from iclr_lab.core.progress import progress
from iclr_lab.core.validation import check_int, check_seed
from iclr_lab.core.worker_data import worker_seed
from iclr_lab.distributed.desloc.stacked import StackedCollective, _batches, _StackedDESLOC, _StackedMLP
from iclr_lab.distributed.mtdao.optimizer import MTDAO
from iclr_lab.distributed.mtdao.training import (
    DigitsSetup,
    Method,
    _check_method,
    _Recorder,
    _shards,
    held_out,
)

__all__ = ["train_stacked"]

INF = math.inf


@dataclass
class _Group:
    """One method's runs (one per seed): rows ``[start, start + len(seeds) * workers)``."""

    method: Method
    seeds: list[int]
    runs: list[int]  # the positions of its runs in train_stacked's argument
    start: int
    opt: torch.optim.Optimizer
    comm: StackedCollective
    recorder: _Recorder

    def rows(self, workers: int) -> slice:
        return slice(self.start, self.start + len(self.seeds) * workers)


def train_stacked(runs: Sequence[tuple[Method, int]], setup: DigitsSetup, workers: int, *,
                  desc: str | None = None) -> list[pd.DataFrame]:
    """:func:`~iclr_lab.distributed.mtdao.training.train_worker` for every worker of every run
    ``(method, seed)`` at once: the table of rank 0 of each run, in the order of ``runs``, equal bit
    for bit to ``run_simulated(partial(train_worker, method=method, setup=setup, seed=seed),
    workers)[0]``.

    Runs of the same method (and learning rate) share one optimizer over their rows; the gradients
    of every model are one batched pass. ``desc`` labels the progress bar over the steps.

    Raises:
        TypeError, ValueError: ``workers`` not an integer >= 1, ``runs`` empty or holding a pair
            whose method or setup is of the wrong type, whose period does not divide
            ``setup.steps``, or whose seed is not an integer in [0, 2**32 - 1] (named as
            ``runs[i] seed``), or a repeated pair.
    """
    workers = check_int("workers", workers, 1)
    if isinstance(runs, str) or not isinstance(runs, Sequence):
        raise TypeError(f"runs must be a sequence of (method, seed), got {type(runs).__name__}")
    runs = list(runs)
    if not runs:
        raise ValueError("runs must not be empty")
    for i, run in enumerate(runs):
        if isinstance(run, str) or not isinstance(run, Sequence) or len(run) != 2:
            raise TypeError(f"runs[{i}] must be a pair (method, seed), got {run!r}")
        _check_method(run[0], setup)
        check_seed(run[1], f"runs[{i}] seed")
    by_method: dict[Method, list[int]] = {}
    for i, (method, _) in enumerate(runs):
        by_method.setdefault(method, []).append(i)
    if any(len({runs[i][1] for i in idx}) != len(idx) for idx in by_method.values()):
        raise ValueError("runs must not repeat a (method, seed) pair")

    # the rows: method by method, seed by seed, rank by rank
    order = [i for idx in by_method.values() for i in idx]
    data = {s: _shards(workers, setup.split, s) for s in dict.fromkeys(seed for _, seed in runs)}
    n_in = next(iter(data.values())).split.x_train.shape[1]
    n_out = next(iter(data.values())).split.n_classes
    # every worker's shard and minibatch draws, one seed at a time (as train_worker draws them)
    batches = {s: _batches(workers, setup, (s,), standardize=True) for s in data}
    x_parts, y_parts, offsets = [], [], {}
    offset = 0
    for s, (x, y, _) in batches.items():
        x_parts.append(x)
        y_parts.append(y)
        offsets[s] = offset
        offset += len(x)
    x_all, onehot_all = torch.cat(x_parts), torch.cat(y_parts)
    idx_parts = [batches[runs[i][1]][2] + offsets[runs[i][1]] for i in order]
    idx = torch.cat(idx_parts, dim=1)
    n_models, bs = len(runs) * workers, setup.batch_size
    inits = {s: FlatMLP(n_in, setup.hidden, n_out,
                        torch.Generator().manual_seed(worker_seed(s, 10_000))) for s in data}
    model = _StackedMLP([inits[runs[i][1]] for i in order for _ in range(workers)])
    scratch = FlatMLP(n_in, setup.hidden, n_out, torch.Generator().manual_seed(0))

    groups: list[_Group] = []
    start = 0
    for method, idx_runs in by_method.items():
        seeds = [runs[i][1] for i in idx_runs]
        sl = slice(start, start + len(seeds) * workers)
        comm = StackedCollective(workers, len(seeds))
        recorder = _Recorder(comm)
        views = [t[sl] for t in model.stacked4]
        for view, grad in zip(views, model.grads, strict=True):
            view.grad = grad[sl]
        opt: torch.optim.Optimizer
        if method.weights is None:  # Method.build's DESLOC, the output bias one tensor per model
            b1, b2 = method.betas
            opt = _StackedDESLOC(views[:3], model.b2_rows[sl], lr=method.lr, betas=(b1, b2),
                                 sync_periods=method.sync_periods, comm=recorder, fused=True)
        else:  # Method.build's MTDAO, element-wise on the stacked tensors
            opt = MTDAO(views, lr=method.lr, betas=method.betas, weights=method.weights,
                        sync_periods=method.sync_periods, comm=recorder)
        groups.append(_Group(method, seeds, idx_runs, start, opt, comm, recorder))
        start = sl.stop

    def flat(tensors: Sequence[torch.Tensor], rows: int) -> torch.Tensor:
        """The models' flat parameters ``theta`` (``(rows, numel)``) from w1, b1, w2, b2."""
        return torch.cat([t.reshape(rows, -1) for t in tensors], dim=1)

    anchors = [flat([t[grp.rows(workers)] for t in model.stacked4], len(grp.seeds) * workers)
               for grp in groups]
    alignment = [[math.nan] * len(grp.seeds) for grp in groups]
    tables: list[list[dict[str, Any]]] = [[] for _ in runs]
    evals = {s: (torch.from_numpy(d.split.x_train), torch.from_numpy(d.split.y_train),
                 *held_out(d)) for s, d in data.items()}

    def record(g: int, step: int) -> None:
        grp = groups[g]
        counts = grp.comm.counts().as_row()
        for k, (run, s) in enumerate(zip(grp.runs, grp.seeds, strict=True)):
            m = model.load_into(grp.start + k * workers, scratch)  # rank 0 of this run
            x_tr, y_tr, (x_va, y_va), (x_te, y_te) = evals[s]
            loss, _ = m.evaluate(x_tr, y_tr)
            val_loss, _ = m.evaluate(x_va, y_va)
            test_loss, acc = m.evaluate(x_te, y_te)
            tables[run].append({"method": grp.method.name, "step": step, "loss": loss,
                                "val_loss": val_loss, "test_loss": test_loss, "test_acc": acc,
                                "alignment": alignment[g][k], **counts})

    for g in range(len(groups)):
        record(g, 0)
    for t in progress(range(1, setup.steps + 1), desc=desc, total=setup.steps):
        batch = idx[t - 1]
        xb = x_all.index_select(0, batch).view(n_models, bs, n_in)
        yb = onehot_all.index_select(0, batch).view(n_models, bs, -1)
        model.grad(xb, yb)
        for g, grp in enumerate(groups):
            method, sl = grp.method, grp.rows(workers)
            for group in grp.opt.param_groups:
                group["lr"] = setup.rate(t, method.lr)
            if method.ddp:
                grp.recorder.all_reduce_mean([gr[sl] for gr in model.grads], kind="gradients")
            grp.opt.step()
            synced = method.ddp or t % int(method.period) == 0
            if synced and not method.ddp:
                n = len(grp.seeds) * workers
                with torch.no_grad():
                    theta = flat([p[sl] for p in model.stacked4], n)
                    mean_move = anchors[g] - theta
                    own_move = anchors[g] - flat(grp.recorder.before, n)
                    share = torch.empty(n, 1)
                    for r in range(n):  # each model's own cosine, as train_worker computes it
                        cos = torch.nn.functional.cosine_similarity(own_move[r], mean_move[r],
                                                                    dim=0, eps=1e-30)
                        share[r] = cos.reshape(1)
                grp.recorder.all_reduce_mean([share], kind="other")
                alignment[g] = [float(share[k * workers]) for k in range(len(grp.seeds))]
                anchors[g] = theta
            if synced and (t % setup.eval_every == 0 or t == setup.steps):
                record(g, t)
    return [pd.DataFrame(rows) for rows in tables]
