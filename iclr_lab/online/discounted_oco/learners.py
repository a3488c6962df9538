"""The learners of discounted online convex optimisation: OGD, the DNP, SOGD, and discounted regret.

Equation labels refer to the chapter ``book/online/discounted_oco.md``:

* ``discounted_oco-eq-regret``: the lambda-discounted regret; ``discounted_oco-eq-memory``: the
  effective memory ``n = 1/(1-lambda)``;
* ``discounted_oco-eq-ogd``: projected OGD; ``discounted_oco-eq-thm1``: the Theorem 1 step and bound;
* ``discounted_oco-eq-dnp``: the DNP confidence; ``discounted_oco-eq-update``: the conservative
  update; ``discounted_oco-eq-thm2``: Theorem 2;
* ``discounted_oco-eq-combiner``: the combiner; ``discounted_oco-eq-bit``: the bit fed to its DNP;
* ``discounted_oco-eq-grid``: SOGD's grid of discounts; ``discounted_oco-eq-thm3``: Theorem 3.

The online-learning interface is the same for every learner: ``w = learner.predict()`` returns the
decision of this round, then ``learner.update(loss)`` reveals the round's loss (an object with
vectorised ``value(W)`` and ``grad(W)``, see :class:`LinearLoss`, :class:`AbsoluteLoss`,
:class:`SquaredLoss`). :class:`OGD` also accepts a plain gradient. Decisions live in the Euclidean
ball of radius ``radius`` in ``R^dim`` (an interval in 1-D), whose diameter is ``D = 2 radius``.

Everything is numpy; learners with a vector of step sizes (or memories) run as a vectorised bank.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq
from scipy.signal import lfilter
from scipy.special import erf

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range

__all__ = [
    "DNP",
    "OGD",
    "SOGD",
    "AbsoluteLoss",
    "LinearLoss",
    "RoundLoss",
    "SquaredLoss",
    "discounted_comparator",
    "discounted_regret",
    "discounted_sum",
    "dnp_confidence",
    "dnp_saturation",
    "dnp_trace",
    "projected_step",
    "run",
    "sogd_bound",
]

#: the default constant in front of the DNP confidence ``discounted_oco-eq-dnp``
DEFAULT_CN = "sqrt(n/8)"


def _numbers(name: str, value: Any, low: float, high: float = math.inf, *,
             low_open: bool | None = None, high_open: bool | None = None) -> np.ndarray:
    """``value`` (a number or a 1-D array of them) as a float array, every entry checked with
    ``check_range``. A string is refused (``np.asarray("0.5", dtype=float)`` would read it)."""
    if np.ndim(value) == 0 and not isinstance(value, np.ndarray):
        return np.asarray(check_range(name, value, low, high, low_open=low_open,
                                      high_open=high_open))
    arr = check_array(name, value, ndim=(0, 1), finite=False)
    if arr.dtype.kind == "b":
        raise TypeError(f"{name} must hold real numbers, got booleans")
    out = np.asarray(arr, dtype=float)
    for v in out.ravel():
        check_range(name, float(v), low, high, low_open=low_open, high_open=high_open)
    return out


# ----------------------------------------------------------------------------------------------
# Losses
# ----------------------------------------------------------------------------------------------


class RoundLoss(Protocol):
    """One round's convex loss, evaluated on a stack of points ``W`` of shape ``(m, dim)``."""

    def value(self, W: np.ndarray) -> np.ndarray: ...

    def grad(self, W: np.ndarray) -> np.ndarray: ...


class LinearLoss:
    """``f(w) = <g, w>`` (Lipschitz constant ``||g||``).

    Args:
        g: the gradient, a finite number (1-D decisions) or a non-empty finite 1-D array.
    """

    __slots__ = ("g",)

    def __init__(self, g: ArrayLike) -> None:
        self.g = np.atleast_1d(np.asarray(check_array("g", g, ndim=(0, 1)), dtype=float))

    def value(self, W: np.ndarray) -> np.ndarray:
        return W @ self.g

    def grad(self, W: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self.g, W.shape)


class AbsoluteLoss:
    """``f(w) = |<x, w> - y|``; with ``x=None`` the 1-D tracking loss ``|w - y|`` (Lipschitz ``||x||``).

    Args:
        y: the target, any finite number.
        x: the features, a non-empty finite 1-D array (or ``None``).
    """

    __slots__ = ("x", "y")

    def __init__(self, y: float, x: ArrayLike | None = None) -> None:
        self.y = check_range("y", y)
        self.x = None if x is None else np.asarray(check_array("x", x, ndim=1), dtype=float)

    def _pred(self, W: np.ndarray) -> np.ndarray:
        return W[..., 0] if self.x is None else W @ self.x

    def value(self, W: np.ndarray) -> np.ndarray:
        return np.abs(self._pred(W) - self.y)

    def grad(self, W: np.ndarray) -> np.ndarray:
        s = np.sign(self._pred(W) - self.y)[..., None]
        return s if self.x is None else s * self.x


