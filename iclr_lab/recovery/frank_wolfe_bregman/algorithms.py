"""Frank–Wolfe with an adaptive Bregman step size: oracles, kernels, step rules and the solver.

Equation labels refer to the chapter ``book/recovery/frank_wolfe_bregman.md``:

* ``frank_wolfe_bregman-eq-problem``: ``min_{x in P} f(x)`` with a linear minimisation oracle (LMO);
* ``frank_wolfe_bregman-eq-bregman``: the Bregman distance ``D_phi`` of a kernel ``phi``;
* ``frank_wolfe_bregman-eq-gap``: the Frank–Wolfe gap; ``frank_wolfe_bregman-eq-update``: the step;
* ``frank_wolfe_bregman-eq-descent``: the extended descent lemma with scaling exponent ``1 + nu``;
* ``frank_wolfe_bregman-eq-short``: the Bregman short step; ``frank_wolfe_bregman-eq-test``: the
  acceptance test of the adaptive search; ``frank_wolfe_bregman-eq-pedregosa``: the Euclidean
  adaptive rule of Pedregosa et al.;
* ``frank_wolfe_bregman-eq-away``: the away direction and its largest step.

Three kinds of objects plug into :func:`frank_wolfe`:

* an **LMO** (:class:`Simplex`, :class:`L1Ball`, :class:`KSparse`, :class:`Box`, :class:`L2Ball`):
  ``lmo(c)`` returns ``argmin_{v in P} <c, v>``; ``lmo.contains(x)`` says whether ``x`` is in ``P``;
* a **kernel** (:class:`Euclidean`, :class:`Quartic`, :class:`Burg`, :class:`Shannon`): its value,
  gradient and Bregman distance ``divergence(y, x) = D_phi(y, x)``. Frank–Wolfe never takes a mirror
  step; it only *evaluates* ``D_phi``;
* a **step rule** (:class:`OpenLoop`, :class:`ShortStep`, :class:`EuclideanAdaptive`,
  :class:`BregmanAdaptive`, or a constant ``float``).

Everything is numpy. Directions follow the convention ``d = v - x`` and ``x+ = x + gamma d``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import rel_entr

from iclr_lab.core.progress import progress
from iclr_lab.core.validation import check_array, check_int, check_range

__all__ = [
    "BregmanAdaptive",
    "Box",
    "Burg",
    "Constant",
    "Euclidean",
    "EuclideanAdaptive",
    "FWResult",
    "KSparse",
    "Kernel",
    "L1Ball",
    "L2Ball",
    "LMO",
    "OpenLoop",
    "Quartic",
    "Shannon",
    "ShortStep",
    "Simplex",
    "StepRequest",
    "StepResult",
    "StepRule",
    "evals_per_iteration",
    "frank_wolfe",
]

Array = np.ndarray
#: slack of every sufficient-decrease test, relative to ``max(1, |f(x)|)``: below it the test
#: compares rounding errors, and a rejection would only inflate the smoothness estimate.
_SLACK = 16 * np.finfo(float).eps


def _vec(name: str, x: ArrayLike) -> Array:
    """``x`` as a non-empty, finite 1-D float array; an error naming ``name`` otherwise."""
    a = np.asarray(check_array(name, x, nonempty=False, finite=False), dtype=float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {a.shape}")
    return np.asarray(check_array(name, a), dtype=float)  # finite


# ----------------------------------------------------------------------------------------------
# Linear minimisation oracles
# ----------------------------------------------------------------------------------------------


class LMO(Protocol):
    """A linear minimisation oracle of a compact convex set ``P`` (``frank_wolfe_bregman-eq-problem``)."""

    @property
    def name(self) -> str:
        """A short name for tables and errors."""
        ...

    def __call__(self, c: Array) -> Array:
        """``argmin_{v in P} <c, v>``, a vertex of ``P``."""
        ...

    def contains(self, x: Array, tol: float = 1e-9) -> bool:
        """Whether ``x`` lies in ``P`` (up to ``tol``)."""
        ...


@dataclass(frozen=True)
class Simplex:
    """The (shifted, scaled) simplex ``{x : x_j >= lower, sum_j x_j = radius}``.

    With ``lower = 0`` and ``radius = 1`` this is the probability simplex. A positive ``lower``
    keeps every vertex inside the domain of barrier kernels such as :class:`Burg`, whose Bregman
    distance is infinite at a point with a zero coordinate.
    """

    radius: float = 1.0
    lower: float = 0.0
    name: str = field(default="simplex", init=False)

    def __post_init__(self) -> None:
        check_range("radius", self.radius, 0.0, low_open=True)
        check_range("lower", self.lower, 0.0)

    def _check(self, n: int) -> None:
        if self.radius < n * self.lower:
            raise ValueError(f"radius must be >= n * lower = {n * self.lower:g} for n = {n}, "
                             f"got {self.radius:g}")

    def __call__(self, c: Array) -> Array:
        self._check(c.size)
        v = np.full(c.size, self.lower)
        v[int(np.argmin(c))] += self.radius - c.size * self.lower
        return v

    def contains(self, x: Array, tol: float = 1e-9) -> bool:
        self._check(x.size)
        return bool(np.all(x >= self.lower - tol) and abs(x.sum() - self.radius) <= tol * (1 + self.radius))


@dataclass(frozen=True)
class L1Ball:
    """The l1 ball ``{x : ||x||_1 <= radius}``; its vertices are ``+-radius e_j``."""

    radius: float = 1.0
    name: str = field(default="l1 ball", init=False)

    def __post_init__(self) -> None:
        check_range("radius", self.radius, 0.0, low_open=True)

    def __call__(self, c: Array) -> Array:
        j = int(np.argmax(np.abs(c)))
        v = np.zeros(c.size)
        v[j] = self.radius if c[j] < 0 else -self.radius
        return v

    def contains(self, x: Array, tol: float = 1e-9) -> bool:
        return bool(np.abs(x).sum() <= self.radius * (1 + tol) + tol)


@dataclass(frozen=True)
class KSparse:
    """The K-sparse polytope ``conv{x : ||x||_0 <= K, ||x||_inf <= radius}``
    ``= {x : ||x||_inf <= radius, ||x||_1 <= K radius}``.

    Its LMO puts ``-radius sign(c_j)`` on the ``K`` largest ``|c_j|``. ``K = 1`` is the l1 ball of
    radius ``radius``; ``K = n`` is the box ``[-radius, radius]^n``.
    """

    K: int
    radius: float = 1.0
    name: str = field(default="K-sparse polytope", init=False)

    def __post_init__(self) -> None:
        check_int("K", self.K, 1)
        check_range("radius", self.radius, 0.0, low_open=True)

    def __call__(self, c: Array) -> Array:
        if self.K > c.size:
            raise ValueError(f"K must be an integer in [1, n] = [1, {c.size}], got {self.K}")
        idx = np.argpartition(-np.abs(c), self.K - 1)[:self.K]
        v = np.zeros(c.size)
        v[idx] = np.where(c[idx] < 0, self.radius, -self.radius)
        return v

    def contains(self, x: Array, tol: float = 1e-9) -> bool:
        r = self.radius * (1 + tol) + tol
        return bool(np.abs(x).max() <= r and np.abs(x).sum() <= self.K * r)


@dataclass(frozen=True)
class Box:
    """The box ``{x : lower <= x_j <= upper}``; its LMO picks ``lower`` where ``c_j > 0``.

    ``lower`` is any finite number and ``upper`` a finite number above it.
    """

    lower: float = 0.0
    upper: float = 1.0
    name: str = field(default="box", init=False)

    def __post_init__(self) -> None:
        lower = check_range("lower", self.lower)  # finite: a bound at infinity has no vertex
        check_range("upper", self.upper, lower, low_open=True)

    def __call__(self, c: Array) -> Array:
        return np.where(c > 0, self.lower, self.upper).astype(float)

    def contains(self, x: Array, tol: float = 1e-9) -> bool:
        return bool(np.all(x >= self.lower - tol) and np.all(x <= self.upper + tol))


@dataclass(frozen=True)
class L2Ball:
    """The Euclidean ball ``{x : ||x||_2 <= radius}`` (not a polytope: use it without away steps)."""

    radius: float = 1.0
    name: str = field(default="l2 ball", init=False)

    def __post_init__(self) -> None:
        check_range("radius", self.radius, 0.0, low_open=True)

    def __call__(self, c: Array) -> Array:
        norm = float(np.linalg.norm(c))
        if norm == 0.0:  # every point of the sphere is a minimiser
            v = np.zeros(c.size)
            v[0] = self.radius
            return v
        return -self.radius * c / norm

    def contains(self, x: Array, tol: float = 1e-9) -> bool:
        return bool(np.linalg.norm(x) <= self.radius * (1 + tol) + tol)


# ----------------------------------------------------------------------------------------------
# Kernels and their Bregman distances
# ----------------------------------------------------------------------------------------------


class Kernel(Protocol):
    """A kernel ``phi`` and its Bregman distance ``D_phi(y, x)`` (``frank_wolfe_bregman-eq-bregman``)."""

    @property
    def name(self) -> str:
        """A short name for tables and errors."""
        ...

    def value(self, x: Array) -> float:
        """``phi(x)``."""
        ...

    def grad(self, x: Array) -> Array:
        """``grad phi(x)``."""
        ...

    def divergence(self, y: Array, x: Array) -> float:
        """``D_phi(y, x) = phi(y) - phi(x) - <grad phi(x), y - x>`` (``inf`` outside the domain)."""
        ...

    def in_domain(self, x: Array) -> bool:
        """Whether ``x`` is in the interior of the domain of ``phi``."""
        ...


@dataclass(frozen=True)
class Euclidean:
    """``phi(x) = ||x||^2 / 2``, so ``D_phi(y, x) = ||y - x||^2 / 2``; scaling exponent 2 (``nu = 1``)."""

    name: str = field(default="Euclidean", init=False)

    def value(self, x: Array) -> float:
        return 0.5 * float(x @ x)

    def grad(self, x: Array) -> Array:
        return x.copy()

    def divergence(self, y: Array, x: Array) -> float:
        r = y - x
        return 0.5 * float(r @ r)

    def in_domain(self, x: Array) -> bool:
        return True


@dataclass(frozen=True)
class Quartic:
    """``phi(x) = ||x||^4 / 4 + ||x||^2 / 2``, the kernel of phase retrieval (Bolte et al. 2018).

    The distance is evaluated in the cancellation-free form
    ``D_phi(y, x) = (||y||^2 - ||x||^2)^2 / 4 + (||x||^2 + 1) ||y - x||^2 / 2``.
    """

    name: str = field(default="quartic", init=False)

    def value(self, x: Array) -> float:
        s = float(x @ x)
        return 0.25 * s * s + 0.5 * s

    def grad(self, x: Array) -> Array:
        return (float(x @ x) + 1.0) * x

    def divergence(self, y: Array, x: Array) -> float:
        r = y - x
        sx = float(x @ x)
        return 0.25 * (float(y @ y) - sx) ** 2 + 0.5 * (sx + 1.0) * float(r @ r)

    def in_domain(self, x: Array) -> bool:
        return True


@dataclass(frozen=True)
class Burg:
    """Burg's entropy ``phi(x) = -sum_j log x_j`` on ``x > 0``, the kernel of Poisson/KL problems
    (Bauschke, Bolte and Teboulle 2017): ``D_phi(y, x) = sum_j (y_j/x_j - log(y_j/x_j) - 1)``,
    infinite when some ``y_j <= 0``."""

    name: str = field(default="Burg", init=False)

    def value(self, x: Array) -> float:
        return -float(np.log(x).sum()) if np.all(x > 0) else math.inf

    def grad(self, x: Array) -> Array:
        return -1.0 / x

    def divergence(self, y: Array, x: Array) -> float:
        if np.any(y <= 0):
            return math.inf
        r = y / x
        return float((r - np.log(r) - 1.0).sum())

    def in_domain(self, x: Array) -> bool:
        return bool(np.all(x > 0))


@dataclass(frozen=True)
class Shannon:
    """Shannon's entropy ``phi(x) = sum_j x_j log x_j - x_j`` on ``x >= 0``:
    ``D_phi(y, x) = sum_j y_j log(y_j/x_j) - y_j + x_j``, the generalised Kullback–Leibler
    divergence (finite at ``y_j = 0``, infinite when ``x_j = 0 < y_j``)."""

    name: str = field(default="Shannon", init=False)

    def value(self, x: Array) -> float:
        return float((rel_entr(x, 1.0) - x).sum()) if np.all(x >= 0) else math.inf

    def grad(self, x: Array) -> Array:
        with np.errstate(divide="ignore"):
            return np.log(x)

    def divergence(self, y: Array, x: Array) -> float:
        if np.any(y < 0):
            return math.inf
        return float((rel_entr(y, x) - y + x).sum())

    def in_domain(self, x: Array) -> bool:
        return bool(np.all(x > 0))


# ----------------------------------------------------------------------------------------------
# Step rules
# ----------------------------------------------------------------------------------------------


@dataclass
class StepRequest:
    """What a step rule sees at one iteration (built by :func:`frank_wolfe`).

    Attributes:
        t: the iteration, from 0.
        x: the iterate; ``fx`` its value ``f(x)``; ``g`` its gradient.
        direction: the direction ``d`` (``v - x`` for a FW step, ``x - a`` for an away step).
        gap: ``G_d = -<grad f(x), d>``, the FW gap for a FW step (``frank_wolfe_bregman-eq-gap``).
        gamma_max: the largest feasible step along ``d`` (1 for a FW step).
        kernel: the kernel whose distance the rule may use.
        f: the objective, counted: each call is one function evaluation.
        state: what an adaptive rule carries from one call to the next (``"L"``, ``"kappa"``).
    """

    t: int
    x: Array
    fx: float
    g: Array
    direction: Array
    gap: float
    gamma_max: float
    kernel: Kernel
    f: Callable[[Array], float]
    state: dict[str, float]


@dataclass
class StepResult:
    """What a step rule returns.

    Attributes:
        gamma: the step (0 means that the rule found no step: the run stalls).
        f_new: ``f(x + gamma d)`` when the rule evaluated it, else None.
        trials: the evaluations of ``f`` that the call spent.
        M: the accepted constant of an adaptive rule (NaN otherwise).
        kappa: the accepted exponent of the adaptive Bregman rule (NaN otherwise).
    """

    gamma: float
    f_new: float | None = None
    trials: int = 0
    M: float = math.nan
    kappa: float = math.nan


class StepRule(Protocol):
    """A step-size rule: ``rule.step(search)`` returns the step for one direction."""

    @property
    def name(self) -> str:
        """A short name for tables and legends."""
        ...

    def step(self, s: StepRequest) -> StepResult:
        """The step along ``s.direction`` (at most ``s.gamma_max``)."""
        ...


@dataclass(frozen=True)
class OpenLoop:
    """The open-loop step ``gamma_t = ell / (t + ell)`` (``ell = 2``: the classical ``2/(t+2)``).

    Needs no function value and no constant; with away steps it is clipped at ``gamma_max``.
    """

    ell: float = 2.0
    name: str = field(default="open loop 2/(t+2)", init=False)

    def __post_init__(self) -> None:
        check_range("ell", self.ell, 0.0, low_open=True)

    def step(self, s: StepRequest) -> StepResult:
        return StepResult(min(self.ell / (s.t + self.ell), s.gamma_max))


@dataclass(frozen=True)
class Constant:
    """A constant step ``gamma`` in ``(0, 1]`` (clipped at ``gamma_max``)."""

    gamma: float
    name: str = field(default="constant", init=False)

    def __post_init__(self) -> None:
        check_range("gamma", self.gamma, 0.0, 1.0, low_open=True)

    def step(self, s: StepRequest) -> StepResult:
        return StepResult(min(self.gamma, s.gamma_max))


def _bregman_trial(gap: float, M: float, kappa: float, D: float, gamma_max: float) -> float:
    """``u = min{(gamma_max G / (M (1 + kappa) D))^(1/kappa), 1}``: the maximiser over ``u`` in
    ``[0, 1]`` of the model decrease ``u gamma_max G - M u^(1+kappa) D``
    (``frank_wolfe_bregman-eq-short``)."""
    base = gamma_max * gap / (M * (1.0 + kappa) * D)
    if base >= 1.0:
        return 1.0
    return float(base ** (1.0 / kappa))


@dataclass(frozen=True)
class ShortStep:
    """The Bregman short step with known constants ``L`` and ``nu`` (``frank_wolfe_bregman-eq-short``):
    ``gamma = min{(G / (L (1 + nu) D_phi(v, x)))^(1/nu), 1}``.

    With the Euclidean kernel and ``nu = 1`` this is the classical short step
    ``min{G / (L ||d||^2), 1}``. ``L`` must be a *global* constant, valid on all of ``P``, so it is
    often very pessimistic.
    """

    L: float
    nu: float = 1.0
    name: str = field(default="short step (global L)", init=False)

    def __post_init__(self) -> None:
        check_range("L", self.L, 0.0, low_open=True)
        check_range("nu", self.nu, 0.0, 1.0, low_open=True)

    def step(self, s: StepRequest) -> StepResult:
        D = s.kernel.divergence(s.x + s.gamma_max * s.direction, s.x)
        if not (s.gap > 0 and 0 < D < math.inf):
            return StepResult(0.0)
        return StepResult(_bregman_trial(s.gap, self.L, self.nu, D, s.gamma_max) * s.gamma_max)


def _initial_estimate(s: StepRequest, grad: Callable[[Array], Array], kernel: Kernel) -> float:
    """FrankWolfe.jl's first smoothness estimate, generalised to a kernel:
    ``||grad f(x + eps d) - grad f(x)|| ||d|| / (2 eps D_phi(x + d, x))`` with ``eps = min(1e-3, gamma_max)``.

    With the Euclidean kernel this is ``||grad f(x + eps d) - grad f(x)|| / (eps ||d||)``.
    """
    eps = min(1e-3, s.gamma_max)
    dg = grad(s.x + eps * s.direction) - s.g
    nd = float(np.linalg.norm(s.direction))
    D = kernel.divergence(s.x + s.direction, s.x)
    est = float(np.linalg.norm(dg)) * nd / (2.0 * eps * D) if 0 < D < math.inf else 0.0
    return est if est > 0 and math.isfinite(est) else 1.0


@dataclass(frozen=True)
class EuclideanAdaptive:
    """Pedregosa et al.'s adaptive step (``frank_wolfe_bregman-eq-pedregosa``).

    Each call starts from ``M = eta L_prev`` and tries ``gamma = min{G / (M ||d||^2), gamma_max}``;
    it accepts when ``f(x + gamma d) <= f(x) - gamma G + gamma^2 M ||d||^2 / 2`` and otherwise
    multiplies ``M`` by ``tau``. ``L0`` is the first estimate (default: FrankWolfe.jl's recipe, one
    extra gradient, with the Euclidean distance). The kernel passed to :func:`frank_wolfe` is ignored:
    this rule, its first estimate included, is Euclidean by construction.
    """

    eta: float = 0.9
    tau: float = 2.0
    L0: float | None = None
    max_trials: int = 100
    name: str = field(default="Euclidean adaptive (Pedregosa)", init=False)

    def __post_init__(self) -> None:
        check_range("eta", self.eta, 0.0, 1.0, low_open=True)
        check_range("tau", self.tau, 1.0, low_open=True)
        if self.L0 is not None:
            check_range("L0", self.L0, 0.0, low_open=True)
        check_int("max_trials", self.max_trials, 1)

    def step(self, s: StepRequest) -> StepResult:
        nd2 = float(s.direction @ s.direction)
        if not (s.gap > 0 and nd2 > 0):
            return StepResult(0.0)
        M = self.eta * s.state["L"]
        slack = _SLACK * max(1.0, abs(s.fx))
        for trial in range(1, self.max_trials + 1):
            gamma = min(s.gap / (M * nd2), s.gamma_max)
            f_new = s.f(s.x + gamma * s.direction)
            if f_new <= s.fx - gamma * s.gap + 0.5 * gamma * gamma * M * nd2 + slack:
                s.state["L"] = M
                return StepResult(gamma, f_new, trial, M)
            M *= self.tau
        s.state["L"] = M
        return StepResult(0.0, None, self.max_trials, M)


@dataclass(frozen=True)
class BregmanAdaptive:
    """The paper's adaptive Bregman step: a joint search for the constant ``M`` and the exponent
    ``kappa`` of the model ``f(x + gamma d) <= f(x) - gamma G + M gamma^(1+kappa) D_phi``
    (``frank_wolfe_bregman-eq-test``).

    Each call starts from ``M = eta L_prev`` and ``kappa = 1`` (or the previous ``kappa`` if
    ``kappa_restart=False``), tries the Bregman short step with ``(M, kappa)``
    (``frank_wolfe_bregman-eq-short``) and accepts when
    ``f(x + gamma d) - f(x) + gamma G <= M u^(1+kappa) D`` with ``u = gamma / gamma_max`` and
    ``D = D_phi(x + gamma_max d, x)``; otherwise ``M <- tau M`` and ``kappa <- max(beta kappa, kappa_min)``.
    With ``freeze_kappa=True`` the exponent stays at 1; with the Euclidean kernel the rule is then
    :class:`EuclideanAdaptive` step for step.
    """

    eta: float = 0.9
    tau: float = 2.0
    beta: float = 0.9
    L0: float | None = None
    kappa_restart: bool = True
    freeze_kappa: bool = False
    kappa_min: float = 1e-3
    max_trials: int = 100
    name: str = field(default="Bregman adaptive (paper)", init=False)

    def __post_init__(self) -> None:
        check_range("eta", self.eta, 0.0, 1.0, low_open=True)
        check_range("tau", self.tau, 1.0, low_open=True)
        check_range("beta", self.beta, 0.0, 1.0, low_open=True)
        if self.L0 is not None:
            check_range("L0", self.L0, 0.0, low_open=True)
        check_range("kappa_min", self.kappa_min, 0.0, 1.0, low_open=True)
        check_int("max_trials", self.max_trials, 1)

    def step(self, s: StepRequest) -> StepResult:
        D = s.kernel.divergence(s.x + s.gamma_max * s.direction, s.x)
        if not (s.gap > 0 and 0 < D < math.inf):
            return StepResult(0.0)
        M = self.eta * s.state["L"]  # a little more optimistic than last time
        restart = self.kappa_restart or self.freeze_kappa
        kappa = 1.0 if restart else s.state.get("kappa", 1.0)
        slack = _SLACK * max(1.0, abs(s.fx))
        for trial in range(1, self.max_trials + 1):
            u = _bregman_trial(s.gap, M, kappa, D, s.gamma_max)  # the short step for (M, kappa)
            gamma = u * s.gamma_max
            f_new = s.f(s.x + gamma * s.direction)
            model = M * u ** (1.0 + kappa) * D
            if f_new - s.fx + gamma * s.gap <= model + slack:
                s.state["L"], s.state["kappa"] = M, kappa
                return StepResult(gamma, f_new, trial, M, kappa)
            M *= self.tau
            if not self.freeze_kappa:
                kappa = max(self.beta * kappa, self.kappa_min)
        s.state["L"], s.state["kappa"] = M, kappa
        return StepResult(0.0, None, self.max_trials, M, kappa)


def evals_per_iteration(eta: float = 0.9, tau: float = 2.0) -> float:
    """The long-run function evaluations per iteration of an adaptive rule whose local constant is
    steady: ``1 + log(1/eta) / log(tau)`` (about 1.152 for the defaults). Every call shrinks the
    estimate by ``eta`` and every rejection grows it by ``tau``, so rejections must balance."""
    check_range("eta", eta, 0.0, 1.0, low_open=True)
    check_range("tau", tau, 1.0, low_open=True)
    return 1.0 + math.log(1.0 / eta) / math.log(tau)


# ----------------------------------------------------------------------------------------------
# The solver
# ----------------------------------------------------------------------------------------------


@dataclass
class FWResult:
    """What :func:`frank_wolfe` returns. Arrays indexed by ``t = 0 .. n_iter`` describe the iterate
    ``x_t``; arrays indexed by ``t = 0 .. n_iter - 1`` describe the step from ``x_t`` to ``x_{t+1}``.

    Attributes:
        x: the last iterate.
        iterates: every iterate, shape ``(n_iter + 1, n)`` (empty if ``store_iterates=False``).
        gaps: the Frank–Wolfe gap ``G(x_t)`` (``frank_wolfe_bregman-eq-gap``) of every iterate.
        f_values: ``f(x_t)`` (recorded for the reader; evaluations the rule did not need are not
            counted in ``evals``).
        evals: cumulative number of evaluations of ``f`` the step rule needed to reach ``x_t``.
        steps: the step ``gamma_t``.
        gamma_max: the largest feasible step ``gamma_t`` could have taken (1 for a FW step,
            ``w/(1 - w)`` for an away step), so ``steps / gamma_max`` is the share of the segment taken.
        trials: the evaluations of ``f`` spent on the step ``gamma_t``.
        M: the accepted constant of an adaptive rule (NaN otherwise).
        kappa: the accepted exponent of the adaptive Bregman rule (NaN otherwise).
        kinds: ``"fw"``, ``"away"`` or ``"drop"`` (an away step that removed a vertex).
        grad_evals: gradient evaluations (one per iterate, plus one for a first estimate).
        status: ``"converged"`` (gap <= tol), ``"max_iter"`` or ``"stalled"`` (a zero step).
        active_size: the number of vertices in the active set of every iterate (away steps).
    """

    x: Array
    iterates: Array
    gaps: Array
    f_values: Array
    evals: Array
    steps: Array
    gamma_max: Array
    trials: Array
    M: Array
    kappa: Array
    kinds: list[str]
    grad_evals: int
    status: str
    active_size: Array

    @property
    def n_iter(self) -> int:
        """Number of steps taken."""
        return int(self.steps.size)

    @property
    def n_evals(self) -> int:
        """Total evaluations of ``f`` the step rule needed."""
        return int(self.evals[-1])

    def best_gap(self, budget: float | None = None) -> float:
        """The smallest FW gap among the iterates reached within ``budget`` evaluations of ``f``
        (all iterates if ``budget`` is None)."""
        if budget is None:
            return float(self.gaps.min())
        reached = self.evals <= budget
        return float(self.gaps[reached].min()) if reached.any() else math.nan


class _ActiveSet:
    """``x = sum_i w_i a_i`` over the atoms met so far (vertices, and ``x0``), for away steps."""

    def __init__(self, x0: Array) -> None:
        self.atoms: list[Array] = [x0.copy()]
        self.keys: list[bytes] = [x0.tobytes()]
        self.w = np.ones(1)

    def away(self, g: Array) -> int:
        """Index of the atom with the largest ``<g, a>`` (the away vertex)."""
        return int(np.argmax([float(g @ a) for a in self.atoms]))

    def fw_update(self, v: Array, gamma: float) -> None:
        if gamma >= 1.0:  # the iterate is the vertex itself
            self.atoms, self.keys, self.w = [v.copy()], [v.tobytes()], np.ones(1)
            return
        self.w = (1.0 - gamma) * self.w
        key = v.tobytes()
        if key in self.keys:
            self.w[self.keys.index(key)] += gamma
        else:
            self.atoms.append(v.copy())
            self.keys.append(key)
            self.w = np.append(self.w, gamma)

    def away_update(self, i: int, gamma: float, drop: bool) -> None:
        self.w = (1.0 + gamma) * self.w
        self.w[i] -= gamma
        if drop:
            del self.atoms[i], self.keys[i]
            self.w = np.delete(self.w, i)


def _as_rule(step: StepRule | float) -> StepRule:
    if isinstance(step, int | float) and not isinstance(step, bool):
        # checked here, so that the error names the caller's ``step`` and not Constant's ``gamma``
        return Constant(check_range("step", step, 0.0, 1.0, low_open=True))
    if isinstance(step, bool) or not hasattr(step, "step"):
        raise TypeError(f"step must be a step rule (OpenLoop, ShortStep, EuclideanAdaptive, "
                        f"BregmanAdaptive) or a number in (0, 1], got {type(step).__name__}")
    return step


def frank_wolfe(f: Callable[[Array], float], grad: Callable[[Array], Array], lmo: LMO,
                x0: ArrayLike, step: StepRule | float | None = None, kernel: Kernel | None = None,
                max_iter: int = 1000, tol: float = 1e-7, *, away: bool = False,
                store_iterates: bool = True, feasibility_tol: float = 1e-9) -> FWResult:
    """Minimise ``f`` over ``P`` with Frank–Wolfe (``frank_wolfe_bregman-eq-update``).

    At ``x_t`` the LMO returns ``v_t = argmin_{v in P} <grad f(x_t), v>``; the FW gap
    ``G_t = <grad f(x_t), x_t - v_t>`` (``frank_wolfe_bregman-eq-gap``) bounds the primal gap of a
    convex ``f`` and is the stopping test. The step rule picks ``gamma_t`` along ``d_t = v_t - x_t``.
    With ``away=True``, the iterate is kept as a convex combination of the atoms met so far
    (``x0`` and LMO vertices), and the solver moves *away* from the worst atom when that direction
    promises more (``frank_wolfe_bregman-eq-away``), with ``gamma_max = w/(1 - w)``; an away step that
    reaches ``gamma_max`` drops the atom.

    Args:
        f: the objective; it is called only by step rules that need function values (plus once per
            iterate to record ``f_values``, uncounted).
        grad: its gradient.
        lmo: the linear minimisation oracle of ``P`` (:class:`Simplex`, :class:`L1Ball`,
            :class:`KSparse`, :class:`Box`, :class:`L2Ball` or any object with ``__call__`` and
            ``contains``).
        x0: the starting point; must lie in ``P`` and in the domain of the kernel.
        step: a step rule, or a constant step in ``(0, 1]``. Default: :class:`BregmanAdaptive`.
        kernel: the kernel whose Bregman distance the step rules use. Default: :class:`Euclidean`.
        max_iter: the largest number of steps.
        tol: stop when the FW gap is at most ``tol`` (the paper uses ``1e-7``).
        away: use away steps (for polytopes).
        store_iterates: keep every iterate in ``FWResult.iterates``.
        feasibility_tol: tolerance of the check that ``x0`` lies in ``P``.

    Returns:
        An :class:`FWResult` with the iterates, FW gaps, the function-evaluation count and the
        step-size trace.
    """
    for name, fn in (("f", f), ("grad", grad), ("lmo", lmo)):
        if not callable(fn):
            raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
    if not hasattr(lmo, "contains"):
        raise TypeError(f"lmo must be a linear minimisation oracle with a contains method, got "
                        f"{type(lmo).__name__}")
    rule = _as_rule(BregmanAdaptive() if step is None else step)
    kern: Kernel = Euclidean() if kernel is None else kernel
    x = _vec("x0", x0).copy()
    max_iter = check_int("max_iter", max_iter, 0)
    tol = check_range("tol", tol, 0.0)
    check_range("feasibility_tol", feasibility_tol, 0.0)
    if not lmo.contains(x, feasibility_tol):
        raise ValueError(f"x0 must lie in the feasible set ({getattr(lmo, 'name', 'P')}); "
                         f"it does not (tolerance {feasibility_tol:g})")
    if not kern.in_domain(x):
        raise ValueError(f"x0 must lie in the interior of the domain of the {kern.name} kernel")

    n_evals = 0

    def counted(z: Array) -> float:
        nonlocal n_evals
        n_evals += 1
        return float(f(z))

    needs_f = isinstance(rule, EuclideanAdaptive | BregmanAdaptive)
    fx = counted(x) if needs_f else float(f(x))
    state: dict[str, float] = {}
    active = _ActiveSet(x) if away else None
    grad_evals = 0
    iterates, gaps, fvals, evals = [x.copy()], [], [fx], [n_evals]
    steps, gmaxs, trials, Ms, kappas, kinds, sizes = [], [], [], [], [], [], [1]
    status = "max_iter"
    g = np.asarray(grad(x), dtype=float)
    grad_evals += 1
    for t in progress(range(max_iter), desc="Frank–Wolfe", total=max_iter):
        v = np.asarray(lmo(g), dtype=float)
        d = v - x
        gap = float(-(g @ d))
        gaps.append(gap)
        if gap <= tol:
            status = "converged"
            break
        gamma_max, kind, i_away = 1.0, "fw", -1
        if active is not None:
            i_away = active.away(g)
            d_away = x - active.atoms[i_away]
            w_away = float(active.w[i_away])
            if float(-(g @ d_away)) > gap and w_away < 1.0:
                d, gap, kind = d_away, float(-(g @ d_away)), "away"
                gamma_max = w_away / (1.0 - w_away)
        search = StepRequest(t, x, fx, g, d, gap, gamma_max, kern, counted, state)
        if "L" not in state and isinstance(rule, EuclideanAdaptive | BregmanAdaptive):
            # Pedregosa's rule is Euclidean whatever kernel is passed, and so is its first estimate
            first_kernel = Euclidean() if isinstance(rule, EuclideanAdaptive) else kern
            state["L"] = (rule.L0 if rule.L0 is not None
                          else _initial_estimate(search, grad, first_kernel))
            grad_evals += rule.L0 is None
        res = rule.step(search)
        if res.gamma <= 0.0:
            status = "stalled"
            break
        x = x + res.gamma * d
        if active is not None:
            if kind == "fw":
                active.fw_update(v, res.gamma)
            else:
                drop = res.gamma >= gamma_max
                active.away_update(i_away, res.gamma, drop)
                kind = "drop" if drop else "away"
        fx = res.f_new if res.f_new is not None else float(f(x))
        g = np.asarray(grad(x), dtype=float)
        grad_evals += 1
        if store_iterates:
            iterates.append(x.copy())
        fvals.append(fx)
        evals.append(n_evals)
        steps.append(res.gamma)
        gmaxs.append(gamma_max)
        trials.append(res.trials)
        Ms.append(res.M)
        kappas.append(res.kappa)
        kinds.append(kind)
        sizes.append(len(active.atoms) if active is not None else 1)
    if len(gaps) < len(fvals):  # the gap of the last iterate
        gaps.append(float(g @ (x - np.asarray(lmo(g), dtype=float))))
    return FWResult(
        x=x, iterates=np.array(iterates) if store_iterates else np.empty((0, x.size)),
        gaps=np.array(gaps), f_values=np.array(fvals), evals=np.array(evals, dtype=int),
        steps=np.array(steps), gamma_max=np.array(gmaxs), trials=np.array(trials, dtype=int), M=np.array(Ms),
        kappa=np.array(kappas), kinds=kinds, grad_evals=grad_evals, status=status,
        active_size=np.array(sizes, dtype=int))
