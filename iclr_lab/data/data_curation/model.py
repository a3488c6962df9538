"""The data-curation model, the curation rules, curated ridge and its closed-form test error.

A Gaussian teacher-student model (Dohmatob, Pezeshki and Askari-Hemmat, "Why Less is More
(Sometimes): A Theory of Data Curation", ICLR 2026): a *generator* ``w_g`` labels the training inputs
(``data_curation-eq-labels``), an *oracle* ``w_o`` scores them by their margin and a curation rule
keeps some of them (``data_curation-eq-rules``), and ridge regression normalised by the total sample
size (``data_curation-eq-ridge``) is judged against the ground truth ``w_star``
(``data_curation-eq-error``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed

__all__ = ["RULES", "Geometry", "Moments", "angle_error", "keep_mask", "kept_moments", "limit_error",
           "ridge", "sample", "self_train", "simulate", "theory_error", "threshold"]

#: The names of the curation rules of ``data_curation-eq-rules``. ``full`` keeps everything,
#: ``keep_easy`` and ``keep_hard`` keep the large- or small-margin examples by the oracle's margin,
#: ``agree`` keeps the examples whose label the oracle agrees with, and ``agree_easy`` and
#: ``agree_hard`` also filter by difficulty.
RULES: tuple[str, ...] = ("full", "keep_easy", "keep_hard", "agree", "agree_easy", "agree_hard")
_LABEL_AWARE = ("agree", "agree_easy", "agree_hard")
_SQRT2PI = math.sqrt(2.0 * math.pi)


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Geometry:
    """The cosines between the ground truth ``w_star``, the generator ``w_g`` and the oracle ``w_o``.

    Attributes:
        rho: generator quality, ``<w_g, w_star>``, in ``[-1, 1]``.
        rho_star: oracle quality, ``<w_o, w_star>``, in ``[-1, 1]``.
        rho_g: oracle-generator alignment, ``<w_o, w_g>``, in ``[-1, 1]``.

    The three unit vectors are built in the first three coordinates (``data_curation-eq-geometry``):
    ``w_o = e1``, ``w_g = rho_g e1 + s e2`` with ``s = sqrt(1 - rho_g^2)``, and
    ``w_star = rho_star e1 + c2 e2 + c3 e3``. A triple whose Gram matrix is not positive
    semi-definite has no such vectors and is rejected.
    """

    rho: float
    rho_star: float
    rho_g: float

    def __post_init__(self) -> None:
        for name in ("rho", "rho_star", "rho_g"):
            check_range(name, getattr(self, name), -1.0, 1.0)
        gram = np.array([[1.0, self.rho, self.rho_star], [self.rho, 1.0, self.rho_g],
                         [self.rho_star, self.rho_g, 1.0]])
        if np.linalg.eigvalsh(gram).min() < -1e-12:
            raise ValueError(f"(rho, rho_star, rho_g) = ({self.rho}, {self.rho_star}, {self.rho_g}) "
                             "is not a valid geometry: the Gram matrix of (w_star, w_g, w_o) must be "
                             "positive semi-definite")

    @property
    def s(self) -> float:
        """``sqrt(1 - rho_g^2)``: the part of ``w_g`` orthogonal to the oracle."""
        return math.sqrt(max(1.0 - self.rho_g**2, 0.0))

    @property
    def c2(self) -> float:
        """The coordinate of ``w_star`` along ``e2`` (0 when the oracle and generator coincide)."""
        if self.s < 1e-12:
            return 0.0
        return (self.rho - self.rho_g * self.rho_star) / self.s

    @property
    def tau(self) -> float:
        """``rho_g / sqrt(1 - rho_g^2)`` (infinite for self-curation, ``w_o = w_g``)."""
        return math.inf if self.s < 1e-12 else self.rho_g / self.s

    def vectors(self, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(w_star, w_g, w_o)`` as unit vectors of ``R^d`` (``d >= 3``)."""
        d = check_int("d", d, 3)
        w_o, w_g, w_star = np.zeros(d), np.zeros(d), np.zeros(d)
        w_o[0] = 1.0
        w_g[0], w_g[1] = self.rho_g, self.s
        c3 = math.sqrt(max(1.0 - self.rho_star**2 - self.c2**2, 0.0))
        w_star[:3] = self.rho_star, self.c2, c3
        return w_star, w_g, w_o

    @property
    def generator_error(self) -> float:
        """The generator's own test error ``arccos(rho)/pi``."""
        return math.acos(self.rho) / math.pi

    @property
    def oracle_error(self) -> float:
        """The oracle's own test error ``arccos(rho_star)/pi``."""
        return math.acos(self.rho_star) / math.pi


