"""Tiny torch building blocks shared by chapters: an MLP, a minibatch training loop, a one-hidden-layer
MLP with its gradient written out (for the many small worker steps of Part II), Adam's update for
such written-out loops, and a learning-rate schedule.

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
from iclr_lab.core.validation import check_array, check_int, check_range, check_seed

__all__ = ["FlatMLP", "adam_update", "batch_indices", "evaluate", "mlp", "train_classifier",
           "warmup_cosine"]


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
    check_array("x", x, nonempty=True)
    check_array("y", y, ndim=1, finite=False)
    if y.dtype.is_floating_point or y.dtype.is_complex:
        raise TypeError(f"y must hold integer class labels, got dtype {y.dtype}")
    if len(y) != len(x):
        raise ValueError(f"x and y must have one row per example: got {len(x)} and {len(y)} rows")
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y).item()
    acc = (logits.argmax(dim=1) == y).float().mean().item()
    return loss, acc


def batch_indices(n: int, steps: int, batch_size: int, seed: int) -> list[torch.Tensor]:
    """The minibatch indices of ``steps`` steps: epochs of a seeded random permutation of ``n``
    (a new permutation when the next batch would not fit). :func:`train_classifier` draws these;
    stacked runs that must match it draw them here too."""
    n = check_int("n", n, 1)
    steps = check_int("steps", steps, 0)
    batch_size = check_int("batch_size", batch_size, 1)
    gen = torch.Generator().manual_seed(check_seed(seed))
    perm, pos, out = torch.randperm(n, generator=gen), 0, []
    for _ in range(steps):
        if pos + batch_size > n:
            perm, pos = torch.randperm(n, generator=gen), 0
        out.append(perm[pos:pos + batch_size])
        pos += batch_size
    return out


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
    check_seed(seed)
    xtr, ytr = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    xte, yte = torch.from_numpy(data.x_test), torch.from_numpy(data.y_test)
    batches = batch_indices(len(ytr), steps, batch_size, seed)
    rows = []
    for step in progress(range(1, steps + 1), desc=desc, total=steps):
        idx = batches[step - 1]
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


def adam_update(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor,
                exp_avg_sq: torch.Tensor, step: int, *, lr: float,
                betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
    """Step ``step`` (1, 2, ...) of ``torch.optim.Adam`` (no weight decay, amsgrad or maximize) on
    one tensor, in place: ``param``, its first and second moments ``exp_avg`` and ``exp_avg_sq``
    (zeros before step 1). ``param`` must not require grad (or call this under
    ``torch.no_grad()``); the function itself does not enter ``no_grad``, whose cost would show in
    loops of thousands of tiny steps.

    The operations are those of Adam's single-tensor path (the one it takes on CPU), in its order,
    so a loop that writes out its gradient gets ``torch.optim.Adam``'s numbers bit for bit, without
    the optimizer's per-step bookkeeping or the ``torch._dynamo`` import that its first construction
    costs (about a CPU second); tests compare the two."""
    # Cheap Python checks only: this runs once per tensor per step. NaN in the tensors propagates,
    # as it does in torch.optim.Adam.
    step = check_int("step", step, 1)
    lr = check_range("lr", lr, 0)
    eps = check_range("eps", eps, 0)
    beta1, beta2 = betas
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias_correction1 = 1 - beta1 ** float(step)
    bias_correction2_sqrt = (1 - beta2 ** float(step)) ** 0.5
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-(lr / bias_correction1))


def warmup_cosine(t: int, peak: float, warmup: int, steps: int) -> float:
    """The learning rate of step ``t`` (1-based) of ``steps``: linear warm-up to ``peak`` over the
    first ``warmup`` steps, then cosine decay to 0 at step ``steps``.

    Step 0 gives 0 (or ``peak`` with no warm-up), and a step past ``steps`` gives 0: the schedule
    has ended, it does not repeat. ``warmup = steps`` warms up over the whole run.

    Args:
        t: the step (an integer >= 0).
        peak: the rate at the end of the warm-up (finite, >= 0).
        warmup: warm-up steps (0 <= warmup <= steps).
        steps: the schedule's length (>= 1).
    """
    steps = check_int("steps", steps, 1)
    warmup = check_int("warmup", warmup, 0, steps)
    t = check_int("t", t, 0)
    peak = check_range("peak", peak, 0, math.inf, high_open=True)
    if t <= warmup:
        return peak * t / warmup if warmup else peak
    if t >= steps:
        return 0.0
    frac = (t - warmup) / (steps - warmup)
    return peak * 0.5 * (1.0 + math.cos(math.pi * frac))


class FlatMLP:
    """``Linear(n_in, h) -> ReLU -> Linear(h, n_out)`` whose weights are views into one flat tensor,
    with the mean cross-entropy gradient written out.

    One flat parameter makes each optimizer step and each all-reduce a single tensor operation
    (``[model.theta]``); :attr:`params` gives the four layer tensors instead, each with its
    ``.grad`` a view into ``theta.grad``, for optimizers that treat layers apart. On a model this
    small the written-out gradient costs half of autograd's time (tests check it against autograd).

    Args:
        n_in, hidden, n_out: layer widths (>= 1).
        gen: the generator of the initialisation, ``torch.nn.Linear``'s default
            ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, drawn layer by layer (weight, then bias).
    """

    def __init__(self, n_in: int, hidden: int, n_out: int, gen: torch.Generator) -> None:
        shapes = [(check_int("hidden", hidden, 1), check_int("n_in", n_in, 1)), (hidden,),
                  (check_int("n_out", n_out, 1), hidden), (n_out,)]
        sizes = [math.prod(s) for s in shapes]
        fans = [n_in, n_in, hidden, hidden]
        self.theta = torch.empty(sum(sizes))
        self.theta.grad = torch.zeros_like(self.theta)
        chunks = torch.split(self.theta, sizes)
        grads = torch.split(self.theta.grad, sizes)
        self.w1, self.b1, self.w2, self.b2 = (c.view(s) for c, s in zip(chunks, shapes, strict=True))
        self.g1, self.gb1, self.g2, self.gb2 = (g.view(s) for g, s in zip(grads, shapes, strict=True))
        with torch.no_grad():
            for view, fan in zip((self.w1, self.b1, self.w2, self.b2), fans, strict=True):
                bound = 1.0 / math.sqrt(fan)
                view.copy_((torch.rand(view.shape, generator=gen) * 2 - 1) * bound)
        for view, grad in zip((self.w1, self.b1, self.w2, self.b2),
                              (self.g1, self.gb1, self.g2, self.gb2), strict=True):
            view.grad = grad

    @property
    def params(self) -> list[torch.Tensor]:
        """The layer tensors ``[w1, b1, w2, b2]`` (views into ``theta``)."""
        return [self.w1, self.b1, self.w2, self.b2]

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The network's output on a batch ``x`` of shape ``(n, n_in)``."""
        return torch.addmm(self.b2, torch.addmm(self.b1, x, self.w1.T).clamp_min_(0), self.w2.T)

    def grad(self, x: torch.Tensor, onehot: torch.Tensor) -> None:
        """Write the gradient of the mean cross-entropy on ``(x, labels)`` into ``theta.grad``;
        the labels come one-hot encoded (float, one row per example)."""
        pre = torch.addmm(self.b1, x, self.w1.T)
        h = pre.clamp_min(0)
        d = torch.softmax(torch.addmm(self.b2, h, self.w2.T), dim=1)
        d.sub_(onehot).div_(len(x))           # d loss / d logits = (softmax - one-hot) / n
        torch.mm(d.T, h, out=self.g2)
        torch.sum(d, 0, out=self.gb2)
        dh = torch.mm(d, self.w2).mul_(pre > 0)
        torch.mm(dh.T, x, out=self.g1)
        torch.sum(dh, 0, out=self.gb1)

    @torch.no_grad()
    def evaluate(self, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        """Mean cross-entropy and accuracy on ``(x, y)``."""
        logits = self.logits(x)
        loss = float(torch.nn.functional.cross_entropy(logits, y))
        return loss, float((logits.argmax(1) == y).float().mean())
