"""The Frank–Wolfe chapter's experiments: ``reproduce()`` and its claims (charts: ``figures.py``).

* Experiment 1, **phase retrieval** (``frank_wolfe_bregman-eq-phase``) over a K-sparse polytope: the
  paper's adaptive Bregman step (quartic kernel) against Pedregosa et al.'s Euclidean adaptive
  step, the open-loop step and the Bregman short step with the global constant; and whether the
  adaptive rules' estimate ``M`` stays bounded, on which their count of function evaluations per
  iteration depends (``frank_wolfe_bregman-eq-evals``).
* Experiment 2, an **l_p loss** with ``p = 1.1`` (``frank_wolfe_bregman-eq-lp``) over an l2 ball,
  where the gradient is only Hölder continuous: the same comparison and the same check of ``M``,
  for both readings of the kappa search (restarted at 1 on every call, or carried over), on an
  easy Gaussian instance and on an ill-conditioned one with heavy-leverage rows.
* Experiment 3, a **Poisson/KL inverse problem** (``frank_wolfe_bregman-eq-kl``) over a shifted
  simplex: plain and away-step Frank–Wolfe (``frank_wolfe_bregman-eq-away``), with Euclidean and
  Bregman (Burg) adaptive steps; the log-slope of the primal gap, fitted separately on the two
  halves of iterations 200–1000, and their ratio (1 for a linear rate, whatever its speed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr_lab.core.validation import check_array, check_int, check_range
from iclr_lab.recovery.frank_wolfe_bregman.algorithms import (
    BregmanAdaptive,
    Burg,
    Euclidean,
    EuclideanAdaptive,
    FWResult,
    Kernel,
    KSparse,
    L2Ball,
    OpenLoop,
    Quartic,
    ShortStep,
    Simplex,
    evals_per_iteration,
    frank_wolfe,
)
from iclr_lab.recovery.frank_wolfe_bregman.problems import LpLoss, PhaseRetrieval, PoissonKL

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

    from iclr_lab.core.report import Claim, Report

__all__ = ["SIZES", "estimate_growth", "half_rates", "linear_rate", "lp_hard_instance",
           "lp_instance", "numbers", "phase_retrieval_instance", "poisson_instance", "reproduce",
           "slope_ratio"]

BREG = "Bregman adaptive (paper)"
#: the other reading of the paper's kappa search: kappa starts each call where the last one ended
BREG_CARRY = "Bregman adaptive, κ carried over"
EUC = "Euclidean adaptive (Pedregosa)"
OPEN = "open loop 2/(t+2)"
SHORT = "Bregman short step, global L"
#: Experiment 3's methods: (name, step rule, kernel, away steps)
KL_EUC_FW = "FW, Euclidean adaptive"
KL_EUC_AFW = "AFW, Euclidean adaptive"
KL_BREG_FW = "FW, Bregman adaptive (Burg)"
KL_BREG_AFW = "AFW, Bregman adaptive (Burg)"
KL_OPEN = "FW, open loop"
KL_SHORT = "FW, Bregman short step (L = ‖b‖₁)"
#: thresholds fixed before any run (see the chapter): "the smallest gap" read as a ratio <= 1;
#: "fails to converge" read as an order of magnitude.
RATIO_MAIN, RATIO_LP = 1.0, 0.1
#: "linear" read as a ratio of the log-slopes of the two halves of the fit window >= 0.75: a linear
#: rate gives 1 at any speed, any power law t^-a gives 0.48 on iterations 200-1000 split at 600
#: (least-squares slopes; the secants give ln(5/3)/ln(3) = 0.465); 0.75 sits between. Replaced
#: the scale-dependent "per-iteration factor <= 0.99" (source "pilot": set after the runs that
#: judged the old test).
SLOPE_RATIO = 0.75
#: set after a pilot run (source "pilot"): the estimate M "stays bounded" when its median over the
#: second half of a run is within tau^2 of its median over the first tenth
GROWTH = 2.0
ETA, TAU = 0.9, 2.0
#: primal gaps below this share of max(1, |f*|) are rounding noise and left out of the linear fit
FLOOR = 1e-10
#: a step gamma below this counts as vanished (the share is reported next to estimate_bounded_lp_carry)
TINY_STEP = 1e-6
#: the refit of the away-step runs after their first drop step starts this many iterations after it
AFTER_DROP = 50


# ----------------------------------------------------------------------------------------------
# Problem instances
# ----------------------------------------------------------------------------------------------


def _check_rng(rng: Any) -> np.random.Generator:
    """The instances draw from a generator the caller made (so every instance is seeded)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got "
                        f"{type(rng).__name__}")
    return rng


def phase_retrieval_instance(m: int, n: int, K: int, s: int, rng: np.random.Generator
                             ) -> tuple[PhaseRetrieval, KSparse, np.ndarray, np.ndarray]:
    """Experiment 1's instance: Gaussian ``a_i``, an ``s``-sparse ``x_true`` with N(0, 1) entries,
    noiseless ``b_i = <a_i, x_true>^2``, the K-sparse polytope of radius ``max |x_true|`` (so
    ``x_true`` is feasible and ``f* = 0``), and the start ``x0 = 0.3 LMO(-A^T b)``, a point that is
    not a vertex and not the spurious stationary point 0.

    Returns ``(problem, lmo, x0, x_true)``.
    """
    m, n, K = check_int("m", m, 1), check_int("n", n, 1), check_int("K", K, 1, n)
    s = check_int("s", s, 1, n)
    rng = _check_rng(rng)
    A = rng.standard_normal((m, n))
    x_true = np.zeros(n)
    x_true[rng.choice(n, s, replace=False)] = rng.standard_normal(s)
    problem = PhaseRetrieval(A, (A @ x_true) ** 2)
    lmo = KSparse(K, float(np.abs(x_true).max()))
    return problem, lmo, 0.3 * lmo(-A.T @ problem.b), x_true