class SquaredLoss:
    """``f(w) = (<x, w> - y)^2 / 2`` (Lipschitz ``||x|| (||x|| R + |y|)`` on the ball of radius R).

    Args:
        x: the features, a finite number (1-D decisions) or a non-empty finite 1-D array.
        y: the target, any finite number.
    """

    __slots__ = ("x", "y")

    def __init__(self, x: ArrayLike, y: float) -> None:
        self.x = np.atleast_1d(np.asarray(check_array("x", x, ndim=(0, 1)), dtype=float))
        self.y = check_range("y", y)

    def value(self, W: np.ndarray) -> np.ndarray:
        return 0.5 * (W @ self.x - self.y) ** 2

    def grad(self, W: np.ndarray) -> np.ndarray:
        return (W @ self.x - self.y)[..., None] * self.x


# ----------------------------------------------------------------------------------------------
# Theorem 1: projected OGD with a constant step
# ----------------------------------------------------------------------------------------------


def _check_lam(lam: ArrayLike, name: str = "lam") -> np.ndarray:
    """A discount or a 1-D array of them, each in ``(0, 1]``."""
    return _numbers(name, lam, 0.0, 1.0, low_open=True)


def projected_step(W: np.ndarray, lr: np.ndarray, grad: np.ndarray, radius: float) -> np.ndarray:
    """One step of ``discounted_oco-eq-ogd`` for a bank of learners, in place.

    ``W`` has one decision per row, ``lr`` one step size per row; each row moves against its
    gradient, then is projected back onto the ball of radius ``radius`` (a clip in 1-D).

    Args:
        W: the decisions, a finite float array of shape ``(m, dim)``, updated in place.
        lr: the ``m`` step sizes, each finite and ``>= 0``.
        grad: the gradients, finite, of shape ``(m, dim)`` or one that broadcasts to it.
        radius: the radius of the ball, in ``(0, inf)``.
    """
    if not isinstance(W, np.ndarray) or W.dtype.kind != "f":
        got = f"dtype {W.dtype}" if isinstance(W, np.ndarray) else type(W).__name__
        raise TypeError(f"W must be a float numpy array (it is updated in place), got {got}")
    check_array("W", W, ndim=2)
    lrs = check_array("lr", lr, shape=(W.shape[0],))
    if not np.all(lrs >= 0):
        raise ValueError(f"lr must have entries in [0, inf), got minimum {float(lrs.min())!r}")
    g = check_array("grad", grad)
    try:
        fits = np.broadcast_shapes(g.shape, W.shape) == W.shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"grad must have the shape of W {W.shape} or broadcast to it, got "
                         f"shape {g.shape}")
    check_range("radius", radius, 0.0, low_open=True)
    return _projected_step(W, lrs, g, float(radius))


def _projected_step(W: np.ndarray, lr: np.ndarray, grad: np.ndarray, radius: float) -> np.ndarray:
    """:func:`projected_step` without the checks: OGD's hot loop, on arrays it built itself."""
    W -= lr[:, None] * grad                                   # gradient step
    if W.shape[-1] == 1:                                      # 1-D: the ball is an interval
        np.minimum(W, radius, out=W)
        np.maximum(W, -radius, out=W)
        return W
    norms = np.sqrt(np.einsum("ij,ij->i", W, W))
    over = norms > radius
    W[over] *= (radius / norms[over])[:, None]                # rescale rows outside the ball
    return W


