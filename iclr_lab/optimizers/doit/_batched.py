"""Many independent runs of the chapter's MLP trained at once, stacked along a leading dimension.

A grid of runs (optimizers x rates x seeds x switching methods) on a 64-64-64-10 MLP is dominated
on a CPU by the overhead of each small step, not by arithmetic. :class:`Stack` holds ``B`` MLPs as
one tensor per layer, ``(B, out, in)`` and ``(B, out)``; one ``torch.baddbmm`` per layer runs all of
them forward and backward. The five candidate optimizers are element-wise, so each acts on every row
of the stack exactly as ``torch.optim`` acts on one model alone, with that row's learning rate and
step count: :meth:`Stack.update` replays the op sequence of PyTorch's ``foreach`` implementations
(SGD, SGD with momentum, Adagrad, RMSprop, Adam at the defaults of
:func:`~iclr_lab.optimizers.doit.method.make_optimizer`) with per-row scalars.

:func:`run_many` drives one :class:`~iclr_lab.optimizers.doit.method.DOIT` controller per run in
lockstep (the controller decides; the stack steps): it gives the same runs as
:func:`~iclr_lab.optimizers.doit.experiments.run_method` called one by one, to float rounding (on
this chapter's machines, bit for bit; ``tests/optimizers/test_doit_batched.py`` checks it).
Each controller's model is a view of its row of the stack, so the controller's features and probe see
the stacked weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch
from torch import nn

from iclr_lab.core.nn import batch_indices
from iclr_lab.core.validation import check_int
from iclr_lab.optimizers.doit.method import OPTIMIZERS, SGDM_MOMENTUM, score

if TYPE_CHECKING:
    from iclr_lab.optimizers.doit.experiments import DigitsSplit, Run

__all__ = ["Job", "Stack", "run_many"]

# the defaults of torch.optim that make_optimizer keeps
_ADAM_BETAS = (0.9, 0.999)
_ADAM_EPS = 1e-8
_RMS_ALPHA = 0.99
_RMS_EPS = 1e-8
_ADAGRAD_EPS = 1e-10
#: the state buffers of each optimizer, one per parameter
_BUFFERS = {"SGD": 0, "SGDM": 1, "Adagrad": 1, "RMSprop": 1, "Adam": 2}


def _col(values: Sequence[float], like: torch.Tensor) -> torch.Tensor:
    """Per-row scalars as a float tensor that broadcasts over ``like``'s trailing dimensions (the
    float64 value rounded to the tensor's dtype, as a Python scalar is inside a kernel)."""
    return torch.tensor(list(values), dtype=like.dtype).view(-1, *([1] * (like.ndim - 1)))


