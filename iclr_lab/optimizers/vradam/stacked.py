"""Experiment B's digits runs stacked: many (method, rate, seed) runs of the MLP in one tensor pass.

:func:`~iclr_lab.optimizers.vradam.experiments.train_digits` trains one 64-128-128-10 MLP with
:class:`~iclr_lab.optimizers.vradam.optimizer.VRAdam` or ``torch.optim.AdamW(foreach=True)``; on a
CPU a run of this size spends most of its time in per-step overhead. :func:`train_many` trains
``B`` such runs at once, model ``i`` being row ``i`` of one tensor per layer, and gives every run
the numbers ``train_digits`` gives it, **bit for bit** (``tests/optimizers/test_vradam_stacked.py``
checks it), because each operation does the same float arithmetic per model:

* the forward and backward passes are ``baddbmm`` per layer (as ``doit/_batched.py``); the
  gradient comes from per-example losses weighted ``1/N`` (what the mean's backward passes back);
* the optimizer replays the ops of PyTorch's foreach AdamW (which VRAdam's blocked step also
  performs) on the stacked tensors, with each row's rate as a per-row float32 column where the
  serial run passes a Python scalar (the kernels round that scalar to float32 too);
* VRAdam's gate is per model: ``P_t`` is the float64 sum of ``torch.dot`` of each of the model's
  own velocity rows, as VRAdam's own step takes it;
* the 10-entry output bias goes through a kernel's scalar tail path when a model runs alone, so
  each model's output bias (and its moments) is handed to the optimizer as a tensor of its own, a
  row of a stack padded to 16 entries (so every row starts 64-byte aligned, as a fresh tensor does);
  the other layers have sizes that are multiples of every vector width;
* minibatches are drawn from each seed's own generator as ``train_classifier`` draws them.

This serves the chapter's experiments only; the optimizer
:class:`~iclr_lab.optimizers.vradam.optimizer.VRAdam` is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from torch import nn

from iclr_lab.core.nn import batch_indices
from iclr_lab.core.validation import check_int, check_range
from iclr_lab.optimizers.vradam.optimizer import _gate, _total

if TYPE_CHECKING:
    from iclr_lab.core.datasets import Split

__all__ = ["RateSpec", "Spec", "rate_many", "train_many"]

_BETAS = (0.9, 0.999)  # AdamW's defaults, which both optimizers of the chapter keep
_EPS = 1e-8
_PAD = 16  # row stride of the output-bias stacks


@dataclass(frozen=True)
class Spec:
    """One run: ``vradam`` (VRAdam with ``beta3``) or AdamW, at ``lr``, from ``seed``."""

    vradam: bool
    lr: float
    seed: int
    beta3: float = 1.0


def _col(values: Sequence[float], ndim: int) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.float32).view(-1, *([1] * (ndim - 1)))


def _padded(rows: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``rows`` (B, k) copied into a (B, 16)-strided stack; returns the (B, k) view and its rows."""
    store = torch.zeros(rows.shape[0], _PAD, dtype=rows.dtype)
    view = store[:, :rows.shape[1]]
    view.copy_(rows)
    return view, [view[i] for i in range(rows.shape[0])]


def _check_common(steps: int, lr_cutoff: float, batch_size: int) -> None:
    check_int("steps", steps, 1)
    check_range("lr_cutoff", lr_cutoff, 0, math.inf, high_open=False)
    check_int("batch_size", batch_size, 1)


def _check_spec(i: int, rate: float, rate_name: str, beta3: float, seed: int) -> None:
    check_range(f"specs[{i}].{rate_name}", rate, 0)
    check_range(f"specs[{i}].beta3", beta3, 0)
    check_int(f"specs[{i}].seed", seed, 0, 2**32 - 1)


def _grad(p: torch.Tensor) -> torch.Tensor:
    assert p.grad is not None
    return p.grad