class OGD:
    """Projected online gradient descent with a constant step, ``discounted_oco-eq-ogd``.

    ``w_{t+1} = Proj_W[w_t - lr * grad f_t(w_t)]`` on the ball of radius ``radius`` in ``R^dim``
    (diameter ``D = 2 radius``), starting at the centre. With any step its lambda-discounted
    regret is at most ``D^2 / (2 lr) + lr G^2 n / 2`` with ``n = 1 / (1 - lam)``
    (``discounted_oco-eq-ogd-bound``); with the Theorem 1 step ``lr = D sqrt(2 (1 - lam)) / G``
    (:meth:`tuned`) it is at most ``sqrt(2) D G / sqrt(1 - lam)`` at *every* horizon,
    ``discounted_oco-eq-thm1``. The step never decays: that is what makes the bound hold uniformly
    in time.

    Args:
        lr: a step size in ``[0, inf)``, or a non-empty 1-D array of ``m`` step sizes: then ``m``
            independent learners run in lockstep (a vectorised bank) and :meth:`predict` returns an
            ``(m, dim)`` array.
        radius: radius of the decision set, in ``(0, inf)``.
        dim: dimension of the decisions, an integer ``>= 1``.
    """

    def __init__(self, lr: float | ArrayLike, *, radius: float = 1.0, dim: int = 1) -> None:
        lrs = _numbers("lr", lr, 0.0)
        self.radius = check_range("radius", radius, 0.0, low_open=True)
        self.dim = check_int("dim", dim, 1)
        self.single = lrs.ndim == 0
        self.lr = np.atleast_1d(lrs).copy()
        self.w = np.zeros((self.lr.size, self.dim))

    @staticmethod
    def tuned_lr(lam: float | ArrayLike, D: float, G: float,
                 T: int | None = None) -> np.ndarray | float:
        """The Theorem 1 step ``D sqrt(2 (1 - lam)) / G``, ``discounted_oco-eq-thm1``.

        In the near-static regime ``lam >= 1 - 1/T`` (only when ``T`` is given) the step is
        ``D / (G sqrt(T))``. ``lam = 1`` needs ``T``.
        """
        lam_a = _check_lam(lam)
        check_range("D", D, 0.0, low_open=True)
        check_range("G", G, 0.0, low_open=True)
        lr = D * np.sqrt(2.0 * (1.0 - lam_a)) / G
        if T is not None:
            check_int("T", T, 1)
            lr = np.where(lam_a >= 1.0 - 1.0 / T, D / (G * math.sqrt(T)), lr)
        elif np.any(lam_a == 1.0):
            raise ValueError("lam = 1 has no Theorem 1 step; pass the horizon T (step D/(G sqrt T))")
        return float(lr) if lr.ndim == 0 else lr

    @classmethod
    def tuned(cls, lam: float | ArrayLike, D: float, G: float, *,
              T: int | None = None, dim: int = 1) -> OGD:
        """OGD on the ball of diameter ``D`` with the Theorem 1 step for ``lam``."""
        return cls(cls.tuned_lr(lam, D, G, T), radius=D / 2.0, dim=dim)

    @staticmethod
    def bound(lam: float | ArrayLike, D: float, G: float) -> np.ndarray | float:
        """Theorem 1's bound ``sqrt(2) D G / sqrt(1 - lam) = sqrt(2) D G sqrt(n)``."""
        lam_a = _check_lam(lam)
        if np.any(lam_a == 1.0):
            raise ValueError("lam must be in (0, 1) for Theorem 1's bound, got 1")
        b = math.sqrt(2.0) * D * G / np.sqrt(1.0 - lam_a)
        return float(b) if b.ndim == 0 else b

    def predict(self) -> np.ndarray:
        """This round's decision: shape ``(dim,)``, or ``(m, dim)`` for a bank."""
        return self.w[0].copy() if self.single else self.w.copy()

    def update(self, loss: RoundLoss | ArrayLike) -> None:
        """Take one projected step (:func:`projected_step`) with the gradient at the decision.

        ``loss`` is a :class:`RoundLoss` (its gradient is evaluated at the decision) or the
        gradient itself (shape ``(dim,)``, or ``(m, dim)`` for a bank).
        """
        if hasattr(loss, "grad"):
            g = loss.grad(self.w)
        else:
            g = np.asarray(loss, dtype=float)
            if g.shape not in {(self.dim,), self.w.shape} and not (self.dim == 1 and g.ndim == 0):
                raise ValueError(f"grad must have shape {(self.dim,)} or {self.w.shape}, "
                                 f"got {g.shape}")
        _projected_step(self.w, self.lr, g, self.radius)


# ----------------------------------------------------------------------------------------------
# Theorem 2: the Discounted-Normal-Predictor with conservative updating
# ----------------------------------------------------------------------------------------------


def _cn(c_n: float | str, n: np.ndarray) -> np.ndarray:
    if isinstance(c_n, str):
        check_choice("c_n", c_n, ("sqrt(n/8)",))
        return np.sqrt(n / 8.0)
    return np.full_like(n, check_range("c_n", c_n, 0.0, low_open=True))


def dnp_confidence(x: ArrayLike, n: float | ArrayLike, Z: float,
                   c_n: float | str = DEFAULT_CN) -> tuple[np.ndarray, np.ndarray]:
    """The DNP confidence ``g(x) = clip(c_n Z erf(x / sqrt(8n)) exp(x^2 / (16 n)), 0, 1)``,
    ``discounted_oco-eq-dnp``.

    Computed in log space, so it never overflows however large ``x`` grows.

    Args:
        x: the deviations, a non-empty array of any shape with no NaN (``+-inf`` are the limits:
            ``g = 1`` and ``g = 0``).
        n: the memory ``n >= 1``, or a 1-D array of memories that broadcasts with ``x``.
        Z: the prior-loss scale, in ``(0, 1]``.
        c_n: as for :class:`DNP`.

    Returns:
        ``(g, saturated)``: the confidence in ``[0, 1]`` and whether the unclipped value is ``>= 1``.
    """
    x = np.asarray(check_array("x", x, finite=False), dtype=float)
    if np.isnan(x).any():
        raise ValueError(f"x must not hold NaN, got {int(np.isnan(x).sum())} NaN entries of {x.size}")
    n = _numbers("n", n, 1.0)
    check_range("Z", Z, 0.0, 1.0, low_open=True)
    _cn(c_n, np.ones(1))  # validate
    try:
        fits = np.broadcast_shapes(n.shape, x.shape) == x.shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"n must be one memory or broadcast to the shape of x {x.shape}, got "
                         f"shape {n.shape}")
    pos = x > 0
    xs = np.where(pos, np.minimum(x, 1e100), 1.0)  # g saturates long before 1e100
    with np.errstate(divide="ignore"):
        logg = (np.log(_cn(c_n, np.broadcast_to(n, x.shape).astype(float)) * Z)
                + np.log(erf(xs / np.sqrt(8.0 * n))) + xs * xs / (16.0 * n))
    g = np.where(pos, np.exp(np.minimum(logg, 0.0)), 0.0)
    return g, pos & (logg >= 0.0)


