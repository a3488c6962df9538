"""The time-scale arithmetic behind MT-DAO, in closed form and by Monte Carlo (numpy only).

The chapter is ``book/distributed/mtdao.md``; equations are cited by their label there.

* :func:`momentum_variance`: the variance of a momentum ``K`` local steps after it was set to the
  synchronised value (``mtdao-eq-variance``); :func:`variance_check` measures it by Monte Carlo.
* :func:`information_kept`: the mutual information between the synchronised momentum and the
  local one ``K`` steps later, for a scalar Gaussian model (``mtdao-eq-mi``).
* :func:`update_weights` and :func:`anchor_share`: the weight an update puts on each past
  gradient (``mtdao-eq-impulse``), and the share of a round's updates that still comes from the
  state synchronised at its start (``mtdao-eq-anchor``).
* :func:`beta_omega` and :func:`sync_penalty`: the two constants of the paper's Theorem 1
  (``mtdao-eq-constants``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from iclr_lab.core.validation import check_int, check_range, check_seed

__all__ = [
    "anchor_share",
    "beta_omega",
    "information_kept",
    "momentum_variance",
    "sync_penalty",
    "update_weights",
    "variance_check",
]


def _beta(name: str, beta: float) -> float:
    return check_range(name, beta, 0, 1, high_open=True)


def _mix(betas: Sequence[float], weights: Sequence[float]) -> tuple[list[float], list[float]]:
    bs = [_beta(f"betas[{i}]", b) for i, b in enumerate(betas)]
    ws = [check_range(f"weights[{i}]", w, 0, 1) for i, w in enumerate(weights)]
    if len(bs) != len(ws) or not bs:
        raise ValueError(f"betas and weights must have the same length >= 1 (one per first moment), "
                         f"got {len(bs)} and {len(ws)}")
    if sum(ws) > 1 + 1e-12:
        raise ValueError(f"weights must sum to at most 1, got sum {sum(ws):.6g}")
    return bs, ws


def momentum_variance(beta: float, K: int, sigma: float = 1.0) -> float:
    r"""``Var(u_{t+K} | u_t) = (1 - beta) / (1 + beta) * (1 - beta^(2K)) * sigma^2``
    (``mtdao-eq-variance``): the variance that ``K`` local steps of an EMA with coefficient ``beta``
    add to a momentum fixed at the synchronised value, when the local gradients carry independent
    noise of variance ``sigma^2`` per coordinate. ``beta`` is in [0, 1), ``K`` an integer >= 0,
    ``sigma`` in [0, inf)."""
    beta = _beta("beta", beta)
    K = check_int("K", K, 0)
    sigma = check_range("sigma", sigma, 0, math.inf, high_open=True)
    return (1 - beta) / (1 + beta) * (1 - beta ** (2 * K)) * sigma**2


def information_kept(beta: float, K: int, snr: float = 1.0) -> float:
    r"""Mutual information, in nats, between the synchronised momentum ``U_t`` and the local
    momentum ``U_{t+K} = beta^K U_t + L`` ``K`` steps later (``mtdao-eq-mi``), for a scalar
    Gaussian model: ``0.5 log(1 + beta^(2K) s^2 / l^2)`` with ``l^2`` = :func:`momentum_variance`
    and ``s^2 = snr * sigma^2`` the variance of ``U_t``. It is infinite at ``K = 0``. ``beta`` is
    in [0, 1), ``K`` an integer >= 0, ``snr`` in [0, inf)."""
    beta = _beta("beta", beta)
    K = check_int("K", K, 0)
    snr = check_range("snr", snr, 0, math.inf, high_open=True)
    if K == 0:  # no local step yet: the local momentum is the synchronised one
        return math.inf if snr > 0 else 0.0
    noise = momentum_variance(beta, K)
    return 0.5 * math.log1p(beta ** (2 * K) * snr / noise)


def update_weights(betas: Sequence[float], weights: Sequence[float], lags: int) -> np.ndarray:
    r"""Weight of the gradient from ``k`` steps ago in one update, for ``k = 0 .. lags - 1``
    (``mtdao-eq-impulse``, without bias correction and normalisation):
    ``w_0 = (1 - sum_j omega_j) + sum_j omega_j (1 - beta_j)`` and
    ``w_k = sum_j omega_j (1 - beta_j) beta_j^k``. Adam is ``betas=(beta1,), weights=(1,)``.
    Each beta is in [0, 1), each weight in [0, 1] with sum <= 1 (one per beta), ``lags`` an integer
    >= 1."""
    bs, ws = _mix(betas, weights)
    lags = check_int("lags", lags, 1)
    k = np.arange(lags, dtype=float)
    w = np.zeros(lags)
    for b, om in zip(bs, ws, strict=True):
        w += om * (1 - b) * b**k
    w[0] += 1 - sum(ws)
    return w


def anchor_share(betas: Sequence[float], weights: Sequence[float], K: int) -> float:
    r"""Share of a round's ``K`` updates that comes from the first moments synchronised at its
    start (``mtdao-eq-anchor``): ``(1/K) sum_{k=1..K} sum_j omega_j beta_j^k``.

    After ``k`` local steps the synchronised momentum still weighs ``beta_j^k`` in ``u^j``, and
    ``u^j`` weighs ``omega_j`` in the update. Adam with ``beta1 = 0.9`` and ``K = 32`` keeps about
    0.27; ``beta1 = 0.99`` about 0.86. ``betas`` and ``weights`` as for :func:`update_weights`;
    ``K`` an integer >= 1.
    """
    bs, ws = _mix(betas, weights)
    K = check_int("K", K, 1)
    total = 0.0
    for b, om in zip(bs, ws, strict=True):
        # sum_{k=1..K} b^k, written to stay exact as b -> 0
        total += om * (K if b == 1 else b * (1 - b**K) / (1 - b))
    return total / K


def beta_omega(betas: Sequence[float], weights: Sequence[float]) -> float:
    r"""``beta_omega = sum_j omega_j beta_j / (1 - beta_j)`` (``mtdao-eq-constants``): the constant
    of Theorem 1 that caps the step size; slower momenta give a smaller largest step. ``betas`` and
    ``weights`` as for :func:`update_weights`."""
    bs, ws = _mix(betas, weights)
    return sum(om * b / (1 - b) for b, om in zip(bs, ws, strict=True))


def sync_penalty(px: float, p_moments: Sequence[float], betas: Sequence[float],
                 weights: Sequence[float]) -> float:
    r"""``psi = 4 (1 - p_x) / p_x^2 * sum_j omega_j (1 - beta_j)(1 - p_j) / (1 - (1 - p_j) beta_j)``
    (``mtdao-eq-constants``): Theorem 1's communication penalty, with parameter and momentum
    synchronisation probabilities ``p_x = 1/Kx`` and ``p_j = 1/K_j`` in (0, 1]. It vanishes as
    ``beta_j -> 1``: a slow momentum does not mind rare averaging. ``px`` and each of ``p_moments``
    (one per beta) are in (0, 1]; ``betas`` and ``weights`` as for :func:`update_weights`."""
    bs, ws = _mix(betas, weights)
    px = check_range("px", px, 0, 1, low_open=True)
    ps = [check_range(f"p_moments[{i}]", p, 0, 1, low_open=True) for i, p in enumerate(p_moments)]
    if len(ps) != len(bs):
        raise ValueError(f"p_moments must hold one probability per first moment ({len(bs)}), "
                         f"got {len(ps)}")
    total = sum(om * (1 - b) * (1 - p) / (1 - (1 - p) * b)
                for b, om, p in zip(bs, ws, ps, strict=True))
    return 4 * (1 - px) / px**2 * total


def variance_check(betas: Sequence[float] = (0.9, 0.99, 0.999), periods: Sequence[int] = (1, 8, 32, 128),
                   chains: int = 20_000, seed: int = 0, sigma: float = 1.0) -> pd.DataFrame:
    """Monte Carlo of ``mtdao-eq-variance``: ``chains`` independent momenta start at the same
    synchronised value, run ``K`` EMA steps on gradients with independent N(0, sigma^2) noise, and
    their sample variance is compared with :func:`momentum_variance`.

    The recursion is simulated step by step (not through the closed-form sum), so the check does
    not reuse the derivation. Returns one row per ``(beta, K)`` with ``empirical``, ``formula`` and
    ``rel_error`` = ``|empirical / formula - 1|``.

    Args:
        betas: the EMA coefficients, each in [0, 1).
        periods: the step counts ``K``, each an integer >= 1.
        chains: independent momenta per ``(beta, K)``, an integer >= 2.
        seed: seeds the noise, an integer in [0, 2**32 - 1].
        sigma: the noise's standard deviation, in (0, inf).

    Raises:
        TypeError, ValueError: an argument outside the ranges above, naming it (an entry as
            ``betas[i]`` or ``periods[i]``).
    """
    if isinstance(betas, str) or not isinstance(betas, Sequence):
        raise TypeError(f"betas must be a sequence of numbers, got {type(betas).__name__}")
    if isinstance(periods, str) or not isinstance(periods, Sequence):
        raise TypeError(f"periods must be a sequence of integers, got {type(periods).__name__}")
    betas = [_beta(f"betas[{i}]", b) for i, b in enumerate(betas)]
    periods = [check_int(f"periods[{i}]", K, 1) for i, K in enumerate(periods)]
    chains = check_int("chains", chains, 2)
    rng = np.random.default_rng(check_seed(seed))
    sigma = check_range("sigma", sigma, 0, math.inf, low_open=True, high_open=True)
    rows = []
    for beta in betas:
        for K in periods:
            u = np.full(chains, 0.3)  # the synchronised value; any constant gives the same variance
            for _ in range(K):
                u = beta * u + (1 - beta) * sigma * rng.standard_normal(chains)
            emp = float(u.var(ddof=1))
            formula = momentum_variance(beta, K, sigma)
            rows.append({"beta": beta, "K": K, "empirical": emp, "formula": formula,
                         "rel_error": abs(emp / formula - 1), "chains": chains, "seed": seed})
    return pd.DataFrame(rows)