def train_many(specs: Sequence[Spec], *, steps: int, data: Split, eval_every: int = 10,
               weight_decay: float, lr_cutoff: float,
               batch_size: int = 64) -> list[tuple[pd.DataFrame, np.ndarray]]:
    """``train_digits(method, lr, seed, steps=..., beta3=..., data=..., eval_every=...)`` for every
    spec, trained together; returns ``(log, ratios)`` per spec, as ``train_digits`` does.

    ``steps``, ``eval_every`` and ``batch_size`` are at least 1, ``weight_decay`` is in
    ``[0, inf)`` and ``lr_cutoff`` in ``[0, inf]``, as for
    :class:`~iclr_lab.optimizers.vradam.optimizer.VRAdam`; so is every spec's ``lr`` and ``beta3``.
    """
    from iclr_lab.core.nn import mlp

    _check_common(steps, lr_cutoff, batch_size)
    check_int("eval_every", eval_every, 1)
    check_range("weight_decay", weight_decay, 0)
    for i, spec in enumerate(specs):
        _check_spec(i, spec.lr, "lr", spec.beta3, spec.seed)
    if not specs:
        return []
    b = len(specs)
    sizes = [data.n_features, 128, 128, data.n_classes]
    per_model = []
    for s in specs:
        torch.manual_seed(s.seed)
        per_model.append([p.detach() for p in mlp(sizes).parameters()])
    with torch.no_grad():
        params = [torch.stack([ps[j] for ps in per_model]) for j in range(5)]
        out_bias, out_rows = _padded(torch.stack([ps[5] for ps in per_model]))
    for p in params:
        p.requires_grad_()
    out_bias.requires_grad_()  # a non-leaf view would not keep .grad: the leaf is the view itself
    leaves = [*params, out_bias]
    exp_avg = [torch.zeros_like(p) for p in params]
    exp_avg_sq = [torch.zeros_like(p) for p in params]
    ea_out, ea_rows = _padded(torch.zeros(b, data.n_classes))
    eas_out, eas_rows = _padded(torch.zeros(b, data.n_classes))
    del ea_out, eas_out

    xtr, ytr = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    xte, yte = torch.from_numpy(data.x_test), torch.from_numpy(data.y_test)
    x_test = xte.expand(b, *xte.shape)
    seeds = sorted({s.seed for s in specs})
    batches = {s: batch_indices(len(ytr), steps, batch_size, s) for s in seeds}
    vr_rows = [i for i, s in enumerate(specs) if s.vradam]
    beta1, beta2 = _BETAS
    wd = weight_decay
    ce = nn.functional.cross_entropy
    logs: list[list[dict[str, float]]] = [[] for _ in specs]
    ratios: list[list[float]] = [[] for _ in specs]
    done = [False] * b

    def forward(x: torch.Tensor) -> torch.Tensor:
        h = x
        ws = [params[0], params[2], params[4]]
        bs = [params[1], params[3], out_bias]
        for layer in range(3):
            h = torch.baddbmm(bs[layer].unsqueeze(1), h, ws[layer].transpose(1, 2))
            if layer < 2:
                h = torch.relu(h)
        return h

    for step in range(1, steps + 1):
        idx = torch.stack([batches[s.seed][step - 1] for s in specs])
        for p in leaves:
            p.grad = None
        logits = forward(xtr[idx])
        ys = ytr[idx]
        per_example = ce(logits.reshape(-1, logits.shape[-1]), ys.reshape(-1), reduction="none")
        (per_example * (1.0 / logits.shape[1])).sum().backward()
        with torch.no_grad():
            grads = [_grad(p) for p in params]
            gout = _grad(out_bias)
            g_rows = [gout[i] for i in range(b)]
            # moments (AdamW's foreach ops; the output bias one row at a time)
            for m, v, g in zip(exp_avg, exp_avg_sq, grads, strict=True):
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2)
                v.addcmul_(g, g, value=1 - beta2)
            torch._foreach_lerp_(ea_rows, g_rows, 1 - beta1)
            torch._foreach_mul_(eas_rows, beta2)
            torch._foreach_addcmul_(eas_rows, g_rows, g_rows, 1 - beta2)
            # the gate, per VRAdam model, from its own velocity rows
            ratio = [1.0] * b
            for i in vr_rows:
                squares = [torch.dot(m[i].view(-1), m[i].view(-1)) for m in exp_avg]
                squares.append(torch.dot(ea_rows[i], ea_rows[i]))
                ratio[i] = _gate(_total(squares), specs[i].beta3, lr_cutoff)
            lrs = [s.lr * r if s.vradam else s.lr for s, r in zip(specs, ratio, strict=True)]
            n = float(step)
            step_size = [(lr / (1 - beta1 ** n)) * -1 for lr in lrs]
            bc2 = (1 - beta2 ** n) ** 0.5
            decay = [1 - lr * wd for lr in lrs]
            for p, m, v in zip(params, exp_avg, exp_avg_sq, strict=True):
                p.mul_(_col(decay, p.ndim))
                denom = torch.sqrt(v)
                denom.div_(bc2)
                denom.add_(_EPS)
                p.addcdiv_(_col(step_size, p.ndim) * m, denom)
            torch._foreach_mul_(out_rows, decay)
            denoms = torch._foreach_sqrt(eas_rows)
            torch._foreach_div_(denoms, [bc2] * b)
            torch._foreach_add_(denoms, _EPS)
            torch._foreach_addcdiv_(out_rows, ea_rows, denoms, step_size)
            # bookkeeping: the loss, divergence and evaluations, as train_classifier does
            worst = per_example.view(b, -1).max(1).values
            row_finite = torch.isfinite(per_example.view(b, -1)).all(1).tolist()
            live = [i for i in range(b) if not done[i]]
            evals = []
            losses: dict[int, torch.Tensor] = {}
            for i in live:
                ratios[i].append(ratio[i])
                finite = row_finite[i]
                if finite and float(worst[i]) > 1e30:  # the mean could overflow: take it
                    losses[i] = ce(logits[i], ys[i])
                    finite = bool(torch.isfinite(losses[i]))
                if step % eval_every == 0 or step == steps or not finite:
                    evals.append(i)
                if not finite:
                    done[i] = True
            if evals:
                lt = forward(x_test)
                for i in evals:
                    loss = losses[i] if i in losses else ce(logits[i], ys[i])
                    logs[i].append({"step": step, "train_loss": loss.item(),
                                    "test_loss": ce(lt[i], yte).item(),
                                    "test_acc": (lt[i].argmax(dim=1) == yte).float().mean().item(),
                                    "lr_ratio": ratio[i]})
        if all(done):
            break
    return [(pd.DataFrame(rows), np.asarray(r)) for rows, r in zip(logs, ratios, strict=True)]