def dnp_saturation(n: float, Z: float, c_n: float | str = DEFAULT_CN) -> float:
    """The deviation ``x*`` at which the DNP's confidence reaches 1 (``g~(x*) = 1``).

    Roughly ``4 sqrt(n ln(1/(c_n Z)))``: the DNP bets almost nothing until its evidence ``x``
    comes close to this level, then goes all in.
    """
    check_range("n", n, 1.0)
    check_range("Z", Z, 0.0, 1.0, low_open=True)
    c = float(_cn(c_n, np.array([float(n)]))[0])
    if c * Z >= 1.0:
        return 0.0

    def logg(x: float) -> float:
        return math.log(c * Z) + math.log(math.erf(x / math.sqrt(8 * n))) + x * x / (16 * n)

    hi = 4.0 * math.sqrt(n * max(math.log(1.0 / (c * Z)), 1e-12)) + 8.0 * math.sqrt(n)
    return float(brentq(logg, 1e-9 * math.sqrt(n), hi))


class DNP:
    """Discounted-Normal-Predictor with conservative updating (Kapralov & Panigrahy),
    ``discounted_oco-eq-dnp`` and ``discounted_oco-eq-update``.

    State: the discounted deviation ``x`` (``x_1 = 0``). Each round it bets the confidence
    ``omega = g(x)`` on the bit ``b in [-1, 1]`` and gains ``omega * b``; then

    * ``x <- x`` (freeze) if ``conservative`` and ``g~(x) >= 1`` and ``b >= 0``: saturated and right;
    * ``x <- x`` if ``lower_freeze`` and ``x <= 0`` and ``b <= 0`` (a symmetric freeze at the
      bottom; an option, off by default);
    * ``x <- rho x + b`` otherwise, with ``rho = 1 - 1/n``.

    Theorem 2 (``discounted_oco-eq-thm2``): for every slower discount ``eta >= rho`` the
    eta-discounted payoff is at least ``-Z / (2 (1 - eta))``, and under ``rho`` it trails "always
    bet 1" by ``O(sqrt(n log 1/Z))``.

    Args:
        n: the memory ``n >= 1`` (a number, or a 1-D array for a vectorised bank of predictors).
        Z: the prior-loss scale, in ``(0, 1]`` (the paper recommends ``1/T``).
        c_n: the constant in front of ``discounted_oco-eq-dnp``: ``"sqrt(n/8)"`` (the default, the
            factor printed in notes on the paper) or a positive number (``1`` is the form of
            Kapralov and Panigrahy). It only rescales ``Z``.
        conservative: freeze when saturated and right (the paper's conservative updating).
        lower_freeze: also freeze at ``x <= 0`` on non-positive bits (default off).
    """

    def __init__(self, n: float | ArrayLike, Z: float, *, c_n: float | str = DEFAULT_CN,
                 conservative: bool = True, lower_freeze: bool = False) -> None:
        ns = _numbers("n", n, 1.0)
        self.Z = check_range("Z", Z, 0.0, 1.0, low_open=True)
        _cn(c_n, np.ones(1))  # validate
        self.c_n = c_n
        self.single = ns.ndim == 0
        self.n = np.atleast_1d(ns).copy()
        self.rho = 1.0 - 1.0 / self.n
        self.conservative = bool(conservative)
        self.lower_freeze = bool(lower_freeze)
        self.x = np.zeros_like(self.n)
        self._log_czn = np.log(_cn(c_n, self.n) * self.Z)
        self._s8n, self._16n = np.sqrt(8.0 * self.n), 16.0 * self.n
        self._cache: tuple[np.ndarray, np.ndarray] | None = None

    def _state(self) -> tuple[np.ndarray, np.ndarray]:
        if self._cache is None:  # discounted_oco-eq-dnp in log space, constants precomputed
            x = self.x
            g, saturated = np.zeros_like(x), np.zeros(x.shape, dtype=bool)
            idx = np.flatnonzero(x > 0)  # g = 0 wherever there is no evidence yet
            if idx.size:  # |x| <= n (bits in [-1, 1], discount 1 - 1/n): x^2/(16n) stays finite
                xs = x[idx]
                logg = self._log_czn[idx] + np.log(erf(xs / self._s8n[idx])) + xs * xs / self._16n[idx]
                g[idx] = np.exp(np.minimum(logg, 0.0))
                saturated[idx] = logg >= 0.0
            self._cache = (g, saturated)
        return self._cache

    def predict(self) -> np.ndarray | float:
        """The confidence ``omega_t = g(x_t)`` in ``[0, 1]``."""
        g, _ = self._state()
        return float(g[0]) if self.single else g

    def update(self, b: float | ArrayLike) -> None:
        """Reveal the bit(s) ``b in [-1, 1]`` and apply the conservative update."""
        bits = np.asarray(b, dtype=float)
        if not np.max(np.abs(bits)) <= 1.0 + 1e-9:  # also catches NaN
            raise ValueError(f"b must be in [-1, 1], got {bits}")
        bits = np.minimum(np.maximum(bits, -1.0), 1.0)
        _, saturated = self._state()
        freeze = np.zeros(self.x.shape, dtype=bool)
        if self.conservative:
            freeze |= saturated & (bits >= 0)                 # saturated and right: hold x
        if self.lower_freeze:
            freeze |= (self.x <= 0) & (bits <= 0)
        self.x = np.where(freeze, self.x, self.rho * self.x + bits)
        self._cache = None