def lp_instance(m: int, n: int, p: float, rng: np.random.Generator
                ) -> tuple[LpLoss, L2Ball, np.ndarray]:
    """Experiment 2's instance: Gaussian ``A``, ``b = A x_true + e`` with Student-t (2 degrees of
    freedom) noise, the reason one fits with ``p`` near 1, and the l2 ball of radius
    ``||x_true|| / 2``, so that the constraint binds. Starts at 0. Returns ``(problem, lmo, x0)``.
    ``p`` is in ``(1, 2]`` (see :class:`~iclr_lab.recovery.frank_wolfe_bregman.LpLoss`)."""
    m, n = check_int("m", m, 1), check_int("n", n, 1)
    check_range("p", p, 1.0, 2.0, low_open=True)
    rng = _check_rng(rng)
    A = rng.standard_normal((m, n))
    x_true = rng.standard_normal(n)
    problem = LpLoss(A, A @ x_true + rng.standard_t(2.0, size=m), p)
    return problem, L2Ball(0.5 * float(np.linalg.norm(x_true))), np.zeros(n)


def lp_hard_instance(m: int, n: int, p: float, rng: np.random.Generator, cond: float = 1e3,
                     tail: float = 1.5) -> tuple[LpLoss, L2Ball, np.ndarray]:
    """Experiment 2's second instance, ill-conditioned with heavy leverage: Gaussian rows mixed by
    ``Q diag(s) Q^T`` with singular values ``s`` spaced geometrically from 1 to ``1/cond`` (``Q`` a
    random rotation), each row then scaled by ``1 + Pareto(tail)`` (infinite variance for
    ``tail <= 2``), so that a few rows carry most of the leverage, as in sensor data with
    correlated channels and bursts. ``b``, the ball and the start as in :func:`lp_instance`.
    ``cond`` is in ``[1, inf)``, ``tail`` in ``(0, inf)``, ``p`` in ``(1, 2]``."""
    m, n = check_int("m", m, 1), check_int("n", n, 1)
    check_range("p", p, 1.0, 2.0, low_open=True)
    check_range("cond", cond, 1.0)
    check_range("tail", tail, 0.0, low_open=True)
    rng = _check_rng(rng)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (rng.standard_normal((m, n)) @ Q) * np.geomspace(1.0, 1.0 / cond, n) @ Q.T
    A *= (1.0 + rng.pareto(tail, size=m))[:, None]
    x_true = rng.standard_normal(n)
    problem = LpLoss(A, A @ x_true + rng.standard_t(2.0, size=m), p)
    return problem, L2Ball(0.5 * float(np.linalg.norm(x_true))), np.zeros(n)