class Stack:
    """``B`` MLPs with the same layer widths as rows of one tensor per parameter.

    ``params`` lists, in ``model.parameters()`` order, one leaf tensor per parameter with a leading
    dimension ``B``. Every row has its own state for every optimizer (zeros = fresh), reset with
    :meth:`reset` and copied with :meth:`copy_row`.
    """

    def __init__(self, models: Sequence[torch.nn.Module]) -> None:
        if not models:
            raise ValueError("models must hold at least one model")
        per_model = [list(m.parameters()) for m in models]
        with torch.no_grad():
            self.params = [torch.stack([ps[j].detach() for ps in per_model]).requires_grad_()
                           for j in range(len(per_model[0]))]
        self.size = len(models)
        self.layers = len(self.params) // 2
        self.state = {k: [[torch.zeros_like(p) for p in self.params] for _ in range(n)]
                      for k, n in _BUFFERS.items()}
        self.count = {k: [0] * self.size for k in _BUFFERS}

    def view(self, i: int, model: torch.nn.Module) -> torch.nn.Module:
        """Make ``model``'s parameters views of row ``i`` (they share memory); returns ``model``."""
        linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
        for layer, lin in enumerate(linears):
            lin.weight = nn.Parameter(self.params[2 * layer][i].detach())
            lin.bias = nn.Parameter(self.params[2 * layer + 1][i].detach())
        return model

    def forward(self, x: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``(B, N, classes)`` of every row (or of ``rows``) on ``x`` of shape ``(B, N, in)``."""
        h = x
        for layer in range(self.layers):
            w, b = self.params[2 * layer], self.params[2 * layer + 1]
            if rows is not None:
                w, b = w.index_select(0, rows), b.index_select(0, rows)
            h = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
            if layer < self.layers - 1:
                h = torch.relu(h)
        return h

    @torch.no_grad()
    def reset(self, kind: str, i: int) -> None:
        """Fresh state of optimizer ``kind`` for row ``i`` (what a new ``torch.optim`` object has)."""
        for buf in self.state[kind]:
            for t in buf:
                t[i].zero_()
        self.count[kind][i] = 0

    @torch.no_grad()
    def copy_row(self, src: int, dst: int, kinds: Sequence[str] = ()) -> None:
        """Copy row ``src``'s parameters (and its state of the optimizers ``kinds``) to row ``dst``."""
        for p in self.params:
            p[dst].copy_(p[src])
        for kind in kinds:
            for buf in self.state[kind]:
                for t in buf:
                    t[dst].copy_(t[src])
            self.count[kind][dst] = self.count[kind][src]

    @torch.no_grad()
    def update(self, kind: str, rows: Sequence[int], lrs: Sequence[float]) -> None:
        """One step of optimizer ``kind`` on ``rows`` (learning rate ``lrs[k]`` for ``rows[k]``),
        from the gradients in ``params[j].grad``: the ops of ``torch.optim``'s foreach path."""
        if kind not in _BUFFERS:
            raise ValueError(f"kind must be one of {OPTIMIZERS}, got {kind!r}")
        rows = list(rows)
        if not rows:
            return
        whole = rows == list(range(self.size))
        idx = torch.tensor(rows)
        counts = self.count[kind]
        for r in rows:
            counts[r] += 1
        steps = [float(counts[r]) for r in rows]
        pick = (lambda t: t) if whole else (lambda t: t.index_select(0, idx))
        for j, full in enumerate(self.params):
            assert full.grad is not None
            p, g = pick(full), pick(full.grad)
            bufs = [pick(b[j]) for b in self.state[kind]]
            if kind == "SGD":
                p = torch.addcmul(p, g, _col([-lr for lr in lrs], p))
            elif kind == "SGDM":
                (m,) = bufs
                m.mul_(SGDM_MOMENTUM).add_(g)  # a fresh buffer is 0: 0 * 0.9 + g = g, torch's clone
                p = torch.addcmul(p, m, _col([-lr for lr in lrs], p))
            elif kind == "Adagrad":
                (acc,) = bufs
                acc.addcmul_(g, g, value=1)
                std = torch.sqrt(acc).add_(_ADAGRAD_EPS)
                clr = [-lr / (1 + (s - 1) * 0.0) for lr, s in zip(lrs, steps, strict=True)]
                p = torch.addcdiv(p, g * _col(clr, p), std)
            elif kind == "RMSprop":
                (sq,) = bufs
                sq.mul_(_RMS_ALPHA).addcmul_(g, g, value=1 - _RMS_ALPHA)
                avg = torch.sqrt(sq).add_(_RMS_EPS)
                p = torch.addcdiv(p, _col([-lr for lr in lrs], p) * g, avg)
            else:  # Adam
                b1, b2 = _ADAM_BETAS
                ea, eas = bufs
                ea.lerp_(g, 1 - b1)
                eas.mul_(b2).addcmul_(g, g, value=1 - b2)
                size = [(lr / (1 - b1 ** s)) * -1 for lr, s in zip(lrs, steps, strict=True)]
                bc2 = [(1 - b2 ** s) ** 0.5 for s in steps]
                denom = torch.sqrt(eas).div_(_col(bc2, p)).add_(_ADAM_EPS)
                p = torch.addcdiv(p, _col(size, p) * ea, denom)
            if whole:
                full.copy_(p)
            else:
                full.index_copy_(0, idx, p)
                for b, t in zip(self.state[kind], bufs, strict=True):
                    b[j].index_copy_(0, idx, t)


@dataclass
class Job:
    """One run of :func:`run_many`: what :func:`~iclr_lab.optimizers.doit.experiments.run_method`
    takes (``method``, ``seed``, ``rates``, ``cycle``, ``branch``, ``omega_t``)."""

    method: str
    seed: int
    rates: dict[str, float]
    cycle: int = 10
    branch: bool = False
    omega_t: float = 0.0


@dataclass
class _Slot:
    """A branch row of the stack: one candidate run for one cycle from its run's state."""

    owner: int  # the job's row
    name: str
    start: int = -1  # the first step of the branched cycle; -1: idle
    cycle_index: int = -1
    l0: float = math.nan
    losses: list[float] = field(default_factory=list)


def run_many(jobs: Sequence[Job], *, steps: int, n_ini: int = 10, halving: int = 10,
             eval_every: int = 25, probe_size: int = 256, data: DigitsSplit,
             snapshot_at: int | None = None,
             desc: str = "doit: stacked runs") -> tuple[list[Run], list[list[torch.Tensor]]]:
    """Train every job in lockstep on one :class:`Stack`; returns one
    :class:`~iclr_lab.optimizers.doit.experiments.Run` per job (as ``run_method`` returns it) and,
    if ``snapshot_at`` is given, every job's parameters after that step (else empty lists).

    ``steps``, ``halving`` and ``eval_every`` are at least 1, ``n_ini`` at least 0, ``probe_size``
    in ``[1, n_train]`` and ``snapshot_at`` (if given) in ``[1, steps]``.
    """
    from iclr_lab.core.progress import progress
    from iclr_lab.optimizers.doit import experiments as ex

    check_int("steps", steps, 1)
    check_int("n_ini", n_ini, 0)
    check_int("halving", halving, 1)
    check_int("eval_every", eval_every, 1)
    check_int("probe_size", probe_size, 1, len(data.y_train))
    if snapshot_at is not None:
        check_int("snapshot_at", snapshot_at, 1, steps)

    n_jobs = len(jobs)
    models = [ex._mlp(job.seed) for job in jobs]
    uses = [job.method in (ex.DOIT_NAME, ex.LITERAL) for job in jobs]
    slots: list[_Slot] = []
    slot_of: list[list[int]] = [[] for _ in jobs]
    for i, job in enumerate(jobs):
        if job.branch and uses[i]:
            for name in job.rates:
                slot_of[i].append(n_jobs + len(slots))
                slots.append(_Slot(i, name))
    owner = list(range(n_jobs)) + [s.owner for s in slots]
    stack = Stack(models + [models[s.owner] for s in slots])
    ctls = []
    for i, job in enumerate(jobs):
        stack.view(i, models[i])
        probe = ex._probe(data, job.seed, probe_size) if uses[i] else None
        ctls.append(ex._controller(job.method, models[i], job.rates, seed=job.seed, cycle=job.cycle,
                                   n_ini=n_ini, halving=halving, steps=steps, probe=probe,
                                   omega_t=job.omega_t))
    n = len(jobs)
    batches = [batch_indices(len(data.y_train), steps, 64, job.seed) for job in jobs]
    probe_rows = torch.stack([torch.from_numpy(ex._probe_pick(data, jobs[owner[r]].seed, probe_size))
                              for r in range(stack.size)])
    x_probe, y_probe = data.x_train[probe_rows], data.y_train[probe_rows]
    x_val = data.x_val.expand(stack.size, *data.x_val.shape)
    x_test = data.x_test.expand(stack.size, *data.x_test.shape)
    done = [False] * n
    seen: list[Any] = [None] * n
    logs: list[list[dict[str, Any]]] = [[] for _ in jobs]
    branch_rows: list[list[dict[str, Any]]] = [[] for _ in jobs]
    snapshots: list[list[torch.Tensor]] = [[] for _ in jobs]
    ce = nn.functional.cross_entropy
    for step in progress(range(1, steps + 1), desc=desc, total=steps):
        # 1. cycle boundaries: branch (before the run's choice, from the state it starts from), choose
        kind_of: dict[int, str] = {}
        lr_of: dict[int, float] = {}
        for i in range(n):
            if done[i]:
                continue
            ctl = ctls[i]
            hist = len(ctl.history)
            if (slot_of[i] and (step - 1) % ctl.cycle == 0 and not ctl.in_cold_start(hist)
                    and step - 1 + ctl.cycle <= steps):
                assert ctl.probe is not None
                l0 = ctl.probe(ctl.model)
                for r in slot_of[i]:
                    s = slots[r - n]
                    keep = s.name == ctl.current and ctl.keep_state_if_same and ctl.optimizer is not None
                    stack.reset(s.name, r)
                    stack.copy_row(i, r, [s.name] if keep else [])
                    s.start, s.cycle_index, s.l0, s.losses = step, hist, l0, []
            if ctl._pos == 0:
                ctl.begin_cycle()
            assert ctl.current is not None
            if ctl.optimizer is not seen[i]:  # a new optimizer: fresh state
                stack.reset(ctl.current, i)
                seen[i] = ctl.optimizer
            kind_of[i], lr_of[i] = ctl.current, ctl.rates[ctl.current]
        for r in range(n, stack.size):
            s = slots[r - n]
            if s.start > 0:
                kind_of[r], lr_of[r] = s.name, jobs[s.owner].rates[s.name]
        if not kind_of:
            break
        live = sorted(kind_of)
        # 2. one forward and backward pass for every live row, then each optimizer on its rows
        idx = torch.stack([batches[owner[r]][step - 1] for r in range(stack.size)])
        for p in stack.params:
            p.grad = None
        logits = stack.forward(data.x_train[idx])
        ys = data.y_train[idx]
        # the gradient from per-example losses weighted 1/N (what the mean's backward passes back,
        # bit for bit); the loss values from the mean itself, as each run alone computes it
        sel = torch.tensor(live)
        lg, yl = logits.index_select(0, sel), ys.index_select(0, sel)
        per_example = ce(lg.reshape(-1, lg.shape[-1]), yl.reshape(-1), reduction="none")
        (per_example * (1.0 / lg.shape[1])).sum().backward()
        with torch.no_grad():
            values = {r: float(ce(lg[k], yl[k])) for k, r in enumerate(live)}
        for kind in OPTIMIZERS:
            members = [r for r in live if kind_of[r] == kind]
            stack.update(kind, members, [lr_of[r] for r in members])
        # 3. probes, the controllers' bookkeeping, evaluations
        probed = [r for r in live if (r < n and uses[r]) or r >= n]
        probe_loss: dict[int, float] = {}
        if probed:
            sel = torch.tensor(probed)
            with torch.no_grad():
                pl = stack.forward(x_probe.index_select(0, sel), sel)
                probe_loss = {r: float(ce(pl[k], y_probe[r])) for k, r in enumerate(probed)}
        evals: list[int] = []
        for i in live:
            if i >= n:
                continue
            loss = ctls[i].after_step(values[i], probe_loss.get(i))
            finite = math.isfinite(loss)
            if step % eval_every == 0 or step == steps or not finite:
                evals.append(i)
            if not finite:
                done[i] = True
        if evals:
            sel = torch.tensor(evals)
            with torch.no_grad():
                lv = stack.forward(x_val.index_select(0, sel), sel)
                lt = stack.forward(x_test.index_select(0, sel), sel)
            for k, i in enumerate(evals):
                logs[i].append({"step": step, "train_loss": values[i],
                                "val_loss": float(ce(lv[k], data.y_val)),
                                "val_acc": float((lv[k].argmax(1) == data.y_val).float().mean()),
                                "test_loss": float(ce(lt[k], data.y_test)),
                                "test_acc": float((lt[k].argmax(1) == data.y_test).float().mean())})
        for r in live:
            if r < n:
                continue
            s = slots[r - n]
            s.losses.append(probe_loss[r])
            if len(s.losses) == ctls[s.owner].cycle:
                branch_rows[s.owner].append({"cycle": s.cycle_index, "candidate": s.name,
                                             "branch_score": float(score(s.l0, s.losses,
                                                                         ctls[s.owner].alpha))})
                s.start = -1
        if snapshot_at is not None and step == snapshot_at:
            with torch.no_grad():
                for i in range(n):
                    snapshots[i] = [p[i].detach().clone() for p in stack.params]
    runs = []
    for i, job in enumerate(jobs):
        ctl = ctls[i]
        log = pd.DataFrame(logs[i]).assign(method=job.method, seed=job.seed)
        cycles = ctl.history_frame().assign(method=job.method, seed=job.seed) \
            if uses[i] or job.method in ex.BASELINES else pd.DataFrame()
        order = {n_: k for k, n_ in enumerate(ctl.names)}
        br = sorted(branch_rows[i], key=lambda d: (d["cycle"], order[d["candidate"]]))
        runs.append(ex.Run(log, cycles, pd.DataFrame(br).assign(seed=job.seed), ctl))
    return runs, snapshots
