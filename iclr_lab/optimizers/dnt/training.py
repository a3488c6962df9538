"""Training a :class:`~iclr_lab.optimizers.dnt.model.TinyGPT` on a seeded Zipf language.

:func:`train_lm` is the one loop of the chapter: AdamW or mSGDW (``dnt-eq-msgdw``), a linear
warm-up then a cosine schedule, optional global gradient clipping, the validation loss every few
steps, and (optionally) the gradient statistics of one fixed probe batch at one chosen step.
Every run with the same ``seed`` sees the same language, the same initial weights (per placement),
the same minibatches and the same validation set, so runs differ only in what the chapter varies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
import torch

from iclr_lab.core.languages import ZipfLanguage
from iclr_lab.core.validation import check_choice, check_int, check_range
from iclr_lab.optimizers.dnt.model import (
    GPTConfig,
    HeavyTailStats,
    Placement,
    TinyGPT,
    decoupled_weight_decay,
    heavy_tail_stats,
    no_decay,
    weight_tensors,
)

__all__ = ["OPTIMIZERS", "POOLED", "Recipe", "Run", "make_optimizer", "train_lm"]

OptimizerName = Literal["adamw", "msgdw"]
#: The two optimizers of the chapter.
OPTIMIZERS: tuple[OptimizerName, ...] = ("adamw", "msgdw")


@dataclass(frozen=True)
class Recipe:
    """The optimizer settings shared by every run (only the learning rate is tuned).

    Args:
        adamw_betas: AdamW's ``(beta1, beta2)`` (nanoGPT: ``(0.9, 0.95)``).
        adamw_weight_decay: AdamW's decoupled weight decay (nanoGPT: 0.1).
        momentum: mSGDW's momentum ``mu`` (the paper: 0.9), PyTorch convention ``b = mu b + g``.
        msgdw_weight_decay: mSGDW's decoupled weight decay ``lambda`` (``dnt-eq-msgdw``).
        warmup: steps of linear warm-up before the cosine decay.
        min_lr_ratio: the cosine schedule ends at this fraction of the peak rate (nanoGPT: 0.1).
    """

    adamw_betas: tuple[float, float] = (0.9, 0.95)
    adamw_weight_decay: float = 0.1
    momentum: float = 0.9
    msgdw_weight_decay: float = 1e-4
    warmup: int = 20
    min_lr_ratio: float = 0.1

    def __post_init__(self) -> None:
        for i, b in enumerate(self.adamw_betas):
            check_range(f"adamw_betas[{i}]", b, 0.0, 1.0, high_open=True)
        check_range("adamw_weight_decay", self.adamw_weight_decay, 0.0)
        check_range("momentum", self.momentum, 0.0, 1.0, high_open=True)
        check_range("msgdw_weight_decay", self.msgdw_weight_decay, 0.0)
        check_int("warmup", self.warmup, 0)
        check_range("min_lr_ratio", self.min_lr_ratio, 0.0, 1.0)

    def schedule(self, step: int, steps: int) -> float:
        """The learning-rate multiplier before optimizer step ``step`` (0-based) of ``steps``."""
        if step < self.warmup:
            return (step + 1) / self.warmup
        progress = (step - self.warmup) / max(1, steps - self.warmup)
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cosine


def make_optimizer(model: TinyGPT, name: str, lr: float,
                   recipe: Recipe | None = None) -> torch.optim.Optimizer:
    """AdamW, or the momentum half of mSGDW (:class:`torch.optim.SGD`; call
    :func:`~iclr_lab.optimizers.dnt.model.decoupled_weight_decay` before each step).

    Matrices and embeddings are decayed, norm gains are not (two param groups, as in nanoGPT).
    """
    name = check_choice("optimizer", name, OPTIMIZERS)
    lr = check_range("lr", lr, 0.0, low_open=True)
    recipe = recipe or Recipe()
    decay = [p for n, p in model.named_parameters() if not no_decay(n, p)]
    rest = [p for n, p in model.named_parameters() if no_decay(n, p)]
    if name == "adamw":
        return torch.optim.AdamW([{"params": decay, "weight_decay": recipe.adamw_weight_decay},
                                  {"params": rest, "weight_decay": 0.0}], lr=lr,
                                 betas=recipe.adamw_betas, foreach=True)
    return torch.optim.SGD([{"params": decay, "decoupled_weight_decay": recipe.msgdw_weight_decay},
                            {"params": rest, "decoupled_weight_decay": 0.0}], lr=lr,
                           momentum=recipe.momentum, weight_decay=0.0, foreach=True)


@dataclass
class Run:
    """One training run of :func:`train_lm`.

    Attributes:
        log: one row per evaluation: ``step``, ``val_loss`` (on the fixed validation set) and
            ``train_loss`` (the minibatch loss of that step).
        final_val_loss: the validation loss at the end, ``inf`` if training diverged.
        diverged: whether the loss became non-finite (training then stops).
        stats: gradient statistics of the probe batch at ``stats_at`` (``None`` if not asked).
        histograms: per weight matrix, and pooled over all of them but the embedding
            (``POOLED``), a histogram of ``log10 |g|`` of the probe batch at ``stats_at``:
            columns ``tensor``, ``log10_grad`` (bin centre), ``fraction``.
        train_losses: the minibatch loss of every step (free to record: the learning curves).
        grad_norms: the global gradient norm of every step (before clipping).
        weight_norms: the Frobenius norm of every weight matrix at the end (see
            :func:`~iclr_lab.optimizers.dnt.model.weight_tensors`; the embedding included).
        model: the trained model.
    """

    log: pd.DataFrame
    final_val_loss: float
    diverged: bool
    stats: HeavyTailStats | None = None
    histograms: pd.DataFrame | None = None
    train_losses: np.ndarray = field(default_factory=lambda: np.zeros(0))
    grad_norms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    weight_norms: dict[str, float] = field(default_factory=dict)
    model: TinyGPT | None = None


#: bin edges of the log10 |g| histograms (every chart of both models shares them).
HIST_EDGES = np.linspace(-9.0, -1.0, 41)


#: name of the pooled histogram (every weight matrix but the embedding), as in the paper's Fig. 1.
POOLED = "all matrices but the embedding (pooled)"


def _histograms(model: TinyGPT) -> pd.DataFrame:
    centres = 0.5 * (HIST_EDGES[1:] + HIST_EDGES[:-1])
    counts: dict[str, np.ndarray] = {}
    for name, _, g in weight_tensors(model, embedding=True):
        assert g is not None
        a = np.log10(np.maximum(g.detach().abs().double().flatten().numpy(), 1e-30))
        counts[name], _ = np.histogram(np.clip(a, HIST_EDGES[0], HIST_EDGES[-1] - 1e-9), HIST_EDGES)
    pooled = np.sum([c for n, c in counts.items() if n != "embedding"], axis=0)
    rows = [pd.DataFrame({"tensor": name, "log10_grad": centres, "fraction": c / c.sum()})
            for name, c in {POOLED: pooled, **counts}.items()]
    return pd.concat(rows, ignore_index=True)


def _probe(model: TinyGPT, probe: torch.Tensor) -> tuple[HeavyTailStats, pd.DataFrame]:
    """Gradient statistics of ``probe`` at the current weights (the training gradients are kept)."""
    saved = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    model.loss(probe).backward()
    out = heavy_tail_stats(model), _histograms(model)
    for p, g in zip(model.parameters(), saved, strict=True):
        p.grad = g
    return out


@torch.no_grad()
def _evaluate(model: TinyGPT, tokens: torch.Tensor, chunk: int = 128) -> float:
    losses = [float(model.loss(tokens[i:i + chunk])) * len(tokens[i:i + chunk])
              for i in range(0, len(tokens), chunk)]
    return sum(losses) / len(tokens)


def train_lm(norm: str | Placement, optimizer: str, lr: float, *, seed: int = 0,
             steps: int = 250, batch_size: int = 32, clip: float | None = None,
             config: GPTConfig | None = None, recipe: Recipe | None = None,
             language: ZipfLanguage | None = None, val_sequences: int = 256, eval_every: int = 50,
             stats_at: int | None = None, stop_at: int | None = None) -> Run:
    """Train a :class:`~iclr_lab.optimizers.dnt.model.TinyGPT` on a Zipf language; return the :class:`Run`.

    Args:
        norm: ``"pre"``, ``"dnt"`` or a :class:`~iclr_lab.optimizers.dnt.model.Placement`.
        optimizer: ``"adamw"`` or ``"msgdw"`` (``dnt-eq-msgdw``).
        lr: the peak learning rate, in ``(0, inf)`` (after warm-up; cosine decay to
            ``recipe.min_lr_ratio`` of it).
        seed: fixes the language (``ZipfLanguage(seed=seed)``), the initial weights, the minibatches,
            the validation set and the probe batch.
        steps: optimizer steps.
        batch_size: sequences per step, each of ``config.context + 1`` tokens.
        clip: clip the global gradient norm to this value before each step (nanoGPT: 1.0);
            ``None`` for no clipping.
        config: model sizes (default :class:`~iclr_lab.optimizers.dnt.model.GPTConfig`); its
            ``vocab`` must match the language's.
        recipe: optimizer settings (default :class:`Recipe`).
        language: the language (default ``ZipfLanguage(vocab=config.vocab, seed=seed)``).
        val_sequences: sequences in the fixed validation set.
        eval_every: steps between evaluations (the last step is always evaluated).
        stats_at: after this many steps, measure the gradient of a fixed probe batch of 32
            sequences with :func:`~iclr_lab.optimizers.dnt.model.heavy_tail_stats` (``None``: never).
        stop_at: stop after this many steps (the schedule still spans ``steps``, so the first
            ``stop_at`` steps are exactly those of the full run); ``None`` runs all ``steps``.
    """
    check_choice("optimizer", optimizer, OPTIMIZERS)
    lr = check_range("lr", lr, 0.0, low_open=True)
    config = config or GPTConfig()
    recipe = recipe or Recipe()
    seed = check_int("seed", seed, 0, 2**32 - 1)
    steps = check_int("steps", steps, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    check_int("val_sequences", val_sequences, 1)
    check_int("eval_every", eval_every, 1)
    if clip is not None:
        clip = check_range("clip", clip, 0.0, low_open=True)
    if stats_at is not None:
        stats_at = check_int("stats_at", stats_at, 0, steps)
    stop_at = steps if stop_at is None else check_int("stop_at", stop_at, 1, steps)
    language = language or ZipfLanguage(vocab=config.vocab, seed=seed)
    if language.vocab != config.vocab:
        raise ValueError(f"language.vocab ({language.vocab}) must equal config.vocab ({config.vocab})")
    length = config.context + 1
    train = torch.from_numpy(language.sample(steps * batch_size, length,
                                             np.random.default_rng([seed, 1])))
    val = torch.from_numpy(language.sample(val_sequences, length, np.random.default_rng([seed, 2])))
    probe = torch.from_numpy(language.sample(32, length, np.random.default_rng([seed, 3])))

    torch.manual_seed(seed)
    model = TinyGPT(config, norm)
    opt = make_optimizer(model, optimizer, lr, recipe)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: recipe.schedule(k, steps))
    params = list(model.parameters())
    rows: list[dict[str, float]] = []
    norms: list[float] = []
    losses: list[float] = []
    stats, hist = None, None
    diverged = False
    for step in range(stop_at):
        if stats_at == step:
            stats, hist = _probe(model, probe)
        opt.zero_grad(set_to_none=True)
        loss = model.loss(train[step * batch_size:(step + 1) * batch_size])
        loss.backward()
        value = float(loss.detach())
        gnorm = float(torch.nn.utils.clip_grad_norm_(params, clip if clip is not None else math.inf))
        norms.append(gnorm)
        losses.append(value)
        if not (math.isfinite(value) and math.isfinite(gnorm)):
            diverged = True
            rows.append({"step": step + 1, "val_loss": math.inf, "train_loss": math.inf})
            break
        if optimizer == "msgdw":
            decoupled_weight_decay(opt)  # type: ignore[arg-type]
        opt.step()
        sched.step()
        if (step + 1) % eval_every == 0 or step + 1 == stop_at:
            v = _evaluate(model, val)
            rows.append({"step": step + 1, "val_loss": v, "train_loss": value})
            if not math.isfinite(v):
                diverged = True
                break
    if stats_at == stop_at and not diverged:
        stats, hist = _probe(model, probe)
    final = math.inf if diverged else float(rows[-1]["val_loss"])
    with torch.no_grad():
        weights = {n: float(w.norm()) for n, w, _ in weight_tensors(model, embedding=True)}
    return Run(pd.DataFrame(rows), final, diverged, stats, hist, np.asarray(losses),
               np.asarray(norms), weights, model)