def leverage(A: np.ndarray) -> tuple[float, float]:
    """``(condition number of A, share of the total leverage n held by the top 1% of rows)``."""
    U, sv, _ = np.linalg.svd(A, full_matrices=False)
    lev = np.sort((U**2).sum(axis=1))[::-1]
    return float(sv[0] / sv[-1]), float(lev[:max(1, A.shape[0] // 100)].sum() / A.shape[1])


def poisson_instance(m: int, n: int, s: int, rng: np.random.Generator, lower: float = 1e-3
                     ) -> tuple[PoissonKL, Simplex, np.ndarray]:
    """Experiment 3's instance: ``A ~ U(0, 1)^(m x n)``, an ``s``-sparse ``x_true`` with entries in
    ``U(1, 3)``, counts ``b ~ Poisson(A x_true + 0.5)``, the shifted simplex
    ``{x >= lower, sum x = sum x_true}`` (its vertices lie in the domain of Burg's entropy) and the
    start at its centre. Returns ``(problem, lmo, x0)``. ``lower`` is in ``[0, inf)`` (and at most
    the simplex's centre, ``sum x_true / n``)."""
    m, n = check_int("m", m, 1), check_int("n", n, 1)
    s = check_int("s", s, 1, n)
    check_range("lower", lower, 0.0)
    rng = _check_rng(rng)
    A = rng.uniform(size=(m, n))
    x_true = np.zeros(n)
    x_true[rng.choice(n, s, replace=False)] = rng.uniform(1.0, 3.0, s)
    problem = PoissonKL(A, rng.poisson(A @ x_true + 0.5).astype(float))
    radius = float(x_true.sum())
    return problem, Simplex(radius, lower), np.full(n, radius / n)


def _check_fit(h: np.ndarray, window: tuple[int, int], floor: float
               ) -> tuple[np.ndarray, int, int, float]:
    """The arguments of the rate fits: ``h`` a non-empty finite 1-D array, ``window`` a pair of
    iterations ``0 <= lo <= hi``, ``floor`` in ``[0, inf)``."""
    h = np.asarray(check_array("h", h, ndim=1), dtype=float)
    if not (isinstance(window, tuple | list) and len(window) == 2):
        raise TypeError(f"window must be a pair (lo, hi) of iterations, got {window!r}")
    lo = check_int("window[0]", window[0], 0)
    hi = check_int("window[1]", window[1], lo)
    return h, lo, hi, check_range("floor", floor, 0.0)


def linear_rate(h: np.ndarray, window: tuple[int, int], floor: float = 0.0
                ) -> tuple[float, float, int]:
    """Fit ``log h_t = a + t log q`` over iterations ``t`` in ``window`` where ``h_t > floor``.

    Args:
        h: the sequence (a primal gap), a non-empty finite 1-D array indexed by iteration.
        window: ``(lo, hi)``, the first and the last iteration of the fit, ``0 <= lo <= hi``.
        floor: values at or below it (in ``[0, inf)``) are left out, as rounding noise.

    Returns ``(q, R^2, points)``: the per-iteration factor, the fit's coefficient of determination
    and the number of iterations used; NaNs when fewer than 20 iterations qualify.
    """
    h, lo, hi, floor = _check_fit(h, window, floor)
    t = np.arange(h.size)
    keep = (t >= lo) & (t <= hi) & (h > floor)
    if keep.sum() < 20:
        return math.nan, math.nan, int(keep.sum())
    y = np.log(h[keep])
    slope, icpt = np.polyfit(t[keep], y, 1)
    resid = y - (slope * t[keep] + icpt)
    tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / tot if tot > 0 else math.nan
    return float(math.exp(slope)), r2, int(keep.sum())




def half_rates(h: np.ndarray, window: tuple[int, int], floor: float = 0.0) -> tuple[float, float]:
    """The per-iteration factors of :func:`linear_rate` fitted separately on the first and the second
    half of the iterations in ``window`` where ``h_t > floor``.

    A linear rate gives two equal factors; a sublinear decay such as ``1/t`` gives a second factor
    closer to 1 than the first (its log-slope halves when ``t`` doubles). NaNs when fewer than 40
    iterations qualify. Arguments as in :func:`linear_rate`.
    """
    h, lo, hi, floor = _check_fit(h, window, floor)
    t = np.arange(h.size)
    kept = t[(t >= lo) & (t <= hi) & (h > floor)]
    if kept.size < 40:
        return math.nan, math.nan
    mid = int(kept[kept.size // 2])
    return (linear_rate(h, (int(kept[0]), mid), floor)[0],
            linear_rate(h, (mid, int(kept[-1])), floor)[0])


def slope_ratio(h: np.ndarray, window: tuple[int, int], floor: float = 0.0) -> float:
    """The ratio of the log-slopes of :func:`half_rates`, ``log q_second / log q_first``.

    1 for a linear rate at any speed; about 0.48 for any power law ``t^-a`` on the window 200-1000
    (least-squares slopes; the secants would give ``ln(5/3)/ln(3) = 0.465``); above 1 for a curve
    that speeds up. NaN when the first half does not decrease or too few iterations qualify.
    Unlike a bar on the factor itself, it does not depend on how fast the rate is, only on whether
    it is constant. Arguments as in :func:`linear_rate`.
    """
    q1, q2 = half_rates(h, window, floor)  # which checks the arguments
    if not (q1 < 1.0 and q2 > 0.0):
        return math.nan
    return float(math.log(q2) / math.log(q1))


def estimate_growth(M: np.ndarray, tau: float = 2.0) -> float:
    """How far an adaptive rule's accepted estimate ``M_t`` climbed during a run:
    ``log_tau(median of M_t over the second half / median of M_t over the first tenth)``.

    Near 0 when ``M`` stays bounded, so that the count of evaluations per iteration tends to
    ``1 + log(1/eta)/log(tau)`` (``frank_wolfe_bregman-eq-evals``); it grows with the run's length
    when ``M`` runs away. NaN for fewer than 10 steps.

    Args:
        M: the accepted estimates, a non-empty 1-D array of positive finite numbers.
        tau: the base of the logarithm, in ``(1, inf)`` (the rule's growth factor).
    """
    M = np.asarray(check_array("M", M, ndim=1), dtype=float)
    if np.any(M <= 0):
        raise ValueError(f"M must be positive (accepted estimates), got minimum {M.min():g}")
    tau = check_range("tau", tau, 1.0, low_open=True)
    if M.size < 10:
        return math.nan
    return float(math.log(np.median(M[M.size // 2:]) / np.median(M[:M.size // 10]), tau))


# ----------------------------------------------------------------------------------------------
# Sizes
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sizes:
    """Per-scale sizes of :func:`reproduce`."""

    seeds: int  # instances per experiment: seed, seed+1, ...
    pr: tuple[int, int, int, int]  # phase retrieval (m, n, K, sparsity of x_true)
    pr_budget: int  # evaluations of f per run (Experiment 1)
    lp: tuple[int, int]  # l_p loss (m, n)
    lp_hard: tuple[int, int]  # the ill-conditioned, heavy-leverage l_p instance (m, n)
    lp_budget: int  # evaluations of f per run (Experiment 2)
    kl: tuple[int, int, int]  # Poisson/KL (m, n, sparsity)
    kl_iters: int  # iterations per run (Experiment 3)
    window: tuple[int, int]  # iterations of the linear fits
    etas: tuple[float, ...]  # the eta sweep of the Explore section
    sweep_iters: int


SIZES = {
    "smoke": _Sizes(seeds=2, pr=(60, 20, 3, 3), pr_budget=200, lp=(40, 8), lp_hard=(80, 10),
                    lp_budget=150,
                    kl=(60, 30, 3), kl_iters=300, window=(50, 300), etas=(0.5, 0.9),
                    sweep_iters=100),
    "book": _Sizes(seeds=5, pr=(300, 60, 5, 5), pr_budget=3000, lp=(200, 20), lp_hard=(2000, 64),
                   lp_budget=2000,
                   kl=(400, 200, 20), kl_iters=1000, window=(200, 1000),
                   etas=(0.5, 0.7, 0.8, 0.9, 0.95, 0.99), sweep_iters=1500),
    "paper": _Sizes(seeds=5, pr=(3000, 600, 50, 50), pr_budget=10_000, lp=(2000, 64),
                    lp_hard=(13_910, 128), lp_budget=5000, kl=(800, 400, 40), kl_iters=1000,
                    window=(200, 1000),
                    etas=(0.5, 0.7, 0.8, 0.9, 0.95, 0.99), sweep_iters=5000),
}
#: the paper's stopping tolerance on the FW gap
TOL = 1e-7
#: the name of the theory's line in the eta sweep
THEORY = "theory 1 + log(1/η)/log τ"


def _log_grid(T: int, points: int = 150) -> np.ndarray:
    """Iterations ``0 .. T`` on a log-spaced grid (all of them when ``T`` is small)."""
    return np.unique(np.concatenate([[0], np.geomspace(1, max(T, 1), points).astype(int), [T]]))


def _within(res: FWResult, budget: int) -> int:
    """The last iterate that a run reached within ``budget`` evaluations of ``f``."""
    return int(np.searchsorted(res.evals, budget, side="right")) - 1


def _curve_rows(res: FWResult, name: str, seed: int, grid: np.ndarray, last: int
                ) -> list[dict[str, Any]]:
    """The log-spaced curve of one run, up to the iterate ``last`` at which it is judged. A run
    that met the stopping tolerance keeps its last values to the end of the grid."""
    best = np.minimum.accumulate(res.gaps)
    stopped = res.status == "converged" and last == res.n_iter
    ts = grid if stopped else grid[grid <= last]
    return [{"seed": seed, "method": name, "t": int(t), "evals": int(res.evals[min(t, last)]),
             "gap": float(res.gaps[min(t, last)]), "best_gap": float(max(best[min(t, last)], TOL)),
             "f": float(res.f_values[min(t, last)])} for t in ts]


def _common_end(df: pd.DataFrame) -> pd.DataFrame:
    """Cut each method's curves where its shortest run ends, so that every point of the mean and
    its band is over all instances."""
    end = df.groupby(["method", "seed"])["t"].max().groupby("method").min()
    return df[df["t"] <= df["method"].map(end)]


def _search_row(res: FWResult, last: int) -> dict[str, float]:
    """What the line search of an adaptive run did over its first ``last`` steps."""
    trials, M, kappa = res.trials[:last], res.M[:last], res.kappa[:last]
    bregman = bool(np.isfinite(kappa).any())
    return {"evals_per_iter": float(trials.mean()) if trials.size else math.nan,
            "share_retried": float(np.mean(trials > 1)) if trials.size else math.nan,
            "M_growth": estimate_growth(M, TAU) if M.size else math.nan,
            "M_doublings": float(math.log(M[-1] / M[0], TAU)) if M.size else math.nan,
            "smallest_kappa": float(np.nanmin(kappa)) if bregman else math.nan,
            "kappa_below_one": float(np.mean(kappa < 1.0)) if bregman else math.nan,
            # steps this small move nothing: a bounded M over them says nothing about adaptivity
            "share_tiny_steps": float(np.mean(res.steps[:last] < TINY_STEP)) if last else math.nan}


def _trace_rows(res: FWResult, problem: str, name: str, seed: int, last: int
                ) -> list[dict[str, Any]]:
    idx = _log_grid(last)
    idx = idx[(idx >= 1) & (idx <= last)] - 1
    return [{"problem": problem, "seed": seed, "method": name, "t": int(i + 1),
             "log2_M": float(np.log2(res.M[i] / res.M[0])), "kappa": float(res.kappa[i])}
            for i in idx]


def _pedregosa_reference(problem: PhaseRetrieval, lmo: KSparse, x0: np.ndarray, T: int
                         ) -> np.ndarray:
    """Pedregosa et al.'s adaptive Frank–Wolfe written out as a plain loop, independently of
    :func:`frank_wolfe` (FrankWolfe.jl's first estimate, the test ``frank_wolfe_bregman-eq-pedregosa``).
    Returns the iterates ``x_0 .. x_T``."""
    f, grad = problem.f, problem.grad
    x, L, out = x0.copy(), math.nan, [x0.copy()]
    for _ in range(T):
        g = grad(x)
        d = lmo(g) - x
        G, dd = float(-(g @ d)), float(d @ d)
        if G <= 0:
            break
        if math.isnan(L):
            L = float(np.linalg.norm(grad(x + 1e-3 * d) - g) / (1e-3 * math.sqrt(dd)))
        M, fx = ETA * L, f(x)
        gamma = min(G / (M * dd), 1.0)
        while f(x + gamma * d) > fx - gamma * G + 0.5 * gamma**2 * M * dd:
            M *= TAU
            gamma = min(G / (M * dd), 1.0)
        L, x = M, x + gamma * d
        out.append(x.copy())
    return np.array(out)


# ----------------------------------------------------------------------------------------------
# Experiment 1: phase retrieval
# ----------------------------------------------------------------------------------------------


def _pr_methods(problem: PhaseRetrieval) -> list[tuple[str, Any, Kernel]]:
    return [(BREG, BregmanAdaptive(eta=ETA, tau=TAU), Quartic()),
            (EUC, EuclideanAdaptive(eta=ETA, tau=TAU), Euclidean()),
            (OPEN, OpenLoop(), Euclidean()),
            (SHORT, ShortStep(problem.L_smad), Quartic())]


def _phase_retrieval(sz: _Sizes, seeds: Sequence[int]) -> dict[str, pd.DataFrame]:
    import pandas as pd

    from iclr_lab.core.progress import progress

    m, n, K, s = sz.pr
    B = sz.pr_budget
    curves: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    trace: list[dict[str, Any]] = []
    equiv: list[dict[str, Any]] = []
    grid = _log_grid(B)
    for seed in progress(seeds, desc="phase retrieval"):
        problem, lmo, x0, x_true = phase_retrieval_instance(m, n, K, s, np.random.default_rng([seed, 1]))
        horizon = B
        for name, rule, kernel in _pr_methods(problem):
            res = frank_wolfe(problem.f, problem.grad, lmo, x0, rule, kernel, max_iter=B, tol=TOL)
            adaptive = name in (BREG, EUC)
            # the adaptive rules are judged within B evaluations of f; open loop and the short step
            # evaluate f zero times, so they are judged after as many iterations as the Bregman rule
            last = _within(res, B) if adaptive else min(horizon, res.n_iter)
            if name == BREG:
                horizon = last
            curves += _curve_rows(res, name, seed, grid, last)
            x = res.iterates[last]
            summary.append({
                "seed": seed, "method": name, "iterations": last,
                "best_gap": float(max(res.gaps[:last + 1].min(), TOL)),
                "f_final": float(res.f_values[last]),
                "dist_to_truth": float(min(np.linalg.norm(x - x_true), np.linalg.norm(x + x_true))),
                **(_search_row(res, last) if adaptive else {}),
            })
            if seed == seeds[0] and adaptive:
                trace += _trace_rows(res, "phase retrieval", name, seed, last)
        if seed == seeds[0]:
            # the sanity check: both package rules against a plain loop written from the equations
            T = min(300, B)
            ref = _pedregosa_reference(problem, lmo, x0, T)
            for name, rule in ((EUC, EuclideanAdaptive(eta=ETA, tau=TAU)),
                               ("Bregman adaptive, κ frozen at 1",
                                BregmanAdaptive(eta=ETA, tau=TAU, freeze_kappa=True))):
                a = frank_wolfe(problem.f, problem.grad, lmo, x0, rule, Euclidean(), max_iter=T,
                                tol=0.0).iterates
                same = a.shape == ref.shape
                equiv.append({"seed": seed, "rule": name, "iterations": ref.shape[0] - 1,
                              "max_abs_diff": float(np.abs(a - ref).max()) if same else math.inf,
                              "scale": float(np.abs(ref).max())})
    return {"pr_curves": pd.DataFrame(curves), "pr_summary": pd.DataFrame(summary),
            "pr_trace": pd.DataFrame(trace), "equivalence": pd.DataFrame(equiv)}


# ----------------------------------------------------------------------------------------------
# Experiment 2: the l_p loss
# ----------------------------------------------------------------------------------------------


#: Experiment 2's step rules: both readings of the paper's kappa search, Pedregosa's rule, open loop
def _lp_methods() -> list[tuple[str, Any]]:
    return [(BREG, BregmanAdaptive(eta=ETA, tau=TAU)),
            (BREG_CARRY, BregmanAdaptive(eta=ETA, tau=TAU, kappa_restart=False)),
            (EUC, EuclideanAdaptive(eta=ETA, tau=TAU)), (OPEN, OpenLoop())]


def _lp(sz: _Sizes, seeds: Sequence[int]) -> dict[str, pd.DataFrame]:
    import pandas as pd

    from iclr_lab.core.progress import progress

    B = sz.lp_budget
    curves: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    trace: list[dict[str, Any]] = []
    grid = _log_grid(B)
    for seed in progress(seeds, desc="l_p loss"):
        for hard in (False, True):
            if hard:
                problem, lmo, x0 = lp_hard_instance(*sz.lp_hard, 1.1, np.random.default_rng([seed, 4]))
            else:
                problem, lmo, x0 = lp_instance(*sz.lp, 1.1, np.random.default_rng([seed, 2]))
            cond, top = leverage(problem.A)
            horizon = B
            for name, rule in _lp_methods():
                res = frank_wolfe(problem.f, problem.grad, lmo, x0, rule, Euclidean(), max_iter=B,
                                  tol=TOL, store_iterates=False)
                adaptive = name != OPEN
                last = _within(res, B) if adaptive else min(horizon, res.n_iter)
                if name == BREG:
                    horizon = last
                if not hard:
                    curves += _curve_rows(res, name, seed, grid, last)
                best = float(res.gaps[:last + 1].min())
                summary.append({
                    "instance": "ill-conditioned" if hard else "Gaussian", "seed": seed,
                    "method": name, "best_gap": max(best, TOL), "iterations": last,
                    "reached_tol": best <= TOL, "status": res.status, "cond": cond,
                    "top1pct_leverage": top, **(_search_row(res, last) if adaptive else {}),
                })
                if seed == seeds[0] and name in (BREG, BREG_CARRY, EUC) and not hard:
                    trace += _trace_rows(res, "l_p loss, p = 1.1", name, seed, last)
    df = pd.DataFrame(summary)
    easy = df["instance"] == "Gaussian"
    return {"lp_curves": pd.DataFrame(curves),
            "lp_summary": df[easy].drop(columns="instance").reset_index(drop=True),
            "lp_hard_summary": df[~easy].drop(columns="instance").reset_index(drop=True),
            "lp_trace": pd.DataFrame(trace)}


# ----------------------------------------------------------------------------------------------
# Experiment 3: Poisson/KL, plain and away steps
# ----------------------------------------------------------------------------------------------


def _after_drop(h: np.ndarray, kinds: np.ndarray, window: tuple[int, int], floor: float
                ) -> tuple[float, float]:
    """The ratio of log-slopes refitted from ``AFTER_DROP`` iterations past the first drop step to
    the window's end, and what a power law gives on that same window (NaNs without a drop step in
    the window, or too short a window). A run whose first drop falls inside the fit window bends
    there; the refit shows the rate after the bend."""
    drop = np.flatnonzero(kinds == "drop")
    lo, hi = window
    if drop.size == 0 or drop[0] + AFTER_DROP + 40 > hi or drop[0] < lo:
        return math.nan, math.nan
    start = int(drop[0]) + AFTER_DROP
    t = np.arange(hi + 1, dtype=float)
    power = slope_ratio(1.0 / np.maximum(t, 1.0), (start, hi))  # any t^-a gives the same ratio
    return slope_ratio(h, (start, hi), floor), power


def _kl_methods(problem: PoissonKL) -> list[tuple[str, Any, Kernel, bool]]:
    return [(KL_EUC_FW, EuclideanAdaptive(eta=ETA, tau=TAU), Euclidean(), False),
            (KL_EUC_AFW, EuclideanAdaptive(eta=ETA, tau=TAU), Euclidean(), True),
            (KL_BREG_FW, BregmanAdaptive(eta=ETA, tau=TAU), Burg(), False),
            (KL_BREG_AFW, BregmanAdaptive(eta=ETA, tau=TAU), Burg(), True),
            (KL_OPEN, OpenLoop(), Euclidean(), False),
            (KL_SHORT, ShortStep(problem.L_burg), Burg(), False)]


def _poisson(sz: _Sizes, seeds: Sequence[int]) -> dict[str, pd.DataFrame]:
    import pandas as pd

    from iclr_lab.core.progress import progress

    m, n, s = sz.kl
    T = sz.kl_iters
    curves: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    reference: list[dict[str, Any]] = []
    grid = np.unique(np.concatenate([np.arange(0, T + 1, max(1, T // 125)), [T]]))
    for seed in progress(seeds, desc="Poisson/KL"):
        problem, lmo, x0 = poisson_instance(m, n, s, np.random.default_rng([seed, 3]))
        runs = {name: frank_wolfe(problem.f, problem.grad, lmo, x0, rule, kernel, max_iter=T,
                                  tol=0.0, away=away, store_iterates=False)
                for name, rule, kernel, away in _kl_methods(problem)}
        # f* from a three-times-longer away-step run; its FW gap certifies f* to within that gap
        ref = frank_wolfe(problem.f, problem.grad, lmo, x0, EuclideanAdaptive(eta=ETA, tau=TAU),
                          max_iter=3 * T, tol=0.0, away=True, store_iterates=False)
        f_star = min(float(ref.f_values.min()), *(float(r.f_values.min()) for r in runs.values()))
        reference.append({"seed": seed, "f_star": f_star, "certificate": float(ref.gaps.min())})
        floor = FLOOR * max(1.0, abs(f_star))
        for name, r in runs.items():
            h = r.f_values - f_star
            q1, q2 = half_rates(h, sz.window, floor)
            kinds = np.array(r.kinds)
            away = kinds != "fw"
            after, power = _after_drop(h, kinds, sz.window, floor)
            summary.append({"seed": seed, "method": name,
                            **dict(zip(("factor", "r2"), linear_rate(h, sz.window, floor)[:2],
                                       strict=True)),
                            "factor_first": q1, "factor_second": q2,
                            "slope_ratio": slope_ratio(h, sz.window, floor),
                            "h_start": float(h[sz.window[0]]), "h_end": float(h[-1]),
                            "evals_per_iter": float(r.trials.mean()) if r.trials.size else 0.0,
                            "away_steps": int(away.sum()), "drop_steps": int((kinds == "drop").sum()),
                            "first_drop": (float(np.argmax(kinds == "drop")) if (kinds == "drop").any()
                                           else math.nan),
                            "slope_ratio_after_drop": after, "power_law_after_drop": power,
                            "smallest_kappa": float(np.nanmin(r.kappa)) if np.isfinite(r.kappa).any()
                            else math.nan,
                            "active_vertices": int(r.active_size[-1])})
            ts = grid[grid < h.size]
            curves += [{"seed": seed, "method": name, "t": int(t),
                        "primal_gap": float(max(h[t], floor)), "gap": float(max(r.gaps[t], floor))}
                       for t in ts]
    return {"kl_curves": pd.DataFrame(curves), "kl_summary": pd.DataFrame(summary),
            "kl_reference": pd.DataFrame(reference)}


# ----------------------------------------------------------------------------------------------
# The eta sweep (Explore)
# ----------------------------------------------------------------------------------------------


def _eta_sweep(sz: _Sizes, seed: int) -> pd.DataFrame:
    import pandas as pd

    m, n, K, s = sz.pr
    problem, lmo, x0, _ = phase_retrieval_instance(m, n, K, s, np.random.default_rng([seed, 1]))
    rows: list[dict[str, Any]] = []
    T = sz.sweep_iters
    grid = _log_grid(T, 80)
    for eta in sz.etas:
        for name, rule, kernel in ((BREG, BregmanAdaptive(eta=eta, tau=TAU), Quartic()),
                                   (EUC, EuclideanAdaptive(eta=eta, tau=TAU), Euclidean())):
            r = frank_wolfe(problem.f, problem.grad, lmo, x0, rule, kernel, max_iter=T, tol=0.0,
                            store_iterates=False)
            running = np.cumsum(r.trials) / np.arange(1, r.trials.size + 1)
            rows += [{"eta": eta, "method": name, "t": int(t), "evals_per_iter": float(running[t - 1]),
                      "seed": seed} for t in grid if 1 <= t <= r.trials.size]
        rows += [{"eta": eta, "method": THEORY, "t": int(t),
                  "evals_per_iter": evals_per_iteration(eta, TAU), "seed": seed}
                 for t in grid if t >= 1]
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# reproduce and the claims
# ----------------------------------------------------------------------------------------------


def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Run the chapter's three experiments on instances ``seed .. seed + seeds - 1``; return the Report.

    Every claim is judged on the median over the instances, with the range shown next to it.
    """
    import pandas as pd

    from iclr_lab.core.report import Report, timed
    from iclr_lab.core.scales import pick, seed_everything

    sz = pick(SIZES, scale)
    seed_everything(seed)
    seeds = [seed + k for k in range(sz.seeds)]
    with timed() as elapsed:
        tables = {**_phase_retrieval(sz, seeds), **_lp(sz, seeds), **_poisson(sz, seeds),
                  "eta_sweep": _eta_sweep(sz, seed)}
        tables["trace"] = pd.concat([tables.pop("pr_trace"), tables.pop("lp_trace")],
                                    ignore_index=True)
    return Report(slug="frank_wolfe_bregman", scale=scale, seed=seed, tables=tables,
                  claims=_claims(tables, sz), seconds=elapsed(), chart_builder=_charts)


def _charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    from iclr_lab.recovery.frank_wolfe_bregman.figures import charts

    return charts(report)


def _ratio(summary: pd.DataFrame, num: str, den: str) -> list[float]:
    wide = summary.pivot_table(index="seed", columns="method", values="best_gap")
    return [float(v) for v in (wide[num] / wide[den]).to_numpy()]


def _f_ratio(summary: pd.DataFrame, num: str, den: str) -> list[float]:
    """Per instance, the final objective of ``num`` divided by that of ``den``."""
    wide = summary.pivot_table(index="seed", columns="method", values="f_final")
    return [float(v) for v in (wide[num] / wide[den]).to_numpy()]


def _per_seed(summary: pd.DataFrame, method: str, col: str) -> list[float]:
    sel = summary[summary["method"] == method].sort_values("seed")
    return [float(v) for v in sel[col]]


ABLATION = ("the test is itself the comparison with the ablation: Pedregosa's Euclidean adaptive "
            "step is the paper's rule without its Bregman model and its κ search, run on the same "
            "instances with the same η, τ and budget of evaluations")
LP_PAPER = ("paper: gas-sensor data, 13,910 × 128, p = 1.1, kernel not stated in the summary read "
            "here; ")


def _claims(tables: dict[str, pd.DataFrame], sz: _Sizes) -> list[Claim]:
    from iclr_lab.core.report import Claim

    pr, lp, kl = tables["pr_summary"], tables["lp_summary"], tables["kl_summary"]
    hard = tables["lp_hard_summary"]
    lo, hi = sz.window
    mh, nh = sz.lp_hard
    eq = tables["equivalence"]
    ratio = (f"ratio of the log-slopes of the primal gap on the second and the first half of "
             f"iterations {lo}–{hi} (1 for a linear rate at any speed, 0.48 for any power law)")
    growth = ("log_τ of (median of the accepted estimate M over the second half of the run / its "
              "median over the first tenth)")
    cond = float(np.median(hard["cond"]))
    tiny = float(lp[lp["method"] == BREG_CARRY]["share_tiny_steps"].median())
    top = float(np.median(hard["top1pct_leverage"]))
    easy_regime = (LP_PAPER + f"chapter: synthetic Gaussian {sz.lp[0]} × {sz.lp[1]}, Student-t₂ "
                   "noise, Euclidean kernel: an easy, well-conditioned instance")
    hard_regime = (LP_PAPER + f"chapter: synthetic {mh} × {nh}, condition number about "
                   f"{cond:.0e} (median), Pareto(1.5) row scales so that the top 1% of rows hold "
                   f"{top:.0%} of the leverage; the closest to the paper's data within the budget")
    lp_paper = ("gas-sensor data, p = 1.1: ShortFW and EucFW fail to converge; BregFW reaches the "
                "smallest gaps (curves only)")
    lp_claims = []
    for key, df, regime, where in (("", lp, easy_regime, "Gaussian instance"),
                                   ("_hard", hard, hard_regime, "ill-conditioned instance")):
        for suffix, rule, reading in (("", BREG, "κ restarted at 1 on every call"),
                                      ("_carry", BREG_CARRY, "κ carried over between calls")):
            lp_claims.append(Claim.over_seeds(
                f"lp_vs_euclidean{key}{suffix}", f"l_p loss, p = 1.1, over an l2 ball, {where}: the "
                f"smallest FW gap of the adaptive Bregman step ({reading}) within {sz.lp_budget} "
                f"evaluations, divided by the Euclidean adaptive step's, is <= {RATIO_LP:g} (an "
                "order of magnitude: the Euclidean rule 'fails to converge')",
                _ratio(df, rule, EUC), RATIO_LP, "<=", paper=lp_paper, expected=False,
                source="prior" if key == suffix == "" else "pilot", no_control=ABLATION,
                regime=regime))
    return [
        Claim.over_seeds(
            "bregman_vs_euclidean", "Phase retrieval over a K-sparse polytope: the smallest FW gap "
            f"of the adaptive Bregman step (quartic kernel) within {sz.pr_budget} evaluations of f, "
            f"divided by that of Pedregosa's Euclidean adaptive step, is <= {RATIO_MAIN:g}",
            _ratio(pr, BREG, EUC), RATIO_MAIN, "<=",
            paper="phase retrieval, (m, n) = (1000, 10000), K = 2000: the adaptive Bregman step gives "
                  "the smallest gaps (curves only; a ratio <= 1 is that statement)", expected=False,
            source="paper", no_control=ABLATION,
            regime=f"paper: (m, n) = (1000, 10000), K = 2000; chapter: (m, n) = {sz.pr[:2]}, "
                   f"K = {sz.pr[2]}, a {sz.pr[3]}-sparse signal (the paper's size is beyond the "
                   "CPU budget; an exercise runs an underdetermined shape)"),
        *lp_claims,
        Claim.over_seeds(
            "bregman_afw_linear", "Poisson/KL over a shifted simplex: away-step FW with the adaptive "
            f"Bregman step (Burg kernel) is linear: its {ratio} is >= {SLOPE_RATIO:g}",
            _per_seed(kl, KL_BREG_AFW, "slope_ratio"), SLOPE_RATIO, ">=",
            paper="Theorem 4.4: linear convergence of Bregman away-step FW under HEB with q = 1 + ν",
            expected=False, source="pilot", control=KL_BREG_FW + " (no away steps)",
            control_values=_per_seed(kl, KL_BREG_FW, "slope_ratio"),
            regime=f"paper: any polytope under HEB (a theorem); chapter: Poisson/KL, "
                   f"{sz.kl[0]} × {sz.kl[1]}, over a shifted simplex, Burg's entropy"),
        Claim.over_seeds(
            "estimate_bounded", f"Phase retrieval: the adaptive Bregman step's estimate M stays "
            f"bounded: {growth} is <= {GROWTH:g}", _per_seed(pr, BREG, "M_growth"), GROWTH, "<=",
            paper="Theorem 3.3: the count of evaluations per iteration tends to "
                  "1 + log(1/η)/log τ (about 16% of iterations need a second trial), which needs a "
                  "bounded estimate", kind="theorem", source="pilot"),
        Claim.over_seeds(
            "estimate_bounded_lp", "l_p loss, p = 1.1, Gaussian instance: the same for the adaptive "
            "Bregman step with κ restarted at 1, whose κ search is meant to adapt to the Hölder "
            f"exponent ν = p − 1: {growth} is <= {GROWTH:g}", _per_seed(lp, BREG, "M_growth"),
            GROWTH, "<=",
            paper="the search adapts to Hölder-continuous gradients (ν < 1), where a rule with a "
                  "fixed exponent must keep raising M", expected=False, kind="theorem",
            source="pilot"),
        Claim.over_seeds(
            "estimate_bounded_lp_carry", "The same with κ carried over between calls: "
            f"{growth} is <= {GROWTH:g}. In this regime the check cannot fail: κ falls to its floor, "
            f"a median {tiny:.0%} of the steps are below {TINY_STEP:g}, and M shrinks with them, "
            "so a bounded M says nothing about adaptivity (shown, not a test of the theorem)",
            _per_seed(lp, BREG_CARRY, "M_growth"), GROWTH, "<=",
            paper="the search adapts to Hölder-continuous gradients (ν < 1)", kind="derivation",
            source="pilot"),
        Claim.over_seeds(
            "afw_linear", f"Poisson/KL: away-step FW with the Euclidean adaptive step is linear: its "
            f"{ratio} is >= {SLOPE_RATIO:g}", _per_seed(kl, KL_EUC_AFW, "slope_ratio"),
            SLOPE_RATIO, ">=",
            paper="away-step FW converges linearly on polytopes (Lacoste-Julien and Jaggi; "
                  "Theorem 4.4 with ν = 1)", kind="theorem", source="pilot"),
        Claim.over_seeds(
            "fw_not_linear", f"Plain FW with the same step on the same problem is not: its ratio is "
            f"< {SLOPE_RATIO:g}", _per_seed(kl, KL_EUC_FW, "slope_ratio"), SLOPE_RATIO, "<",
            paper="FW without away steps zig-zags when the optimum lies on a face", kind="theorem",
            source="pilot"),
        Claim.over_seeds(
            "open_loop_objective", "Phase retrieval: the open-loop step's final objective, after "
            "as many iterations as the adaptive Bregman step made within its budget, divided by the "
            "Bregman step's, is <= 1 (the parameter-free baseline ends closer to the signal)",
            _f_ratio(pr, OPEN, BREG), 1.0, "<=",
            paper="(not a claim of the paper; the open-loop step is one of its baselines)",
            kind="derivation", source="pilot"),
        Claim(
            "pedregosa_equivalence", "With the Euclidean kernel, the package's Euclidean adaptive "
            "step and its Bregman step with κ frozen at 1 both reproduce a plain loop written from "
            "Pedregosa et al.'s equations: largest difference of the iterates over "
            f"{int(eq['iterations'].min())} iterations of phase retrieval <= 1e-10",
            float(eq["max_abs_diff"].max()), 1e-10, "<=",
            paper="the adaptive Bregman step generalises Pedregosa et al.'s", kind="sanity",
            source="prior"),
    ]


def numbers(report: Report) -> dict[str, float]:
    """The numbers the chapter's prose quotes, computed from ``report.tables`` (medians over
    instances unless the key says otherwise)."""
    tb = report.tables
    pr, lp, kl = tb["pr_summary"], tb["lp_summary"], tb["kl_summary"]
    hard = tb["lp_hard_summary"]

    def med(df: pd.DataFrame, method: str, col: str) -> float:
        return float(df[df["method"] == method][col].median())

    lp_ratio = _ratio(lp, BREG, EUC)
    lp_wide = lp.pivot_table(index="seed", columns="method", values="best_gap")
    win = int(np.argmin(lp_ratio))  # the instance where the Bregman rule did best
    out = {
        "evals_theory": evals_per_iteration(ETA, TAU),
        "pr_open_vs_euc": float(np.median(_ratio(pr, OPEN, EUC))),
        "pr_short_vs_euc": float(np.median(_ratio(pr, SHORT, EUC))),
        "pr_ratio_lo": float(min(_ratio(pr, BREG, EUC))),
        "pr_ratio_hi": float(max(_ratio(pr, BREG, EUC))),
        "pr_f_breg": med(pr, BREG, "f_final"), "pr_f_open": med(pr, OPEN, "f_final"),
        "pr_gap_breg": med(pr, BREG, "best_gap"), "pr_gap_euc": med(pr, EUC, "best_gap"),
        "pr_iters": med(pr, BREG, "iterations"),
        "pr_evals_breg": med(pr, BREG, "evals_per_iter"),
        "pr_evals_euc": med(pr, EUC, "evals_per_iter"),
        "pr_growth_euc": med(pr, EUC, "M_growth"),
        "pr_kappa_min": float(pr[pr["method"] == BREG]["smallest_kappa"].min()),
        "pr_kappa_below_one": med(pr, BREG, "kappa_below_one"),
        "lp_evals_euc": med(lp, EUC, "evals_per_iter"), "lp_evals_breg": med(lp, BREG, "evals_per_iter"),
        "lp_growth_euc": med(lp, EUC, "M_growth"),
        "lp_total_breg": med(lp, BREG, "M_doublings"), "lp_total_euc": med(lp, EUC, "M_doublings"),
        "pr_total_breg": med(pr, BREG, "M_doublings"),
        "lp_growth_breg_lo": float(lp[lp["method"] == BREG]["M_growth"].min()),
        "lp_open_vs_euc": float(np.median(_ratio(lp, OPEN, EUC))),
        "lp_kappa_min": float(lp[lp["method"] == BREG]["smallest_kappa"].min()),
        "lp_share_retried_breg": med(lp, BREG, "share_retried"),
        "lp_breg_converged": float(lp[lp["method"] == BREG]["reached_tol"].sum()),
        "lp_euc_converged": float(lp[lp["method"] == EUC]["reached_tol"].sum()),
        "lp_ratio_lo": float(min(lp_ratio)), "lp_ratio_hi": float(max(lp_ratio)),
        "lp_win_breg": float(lp_wide[BREG].iloc[win]), "lp_win_euc": float(lp_wide[EUC].iloc[win]),
        "lp_growth_carry": med(lp, BREG_CARRY, "M_growth"),
        "lp_carry_stalled": float((lp[lp["method"] == BREG_CARRY]["status"] == "stalled").sum()),
        "lp_carry_kappa_min": float(lp[lp["method"] == BREG_CARRY]["smallest_kappa"].min()),
        "lp_carry_iters": med(lp, BREG_CARRY, "iterations"),
        "lp_hard_cond": float(hard["cond"].median()),
        "lp_hard_top": float(hard["top1pct_leverage"].median()),
        "lp_easy_top": float(lp["top1pct_leverage"].median()),
        "lp_hard_growth_breg": med(hard, BREG, "M_growth"),
        "lp_hard_growth_carry": med(hard, BREG_CARRY, "M_growth"),
        "lp_hard_growth_euc": med(hard, EUC, "M_growth"),
        "lp_hard_open_vs_euc": float(np.median(_ratio(hard, OPEN, EUC))),
        "kl_ratio_breg_afw": med(kl, KL_BREG_AFW, "slope_ratio"),
        "kl_ratio_breg_fw": med(kl, KL_BREG_FW, "slope_ratio"),
        "kl_ratio_euc_afw": med(kl, KL_EUC_AFW, "slope_ratio"),
        "kl_ratio_euc_fw": med(kl, KL_EUC_FW, "slope_ratio"),
        "kl_ratio_short": med(kl, KL_SHORT, "slope_ratio"),
        "kl_breg_afw_factor": med(kl, KL_BREG_AFW, "factor"),
        "kl_breg_afw_first": med(kl, KL_BREG_AFW, "factor_first"),
        "kl_breg_afw_second": med(kl, KL_BREG_AFW, "factor_second"),
        "kl_fw_r2": med(kl, KL_EUC_FW, "r2"),
        "kl_fw_first": med(kl, KL_EUC_FW, "factor_first"),
        "kl_fw_second": med(kl, KL_EUC_FW, "factor_second"),
        "kl_afw_first": med(kl, KL_EUC_AFW, "factor_first"),
        "kl_afw_second": med(kl, KL_EUC_AFW, "factor_second"),
        "kl_short_h_end": med(kl, KL_SHORT, "h_end"),
        "kl_euc_afw_h_end": med(kl, KL_EUC_AFW, "h_end"),
        "kl_breg_afw_h_end": med(kl, KL_BREG_AFW, "h_end"),
        "kl_breg_afw_kappa": float(kl[kl["method"] == KL_BREG_AFW]["smallest_kappa"].min()),
        "kl_breg_afw_evals": med(kl, KL_BREG_AFW, "evals_per_iter"),
        "kl_breg_afw_first_drop": med(kl, KL_BREG_AFW, "first_drop"),
        "kl_breg_afw_first_drop_lo": float(kl[kl["method"] == KL_BREG_AFW]["first_drop"].min()),
        "kl_breg_afw_first_drop_hi": float(kl[kl["method"] == KL_BREG_AFW]["first_drop"].max()),
        "kl_breg_afw_after_drop": med(kl, KL_BREG_AFW, "slope_ratio_after_drop"),
        "kl_after_drop_power_law": med(kl, KL_BREG_AFW, "power_law_after_drop"),
        "kl_after_drop_start": float(AFTER_DROP),
        "lp_carry_tiny_steps": med(lp, BREG_CARRY, "share_tiny_steps"),
        "pr_open_f_ratio": float(np.median(_f_ratio(pr, OPEN, BREG))),
        "kl_euc_afw_first_drop": med(kl, KL_EUC_AFW, "first_drop"),
    }
    return {k: float(v) for k, v in out.items()}