def sample(n: int, d: int, w_g: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` inputs ``x ~ N(0, I_d)`` and their generator labels ``y = sign(x . w_g)``
    (``data_curation-eq-labels``); ``n, d >= 1``, ``w_g`` finite of shape ``(d,)``."""
    n = check_int("n", n, 1)
    d = check_int("d", d, 1)
    w_g = check_array("w_g", w_g, shape=(d,))
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    X = rng.standard_normal((n, d))
    y = np.where(X @ w_g >= 0, 1.0, -1.0)
    return X, y


def threshold(rule: str, keep_fraction: float) -> float:
    """The margin threshold ``alpha`` of a difficulty rule that keeps ``keep_fraction`` of N(0, 1)
    margins: ``Phi^-1((1+p)/2)`` to keep the hard ones (``|t| <= alpha``), ``Phi^-1(1 - p/2)`` to keep
    the easy ones (``|t| >= alpha``); see ``data_curation-eq-rules``. ``keep_fraction`` is in
    ``(0, 1]``."""
    check_choice("rule", rule, RULES)
    p = check_range("keep_fraction", keep_fraction, 0.0, 1.0, low_open=True)
    if rule.endswith("hard"):
        return math.inf if p >= 1.0 else float(ndtri((1.0 + p) / 2.0))
    if rule.endswith("easy"):
        return 0.0 if p >= 1.0 else float(ndtri(1.0 - p / 2.0))
    return math.nan


def _margins_and_labels(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = check_array("t", t, ndim=1)
    return t, check_array("y", y, shape=t.shape)


def keep_mask(rule: str, keep_fraction: float, t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which examples a rule keeps, from the oracle margins ``t = x . w_o`` and the labels ``y``
    (``data_curation-eq-rules``).

    ``keep_fraction`` is the fraction the *difficulty* filter keeps: for ``keep_easy``/``keep_hard``
    it is the kept fraction itself; the label-aware ``agree_easy``/``agree_hard`` apply the same
    margin threshold and then drop the examples whose label the oracle disagrees with, so they keep
    less. ``full`` and ``agree`` ignore it. ``keep_fraction`` is in ``(0, 1]``; ``t`` and ``y``
    are finite, of one shape ``(n,)``.
    """
    check_choice("rule", rule, RULES)
    check_range("keep_fraction", keep_fraction, 0.0, 1.0, low_open=True)
    t, y = _margins_and_labels(t, y)
    if rule in ("full", "agree"):
        keep = np.ones(t.shape, dtype=bool)
    elif rule.endswith("hard"):
        keep = np.abs(t) <= threshold(rule, keep_fraction)
    else:
        keep = np.abs(t) >= threshold(rule, keep_fraction)
    if rule in _LABEL_AWARE:
        keep &= y == np.where(t >= 0, 1.0, -1.0)
    return keep


def _check_fit(X: np.ndarray, y: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, ...]:
    X = check_array("X", X, ndim=2)
    keep = check_array("keep", keep, shape=X.shape[:1])
    if keep.dtype != bool:
        raise TypeError(f"keep must be a boolean mask, got dtype {keep.dtype}")
    return X, check_array("y", y, shape=X.shape[:1]), keep


def ridge(X: np.ndarray, y: np.ndarray, keep: np.ndarray, lam: float) -> np.ndarray:
    """Ridge regression on the kept examples, normalised by the *total* ``n``
    (``data_curation-eq-ridge``): ``(X^T D X / n + lam I)^-1 X^T D y / n`` with ``D = diag(keep)``;
    ``X`` is finite ``(n, d)``, ``y`` finite ``(n,)``, ``keep`` a boolean ``(n,)``, ``lam > 0``."""
    X, y, keep = _check_fit(X, y, keep)
    lam = check_range("lam", lam, 0.0, low_open=True)
    n, d = X.shape
    Xk = X[keep]
    A = Xk.T @ Xk / n
    A[np.diag_indices(d)] += lam
    return np.linalg.solve(A, Xk.T @ y[keep] / n)


def angle_error(w: np.ndarray, w_star: np.ndarray) -> float:
    """``P(sign(x . w) != sign(x . w_star))`` for ``x ~ N(0, I)``: ``arccos(cos(w, w_star))/pi``
    (``data_curation-eq-error``). A zero vector predicts nothing: error 1/2. ``w`` and ``w_star``
    are finite, of one shape ``(d,)``."""
    w = check_array("w", w, ndim=1)
    w_star = check_array("w_star", w_star, shape=w.shape)
    norm = float(np.linalg.norm(w)) * float(np.linalg.norm(w_star))
    if norm == 0.0:
        return 0.5
    return math.acos(min(max(float(w @ w_star) / norm, -1.0), 1.0)) / math.pi


def simulate(rule: str, keep_fraction: float, n: int, d: int, *, rho: float = 0.999,
             rho_star: float = 0.9999, rho_g: float = 0.999, lam: float = 1e-2,
             seed: int = 0) -> float:
    """Monte Carlo test error of one curated ridge fit: draw ``n`` examples in ``R^d``, label them
    with the generator, curate with the oracle (:func:`keep_mask`), fit :func:`ridge` and return
    :func:`angle_error` against the ground truth. The theory is :func:`theory_error`.

    ``keep_fraction`` is in ``(0, 1]``, ``n >= 1``, ``d >= 3``, ``lam > 0``, ``seed`` in
    ``[0, 2**32 - 1]``, and ``(rho, rho_star, rho_g)`` a :class:`Geometry`.
    """
    check_choice("rule", rule, RULES)
    check_range("keep_fraction", keep_fraction, 0.0, 1.0, low_open=True)
    check_int("n", n, 1)
    check_range("lam", lam, 0.0, low_open=True)
    seed = check_seed(seed)
    geo = Geometry(rho, rho_star, rho_g)
    w_star, w_g, w_o = geo.vectors(d)
    X, y = sample(n, d, w_g, np.random.default_rng(seed))
    keep = keep_mask(rule, keep_fraction, X @ w_o, y)
    return angle_error(ridge(X, y, keep, lam), w_star)


# ----------------------------------------------------------------------------------------------
# The closed form
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Moments:
    """Second moments of the kept examples in the plane of ``(w_o, w_g)``.

    Attributes:
        p: the kept fraction ``P(keep)``.
        cov: ``E[u u^T | keep]`` (2x2), with ``u = (x . e1, x . e2)``.
        cross: ``E[u y | keep]`` (2).

    For a label-agnostic rule ``cov = diag(gamma/p, 1)`` and ``cross = (beta_tilde, beta)/p`` in the
    paper's four scalars (``data_curation-eq-scalars``).
    """

    p: float
    cov: np.ndarray
    cross: np.ndarray

    @property
    def a(self) -> np.ndarray:
        """Population least squares on the kept distribution, ``cov^-1 cross``."""
        return np.linalg.solve(self.cov, self.cross)

    @property
    def noise(self) -> float:
        """Residual variance ``E[(y - u . a)^2 | keep] = 1 - cross . a``."""
        return max(1.0 - float(self.cross @ self.a), 0.0)


_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(80)


def _integrate(f: Any, intervals: Sequence[tuple[float, float]]) -> np.ndarray:
    # Gauss-Legendre on each piece; the pieces split at the kinks of |g| and near 0 at the scale
    # 1/tau, where phi(tau g) and Phi(tau g) change fast when the oracle and generator are close.
    total: np.ndarray | float = 0.0
    for a, b in intervals:
        if b <= a:
            continue
        g = 0.5 * (b - a) * _NODES + 0.5 * (a + b)
        total = total + 0.5 * (b - a) * (f(g) * _WEIGHTS).sum(axis=-1)
    return np.asarray(total)


def kept_moments(geometry: Geometry, rule: str, keep_fraction: float) -> Moments:
    """The kept distribution's moments :class:`Moments` by one-dimensional quadrature over the
    oracle margin ``g ~ N(0, 1)``: the orthogonal coordinate ``G2`` and the label
    ``y = sign(rho_g g + s G2)`` are integrated out in closed form (``data_curation-eq-scalars``).
    ``keep_fraction`` is in ``(0, 1]``."""
    if not isinstance(geometry, Geometry):
        raise TypeError(f"geometry must be a Geometry, got {type(geometry).__name__}")
    check_choice("rule", rule, RULES)
    check_range("keep_fraction", keep_fraction, 0.0, 1.0, low_open=True)
    tau = geometry.tau
    alpha = threshold(rule, keep_fraction)
    top = 12.0
    if rule in ("full", "agree") or (rule.endswith("hard") and alpha == math.inf):
        ranges = [(0.0, top)]
    elif rule.endswith("hard"):
        ranges = [(0.0, alpha)]
    else:
        ranges = [(alpha, top)]
    # split the positive half-line at the scale of 1/tau (the margin function is symmetric)
    cuts = sorted({c for c in (1.0 / tau, 4.0 / tau, 12.0 / tau) if 0 < c < top})
    pieces: list[tuple[float, float]] = []
    for lo, hi in ranges:
        edges = [lo, *[c for c in cuts if lo < c < hi], hi]
        pieces += list(zip(edges[:-1], edges[1:], strict=True))

    def phi(v: np.ndarray) -> np.ndarray:
        return np.exp(-0.5 * v**2) / _SQRT2PI

    def big_phi(v: np.ndarray) -> np.ndarray:
        return np.asarray(ndtr(v))

    if math.isinf(tau):
        def tp(g: np.ndarray) -> np.ndarray:   # phi(tau g) for g > 0, tau = inf
            return np.zeros_like(g)

        def tP(g: np.ndarray) -> np.ndarray:   # Phi(tau g)
            return np.ones_like(g)
    else:
        def tp(g: np.ndarray) -> np.ndarray:
            return phi(tau * g)

        def tP(g: np.ndarray) -> np.ndarray:
            return big_phi(tau * g)

    # Integrals over g > 0 of phi_N(g) times each conditional moment, doubled by symmetry.
    # Label-agnostic: E[y|g] = 2 Phi(tau g) - 1, E[G2 y|g] = 2 phi(tau g), E[G2^2|g] = 1.
    # Label-aware (keep only y = sign g): E[1|g] = Phi(tau|g|), E[G2 1|g] = sign(g) phi(tau|g|),
    # E[G2^2 1|g] = Phi(tau|g|) - tau|g| phi(tau|g|), E[y 1|g] = sign(g) Phi(tau|g|),
    # E[G2 y 1|g] = phi(tau|g|).
    def integrand(g: np.ndarray) -> np.ndarray:
        w = phi(g)
        if rule in _LABEL_AWARE:
            P, p_ = tP(g), tp(g)
            tg_p = np.zeros_like(g) if math.isinf(tau) else tau * g * p_
            rows = [P, g * g * P, g * p_, P - tg_p, g * P, p_]
        else:
            one = np.ones_like(g)
            rows = [one, g * g, np.zeros_like(g), one, g * (2 * tP(g) - 1), 2 * tp(g)]
        return 2.0 * w * np.stack(rows)

    p, m11, m12, m22, c1, c2 = _integrate(integrand, pieces)
    if p <= 1e-12:
        raise ValueError(f"rule {rule!r} with keep_fraction={keep_fraction} keeps nothing")
    cov = np.array([[m11, m12], [m12, m22]]) / p
    return Moments(float(p), cov, np.array([c1, c2]) / p)


def _kappa(psi: np.ndarray, lam_eff: np.ndarray) -> np.ndarray:
    # The positive root of kappa = lam' + psi kappa / (1 + kappa) (data_curation-eq-kappa):
    # kappa^2 + (1 - psi - lam') kappa - lam' = 0.
    b = 1.0 - psi - lam_eff
    return 0.5 * (-b + np.sqrt(b * b + 4.0 * lam_eff))


def theory_error(rule: str, keep_fraction: float, phi: float | np.ndarray, *, rho: float = 0.999,
                 rho_star: float = 0.9999, rho_g: float = 0.999, lam: float = 1e-2,
                 normalise_by_kept: bool = False) -> np.ndarray | float:
    """The proportional-limit test error (``d, n -> inf``, ``d/n = phi``) of curated ridge:
    ``data_curation-eq-kappa`` to ``data_curation-eq-theory``.

    The kept ``p n`` examples have covariance ``diag(Sigma_u, I)``; ridge with the total-``n``
    normalisation is ridge on them with ``lam / p`` and aspect ratio ``psi = phi / p``. ``phi`` may
    be an array (one value per data size). ``normalise_by_kept=True`` uses ``lam`` instead of
    ``lam / p``: the normalisation bug the chapter warns about, kept to show that the check against
    Monte Carlo can tell it apart. ``phi`` is in ``(0, inf)``, ``lam`` in ``[0, inf)``.
    """
    geo = Geometry(rho, rho_star, rho_g)
    lam = check_range("lam", lam, 0.0)
    phis = np.atleast_1d(np.asarray(phi, dtype=float))
    if np.any(~np.isfinite(phis)) or np.any(phis <= 0):
        raise ValueError(f"phi must be in (0, inf), got {phi!r}")
    m = kept_moments(geo, rule, keep_fraction)
    psi = phis / m.p
    lam_eff = np.full_like(psi, lam if normalise_by_kept else lam / m.p)
    if lam == 0.0:
        kappa = np.maximum(psi - 1.0, 0.0)
    else:
        kappa = _kappa(psi, lam_eff)
    a, S, noise = m.a, m.cov, m.noise
    ev, V = np.linalg.eigh(S)
    a_e = V.T @ a                                     # a in the eigenbasis of Sigma_u
    shrink = ev[None, :] / (ev[None, :] + kappa[:, None])       # Sigma (Sigma + kappa)^-1
    mean = (shrink * a_e[None, :]) @ V.T              # E[w_hat] in the (e1, e2) plane
    bias = kappa**2 * ((ev[None, :] * a_e[None, :] ** 2) / (ev[None, :] + kappa[:, None]) ** 2).sum(1)
    df2 = psi / (1.0 + kappa) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        bulk = np.where(df2 < 1.0, (noise + bias) / (1.0 - df2) * df2, np.inf)
    m0 = geo.rho_star * mean[:, 0] + geo.c2 * mean[:, 1]
    nu0 = (mean**2).sum(1) + bulk
    with np.errstate(invalid="ignore"):
        err = np.where(np.isfinite(nu0), np.arccos(np.clip(m0 / np.sqrt(nu0), -1, 1)) / math.pi, 0.5)
    return float(err[0]) if np.ndim(phi) == 0 else err


def limit_error(rule: str, keep_fraction: float, *, rho: float, rho_star: float,
                rho_g: float) -> float:
    """The infinite-data, vanishing-ridge limit ``F(q)`` of Theorem 2 (``data_curation-eq-limit``):
    ``w_hat`` tends to the population least squares ``a`` of the kept distribution. The arguments
    are those of :func:`kept_moments` and :class:`Geometry`."""
    geo = Geometry(rho, rho_star, rho_g)
    a = kept_moments(geo, rule, keep_fraction).a
    m0 = geo.rho_star * a[0] + geo.c2 * a[1]
    return math.acos(min(max(m0 / float(np.linalg.norm(a)), -1.0), 1.0)) / math.pi


# ----------------------------------------------------------------------------------------------
# Self-training
# ----------------------------------------------------------------------------------------------


def _geometry(rho: float, rho_star: float, rho_g: float | None) -> Geometry:
    """The :class:`Geometry`, ``rho_g=None`` standing for ``rho * rho_star`` (independent errors)."""
    if rho_g is None:
        rho_g = check_range("rho", rho, -1.0, 1.0) * check_range("rho_star", rho_star, -1.0, 1.0)
    return Geometry(rho, rho_star, rho_g)


def self_train(rule: str, keep_fraction: float, rounds: int, n: int, d: int, *, rho: float = 0.95,
               rho_star: float = 0.97, rho_g: float | None = None, lam: float = 1e-2,
               seed: int = 0) -> np.ndarray:
    """Iterated self-training: round 1 learns from the given generator; every later round learns
    from fresh inputs labelled by the previous round's student (``data_curation-eq-collapse``). The
    oracle stays fixed. Returns the test error after each round (``rounds`` values).

    ``rho_g=None`` takes the generator's and the oracle's errors independent (orthogonal):
    ``rho_g = rho * rho_star``. ``keep_fraction`` is in ``(0, 1]``, ``rounds, n >= 1``,
    ``d >= 3``, ``lam > 0``, ``seed`` in ``[0, 2**32 - 1]`` (a run is always seeded).
    """
    check_choice("rule", rule, RULES)
    check_range("keep_fraction", keep_fraction, 0.0, 1.0, low_open=True)
    rounds = check_int("rounds", rounds, 1)
    check_int("n", n, 1)
    check_range("lam", lam, 0.0, low_open=True)
    seed = check_seed(seed)
    geo = _geometry(rho, rho_star, rho_g)
    w_star, w_g, w_o = geo.vectors(d)
    rng = np.random.default_rng(seed)
    errors = np.empty(rounds)
    for r in range(rounds):
        X, y = sample(n, d, w_g, rng)
        w = ridge(X, y, keep_mask(rule, keep_fraction, X @ w_o, y), lam)
        errors[r] = angle_error(w, w_star)
        w_g = w / np.linalg.norm(w)
    return errors