@dataclass(frozen=True)
class RateSpec:
    """One run of Experiment C: ``vradam`` (VRAdam with ``beta3``) or AdamW, from ``alpha0``."""

    vradam: bool
    alpha0: float
    seed: int
    beta3: float = 0.0


def _rate_grads(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor, y1: torch.Tensor,
                penalty: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``experiments._loss_grad`` on minibatches, for every row: ``bmm`` where it has ``@``, the same
    element-wise expression, and the bias gradient's sum over examples taken one row at a time."""
    d = (torch.softmax(torch.bmm(x, w.transpose(1, 2)) + b.unsqueeze(1), dim=2) - y1) / x.shape[1]
    gw = torch.bmm(d.transpose(1, 2), x) + penalty * 2 * w / (1 + w * w) ** 2
    gb = torch.stack([d[i].sum(0) for i in range(len(d))]) + penalty * 2 * b / (1 + b * b) ** 2
    return gw, gb


@torch.no_grad()
def rate_many(specs: Sequence[RateSpec], *, steps: int, data: Split, penalty: float,
              lr_cutoff: float, every: int = 10,
              batch_size: int = 64) -> list[dict[str, np.ndarray]]:
    """``experiments.rate_run`` for every spec (``"VRAdam"`` when ``vradam``, else ``"AdamW"``),
    trained together; returns what ``rate_run`` returns, per spec, bit for bit.

    ``steps``, ``every`` and ``batch_size`` are at least 1, ``penalty`` (the weight of the
    non-convex term) is in ``[0, inf)`` and ``lr_cutoff`` in ``[0, inf]``; every spec's ``alpha0``
    and ``beta3`` are in ``[0, inf)``.
    """
    from iclr_lab.optimizers.vradam.experiments import _loss_grad as loss_grad

    _check_common(steps, lr_cutoff, batch_size)
    check_int("every", every, 1)
    check_range("penalty", penalty, 0)
    for i, spec in enumerate(specs):
        _check_spec(i, spec.alpha0, "alpha0", spec.beta3, spec.seed)
    if not specs:
        return []
    r = len(specs)
    x, y = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    y1 = nn.functional.one_hot(y, data.n_classes).to(x.dtype)
    ws, bs = [], []
    for s in specs:
        torch.manual_seed(s.seed)
        model = nn.Linear(data.n_features, data.n_classes)
        ws.append(model.weight.detach())
        bs.append(model.bias.detach())
    w = torch.stack(ws)
    b, b_rows = _padded(torch.stack(bs))
    m_w, v_w = torch.zeros_like(w), torch.zeros_like(w)
    _, m_b = _padded(torch.zeros(r, data.n_classes))
    _, v_b = _padded(torch.zeros(r, data.n_classes))
    gens = {s.seed: torch.Generator().manual_seed(s.seed) for s in specs}
    seeds = list(gens)
    row_of_seed = [seeds.index(s.seed) for s in specs]
    beta1, beta2 = _BETAS
    rec_step: list[int] = []
    rec_g: list[list[float]] = [[] for _ in specs]
    sq = [[] for _ in specs]  # type: list[list[float]]
    ratio_log = [[] for _ in specs]  # type: list[list[float]]
    vr_rows = [i for i, s in enumerate(specs) if s.vradam]
    for t in range(1, steps + 1):
        if (t - 1) % every == 0:
            # the full-batch gradient, model by model (a batched product over all 1437 examples
            # rounds differently from rate_run's mm)
            rec_step.append(t - 1)
            for i in range(r):
                fw, fb = loss_grad(w[i], b[i], x, y1)
                rec_g[i].append(float(fw.pow(2).sum() + fb.pow(2).sum()))
        picks = [torch.randint(len(y), (batch_size,), generator=gens[s]) for s in seeds]
        idx = torch.stack([picks[k] for k in row_of_seed])
        gw, gb = _rate_grads(w, b, x[idx], y1[idx], penalty)
        g_rows = [gb[i] for i in range(r)]
        m_w.lerp_(gw, 1 - beta1)
        v_w.mul_(beta2)
        v_w.addcmul_(gw, gw, value=1 - beta2)
        torch._foreach_lerp_(m_b, g_rows, 1 - beta1)
        torch._foreach_mul_(v_b, beta2)
        torch._foreach_addcmul_(v_b, g_rows, g_rows, 1 - beta2)
        ratio = [1.0] * r
        norm = [math.nan] * r
        for i in vr_rows:
            norm[i] = _total([torch.dot(m_w[i].view(-1), m_w[i].view(-1)), torch.dot(m_b[i], m_b[i])])
            ratio[i] = _gate(norm[i], specs[i].beta3, lr_cutoff)
        scale = 1.0 / math.sqrt(t - 1 + 1)  # LambdaLR: base lr * lambda(last_epoch)
        lrs = [s.alpha0 * scale * q if s.vradam else s.alpha0 * scale
               for s, q in zip(specs, ratio, strict=True)]
        n = float(t)
        step_size = [(lr / (1 - beta1 ** n)) * -1 for lr in lrs]
        bc2 = (1 - beta2 ** n) ** 0.5
        denom = torch.sqrt(v_w)
        denom.div_(bc2)
        denom.add_(_EPS)
        w.addcdiv_(_col(step_size, w.ndim) * m_w, denom)
        denoms = torch._foreach_sqrt(v_b)
        torch._foreach_div_(denoms, [bc2] * r)
        torch._foreach_add_(denoms, _EPS)
        torch._foreach_addcdiv_(b_rows, m_b, denoms, step_size)
        for i in range(r):
            sq[i].append(norm[i])
            ratio_log[i].append(ratio[i])
    return [{"step": np.asarray(rec_step), "grad_sq": np.asarray(rec_g[i]),
             "sq_norm": np.asarray(sq[i]), "ratio": np.asarray(ratio_log[i])} for i in range(r)]
