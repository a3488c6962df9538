"""Gradient estimators of ``J(phi) = E[R(x_0)]`` for the adapter of a ``TinyDiffusion``.

Every estimator returns one gradient per sampled trajectory, shape ``(n, d)``; their mean estimates
``grad J``. All of them credit the adapter's use at each step ``t`` (``rlr-eq-credit``) in one of four
ways:

* **FO** (first order, pathwise): backpropagate ``R(x_0)`` through the chain from step ``t`` on;
* **LR** (likelihood ratio, REINFORCE, the DDPO term): ``(R - b) (d mu_t / d phi)^T z_t / sigma_t^2``
  (``rlr-eq-lr``);
* **HO(h)** (half order): the likelihood ratio of a sub-chain of ``h`` steps with its inner noises
  held fixed and local backprop through it (``rlr-eq-ho``);
* **ZO** (zeroth order): perturb the adapter at step ``t`` by ``s delta`` while sampling and use
  ``(R - b) delta / s`` (``rlr-eq-zo``).

The estimators (``METHODS``): ``full_bp`` (FO everywhere, the exact reference), ``truncated``
(FO on the last ``K`` steps only, AlignProp/DRaFT-K), ``ddpo`` (LR everywhere), ``rlr`` (FO on the
last step, HO(h) on a random sub-chain, then LR or, with ``zo=True``, ZO on every other step;
``rlr-eq-rlr``) and ``rlr_code`` (the released code's recipe: FO on the last step plus LR on
``chain_len`` random steps; here rescaled by ``(T - 1) / chain_len`` so that the sum is unbiased).
``b`` is the leave-one-out mean reward of the batch, so every LR, HO and ZO term stays unbiased.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed
from iclr_lab.generative.rlr.diffusion import (
    ADAPTER_BOUND,
    PER_STEP_BOUND,
    TinyDiffusion,
    Trajectory,
)

__all__ = ["METHODS", "estimate_gradient", "finetune", "lr_step_closed_form", "step_terms"]

METHODS = ("full_bp", "truncated", "ddpo", "rlr", "rlr_code")

Reward = Callable[[torch.Tensor], torch.Tensor]


def _check_phi(phi: Any, model: TinyDiffusion, rows: int | None = None) -> torch.Tensor:
    """``phi`` checked: a finite tensor of shape ``(d,)`` or ``(G, d)`` with ``d`` the model's
    adapter size (``G == rows`` when ``rows`` is given); returned detached."""
    d = model.adapter_size
    if not isinstance(phi, torch.Tensor):
        raise TypeError(f"phi must be a torch.Tensor, got {type(phi).__name__}")
    if phi.dim() not in (1, 2) or phi.shape[-1] != d or (phi.dim() == 2 and rows is not None
                                                         and phi.shape[0] != rows):
        g = "G" if rows is None else str(rows)
        raise ValueError(f"phi must have shape ({d},) or ({g}, {d}), got {tuple(phi.shape)}")
    return check_array("phi", phi.detach())


def _check_model(model: Any) -> TinyDiffusion:
    if not isinstance(model, TinyDiffusion):
        raise TypeError(f"model must be a TinyDiffusion, got {type(model).__name__}")
    return model


def _per_sample(phi: torch.Tensor, n: int) -> torch.Tensor:
    """One leaf copy of ``phi`` per sample (``phi`` of shape (d,), or (G, d) for ``G`` groups of
    ``n`` samples each): the gradient of a sum over samples w.r.t. it is the matrix of per-sample
    gradients."""
    phi = phi.detach()
    rows = phi.expand(n, -1) if phi.dim() == 1 else phi.repeat_interleave(n, 0)
    return rows.clone().requires_grad_(True)


def _loo_advantage(r: torch.Tensor, groups: int = 1) -> torch.Tensor:
    """``R_i - b_i`` with ``b_i`` the mean of the *other* rewards of sample ``i``'s group (``groups``
    contiguous blocks of equal size), so that ``b_i`` is independent of sample ``i``."""
    blocks = r.detach().view(groups, -1)
    m = blocks.shape[1]
    return (blocks - (blocks.sum(1, keepdim=True) - blocks) / (m - 1)).reshape(-1)


def _mean(model: TinyDiffusion, x: torch.Tensor, t: torch.Tensor | int, Phi: torch.Tensor, zero: bool,
          h: torch.Tensor | None = None, out: torch.Tensor | None = None,
          repeats: int = 1) -> torch.Tensor:
    """``model.mean(x, t, Phi.repeat(repeats, 1))`` for the per-sample leaf ``Phi`` (all zeros if
    ``zero``), from the stored features ``h`` and trunk output ``out`` when given (the same
    numbers: they were computed from the same ``x`` and ``t``)."""
    h = model.features(x, t) if h is None else h
    return model._step(x, t, h, Phi, out, repeats=repeats, zero=zero)


def _lr_terms(model: TinyDiffusion, traj: Trajectory, Phi: torch.Tensor,
              weights: torch.Tensor, zero: bool = False) -> torch.Tensor:
    """``sum_t weights[t, i] * log p_phi(x_{t-1} | x_t)`` summed over samples, every step in one
    batched call (``weights`` has shape ``(T + 1, n)``; row 0 is ignored)."""
    T, n = model.steps, Phi.shape[0]
    steps = [t for t in range(1, T + 1) if bool((weights[t] != 0).any())]
    if not steps:
        return Phi.sum() * 0.0
    x = torch.cat([traj.xs[t] for t in steps])
    x_prev = torch.cat([traj.xs[t - 1] for t in steps])
    tt = torch.cat([model.full(n, t) for t in steps])
    w = torch.cat([weights[t] for t in steps])
    hs = out = None
    if traj.feats is not None and traj.heads is not None:
        if steps == list(range(steps[0], steps[-1] + 1)):  # a view, no copy
            hs, out = traj.feats[steps[0]:steps[-1] + 1], traj.heads[steps[0]:steps[-1] + 1]
        else:
            hs, out = traj.feats[steps], traj.heads[steps]
        hs, out = hs.reshape(-1, hs.shape[-1]), out.reshape(-1, 2)
    s2 = model.sigma(tt) ** 2
    mu = _mean(model, x, tt, Phi, zero, hs, out, repeats=len(steps))
    return (w * (-((x_prev - mu) ** 2).sum(-1) / (2 * s2))).sum()


def _fo_last(model: TinyDiffusion, reward: Reward, traj: Trajectory, Phi: torch.Tensor,
             zero: bool = False) -> torch.Tensor:
    """Pathwise term of the last step: ``R(mu_phi(x_1, 1) + z_1)`` summed over samples."""
    h, out = (None, None) if traj.feats is None or traj.heads is None else (traj.feats[1], traj.heads[1])
    x0 = _mean(model, traj.xs[1], 1, Phi, zero, h, out) + traj.zs[1]
    return reward(x0).sum()


def _ho_term(model: TinyDiffusion, traj: Trajectory, Phi: torch.Tensor, j: torch.Tensor, h: int,
             adv: torch.Tensor, zero: bool = False) -> torch.Tensor:
    """Half-order surrogate of ``rlr-eq-ho`` for sub-chains ``j_i + h -> j_i`` (one ``j`` per sample).

    Recompute the ``h`` steps from the stored ``x_{j+h}`` with the adapter, inner noises held at
    their sampled values; ``Phi_out`` is the mean of ``x_j``; the borrowed noise is the stored
    ``z_{j+1}``. Its gradient is ``(R - b) (D_phi Phi_out)^T z_{j+1} / sigma_{j+1}^2``.
    """
    n = Phi.shape[0]
    rows = torch.arange(n)
    y = traj.xs[j + h, rows]
    for k in range(h):
        t = j + h - k
        if k == 0 and traj.feats is not None and traj.heads is not None:  # y is a stored state
            y = _mean(model, y, t, Phi, zero, traj.feats[t, rows], traj.heads[t, rows])
        else:
            y = _mean(model, y, t, Phi, zero)
        if k < h - 1:
            y = y + traj.zs[t, rows]
    x_j = traj.xs[j, rows]
    s2 = model.sigma(j + 1) ** 2
    return (adv * (-((x_j - y) ** 2).sum(-1) / (2 * s2))).sum()


def estimate_gradient(method: str, model: TinyDiffusion, reward: Reward, n_samples: int, *,
                      phi: torch.Tensor | None = None, gen: torch.Generator | None = None, K: int = 1,
                      h: int = 2, zo: bool = False, zo_scale: float = 0.05,
                      chain_len: int = 2) -> torch.Tensor:
    """Per-trajectory estimates of ``grad_phi E[R(x_0)]``, shape ``(n_samples, d)``.

    Args:
        method: one of ``METHODS`` (see the module docstring; ``rlr-eq-rlr`` for ``rlr``).
        model: a (pretrained, frozen) :class:`~iclr_lab.generative.rlr.diffusion.TinyDiffusion`.
        reward: a differentiable ``R``, one value per row of its input.
        n_samples: trajectories (>= 2: the LR baseline leaves one out).
        phi: the adapter at which to differentiate, finite, shape ``(d,)`` (default: zero, the
            pretrained model); or ``(G, d)``: ``G`` adapters, ``n_samples`` trajectories each, returned
            group after group (``G * n_samples`` rows; :func:`finetune` runs seeds this way).
        gen: the random generator (default: a fresh one seeded with 0).
        K: steps backpropagated by ``truncated`` (1..T).
        h: length of the half-order sub-chain of ``rlr`` (1..T-1); its start ``j`` is uniform on
            ``1..T-h`` for each trajectory, so it never contains the last step.
        zo: ``rlr`` only: zeroth-order terms (the paper's estimator) instead of LR on the steps
            outside the sub-chain and the last step.
        zo_scale: the perturbation scale ``s`` of the zeroth-order terms (> 0). With the shared
            adapter every ZO step perturbs all ``d`` parameters; with the per-step adapter step
            ``t`` perturbs only its own ``u_t`` (2 numbers), so its ZO term's variance is far smaller.
        chain_len: ``rlr_code`` only: random LR steps per trajectory (1..T-1).
    """
    check_choice("method", method, METHODS)
    T = _check_model(model).steps
    check_int("n_samples", n_samples, 2)
    K = check_int("K", K, 1, T)
    h = check_int("h", h, 1, T - 1)
    chain_len = check_int("chain_len", chain_len, 1, T - 1)
    zo_scale = check_range("zo_scale", zo_scale, 0.0, low_open=True)
    gen = torch.Generator().manual_seed(0) if gen is None else gen
    phi = model.zero_adapter() if phi is None else _check_phi(phi, model)
    groups = 1 if phi.dim() == 1 else phi.shape[0]
    Phi = _per_sample(phi, n_samples)
    # phi = 0 (Experiment A): the graph-free passes skip the adapter (it adds an exact 0) and
    # the per-sample adapter knows its output is 0 (``_PerSampleAdapter``)
    zero = not bool(phi.any())
    rows = None if zero else Phi.detach()
    n = Phi.shape[0]

    if method in ("full_bp", "truncated"):
        cut = T if method == "full_bp" else K
        with torch.no_grad():
            x = torch.randn(n, 2, generator=gen)
            for t in range(T, cut, -1):
                x = model.mean(x, t, rows) + model.sigmas[t - 1] * torch.randn(
                    n, 2, generator=gen)
        for t in range(cut, 0, -1):
            x = _mean(model, x, t, Phi, zero) + model.sigmas[t - 1] * torch.randn(
                n, 2, generator=gen)
        reward(x).sum().backward()
        assert Phi.grad is not None
        return Phi.grad

    if method == "ddpo":
        traj = model.trajectory(n, gen, rows, features=True)
        adv = _loo_advantage(reward(traj.xs[0]), groups)
        _lr_terms(model, traj, Phi, adv.expand(T + 1, n), zero).backward()
        assert Phi.grad is not None
        return Phi.grad

    # rlr and rlr_code: FO on the last step, something else on steps 2..T
    d = model.adapter_size
    mask = torch.zeros(T + 1, n)  # the weight of step t's LR (or ZO) term for sample i
    steps = torch.arange(T + 1)[:, None]
    j = None
    if method == "rlr_code":
        # chain_len distinct random steps out of 2..T per sample, rescaled so the sum is unbiased
        picks = torch.rand(T - 1, n, generator=gen).argsort(0)[:chain_len] + 2
        mask.scatter_(0, picks, (T - 1) / chain_len)
    else:
        j = torch.randint(1, T - h + 1, (n,), generator=gen)
        in_sub = (steps > j[None, :]) & (steps <= (j + h)[None, :])
        mask[2:] = 1.0
        mask[in_sub] = 0.0
    delta = None
    if method == "rlr" and zo:
        delta = torch.randn(T + 1, n, d, generator=gen) * mask[:, :, None]
        if model.adapter == "per_step":
            # perturb only the parameters step t uses (u_t, 2 numbers): the others would add
            # noise to step t's ZO term and nothing to its mean
            delta = delta * _own_slices(T)[:, None, :]
        traj = model.trajectory(n, gen, rows, perturb=zo_scale * delta, features=True)
    else:
        traj = model.trajectory(n, gen, rows, features=True)
    adv = _loo_advantage(reward(traj.xs[0]), groups)
    loss = _fo_last(model, reward, traj, Phi, zero)
    if j is not None:
        loss = loss + _ho_term(model, traj, Phi, j, h, adv, zero)
    if delta is None:
        loss = loss + _lr_terms(model, traj, Phi, adv[None, :] * mask, zero)
    loss.backward()
    assert Phi.grad is not None
    g = Phi.grad
    if delta is not None:
        g = g + adv[:, None] * delta.sum(0) / zo_scale
    return g


def _own_slices(T: int) -> torch.Tensor:
    """``(T + 1, 2 T)``: row ``t`` is 1 on the per-step adapter's slice ``u_t`` (row 0 all zeros)."""
    own = torch.zeros(T + 1, T, 2)
    own[torch.arange(1, T + 1), torch.arange(T)] = 1.0
    return own.view(T + 1, 2 * T)


def step_terms(model: TinyDiffusion, reward: Reward, n_samples: int, step: int, *,
               phi: torch.Tensor | None = None, gen: torch.Generator | None = None,
               h: int = 1, parts: Sequence[str] = ("fo", "lr", "ho", "closed_form"),
               ho_term: Callable[..., torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """Per-trajectory FO, LR and HO(h) estimates of the credit ``c_step`` of one step (``rlr-eq-credit``).

    All three use the same trajectories. ``fo`` backpropagates ``R`` from step ``step`` to ``x_0``
    (the other steps' adapters held fixed); ``lr`` is the score-function term ``rlr-eq-lr`` of that
    step; ``ho`` is the half-order term of the sub-chain ``step + h - 1 -> step - 1``, which
    estimates the credit of ``h`` steps (for ``h = 1`` it is the LR term computed another way).
    ``parts`` picks which of ``fo``, ``lr``, ``ho`` and ``closed_form`` to compute (the same
    trajectories either way); ``ho_term`` replaces the half-order surrogate (a test hook: the
    chapter's check that a wrong sub-chain is caught).

    ``n_samples`` is at least 2 (the leave-one-out baseline), ``step`` in ``1..T``, ``h`` in
    ``1..T - step + 1``; ``phi``, the adapter (default zero), is a finite tensor of shape ``(d,)``.
    """
    T = _check_model(model).steps
    for p in parts:
        check_choice("parts", p, ("fo", "lr", "ho", "closed_form"))
    step = check_int("step", step, 1, T)
    h = check_int("h", h, 1, T - step + 1)
    n = check_int("n_samples", n_samples, 2)
    gen = torch.Generator().manual_seed(0) if gen is None else gen
    # one adapter for every trajectory: the closed form and the per-sample leaves take (d,)
    phi = model.zero_adapter() if phi is None else _check_phi(phi, model, rows=1).reshape(-1)
    zero = not bool(phi.any())
    traj = model.trajectory(n, gen, None if zero else phi, features=True)
    adv = _loo_advantage(reward(traj.xs[0]))
    out = {}
    assert traj.feats is not None and traj.heads is not None
    if "fo" in parts:
        Phi = _per_sample(phi, n)
        x = _mean(model, traj.xs[step], step, Phi, zero, traj.feats[step],
                  traj.heads[step]) + traj.zs[step]
        for t in range(step - 1, 0, -1):
            x = model.mean(x, t, None if zero else phi) + traj.zs[t]
        reward(x).sum().backward()
        assert Phi.grad is not None
        out["fo"] = Phi.grad
    if "lr" in parts:
        Phi = _per_sample(phi, n)
        w = torch.zeros(T + 1, n)
        w[step] = adv
        _lr_terms(model, traj, Phi, w, zero).backward()
        assert Phi.grad is not None
        out["lr"] = Phi.grad
    if "ho" in parts:
        Phi = _per_sample(phi, n)
        (ho_term or _ho_term)(model, traj, Phi, torch.full((n,), step - 1), h, adv, zero).backward()
        assert Phi.grad is not None
        out["ho"] = Phi.grad
    if "closed_form" in parts:
        out["closed_form"] = lr_step_closed_form(model, traj, adv, step, phi)
    return out


def lr_step_closed_form(model: TinyDiffusion, traj: Trajectory, adv: torch.Tensor, step: int,
                        phi: torch.Tensor) -> torch.Tensor:
    """The DDPO term of one step written out, no autograd (``rlr-eq-lr``).

    Shared adapter: ``mu = (x - c_t eps) / sqrt(alpha_t)`` with ``eps = W h + b + A tanh(u)``,
    ``u = dW h + db``, so
    ``d mu / d dW = -(c_t A / sqrt(alpha_t)) (1 - tanh(u)^2) e_k h^T``: the term is
    ``-(R - b) (c_t A / sqrt(alpha_t)) [outer(v, h_t), v]`` with ``v = (1 - tanh(u)^2) z_t / sigma_t^2``.
    Per-step adapter: ``mu' = mu + B tanh(u_t)``, so the term is ``(R - b) B (1 - tanh(u_t)^2)
    z_t / sigma_t^2`` on the slice ``u_t`` and zero elsewhere.

    ``traj`` holds ``n`` chains of ``model``; ``adv`` is finite, shape ``(n,)``; ``step`` is in
    ``1..T``; ``phi`` is finite, shape ``(d,)`` or ``(n, d)``.
    """
    T = _check_model(model).steps
    if not isinstance(traj, Trajectory) or traj.xs.dim() != 3 or traj.xs.shape[0] != T + 1:
        raise ValueError(f"traj must be a Trajectory of model's {T} steps (xs of shape (T + 1, n, 2))")
    n = traj.xs.shape[1]
    if not isinstance(adv, torch.Tensor):
        raise TypeError(f"adv must be a torch.Tensor, got {type(adv).__name__}")
    adv = check_array("adv", adv, shape=(n,))
    step = check_int("step", step, 1, T)
    phi = _check_phi(phi, model, rows=n)
    i = step - 1
    if model.adapter == "per_step":
        u = phi.view(-1, T, 2)[:, i]
        v = (1 - torch.tanh(u) ** 2) * traj.zs[step] / model.sigmas[i] ** 2
        g = torch.zeros(n, T, 2)
        g[:, i] = adv[:, None] * PER_STEP_BOUND * v
        return g.view(n, 2 * T)
    with torch.no_grad():
        hfeat = model.features(traj.xs[step], step)
        u = model.adapter_pre(hfeat, phi)
        z = (1 - torch.tanh(u) ** 2) * traj.zs[step] / model.sigmas[i] ** 2
        scale = -(adv * model.eps_coef[i] * model.inv_sqrt_alpha[i] * ADAPTER_BOUND)[:, None]
        gw = scale[:, :, None] * z[:, :, None] * hfeat[:, None, :]
        return torch.cat([gw.reshape(n, -1), scale * z], dim=1)


def finetune(method: str, model: TinyDiffusion, reward: Reward, *, steps: int = 150,
             batch_size: int = 32, lr: float | Sequence[float] = 0.01, runs: int = 1, seed: int = 0,
             target: tuple[float, float] = (-2.0, 0.0), eval_every: int = 50,
             eval_samples: int = 1000, snapshots: Sequence[int] = (), snapshot_samples: int = 200,
             **estimator: Any) -> tuple[pd.DataFrame, dict[int, np.ndarray]]:
    """Fine-tune the adapter by Adam *ascent* on ``estimate_gradient(method, ...)``.

    Every learning rate in ``lr`` is run ``runs`` times, all runs side by side in one batch (one
    adapter per run, its own ``batch_size`` trajectories and its own leave-one-out baseline; Adam
    acts element by element, so the runs do not interact). Every ``eval_every`` steps (and at the
    end) it records each run's mean reward and the fraction of ``eval_samples`` fresh samples
    within radius 1 of ``target``. Keyword arguments go to :func:`estimate_gradient` (``K``,
    ``h``, ``zo``, ...).

    Ranges: ``steps``, ``runs``, ``eval_every``, ``eval_samples`` and ``snapshot_samples`` at
    least 1, ``batch_size`` at least 2 (the leave-one-out baseline), every ``lr`` in ``(0, inf)``,
    ``seed`` in ``[0, 2**32 - 1]``, each of ``snapshots`` in ``[0, steps]``; ``target`` finite.

    Returns:
        ``(log, clouds)``: the log (columns ``step``, ``run``, ``lr``, ``reward``, ``fraction``)
        and ``{step: array (snapshot_samples, 2)}`` of the first run at each step in ``snapshots``.
    """
    check_choice("method", method, METHODS)
    _check_model(model)
    steps = check_int("steps", steps, 1)
    batch_size = check_int("batch_size", batch_size, 2)
    runs = check_int("runs", runs, 1)
    rates = [check_range("lr", v, 0.0, low_open=True) for v in ([lr] if isinstance(lr, int | float)
                                                                else lr)]
    if not rates:
        raise ValueError("lr must hold at least one learning rate")
    eval_every = check_int("eval_every", eval_every, 1)
    eval_samples = check_int("eval_samples", eval_samples, 1)
    snapshots = [check_int("snapshots", k, 0, steps) for k in snapshots]
    snapshot_samples = check_int("snapshot_samples", snapshot_samples, 1)
    c = torch.tensor([check_range("target[0]", target[0]), check_range("target[1]", target[1])])
    gen = torch.Generator().manual_seed(check_seed(seed))
    G = len(rates) * runs
    lr_of = torch.tensor([r for r in rates for _ in range(runs)])[:, None]
    phi = torch.zeros(G, model.adapter_size)
    m1, m2 = torch.zeros_like(phi), torch.zeros_like(phi)
    b1, b2, eps = 0.9, 0.999, 1e-8  # torch.optim.Adam's defaults
    rows, clouds = [], {}

    def record(k: int) -> None:
        # the same evaluation noise at every checkpoint, so that curves are not jittered by it
        egen = torch.Generator().manual_seed(10_000 + seed)
        # phi = 0 (step 0): no adapter, which adds an exact 0
        adapters = phi.repeat_interleave(eval_samples, 0) if bool(phi.any()) else None
        x = model.sample(eval_samples * G, egen, adapters)
        for g, block in enumerate(x.view(G, eval_samples, 2)):
            rows.append({"step": k, "run": g % runs, "lr": float(lr_of[g]),
                         "reward": float(reward(block).mean()),
                         "fraction": float(((block - c).norm(dim=-1) <= 1.0).float().mean())})
        if k in snapshots:
            clouds[k] = x[:snapshot_samples].numpy().copy()

    for k in range(steps + 1):
        if k % eval_every == 0 or k == steps or k in snapshots:
            record(k)
        if k == steps:
            break
        grads = estimate_gradient(method, model, reward, batch_size, phi=phi, gen=gen, **estimator)
        g = grads.view(G, batch_size, -1).mean(1)
        m1 = b1 * m1 + (1 - b1) * g
        m2 = b2 * m2 + (1 - b2) * g * g
        corr1, corr2 = 1 - b1 ** (k + 1), 1 - b2 ** (k + 1)
        phi = phi + lr_of * (m1 / corr1) / ((m2 / corr2).sqrt() + eps)
    return pd.DataFrame(rows), clouds
