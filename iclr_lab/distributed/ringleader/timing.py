"""How long each worker takes to compute one stochastic gradient: the time models of the simulator.

A time model answers one question, :meth:`TimeModel.finish`: a worker that starts a gradient at
time ``start`` delivers it when? It never depends on the model being trained, so one schedule of
arrivals serves every step size of a batch (``ringleader-eq-time``). Five models:

* :class:`FixedTimes`: worker ``i`` always takes ``tau_i`` seconds (the fixed computation model of
  the paper; ``fixed_times`` builds ``tau_i = i^p``, the stragglers case being ``p = 2``);
* :class:`AuthorsTimes`: the authors' experiments, ``tau_i`` a random permutation of ``1..n``
  plus half-normal noise ``|N(0, i)|`` for the ``i``-th worker (1-based);
* :class:`ExponentialTimes`: exponential durations of mean ``tau_i``;
* :class:`TimeVaryingTimes`: a computing power ``v_i(t) = (1 + a sin(2 pi t / P + phi_i)) / tau_i``;
  a gradient started at ``t0`` is ready at the first ``t`` with ``int_{t0}^t v_i = 1`` (the
  universal computation model);
* :class:`OutageTimes`: fixed times, except that some workers compute nothing during a window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from iclr_lab.core.validation import check_choice, check_int, check_range, check_seed

__all__ = ["TIME_MODELS", "AuthorsTimes", "ExponentialTimes", "FixedTimes", "OutageTimes",
           "TimeModel", "TimeVaryingTimes", "authors_times", "fixed_times", "make_time_model"]

#: The names :func:`make_time_model` accepts.
TIME_MODELS = ("fixed", "authors", "exponential", "time-varying", "outage")


@runtime_checkable
class TimeModel(Protocol):
    """What the simulator needs from a time model."""

    @property
    def n(self) -> int:
        """Number of workers."""
        ...

    def finish(self, worker: int, start: float, rng: np.random.Generator) -> float:
        """When a gradient that ``worker`` starts at time ``start`` is ready (``> start``)."""
        ...

    def rate(self, worker: int) -> float:
        """Gradients per second that ``worker`` delivers in the long run when never interrupted."""
        ...


def _taus(name: str, tau: Sequence[float]) -> tuple[float, ...]:
    values = tuple(check_range(f"{name}[{i}]", t, 0.0, math.inf, low_open=True)
                   for i, t in enumerate(tau))
    if not values:
        raise ValueError(f"{name} must hold one time per worker, got none")
    return values


@dataclass(frozen=True)
class FixedTimes:
    """Worker ``i`` needs exactly ``tau[i]`` seconds per gradient (``tau[i] > 0``)."""

    tau: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "tau", _taus("tau", self.tau))

    @property
    def n(self) -> int:
        return len(self.tau)

    def finish(self, worker: int, start: float, rng: np.random.Generator) -> float:
        return start + self.tau[worker]

    def rate(self, worker: int) -> float:
        return 1.0 / self.tau[worker]


@dataclass(frozen=True)
class AuthorsTimes:
    """``tau[i]`` plus half-normal noise ``|N(0, scale[i]^2)|``, drawn afresh for every gradient.

    The authors' experiments use ``tau`` = a random permutation of ``1..n`` and
    ``scale[i] = sqrt(i + 1)`` (see :func:`authors_times`).
    """

    tau: tuple[float, ...]
    scale: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "tau", _taus("tau", self.tau))
        scale = tuple(check_range(f"scale[{i}]", s, 0.0) for i, s in enumerate(self.scale))
        if len(scale) != len(self.tau):
            raise ValueError(f"scale must have one entry per worker ({len(self.tau)}), got {len(scale)}")
        object.__setattr__(self, "scale", scale)

    @property
    def n(self) -> int:
        return len(self.tau)

    def finish(self, worker: int, start: float, rng: np.random.Generator) -> float:
        return start + self.tau[worker] + abs(self.scale[worker] * float(rng.standard_normal()))

    def rate(self, worker: int) -> float:
        # a renewal process: the long-run rate is 1 / E[duration], and E|N(0, s^2)| = s sqrt(2/pi)
        return 1.0 / (self.tau[worker] + self.scale[worker] * math.sqrt(2.0 / math.pi))


@dataclass(frozen=True)
class ExponentialTimes:
    """Exponential durations with mean ``tau[i]`` (memoryless: a fast worker is sometimes slow)."""

    tau: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "tau", _taus("tau", self.tau))

    @property
    def n(self) -> int:
        return len(self.tau)

    def finish(self, worker: int, start: float, rng: np.random.Generator) -> float:
        # a zero duration would put two events at one instant for no reason; it has probability 0
        return start + max(float(rng.exponential(self.tau[worker])), 1e-12)

    def rate(self, worker: int) -> float:
        return 1.0 / self.tau[worker]


@dataclass(frozen=True)
class TimeVaryingTimes:
    """Computing power ``v_i(t) = (1 + amplitude sin(2 pi t / period + phase[i])) / tau[i]``.

    A gradient started at ``t0`` is ready at the first ``t`` with ``int_{t0}^t v_i(s) ds = 1``; the
    integral has a closed form and is inverted by a safeguarded Newton iteration. ``amplitude``
    must be below 1, so that every worker always makes some progress.
    """

    tau: tuple[float, ...]
    period: float
    amplitude: float
    phase: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "tau", _taus("tau", self.tau))
        check_range("period", self.period, 0.0, math.inf, low_open=True)
        check_range("amplitude", self.amplitude, 0.0, 1.0, high_open=True)
        phase = tuple(check_range(f"phase[{i}]", p) for i, p in enumerate(self.phase))  # finite
        if len(phase) != len(self.tau):
            raise ValueError(f"phase must have one entry per worker ({len(self.tau)}), got {len(phase)}")
        object.__setattr__(self, "phase", phase)

    @property
    def n(self) -> int:
        return len(self.tau)

    def work(self, worker: int, start: float, end: float) -> float:
        """``int_start^end v_worker(s) ds``: the share of a gradient done between the two times."""
        w = 2.0 * math.pi / self.period
        phi = self.phase[worker]
        wave = (self.amplitude / w) * (math.cos(w * start + phi) - math.cos(w * end + phi))
        return ((end - start) + wave) / self.tau[worker]

    def finish(self, worker: int, start: float, rng: np.random.Generator) -> float:
        tau, a = self.tau[worker], self.amplitude
        lo, hi = start + tau / (1.0 + a), start + tau / (1.0 - a)  # the power lies in [(1-a), (1+a)]/tau
        t = min(max(start + tau, lo), hi)
        w = 2.0 * math.pi / self.period
        for _ in range(60):
            gap = self.work(worker, start, t) - 1.0
            if abs(gap) < 1e-13:
                break
            if gap > 0:
                hi = t
            else:
                lo = t
            power = (1.0 + a * math.sin(w * t + self.phase[worker])) / tau
            t_new = t - gap / power
            t = t_new if lo < t_new < hi else 0.5 * (lo + hi)  # Newton, or bisection if it leaves
        return t

    def rate(self, worker: int) -> float:
        return 1.0 / self.tau[worker]  # the sine averages out over a period


@dataclass(frozen=True)
class OutageTimes:
    """Fixed times ``tau``, except that the workers in ``down`` compute nothing on ``[start, end)``.

    A gradient in progress when the outage begins resumes when it ends; one started during the
    outage begins at its end (computing power 0 on the window, ``1/tau`` elsewhere).
    """

    tau: tuple[float, ...]
    down: tuple[int, ...]
    start: float
    end: float
    _down: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tau", _taus("tau", self.tau))
        n = len(self.tau)
        down = tuple(check_int(f"down[{i}]", w, 0, n - 1) for i, w in enumerate(self.down))
        object.__setattr__(self, "down", down)
        object.__setattr__(self, "_down", frozenset(down))
        check_range("start", self.start, 0.0)
        check_range("end", self.end, self.start, math.inf)

    @property
    def n(self) -> int:
        return len(self.tau)

    def finish(self, worker: int, start: float, rng: np.random.Generator) -> float:
        tau = self.tau[worker]
        if worker not in self._down or start + tau <= self.start or start >= self.end:
            return start + tau
        if start >= self.start:  # starts during the outage: waits for its end
            return self.end + tau
        return start + tau + (self.end - self.start)  # interrupted, then resumed

    def rate(self, worker: int) -> float:
        return 1.0 / self.tau[worker]


def fixed_times(n: int, p: float = 1.0) -> FixedTimes:
    """``tau_i = i^p`` for workers ``i = 1..n`` (0-based index ``i - 1``); ``p = 2`` is the
    stragglers case, ``p = 0`` makes every worker equally fast. ``n``: an integer >= 1; ``p``: in
    [0, 8]."""
    n = check_int("n", n, 1)
    p = check_range("p", p, 0.0, 8.0)
    return FixedTimes(tuple(float(i) ** p for i in range(1, n + 1)))


def authors_times(n: int, seed: int = 0) -> AuthorsTimes:
    """The authors' time model: base times a seeded random permutation of ``1..n``, noise scale
    ``sqrt(i)`` for the ``i``-th worker (1-based). ``n``: an integer >= 1; ``seed``: an integer in
    [0, 2**32 - 1]."""
    n = check_int("n", n, 1)
    perm = np.random.default_rng([check_seed(seed), 7]).permutation(np.arange(1, n + 1))
    return AuthorsTimes(tuple(float(t) for t in perm), tuple(math.sqrt(i) for i in range(1, n + 1)))


def make_time_model(kind: str, n: int, *, p: float = 1.0, seed: int = 0) -> TimeModel:
    """One of ``TIME_MODELS`` for ``n`` workers with base times ``tau_i = i^p``.

    * ``fixed``: ``tau_i`` exactly; ``authors``: :func:`authors_times` (ignores ``p``);
    * ``exponential``: exponential durations of mean ``tau_i``;
    * ``time-varying``: power ``(1 + 0.8 sin(2 pi t / P + phi_i)) / tau_i`` with ``P = 50 tau_avg``
      and seeded random phases;
    * ``outage``: fixed times, the slowest worker is down on ``[2 tau_n, 5 tau_n)``.

    ``n`` is an integer >= 1, ``p`` a number in [0, 8], and ``seed`` (read by ``authors`` and
    ``time-varying``, checked for every kind) an integer in [0, 2**32 - 1].
    """
    check_choice("kind", kind, TIME_MODELS)
    seed = check_seed(seed)
    base = fixed_times(n, p)
    if kind == "fixed":
        return base
    if kind == "authors":
        return authors_times(n, seed)
    if kind == "exponential":
        return ExponentialTimes(base.tau)
    if kind == "time-varying":
        phases = np.random.default_rng([seed, 8]).uniform(0, 2 * math.pi, n)
        return TimeVaryingTimes(base.tau, period=50.0 * float(np.mean(base.tau)), amplitude=0.8,
                                phase=tuple(float(v) for v in phases))
    slowest = max(base.tau)
    return OutageTimes(base.tau, down=(n - 1,), start=2.0 * slowest, end=5.0 * slowest)
