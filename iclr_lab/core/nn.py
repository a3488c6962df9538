"""Tiny torch building blocks shared by chapters: an MLP, a minibatch training loop and a
learning-rate schedule.

Importing this module imports torch; ``import iclr_lab`` never does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd
import torch
from torch import nn

from iclr_lab.core.datasets import Split
from iclr_lab.core.progress import progress
from iclr_lab.core.validation import check_int

__all__ = ["evaluate", "mlp", "train_classifier", "warmup_cosine"]


def mlp(sizes: Sequence[int], activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """``Linear -> activation -> ... -> Linear`` through the given layer widths."""
    if len(sizes) < 2:
        raise ValueError(f"sizes must list at least an input and an output width, got {sizes}")
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(check_int(f"sizes[{i}]", a, 1), check_int(f"sizes[{i + 1}]", b, 1)))
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` on ``(x, y)``."""
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y).item()
    acc = (logits.argmax(dim=1) == y).float().mean().item()
    return loss, acc


def train_classifier(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: Split,
    *,
    steps: int,
    batch_size: int = 64,
    eval_every: int = 10,
    seed: int = 0,
    on_step: Callable[[int], dict[str, float]] | None = None,
    desc: str | None = None,
) -> pd.DataFrame:
    """Minibatch cross-entropy training; returns one row per evaluation.

    Columns: ``step``, ``train_loss`` (minibatch loss at that step), ``test_loss``, ``test_acc`` and
    whatever ``on_step(step)`` returns (e.g. an optimizer's effective learning rate). A
    non-finite loss stops training early; the last row then carries the NaN/inf so that divergence is
    visible in the table rather than hidden.
    """
    check_int("steps", steps, 1)
    check_int("batch_size", batch_size, 1)
    check_int("eval_every", eval_every, 1)
    xtr, ytr = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    xte, yte = torch.from_numpy(data.x_test), torch.from_numpy(data.y_test)
    gen = torch.Generator().manual_seed(seed)
    n = len(ytr)
    perm, pos = torch.randperm(n, generator=gen), 0
    rows = []
    for step in progress(range(1, steps + 1), desc=desc, total=steps):
        if pos + batch_size > n:
            perm, pos = torch.randperm(n, generator=gen), 0
        idx = perm[pos:pos + batch_size]
        pos += batch_size
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
        loss.backward()
        optimizer.step()
        extra = on_step(step) if on_step else {}
        finite = bool(torch.isfinite(loss))
        if step % eval_every == 0 or step == steps or not finite:
            test_loss, test_acc = evaluate(model, xte, yte)
            rows.append({"step": step, "train_loss": loss.item(), "test_loss": test_loss,
                         "test_acc": test_acc, **extra})
        if not finite:
            break
    return pd.DataFrame(rows)


def warmup_cosine(t: int, peak: float, warmup: int, steps: int) -> float:
    """The learning rate of step ``t`` (1-based) of ``steps``: linear warm-up to ``peak`` over the
    first ``warmup`` steps, then cosine decay to 0 at step ``steps``."""
    if t <= warmup:
        return peak * t / warmup
    frac = (t - warmup) / (steps - warmup)
    return peak * 0.5 * (1.0 + math.cos(math.pi * frac))