# ----------------------------------------------------------------------------------------------
# SOGD: a chain of DNP combiners over a geometric grid of discounts
# ----------------------------------------------------------------------------------------------


class SOGD:
    """SOGD: OGD experts for a geometric grid of discounts, chained by DNP combiners.

    * Grid, ``discounted_oco-eq-grid``: ``lam_i = 1 - 2^(i-1)/T`` for ``i = 1..N+1``,
      ``N = ceil(log2(T/tau))``, in *decreasing* order; expert ``A_i`` is OGD with the Theorem 1
      step for ``lam_i``.
    * ``B_0`` is OGD with step ``D/(G sqrt T)`` (the near-static regime; override with ``base_lr``).
    * Combiner, ``discounted_oco-eq-combiner``: ``B_i = (1 - omega_i) B_{i-1} + omega_i A_i`` where
      ``omega_i`` comes from a :class:`DNP` with ``rho = lam_i`` (the smaller discount of the pair),
      fed the bit ``b_i = (f(B_{i-1}) - f(A_i)) / (G D)`` of ``discounted_oco-eq-bit``. The output
      is ``B_{N+1}``.

    Theorem 3 (``discounted_oco-eq-thm3``, :func:`sogd_bound`): for every ``lam`` in
    ``[1 - 1/tau, 1 - 1/T]`` at once the lam-discounted regret is ``O(sqrt(log T / (1 - lam)))``,
    without knowing ``lam``.

    The whole chain runs vectorised: one ``(N+2)``-row OGD bank (``B_0`` then ``A_1..A_{N+1}``), one
    DNP bank, and the chain as a lower-triangular mixing matrix (:meth:`chain`), so a round costs
    ``O(N^2 + N dim)`` numpy work in a constant number of calls.

    Args:
        T: horizon (sets the grid and the default ``Z = 1/T``).
        D: diameter of the decision ball (radius ``D/2``).
        G: Lipschitz bound of the losses (bits are normalised by the *true* ``G D``).
        tau: shortest memory of interest, ``2 <= tau <= T``.
        Z: DNP prior-loss scale (default ``1/T``, the paper's choice).
        dim: dimension of the decisions.
        base_lr: step of the baseline learner ``B_0``, in ``[0, inf)`` (default ``D / (G sqrt T)``).
        c_n, conservative, lower_freeze: passed to every :class:`DNP`.
    """

    def __init__(self, T: int, *, D: float, G: float, tau: float = 2.0,
                 Z: float | None = None, dim: int = 1, base_lr: float | None = None,
                 c_n: float | str = DEFAULT_CN, conservative: bool = True,
                 lower_freeze: bool = False) -> None:
        self.T = check_int("T", T, 2)
        self.D = check_range("D", D, 0.0, low_open=True)
        self.G = check_range("G", G, 0.0, low_open=True)
        self.tau = check_range("tau", tau, 2.0, float(T))
        self.Z = 1.0 / T if Z is None else check_range("Z", Z, 0.0, 1.0, low_open=True)
        if base_lr is not None:
            check_range("base_lr", base_lr, 0.0)
        self.lams = self.grid(T, tau)
        lrs = self.D * np.sqrt(2.0 * (1.0 - self.lams)) / self.G
        b0 = self.D / (self.G * math.sqrt(T)) if base_lr is None else base_lr
        self.bank = OGD(np.concatenate([[b0], lrs]), radius=self.D / 2.0, dim=dim)
        self.dnp = DNP(1.0 / (1.0 - self.lams), self.Z, c_n=c_n, conservative=conservative,
                       lower_freeze=lower_freeze)
        k = self.lams.size
        self._strict_upper = np.triu(np.ones((k + 1, k + 1), dtype=bool), 1)
        self._lower = np.tril(np.ones((k + 1, k + 1)))
        self.omega = np.zeros(k)
        #: the bits ``b_i`` of ``discounted_oco-eq-bit`` fed to the combiners in the last round
        self.bits = np.zeros(k)
        self._outputs: np.ndarray | None = None

    @staticmethod
    def grid(T: int, tau: float = 2.0) -> np.ndarray:
        """The discounts ``1 - 2^(i-1)/T``, ``i = 1..ceil(log2(T/tau)) + 1``, decreasing
        (``discounted_oco-eq-grid``)."""
        check_int("T", T, 2)
        check_range("tau", tau, 2.0, float(T))
        big_n = math.ceil(math.log2(T / tau) - 1e-12)
        return 1.0 - 2.0 ** np.arange(big_n + 1) / T

    @property
    def n_experts(self) -> int:
        return int(self.lams.size)

    def chain(self, omega: np.ndarray) -> np.ndarray:
        """The combiners of ``discounted_oco-eq-combiner`` unrolled into one mixing matrix.

        ``B = C @ [B_0 iterate; A_1..A_K]`` with ``C[i, j] = omega_j prod_{k=j+1..i} (1 - omega_k)``
        (``omega_0 = 1``): row ``i`` says how much of each expert the output ``B_i`` holds.
        """
        keep = np.concatenate([[1.0], 1.0 - omega])        # 1 - omega_k, the share B_{k-1} keeps
        prods = np.cumprod(np.where(self._strict_upper, keep[None, :], 1.0), axis=1)  # [j, i]
        take = np.concatenate([[1.0], omega])              # omega_j, the share A_j enters with
        return prods.T * take[None, :] * self._lower

    def outputs(self) -> np.ndarray:
        """All chain outputs ``B_0..B_K`` for this round, shape ``(K+1, dim)``."""
        self.omega = np.asarray(self.dnp.predict())
        if self.omega.any():
            self._outputs = self.chain(self.omega) @ self.bank.w
        else:  # no combiner bets: every B_i is B_0
            self._outputs = np.repeat(self.bank.w[:1], self.omega.size + 1, axis=0)
        return self._outputs

    def predict(self) -> np.ndarray:
        """This round's decision ``B_{N+1}``, shape ``(dim,)``."""
        return self.outputs()[-1].copy()

    def update(self, loss: RoundLoss) -> float:
        """Reveal the round's loss; update every combiner and every expert. Returns ``f(w_t)``.

        All losses are evaluated before any state changes (``discounted_oco-eq-bit`` needs this
        round's ``B_{i-1}``). The bits fed to the combiners stay in :attr:`bits`.
        """
        outs = self.outputs() if self._outputs is None else self._outputs
        f_b = loss.value(outs)                                   # f(B_0), ..., f(B_K)
        f_x = loss.value(self.bank.w)                            # f(B_0 iterate), f(A_1), ..., f(A_K)
        bits = np.minimum(np.maximum((f_b[:-1] - f_x[1:]) / (self.G * self.D), -1.0), 1.0)
        self.bits = bits
        self.dnp.update(bits)                                    # every combiner at once
        self.bank.update(loss)                                   # every expert at once
        self._outputs = None
        return float(f_b[-1])


