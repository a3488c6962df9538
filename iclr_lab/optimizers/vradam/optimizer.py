"""The VRAdam and VRMomentum optimizers (Vaidhyanathan, Schorling, Ares & Osborne, ICLR 2026).

The chapter is ``book/optimizers/vradam.md``; equations are cited by their label there.

* :class:`VRAdam`: AdamW whose learning rate is multiplied by a *global* gate that shrinks when the
  velocity (the first-moment buffer) is large (``vradam-eq-velocity``, ``vradam-eq-gate``,
  ``vradam-eq-update``). It is a thin subclass of :class:`torch.optim.AdamW`: the gate is computed,
  written into ``group["lr"]`` for the duration of AdamW's own ``step`` and then restored, so the
  Adam arithmetic is PyTorch's and LR schedulers keep scheduling the maximal rate ``alpha0`` (stored
  as ``lr``).
* :class:`VRMomentum`: the same gate on EMA momentum without a second moment
  (``vradam-eq-vrmomentum``); the variant analysed by the paper's Theorem 4.1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from iclr_lab.core.validation import check_range

__all__ = ["VRAdam", "VRMomentum", "gate"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def gate(sq_norm: float, beta3: float, lr_cutoff: float) -> float:
    """The learning-rate ratio ``eta_t / alpha0 = 1 / (1 + min(beta3 * P_t, alpha1))`` of Eq. (5).

    ``sq_norm`` is ``P_t``, the squared velocity norm summed over all parameters. The ratio lies in
    ``[1 / (1 + lr_cutoff), 1]``.
    """
    return 1.0 / (1.0 + min(beta3 * sq_norm, lr_cutoff))


def _sq_norm(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """``sum_i ||t_i||^2`` accumulated in float64 (float32 norms for half-precision tensors)."""
    if not tensors:
        return None
    if any(t.dtype in _LOW_PRECISION for t in tensors):
        tensors = [t.float() for t in tensors]
    norms = torch._foreach_norm(tensors)
    device = norms[0].device
    return torch.stack([n.to(device) for n in norms]).double().square().sum()


def _velocity_sq_norm(ms: list[torch.Tensor], gs: list[torch.Tensor], beta1: float) -> torch.Tensor:
    """``sum_i ||beta1 m_i + (1 - beta1) g_i||^2`` without materialising the new velocity.

    Expands the square, ``beta1^2 ||m||^2 + 2 beta1 (1 - beta1) <m, g> + (1 - beta1)^2 ||g||^2``:
    one fused norm over ``m`` and ``g`` plus one dot product per tensor, about three times cheaper
    on CPU than ``_foreach_lerp`` followed by a norm (which allocates a copy of every buffer). The
    terms are accumulated in float64 and the result is clipped at 0 (the expansion can cancel when
    the new velocity is tiny compared with ``m``; the gate is then ~1 either way).
    """
    if any(t.dtype in _LOW_PRECISION for t in ms + gs):
        ms, gs = [m.float() for m in ms], [g.float() for g in gs]
    norms = torch._foreach_norm(ms + gs)
    device = norms[0].device
    sq = torch.stack([n.to(device) for n in norms]).double().square()
    k = len(ms)
    dots = torch.stack([torch.dot(m.reshape(-1), g.reshape(-1)).to(device)
                        for m, g in zip(ms, gs, strict=True)]).double()
    total = (beta1 * beta1 * sq[:k].sum() + 2.0 * beta1 * (1.0 - beta1) * dots.sum()
             + (1.0 - beta1) ** 2 * sq[k:].sum())
    return total.clamp_min(0.0).cpu()


def _check_common(lr: float, beta3: float, lr_cutoff: float, weight_decay: float) -> None:
    check_range("lr", lr, 0)
    check_range("beta3", beta3, 0)
    check_range("lr_cutoff", lr_cutoff, 0)
    check_range("weight_decay", weight_decay, 0)


class VRAdam(torch.optim.AdamW):
    r"""Velocity-Regularized Adam: AdamW with the global velocity gate of Eq. (5).

    At step ``t``, with ``v_t = beta1 v_{t-1} + (1 - beta1) g_t`` the (raw, not bias-corrected)
    first moment of Eq. (4) and ``P_t = sum over all parameters of ||v_t||^2``, the step uses

        eta_t = lr / (1 + min(beta3 * P_t, lr_cutoff))

    in place of AdamW's ``lr``, for both the Adam step and the decoupled weight decay (Eq. (6)).
    ``P_t`` is computed from the buffer's *next* value before AdamW updates it, then
    :meth:`torch.optim.AdamW.step` runs with ``group["lr"]`` temporarily set to ``eta_t``.

    Implementation choices (see the chapter's "Implementation choice" box):

    * ``P_t`` is summed over **all** param groups (the official code sums per group; with one group
      the two agree). ``beta3`` and ``lr_cutoff`` are per-group keys applied to the global ``P_t``.
    * ``lr`` stores the maximal rate ``alpha0``, so LR schedulers scale ``alpha0`` and the gate acts on
      top of the schedule.
    * ``normgrad=True`` reproduces the option of the original code: ``P_t = sum ||g_t||^2`` (the raw
      minibatch gradient) instead of the velocity.

    Args:
        params: parameters or param groups, as for any ``torch.optim`` optimizer.
        lr: maximal learning rate ``alpha0`` (>= 0).
        betas: ``(beta1, beta2)``, each in [0, 1).
        beta3: velocity penalty (>= 0); ``beta3 = 0`` is exactly AdamW.
        lr_cutoff: cap ``alpha1`` on the penalty (>= 0, ``inf`` allowed); the smallest rate is
            ``lr / (1 + lr_cutoff)``; ``lr_cutoff = 0`` is exactly AdamW.
        eps: AdamW's epsilon (>= 0), added after the square root.
        weight_decay: decoupled weight decay (>= 0), multiplied by the gated rate.
        normgrad: penalise ``||g_t||^2`` instead of ``||v_t||^2`` (original-code variant).
        foreach: passed to AdamW (``None`` lets PyTorch choose).

    Attributes:
        last_sq_norm: ``P_t`` of the last step (``nan`` before the first step).
        last_lr_ratio: ``eta_t / lr`` of the first param group at the last step (1.0 before).
        last_lr_ratios: the same ratio for every param group.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        beta3: float = 1.0,
        lr_cutoff: float = 19.0,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        normgrad: bool = False,
        foreach: bool | None = None,
    ) -> None:
        _check_common(lr, beta3, lr_cutoff, weight_decay)
        if len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        b1 = check_range("betas[0]", betas[0], 0, 1, high_open=True)
        b2 = check_range("betas[1]", betas[1], 0, 1, high_open=True)
        check_range("eps", eps, 0)
        extra = {"beta3": float(beta3), "lr_cutoff": float(lr_cutoff), "normgrad": bool(normgrad)}
        super().__init__(params, lr=float(lr), betas=(b1, b2), eps=float(eps),
                         weight_decay=float(weight_decay), foreach=foreach)
        self.defaults.update(extra)
        for group in self.param_groups:
            for key, value in extra.items():
                group.setdefault(key, value)
        self.last_sq_norm: float = math.nan
        self.last_lr_ratio: float = 1.0
        self.last_lr_ratios: list[float] = [1.0] * len(self.param_groups)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("beta3", 1.0)
            group.setdefault("lr_cutoff", 19.0)
            group.setdefault("normgrad", False)

    @torch.no_grad()
    def velocity_sq_norm(self) -> float:
        """``P_t`` of Eq. (5) for the gradients now in ``.grad``, without changing any state.

        For each parameter with a gradient this is ``||beta1 m + (1 - beta1) g||^2`` where ``m`` is
        the current ``exp_avg`` (zero before the first step), i.e. the buffer AdamW is about to
        write; with ``normgrad`` it is ``||g||^2``. Summed over all param groups, in float64.
        """
        total = torch.zeros((), dtype=torch.float64)
        for group in self.param_groups:
            beta1 = group["betas"][0]
            sign = -1.0 if group.get("maximize", False) else 1.0
            fresh, ms, gs = [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad if sign > 0 else -p.grad
                m = self.state[p].get("exp_avg") if p in self.state else None
                if group["normgrad"]:
                    fresh.append(g)
                elif m is None:
                    fresh.append(g)  # exp_avg = 0, so v = (1 - beta1) g
                else:
                    ms.append(m)
                    gs.append(g)
            scale = 1.0 if group["normgrad"] else (1.0 - beta1) ** 2
            part = _sq_norm(fresh)
            if part is not None:
                total = total + scale * part.cpu()
            if ms:
                total = total + _velocity_sq_norm(ms, gs, beta1)
        return float(total)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One VRAdam step: compute the gate of Eq. (5), then run AdamW's own step with it."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        sq_norm = self.velocity_sq_norm()
        alphas = [group["lr"] for group in self.param_groups]
        ratios = [gate(sq_norm, group["beta3"], group["lr_cutoff"]) for group in self.param_groups]
        try:
            for group, alpha0, ratio in zip(self.param_groups, alphas, ratios, strict=True):
                group["lr"] = alpha0 * ratio
            _adamw_step(self)
        finally:
            for group, alpha0 in zip(self.param_groups, alphas, strict=True):
                group["lr"] = alpha0
        self.last_sq_norm = sq_norm
        self.last_lr_ratios = ratios
        self.last_lr_ratio = ratios[0]
        return loss


def _adamw_step(opt: torch.optim.AdamW) -> None:
    """Call ``torch.optim.AdamW.step`` without firing the optimizer step hooks a second time.

    ``torch.optim.Optimizer`` wraps each class's ``step`` once with a hook runner; VRAdam's own
    ``step`` is wrapped already, so the inner AdamW call goes to the unwrapped function.
    """
    step = torch.optim.AdamW.step
    if getattr(step, "hooked", False):
        step = step.__wrapped__  # type: ignore[attr-defined]
    step(opt)


class VRMomentum(torch.optim.Optimizer):
    r"""Velocity-regularized EMA momentum, Eq. (7): the variant analysed by Theorem 4.1.

        v_t = beta v_{t-1} + (1 - beta) g_t,
        eta_t = lr / (1 + min(beta3 * sum ||v_t||^2, lr_cutoff)),
        theta_t = theta_{t-1} (1 - eta_t weight_decay) - eta_t v_t.

    With ``lr_cutoff = inf`` every step obeys ``||theta_t - theta_{t-1}|| <= lr / (2 sqrt(beta3))``
    (without weight decay), Eq. (9). ``beta3 = 0`` is plain EMA momentum.

    Attributes:
        last_sq_norm, last_lr_ratio, last_lr_ratios: as for :class:`VRAdam`.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-2,
        beta: float = 0.9,
        beta3: float = 1.0,
        lr_cutoff: float = 19.0,
        weight_decay: float = 0.0,
    ) -> None:
        _check_common(lr, beta3, lr_cutoff, weight_decay)
        check_range("beta", beta, 0, 1, high_open=True)
        defaults = {"lr": float(lr), "beta": float(beta), "beta3": float(beta3),
                    "lr_cutoff": float(lr_cutoff), "weight_decay": float(weight_decay)}
        super().__init__(params, defaults)
        self.last_sq_norm: float = math.nan
        self.last_lr_ratio: float = 1.0
        self.last_lr_ratios: list[float] = [1.0] * len(self.param_groups)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One VRMomentum step, Eq. (7)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        work: list[tuple[list[torch.Tensor], list[torch.Tensor]]] = []
        total = torch.zeros((), dtype=torch.float64)
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                work.append(([], []))
                continue
            bufs = []
            for p in params:
                state = self.state[p]
                if "velocity" not in state:
                    state["velocity"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                bufs.append(state["velocity"])
            torch._foreach_lerp_(bufs, [p.grad for p in params], 1.0 - group["beta"])
            part = _sq_norm(bufs)
            assert part is not None  # params is non-empty, so bufs is too
            total = total + part.cpu()
            work.append((params, bufs))
        sq_norm = float(total)
        ratios = []
        for group, (params, bufs) in zip(self.param_groups, work, strict=True):
            ratio = gate(sq_norm, group["beta3"], group["lr_cutoff"])
            ratios.append(ratio)
            if not params:
                continue
            eta = group["lr"] * ratio
            if group["weight_decay"]:
                torch._foreach_mul_(params, 1.0 - eta * group["weight_decay"])
            torch._foreach_add_(params, bufs, alpha=-eta)
        self.last_sq_norm = sq_norm
        self.last_lr_ratios = ratios
        self.last_lr_ratio = ratios[0]
        return loss

