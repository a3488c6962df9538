"""The MT-DAO optimizer (Iacob et al., ICLR 2026) and its exact communication cost.

The chapter is ``book/distributed/mtdao.md``; equations are cited by their label there.

* :class:`MTDAO`: MT-DAO-Adam. Each worker keeps ``N`` first moments ``u^j``, each an exponential
  moving average of the gradient with its own ``beta_j``, and one second moment ``v``; its update
  divides a *convex mix* of the fresh gradient and the bias-corrected first moments by Adam's
  denominator (``mtdao-eq-update``). The parameters, each first moment and the second moment are
  averaged across the workers on their own periods ``(Kx, K_1, ..., K_N, Kv)``
  (``mtdao-eq-sync``), through a :class:`~iclr_lab.core.collective.Collective`, so the same
  optimizer runs on the thread simulator and on ``torch.distributed``. Special cases:

  * ``weights=(1.0,)`` with ``N = 1`` is Local Adam (all periods equal) or DES-LOC (periods
    differ); without a collective it is :class:`torch.optim.Adam` (up to rounding);
  * ``weights=(omega,)`` with ``N = 1`` and no collective is QHAdam with ``nu1 = omega``,
    ``nu2 = 1`` (``mtdao-eq-qh``);
  * all periods ``math.inf`` on replicas whose gradients are averaged first is QH-DDP.

* :func:`units_per_step` and :func:`communication_cost`: model-sized all-reduces per step,
  ``1/Kx + sum_j 1/K_j + 1/Kv`` (``mtdao-eq-cost``), and the bytes and rounds of a run, per tensor
  kind; the collective's own counters agree with them to the byte.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from iclr_lab.core.collective import Collective, CommCounts
from iclr_lab.core.validation import check_int, check_range
from iclr_lab.distributed.local_sync import LocalSync, _due, check_period

__all__ = ["MTDAO", "check_sync_periods", "communication_cost", "units_per_step"]

#: The chapter's configuration, fixed before any run: one slow momentum (``beta = 0.995``, a
#: half-life of 138 steps) with weight ``omega = 0.9``, and Adam's ``beta2 = 0.999``.
DEFAULT_BETAS: tuple[float, ...] = (0.995, 0.999)
DEFAULT_WEIGHTS: tuple[float, ...] = (0.9,)
#: Every state averaged every 32 steps, the paper's practical recipe (with ``sync_periods=None``,
#: this period for the parameters, each first moment and the second moment).
DEFAULT_PERIOD = 32

_OWN_KEYS = ("betas", "weights", "eps", "weight_decay", "sync_periods", "maximize")


# ---------------------------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------------------------

def _as_tuple(name: str, value: Any, what: str) -> tuple[Any, ...]:
    if isinstance(value, str | bytes):
        raise TypeError(f"{name} must be a sequence of {what}, got {value!r}")
    try:
        return tuple(value)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of {what}, got {value!r}") from None


def _check_betas(betas: Any) -> tuple[float, ...]:
    """``(beta_1, ..., beta_N, beta2)``: at least two numbers, each in [0, 1)."""
    values = _as_tuple("betas", betas, "numbers in [0, 1)")
    if len(values) < 2:
        raise ValueError(f"betas must be (beta_1, ..., beta_N, beta2) with N >= 1 first moments, "
                         f"got {betas!r}")
    return tuple(check_range(f"betas[{i}]", b, 0, 1, high_open=True) for i, b in enumerate(values))


def _check_weights(weights: Any) -> tuple[float, ...]:
    """``(omega_1, ..., omega_N)``: each in [0, 1], summing to at most 1 (``mtdao-eq-update``)."""
    values = _as_tuple("weights", weights, "numbers in [0, 1]")
    if not values:
        raise ValueError("weights must hold one weight per first moment (at least one), got ()")
    out = tuple(check_range(f"weights[{i}]", w, 0, 1) for i, w in enumerate(values))
    if sum(out) > 1 + 1e-12:
        raise ValueError(f"weights must sum to at most 1 (the fresh gradient gets 1 - sum), got "
                         f"{weights!r} with sum {sum(out):.6g}")
    return out


def check_sync_periods(periods: Any, n_moments: int | None = None) -> tuple[float, ...]:
    """``(Kx, K_1, ..., K_N, Kv)``, each an integer >= 1 or ``math.inf`` (never), or an error
    naming the entry. With ``n_moments`` (an integer >= 1, or ``None``) the length must be
    ``n_moments + 2``."""
    if n_moments is not None:
        n_moments = check_int("n_moments", n_moments, 1)
    values = _as_tuple("sync_periods", periods, "integers >= 1 or math.inf")
    if len(values) < 3:
        raise ValueError(f"sync_periods must be (Kx, K_1, ..., K_N, Kv) with N >= 1, got {periods!r}")
    if n_moments is not None and len(values) != n_moments + 2:
        raise ValueError(f"sync_periods must hold {n_moments + 2} periods (Kx, one per first moment, "
                         f"Kv) for {n_moments} first moment(s), got {periods!r}")
    names = ["Kx", *(f"K_{j + 1}" for j in range(len(values) - 2)), "Kv"]
    return tuple(check_period(f"sync_periods[{i}] ({n})", v)
                 for i, (n, v) in enumerate(zip(names, values, strict=True)))


def _check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return value


def _nonnegative(name: str) -> Callable[[Any], float]:
    return lambda value: check_range(name, value, 0, math.inf, high_open=True)


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "lr": _nonnegative("lr"),
    "betas": _check_betas,
    "weights": _check_weights,
    "eps": _nonnegative("eps"),
    "weight_decay": _nonnegative("weight_decay"),
    "sync_periods": check_sync_periods,
    "maximize": lambda v: _check_flag("maximize", v),
}


def _check_group(group: dict[str, Any]) -> None:
    """Check (and normalise to tuples) a group's options, and that their lengths agree."""
    for key, check in _CHECKS.items():
        if key in group:
            value = check(group[key])
            if key in ("betas", "weights", "sync_periods"):
                group[key] = value
    if "betas" in group and "weights" in group:
        n = len(group["weights"])
        if len(group["betas"]) != n + 1:
            raise ValueError(f"betas must hold one beta per first moment plus beta2 "
                             f"(len(weights) + 1 = {n + 1} values), got {len(group['betas'])}: "
                             f"betas={group['betas']!r}, weights={group['weights']!r}")
        if "sync_periods" in group:
            check_sync_periods(group["sync_periods"], n)