def sogd_bound(lam: float | ArrayLike, T: int, D: float, G: float,
               tau: float = 2.0) -> np.ndarray | float:
    """Theorem 3's bound (``discounted_oco-eq-thm3``), with the natural logarithm:
    ``2GD/sqrt(1-lam) (4 sqrt(ln T) + sqrt 2) + GD (N+1) / ((1-lam) T) + 2GD``.

    ``lam`` in ``(0, 1)`` (or a 1-D array of them), ``T >= 2``, ``D`` and ``G`` in ``(0, inf)``,
    ``2 <= tau <= T``.
    """
    lam_a = _check_lam(lam)
    if np.any(lam_a == 1.0):
        raise ValueError("lam must be in (0, 1) for Theorem 3's bound, got 1")
    check_range("D", D, 0.0, low_open=True)
    check_range("G", G, 0.0, low_open=True)
    big_n = SOGD.grid(T, tau).size - 1
    s = 1.0 - lam_a
    b = (2 * G * D / np.sqrt(s) * (4 * math.sqrt(math.log(T)) + math.sqrt(2))
         + G * D * (big_n + 1) / (s * T) + 2 * G * D)
    return float(b) if b.ndim == 0 else b


def run(learner: Any, losses: Iterable[RoundLoss]) -> np.ndarray:
    """Play ``learner`` (``predict``/``update``) against ``losses``; return ``f_t(w_t)`` per round."""
    out = []
    for f in losses:
        w = learner.predict()
        value = f.value(np.atleast_2d(w))
        learner.update(f)
        out.append(value if value.size > 1 else float(value[0]))
    return np.asarray(out)


