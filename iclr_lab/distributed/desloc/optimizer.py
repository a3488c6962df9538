"""The DES-LOC optimizer (Iacob et al., ICLR 2026) and its exact communication cost.

The chapter is ``book/distributed/desloc.md``; equations are cited by their label there.

* :class:`DESLOC`: Adam run locally on each worker, whose parameters, first moment and second
  moment are each averaged across the workers on their own period ``(Kx, Ku, Kv)``
  (``desloc-eq-adam``, ``desloc-eq-sync``). It subclasses :class:`torch.optim.Adam`: each step is
  PyTorch's Adam step on the local state, then the averages that are due. The averages go through
  a :class:`~iclr_lab.core.collective.Collective`, so the same optimizer runs on the thread
  simulator and on ``torch.distributed``. The baselines are settings of the same class:

  * Local Adam: ``sync_periods=(K, K, K)``;
  * keep the states local (``FAVG+OPT``): ``sync_periods=(K, inf, inf)``;
  * reset the states at every average: ``sync_periods=(K, inf, inf), reset_states=True``;
  * DDP: ``sync_periods=(inf, inf, inf)`` on identical replicas whose gradients are averaged
    before each step (done by the training loop, :func:`~iclr_lab.distributed.desloc.training.train_worker`).

* :func:`communication_cost`: the bytes and rounds a run of ``steps`` steps sends, per tensor kind
  (``desloc-eq-cost``); the collective's own counters must agree with it exactly.
* :func:`units_per_step`: model-sized all-reduces per step, ``1/Kx + 1/Ku + 1/Kv``.
* :func:`half_life`: ``ln 0.5 / ln beta`` (``desloc-eq-halflife``), the paper's rule for periods.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from iclr_lab.core.collective import Collective, CommCounts
from iclr_lab.core.validation import check_int, check_range
from iclr_lab.distributed.local_sync import LocalSync, _due, check_period

__all__ = ["DESLOC", "communication_cost", "half_life", "sync_events", "units_per_step"]

#: The paper's recommended ratios ``Ku = 3 Kx`` and ``Kv = 6 Kx``, here with ``Kx = 16``.
DEFAULT_PERIODS: tuple[float, float, float] = (16, 48, 96)
#: defaults of the keys DES-LOC adds to Adam's, also used for state dicts and pickles without them.
_DESLOC_KEYS: dict[str, Any] = {"sync_periods": DEFAULT_PERIODS, "clip": math.inf,
                                "reset_states": False}
_STATE_KIND = {"exp_avg": "first_moment", "exp_avg_sq": "second_moment",
               "max_exp_avg_sq": "second_moment"}


# ---------------------------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------------------------


def check_periods(periods: Any) -> tuple[float, float, float]:
    """``(Kx, Ku, Kv)``, each an integer >= 1 or ``math.inf``, or an error naming the entry."""
    try:
        triple = tuple(periods)
    except TypeError:
        raise TypeError(f"sync_periods must be a triple (Kx, Ku, Kv), got {periods!r}") from None
    if len(triple) != 3:
        raise ValueError(f"sync_periods must be a triple (Kx, Ku, Kv), got {periods!r}")
    return (check_period("sync_periods[0] (Kx)", triple[0]),
            check_period("sync_periods[1] (Ku)", triple[1]),
            check_period("sync_periods[2] (Kv)", triple[2]))


def _check_flag(name: str, value: Any, *, allow_none: bool = False) -> bool | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, bool):
        allowed = "True, False or None" if allow_none else "True or False"
        raise TypeError(f"{name} must be {allowed}, got {type(value).__name__} {value!r}")
    return value


def _check_betas(betas: Any) -> tuple[float, float]:
    try:
        pair = tuple(betas)
    except TypeError:
        raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}") from None
    if len(pair) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
    return (check_range("betas[0]", pair[0], 0, 1, high_open=True),
            check_range("betas[1]", pair[1], 0, 1, high_open=True))


def _nonnegative(name: str) -> Callable[[Any], float]:
    return lambda value: check_range(name, value, 0, math.inf, high_open=True)


_GROUP_CHECKS: dict[str, Callable[[Any], Any]] = {
    "lr": _nonnegative("lr"),
    "betas": _check_betas,
    "eps": _nonnegative("eps"),
    "weight_decay": _nonnegative("weight_decay"),
    "amsgrad": lambda v: _check_flag("amsgrad", v),
    "maximize": lambda v: _check_flag("maximize", v),
    "foreach": lambda v: _check_flag("foreach", v, allow_none=True),
    "fused": lambda v: _check_flag("fused", v, allow_none=True),
    "sync_periods": check_periods,
    "clip": lambda v: check_range("clip", v, 0, math.inf, low_open=True, high_open=False),
    "reset_states": lambda v: _check_flag("reset_states", v),
}


def _adam_step(opt: torch.optim.Adam) -> None:
    """Call ``torch.optim.Adam.step`` without firing the optimizer step hooks a second time.

    ``torch.optim.Optimizer`` wraps each class's ``step`` once with a hook runner; DES-LOC's own
    ``step`` is wrapped already, so the inner Adam call goes to the unwrapped function.
    """
    step = torch.optim.Adam.step
    if getattr(step, "hooked", False):
        step = step.__wrapped__  # type: ignore[attr-defined]
    step(opt)


# ---------------------------------------------------------------------------------------------
# DES-LOC
# ---------------------------------------------------------------------------------------------

class DESLOC(LocalSync, torch.optim.Adam):
    r"""DES-LOC-Adam: local Adam whose parameters and two moments sync on separate periods.

    Each call of :meth:`step` takes one Adam step on this worker's state (``desloc-eq-adam``, with
    the gradient first clipped to ``[-clip, clip]`` per coordinate), counts it in
    :attr:`local_steps` ``= t``, and then replaces by their average over the workers
    (``desloc-eq-sync``):

    * the parameters when ``t`` is a multiple of ``Kx``;
    * the first moment ``exp_avg`` when ``t`` is a multiple of ``Ku``;
    * the second moment ``exp_avg_sq`` (and AMSGrad's ``max_exp_avg_sq``) when ``t`` is a
      multiple of ``Kv``.

    A period of ``math.inf`` means never. With ``reset_states=True`` the moments and Adam's step
    count are set to zero after each parameter average instead (the reset heuristic). Without a
    ``comm`` (a world of one worker) nothing is sent: DES-LOC is then Adam with clipping, and with
    ``clip=inf`` and ``reset_states=False`` it *is* :class:`torch.optim.Adam`, bit for bit.

    Averaging happens after the local step, as in the authors' implementation (a step hook that
    counts local steps per synchronised tensor); the paper's equations average a state just before
    it is next used, which is the same schedule shifted by one gradient (see the chapter's
    "Implementation choice" box). Every worker must call :meth:`step` the same number of times:
    the averages are collective calls. Adam's step count is never averaged (it is the same on every
    worker), and bias correction uses it as :class:`torch.optim.Adam` does.

    Args:
        params: parameters or param groups, as for any ``torch.optim`` optimizer.
        lr: learning rate (>= 0).
        betas: ``(beta1, beta2)``, each in [0, 1).
        eps: Adam's epsilon (>= 0).
        weight_decay: Adam's (coupled, L2) weight decay (>= 0).
        amsgrad: Adam's AMSGrad variant; its running maximum is averaged with the second moment.
        sync_periods: ``(Kx, Ku, Kv)``, each an integer >= 1 or ``math.inf``. The default
            ``(16, 48, 96)`` follows the paper's rule ``Ku = 3 Kx``, ``Kv = 6 Kx``.
        comm: this worker's :class:`~iclr_lab.core.collective.Collective`, or ``None`` (one
            worker; no communication).
        clip: per-coordinate gradient clipping radius ``rho`` (> 0; ``inf`` switches it off). The
            paper's analysis clips; the gradient in ``.grad`` is clipped in place.
        reset_states: zero the moments and the step count after each parameter average (the
            reset heuristic) instead of averaging them on ``Ku``, ``Kv``.
        maximize: maximise the objective, as in Adam.
        foreach: as in Adam.
        fused: as in Adam (the fastest step on CPU for small models).

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
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        sync_periods: Sequence[float] = DEFAULT_PERIODS,
        comm: Collective | None = None,
        clip: float = math.inf,
        reset_states: bool = False,
        maximize: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        lr = check_range("lr", lr, 0, math.inf, high_open=True)
        b1, b2 = _check_betas(betas)
        eps = check_range("eps", eps, 0, math.inf, high_open=True)
        weight_decay = check_range("weight_decay", weight_decay, 0, math.inf, high_open=True)
        for name, flag in (("amsgrad", amsgrad), ("maximize", maximize), ("reset_states", reset_states)):
            _check_flag(name, flag)
        _check_flag("foreach", foreach, allow_none=True)
        _check_flag("fused", fused, allow_none=True)
        if foreach and fused:
            raise ValueError("foreach and fused cannot both be True")
        own = {"sync_periods": check_periods(sync_periods),
               "clip": check_range("clip", clip, 0, math.inf, low_open=True, high_open=False),
               "reset_states": reset_states}
        self._desloc_defaults = own  # read by add_param_group while Optimizer.__init__ adds groups
        super().__init__(params, lr=lr, betas=(b1, b2), eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, foreach=foreach, fused=fused)
        self.defaults.update(self.__dict__.pop("_desloc_defaults"))
        # Clipping reads the gradients, so a GradScaler must unscale them before step().
        self._step_supports_amp_scaling = False
        self._init_local_sync(comm)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a param group (as :meth:`torch.optim.Optimizer.add_param_group`), checking its
        options; a group may have its own ``sync_periods``, ``clip`` and ``reset_states``."""
        if isinstance(param_group, dict):
            for key, check in _GROUP_CHECKS.items():
                if key in param_group:
                    value = check(param_group[key])
                    if key == "sync_periods":  # stored as a checked tuple
                        param_group[key] = value
            own = self.__dict__.get("_desloc_defaults") or {k: self.defaults[k] for k in _DESLOC_KEYS}
            for key, value in own.items():
                param_group.setdefault(key, value)
        super().add_param_group(param_group)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        own = {key: self.defaults.setdefault(key, default) for key, default in _DESLOC_KEYS.items()}
        for group in self.param_groups:
            for key, value in own.items():
                group.setdefault(key, value)

    @torch.no_grad()
    def _clip(self) -> None:
        for group in self.param_groups:
            rho = group["clip"]
            if rho == math.inf:
                continue
            grads = [torch.view_as_real(p.grad) if p.grad.is_complex() else p.grad
                     for p in group["params"] if p.grad is not None]
            if grads:
                torch._foreach_clamp_min_(grads, -rho)
                torch._foreach_clamp_max_(grads, rho)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One DES-LOC step: clip, take Adam's step, count it, then average what is due
        (``desloc-eq-adam``, ``desloc-eq-sync``). Returns the closure's loss, if any."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if any(group["clip"] != math.inf for group in self.param_groups):
            self._clip()
        _adam_step(self)
        self.local_steps += 1
        t = self.local_steps
        if any(_due(t, k) for group in self.param_groups for k in group["sync_periods"]):
            self.synchronise(t)
        return loss

    @torch.no_grad()
    def synchronise(self, step: int) -> list[str]:
        """Average (or reset) what is due at local step ``step`` and return what was synchronised
        ("parameters", "first_moment", "second_moment", "reset").

        :meth:`step` calls this; call it yourself only to run the schedule by hand (``step``: an
        integer >= 0).
        """
        step = check_int("step", step, 0)
        done: list[str] = []
        for group in self.param_groups:
            kx, ku, kv = group["sync_periods"]
            params = list(group["params"])
            if _due(step, kx):
                self._average(params, "parameters")
                done.append("parameters")
                if group["reset_states"]:
                    self._reset(params)
                    done.append("reset")
            for key, period in (("exp_avg", ku), ("exp_avg_sq", kv), ("max_exp_avg_sq", kv)):
                if not _due(step, period):
                    continue
                tensors = [self.state[p][key] for p in params if key in self.state.get(p, {})]
                if tensors:
                    self._average(tensors, _STATE_KIND[key])
                    done.append(_STATE_KIND[key])
        return list(dict.fromkeys(done))

    def _reset(self, params: list[torch.Tensor]) -> None:
        for p in params:
            state = self.state.get(p)
            if not state:
                continue
            for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
                if key in state:
                    state[key].zero_()
            if isinstance(state.get("step"), torch.Tensor):
                state["step"].zero_()
            elif "step" in state:
                state["step"] = 0


# ---------------------------------------------------------------------------------------------
# communication, counted exactly
# ---------------------------------------------------------------------------------------------

def units_per_step(sync_periods: Sequence[float]) -> float:
    """Model-sized all-reduces per step, ``1/Kx + 1/Ku + 1/Kv`` (``desloc-eq-cost``).

    DDP (a gradient every step) costs 1; Local Adam at period ``K`` costs ``3/K``; a period of
    ``math.inf`` costs nothing. Each period is an integer >= 1 or ``math.inf``.
    """
    return sum(0.0 if k == math.inf else 1.0 / k for k in check_periods(sync_periods))


def communication_cost(sync_periods: Sequence[float], steps: int, model_bytes: int = 1, *,
                       ddp: bool = False) -> CommCounts:
    """What ``steps`` DES-LOC steps send, per tensor kind, exactly (``desloc-eq-cost``).

    A state with period ``K`` is averaged ``floor(steps / K)`` times, each time one model-sized
    payload (``model_bytes``, the bytes of the parameters; Adam's moments have the same size).
    With ``ddp=True`` the gradients are averaged at every step as well. The counters of
    :class:`~iclr_lab.core.collective.Collective` must agree with this to the byte.

    Args:
        sync_periods: ``(Kx, Ku, Kv)``, integers >= 1 or ``math.inf``.
        steps: number of local steps (>= 0).
        model_bytes: payload of one model-sized all-reduce, in bytes (>= 0).
        ddp: add one gradient all-reduce per step.
    """
    kx, ku, kv = check_periods(sync_periods)
    steps = check_int("steps", steps, 0)
    model_bytes = check_int("model_bytes", model_bytes, 0)
    rounds = {kind: 0 if k == math.inf else steps // int(k)
              for kind, k in (("parameters", kx), ("first_moment", ku), ("second_moment", kv))}
    if _check_flag("ddp", ddp):
        rounds["gradients"] = steps
    return CommCounts({k: n * model_bytes for k, n in rounds.items()}, rounds)


def sync_events(sync_periods: Sequence[float], steps: int) -> list[tuple[int, str]]:
    """``(step, kind)`` for every average a run of ``steps`` steps performs, in order.
    ``sync_periods``: ``(Kx, Ku, Kv)``, integers >= 1 or ``math.inf``; ``steps``: an integer >= 0."""
    kx, ku, kv = check_periods(sync_periods)
    steps = check_int("steps", steps, 0)
    return [(t, kind) for t in range(1, steps + 1)
            for kind, k in (("parameters", kx), ("first_moment", ku), ("second_moment", kv))
            if _due(t, k)]


def half_life(beta: float) -> float:
    """Steps for an exponential moving average to forget half of its past:
    ``ln 0.5 / ln beta`` (``desloc-eq-halflife``); 0 for ``beta = 0``. ``beta`` is in [0, 1)."""
    beta = check_range("beta", beta, 0, 1, high_open=True)
    return 0.0 if beta == 0 else math.log(0.5) / math.log(beta)