def _moment_key(j: int) -> str:
    """State key of the ``j``-th first moment (0-based): ``exp_avg`` as in Adam, then ``exp_avg_2``."""
    return "exp_avg" if j == 0 else f"exp_avg_{j + 1}"


def _real(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t) if t.is_complex() else t


# ---------------------------------------------------------------------------------------------
# MT-DAO
# ---------------------------------------------------------------------------------------------

class MTDAO(LocalSync, torch.optim.Optimizer):
    r"""MT-DAO-Adam: several first moments on different time-scales, mixed with the gradient, with
    each state averaged across the workers on its own period.

    Each call of :meth:`step` updates, per parameter and with this worker's gradient ``g``
    (``mtdao-eq-moments``, ``mtdao-eq-update``)::

        u^j <- beta_j u^j + (1 - beta_j) g             for j = 1..N
        v   <- beta2 v + (1 - beta2) g^2
        x   <- x (1 - lr wd) - lr [(1 - sum_j w_j) g + sum_j w_j u^j / (1 - beta_j^t)]
                                   / (sqrt(v / (1 - beta2^t)) + eps)

    then counts the step in :attr:`local_steps` ``= t`` and replaces by their average over the
    workers (``mtdao-eq-sync``) the parameters when ``t`` is a multiple of ``Kx``, the ``j``-th
    first moment when ``t`` is a multiple of ``K_j``, and ``v`` when ``t`` is a multiple of ``Kv``
    (a period of ``math.inf`` means never). The step count ``t`` of the bias corrections is the
    local step count of each parameter, as in :class:`torch.optim.Adam`; it is the same on every
    worker and never averaged. Without a ``comm`` (a world of one) nothing is sent.

    Averaging happens after the local step, as in the authors' DES-LOC code and in
    :class:`~iclr_lab.distributed.desloc.DESLOC`, so that ``weights=(1.0,)`` with equal periods
    is exactly Local Adam. Every worker must call :meth:`step` the same number of times: the
    averages are collective calls.

    Args:
        params: parameters or param groups, as for any ``torch.optim`` optimizer.
        lr: learning rate (>= 0).
        betas: ``(beta_1, ..., beta_N, beta2)``: one EMA coefficient per first moment, then the
            second moment's; each in [0, 1). The default ``(0.995, 0.999)`` is one slow momentum.
        weights: ``(omega_1, ..., omega_N)``, one per first moment, each in [0, 1] with sum <= 1;
            the fresh gradient gets ``1 - sum``. ``(1.0,)`` is Adam's update.
        eps: Adam's epsilon (>= 0).
        weight_decay: decoupled weight decay (>= 0), as in AdamW and the authors' QHAdamW.
        sync_periods: ``(Kx, K_1, ..., K_N, Kv)``, each an integer >= 1 or ``math.inf``; ``None``
            (the default) averages every state every 32 steps.
        comm: this worker's :class:`~iclr_lab.core.collective.Collective`, or ``None``.
        maximize: maximise the objective.

    Attributes:
        local_steps: calls of :meth:`step` so far; the sync schedule reads it. It is saved in the
            state dict and kept by copies.
        comm: the collective the averages go through (``None``: a world of one). Copies and
            unpickled optimizers have none: attach one with ``opt.comm = comm``.
    """

    local_steps: int

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: Sequence[float] = DEFAULT_BETAS,
        weights: Sequence[float] = DEFAULT_WEIGHTS,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        sync_periods: Sequence[float] | None = None,
        comm: Collective | None = None,
        maximize: bool = False,
    ) -> None:
        if sync_periods is None:  # every state on the default period, whatever N
            sync_periods = (DEFAULT_PERIOD,) * (len(_check_weights(weights)) + 2)
        defaults: dict[str, Any] = {"lr": lr, "betas": betas, "weights": weights, "eps": eps,
                                    "weight_decay": weight_decay, "sync_periods": sync_periods,
                                    "maximize": maximize}
        _check_group(defaults)
        super().__init__(params, defaults)
        self._init_local_sync(comm)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a param group (as :meth:`torch.optim.Optimizer.add_param_group`), checking its
        options; a group may have its own ``betas``, ``weights`` and ``sync_periods``."""
        if isinstance(param_group, dict):
            param_group = dict(param_group)
            merged = {**{k: self.defaults[k] for k in _OWN_KEYS if k in self.defaults}, **param_group}
            _check_group(merged)
            for key in ("lr", *_OWN_KEYS):
                if key in param_group:
                    param_group[key] = merged[key]
        super().add_param_group(param_group)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:  # options missing from an older state dict: our defaults
            for key in _OWN_KEYS:
                group.setdefault(key, self.defaults[key])

    @torch.no_grad()
    def _update_group(self, group: dict[str, Any]) -> None:
        betas, weights = group["betas"], group["weights"]
        beta2, lr, eps, wd = betas[-1], group["lr"], group["eps"], group["weight_decay"]
        grad_weight = 1 - sum(weights)
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("MTDAO does not support sparse gradients")
            state = self.state[p]
            if not state:
                state["step"] = 0.0
                for j in range(len(weights)):
                    state[_moment_key(j)] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            # the local step count of the bias corrections (a tensor in a state dict from Adam)
            t = state["step"] = float(state["step"]) + 1
            grad = _real(-p.grad if group["maximize"] else p.grad)
            param, v = _real(p), _real(state["exp_avg_sq"])
            # mtdao-eq-moments: every EMA takes this worker's gradient
            moments = [_real(state[_moment_key(j)]) for j in range(len(weights))]
            for u, beta in zip(moments, betas, strict=False):
                u.lerp_(grad, 1 - beta)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            if wd != 0:  # decoupled, as in AdamW
                param.mul_(1 - lr * wd)
            # mtdao-eq-update: a convex mix of the gradient and the bias-corrected moments
            denom = (v.sqrt() / math.sqrt(1 - beta2**t)).add_(eps)
            mix = grad * grad_weight if grad_weight > 0 else torch.zeros_like(param)
            for u, beta, omega in zip(moments, betas, weights, strict=False):
                if omega != 0:
                    mix.add_(u, alpha=omega / (1 - beta**t))
            param.addcdiv_(mix, denom, value=-lr)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One MT-DAO step: the local update, then the averages that are due
        (``mtdao-eq-update``, ``mtdao-eq-sync``). Returns the closure's loss, if any."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._update_group(group)
        self.local_steps += 1
        t = self.local_steps
        if any(_due(t, k) for group in self.param_groups for k in group["sync_periods"]):
            self.synchronise(t)
        return loss

    @torch.no_grad()
    def synchronise(self, step: int) -> list[str]:
        """Average what is due at local step ``step`` and return what was averaged
        ("parameters", "first_moment", "second_moment"), in that order.

        :meth:`step` calls this; call it yourself only to run the schedule by hand (``step``: an
        integer >= 0).
        """
        step = check_int("step", step, 0)
        done: list[str] = []
        for group in self.param_groups:
            periods = group["sync_periods"]
            params = list(group["params"])
            if _due(step, periods[0]):
                self._average(params, "parameters")
                done.append("parameters")
            keys = [(_moment_key(j), k, "first_moment") for j, k in enumerate(periods[1:-1])]
            for key, period, kind in [*keys, ("exp_avg_sq", periods[-1], "second_moment")]:
                if not _due(step, period):
                    continue
                tensors = [self.state[p][key] for p in params if key in self.state.get(p, {})]
                if tensors:
                    self._average(tensors, kind)
                    done.append(kind)
        return list(dict.fromkeys(done))


# ---------------------------------------------------------------------------------------------
# communication, counted exactly
# ---------------------------------------------------------------------------------------------

def units_per_step(sync_periods: Sequence[float]) -> float:
    """Model-sized all-reduces per step, ``1/Kx + sum_j 1/K_j + 1/Kv`` (``mtdao-eq-cost``).

    DDP (a gradient every step) costs 1; MT-DAO with one first moment and every period ``K``
    costs ``3/K``, and each extra first moment synchronised every ``K`` steps adds ``1/K``; a
    period of ``math.inf`` costs nothing. Each period is an integer >= 1 or ``math.inf``.
    """
    return sum(0.0 if k == math.inf else 1.0 / k for k in check_sync_periods(sync_periods))


def communication_cost(sync_periods: Sequence[float], steps: int, model_bytes: int = 1) -> CommCounts:
    """What ``steps`` MT-DAO steps send, per tensor kind and exactly (``mtdao-eq-cost``).

    A state with period ``K`` is averaged ``floor(steps / K)`` times, each time one model-sized
    payload of ``model_bytes`` bytes; the first moments share the kind ``first_moment``, one round
    each. The counters of :class:`~iclr_lab.core.collective.Collective` agree with this.

    Args:
        sync_periods: ``(Kx, K_1, ..., K_N, Kv)``, integers >= 1 or ``math.inf``.
        steps: number of local steps (>= 0).
        model_bytes: payload of one model-sized all-reduce, in bytes (>= 0).
    """
    periods = check_sync_periods(sync_periods)
    steps = check_int("steps", steps, 0)
    model_bytes = check_int("model_bytes", model_bytes, 0)

    def rounds(k: float) -> int:
        return 0 if k == math.inf else steps // int(k)

    counted = {"parameters": rounds(periods[0]),
               "first_moment": sum(rounds(k) for k in periods[1:-1]),
               "second_moment": rounds(periods[-1])}
    return CommCounts({k: n * model_bytes for k, n in counted.items()}, counted)