def dnp_trace(n: float | ArrayLike, Z: float, bits: ArrayLike, *, c_n: float | str = DEFAULT_CN,
              conservative: bool = True, lower_freeze: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Run one or more DNPs on bit streams; ``bits`` has shape ``(T,)`` or ``(T, m)`` (then ``n``
    may be an array of ``m`` memories). Returns ``(x, omega)`` with the same shape as ``bits``.

    ``bits`` must be non-empty with entries in ``[-1, 1]``; ``n >= 1``, ``Z`` in ``(0, 1]`` and
    ``c_n`` are as for :class:`DNP`.
    """
    b = np.asarray(check_array("bits", bits, ndim=(1, 2)), dtype=float)
    if not np.abs(b).max() <= 1.0 + 1e-9:  # the tolerance of DNP.update
        raise ValueError(f"bits must be in [-1, 1], got entries up to {float(np.abs(b).max())!r} "
                         "in absolute value")
    b2 = b.reshape(b.shape[0], -1)
    ns = _numbers("n", n, 1.0)
    if ns.size not in (1, b2.shape[1]):
        raise ValueError(f"n must be one memory or one per column of bits ({b2.shape[1]}), got "
                         f"{ns.size}")
    check_range("Z", Z, 0.0, 1.0, low_open=True)
    dnp = DNP(np.broadcast_to(ns, (b2.shape[1],)), Z, c_n=c_n,
              conservative=conservative, lower_freeze=lower_freeze)
    xs, om = np.empty_like(b2), np.empty_like(b2)
    for t in range(b2.shape[0]):
        xs[t] = dnp.x
        om[t] = dnp.predict()
        dnp.update(b2[t])
    return xs.reshape(b.shape), om.reshape(b.shape)


# ----------------------------------------------------------------------------------------------
# Discounted regret, discounted_oco-eq-regret
# ----------------------------------------------------------------------------------------------


def discounted_sum(values: ArrayLike, lam: float) -> np.ndarray:
    """``S_t = sum_{s<=t} lam^(t-s) v_s`` for every t (along axis 0), by the recursion
    ``S_t = lam S_{t-1} + v_t``: no explicit powers, so nothing underflows.

    ``values`` is a non-empty finite array of at least one dimension (rounds along axis 0, any
    shape after it); ``lam`` is in ``(0, 1]``.
    """
    lam = float(_check_lam(lam))
    v = check_array("values", values)
    if v.ndim == 0:
        raise ValueError("values must have a round axis (at least 1 dimension), got a 0-d array")
    return _discounted_sum(np.asarray(v, dtype=float), lam)


def _discounted_sum(values: np.ndarray, lam: float) -> np.ndarray:
    """:func:`discounted_sum` without the checks, on arrays the regret code has checked."""
    return lfilter([1.0], [1.0, -lam], values, axis=0)


#: weights lam^k below exp(-_WINDOW_NATS) (relative) are dropped from the absolute-loss comparator:
#: a window of 25 memories; the dropped weights are a share e^-25 < 1e-10 of the total weight.
_WINDOW_NATS = 25.0


def _weighted_median_value(y: np.ndarray, w: np.ndarray, radius: float) -> float:
    order = np.argsort(y, kind="stable")
    ys, ws = y[order], w[order]
    cw = np.cumsum(ws)
    m = ys[min(int(np.searchsorted(cw, 0.5 * cw[-1])), ys.size - 1)]
    u = min(max(m, -radius), radius)
    return float(np.dot(w, np.abs(y - u)))


def _ball_ls_value(A: np.ndarray, b: np.ndarray, c: float, radius: float) -> float:
    """``min_{||u|| <= R} u'Au/2 - b'u + c/2`` for PSD ``A`` (eigendecomposition + bisection)."""
    lam, q = np.linalg.eigh(A)
    beta = q.T @ b
    tol = 1e-12 * max(1.0, float(lam[-1]))
    pos = lam > tol

    def val(u_: np.ndarray) -> float:
        return float(0.5 * u_ @ (lam * u_) - beta @ u_ + 0.5 * c)

    if np.all(np.abs(beta[~pos]) <= 1e-12 * max(1.0, np.abs(beta).max())):
        u0 = np.where(pos, beta / np.where(pos, lam, 1.0), 0.0)
        if np.linalg.norm(u0) <= radius:
            return val(u0)
    lo, hi = max(0.0, -float(lam[0])), float(np.linalg.norm(beta)) / radius + 1.0
    for _ in range(200):
        mu = 0.5 * (lo + hi)
        if np.linalg.norm(beta / (lam + mu)) > radius:
            lo = mu
        else:
            hi = mu
    u = beta / (lam + hi)
    return val(u)


def _times(T: int, times: ArrayLike | None) -> np.ndarray:
    """The horizons: every round, or ``times``, a non-empty 1-D array of integers in ``[1, T]``."""
    if times is None:
        return np.arange(1, T + 1)
    raw = check_array("times", times, ndim=1)
    if raw.dtype.kind not in "iu" and not np.all(raw == np.round(raw)):
        raise TypeError(f"times must hold integers (1-based rounds), got {raw[raw != np.round(raw)][0]!r}")
    ts = raw.astype(int)
    if ts.min() < 1 or ts.max() > T:
        raise ValueError(f"times must lie in [1, {T}], got [{ts.min()}, {ts.max()}]")
    return ts


def _family_data(family: str, data: Any) -> tuple[int, Any]:
    """``data`` of ``family`` checked and as float arrays, with its number of rounds ``T``."""
    check_choice("family", family, ("linear", "absolute", "squared"))
    if family == "linear":
        g = np.asarray(check_array("data", data, ndim=(1, 2)), dtype=float)
        return g.shape[0], g.reshape(g.shape[0], -1)
    if family == "absolute":
        y = np.asarray(check_array("data", data, ndim=(1, 2)), dtype=float)
        if y.ndim == 2 and y.shape[1] != 1:
            raise ValueError(f"data must be the targets y, shape (T,), got shape {y.shape}")
        return y.shape[0], y.ravel()
    if not isinstance(data, tuple | list) or len(data) != 2:
        raise TypeError(f"data must be a pair (X, y) for the squared family, got "
                        f"{type(data).__name__}")
    y = np.asarray(check_array("data[1]", data[1], ndim=(1, 2)), dtype=float)
    if y.ndim == 2 and y.shape[1] != 1:
        raise ValueError(f"data[1] (y) must have shape (T,), got shape {y.shape}")
    y = y.ravel()
    x = np.asarray(check_array("data[0]", data[0], ndim=(1, 2)), dtype=float)
    if x.shape[0] != y.size:
        raise ValueError(f"data[0] (X) must have one row per entry of data[1] (y, {y.size}), got "
                         f"shape {x.shape}")
    return y.size, (x.reshape(y.size, -1), y)


def discounted_comparator(lam: float, family: str, data: Any, *, radius: float = 1.0,
                          times: ArrayLike | None = None) -> np.ndarray:
    """The comparator's part of ``discounted_oco-eq-regret``: ``min_{||u||<=R} sum_{s<=t}
    lam^(t-s) f_s(u)`` at the (1-based) horizons ``times`` (default: every t).

    It depends only on the losses, so one call serves every learner (see :func:`discounted_regret`).
    ``lam``, ``family``, ``data``, ``radius`` and ``times`` are as in :func:`discounted_regret`.
    """
    T, prepared = _family_data(family, data)
    lam = float(_check_lam(lam))
    radius = check_range("radius", radius, 0.0, low_open=True)
    return _comparator(lam, family, prepared, radius, _times(T, times))


def _comparator(lam: float, family: str, data: Any, radius: float, ts: np.ndarray) -> np.ndarray:
    """:func:`discounted_comparator` on checked arguments (``data`` from :func:`_family_data`)."""
    if family == "linear":
        return -radius * np.linalg.norm(_discounted_sum(data, lam)[ts - 1], axis=1)
    if family == "absolute":
        y = data
        loglam = math.log(lam)
        width = y.size if lam == 1.0 else min(y.size, math.ceil(_WINDOW_NATS / -loglam))
        comp = np.empty(ts.size)
        if 4 * width >= y.size:  # long memories: sort once, weight the sorted targets per horizon
            order = np.argsort(y, kind="stable")
            ys = y[order]
            for k, t in enumerate(ts):
                w = np.where(order < t, np.exp(np.minimum((t - 1 - order) * loglam, 0.0)), 0.0)
                cw = np.cumsum(w)
                u = ys[min(int(np.searchsorted(cw, 0.5 * cw[-1])), ys.size - 1)]
                comp[k] = np.dot(w, np.abs(ys - min(max(u, -radius), radius)))
            return comp
        weights = np.exp(np.arange(width - 1, -1, -1) * loglam)  # lam^(t-s), oldest first
        for k, t in enumerate(ts):
            lo = max(0, t - width)
            comp[k] = _weighted_median_value(y[lo:t], weights[width - (t - lo):], radius)
        return comp
    x, y = data
    a_t = _discounted_sum(x[:, :, None] * x[:, None, :], lam)
    b_t = _discounted_sum(y[:, None] * x, lam)
    c_t = _discounted_sum(y * y, lam)
    return np.array([_ball_ls_value(a_t[t - 1], b_t[t - 1], c_t[t - 1], radius) for t in ts])


def discounted_regret(learner_losses: ArrayLike, lam: float, family: str, data: Any, *,
                      radius: float = 1.0, times: ArrayLike | None = None) -> np.ndarray:
    """The lambda-discounted regret of ``discounted_oco-eq-regret`` at the (1-based) horizons
    ``times`` (default: all).

    ``D-Regret(t) = sum_{s<=t} lam^(t-s) f_s(w_s) - min_{||u||<=R} sum_{s<=t} lam^(t-s) f_s(u)``; the
    comparator is re-optimised for every ``t`` under the same weights. The learner's part uses the
    recursion of :func:`discounted_sum`; the comparator's is :func:`discounted_comparator`.

    Args:
        learner_losses: ``f_t(w_t)`` for ``t = 1..T``, finite, shape ``(T,)``, or ``(T, m)`` for
            ``m`` learners at once (then the result has shape ``(len(times), m)``); ``T`` is the
            number of rounds of ``data``.
        lam: the discount in ``(0, 1]``.
        family: ``"linear"`` (``data = g``, shape ``(T,)`` or ``(T, d)``; comparator
            ``-R ||S_t||`` with ``S_t`` the discounted gradient sum), ``"absolute"`` (``data = y``,
            shape ``(T,)``, 1-D ``f_t(u) = |u - y_t|``; comparator a clipped weighted median over the
            last ``25 / ln(1/lam)`` rounds: the weights dropped, ``lam^k < e^-25``, are a share
            below ``1e-10`` of the total) or ``"squared"``
            (``data = (X, y)``, ``f_t(u) = (<x_t,u> - y_t)^2/2``; ball-constrained least squares on
            discounted Gram statistics). Every array is finite and non-empty.
        radius: radius R of the comparator's ball, in ``(0, inf)``.
        times: the horizons, a non-empty 1-D array of integers in ``[1, T]`` (default: all).
    """
    T, prepared = _family_data(family, data)
    lam = float(_check_lam(lam))
    ell = np.asarray(check_array("learner_losses", learner_losses, ndim=(1, 2)), dtype=float)
    if ell.shape[0] != T:
        raise ValueError(f"learner_losses must have one row per round of data ({T}), got shape "
                         f"{ell.shape}")
    radius = check_range("radius", radius, 0.0, low_open=True)
    ts = _times(T, times)
    learner = _discounted_sum(ell, lam)[ts - 1]
    comp = _comparator(lam, family, prepared, radius, ts)
    return learner - (comp[:, None] if learner.ndim == 2 else comp)
