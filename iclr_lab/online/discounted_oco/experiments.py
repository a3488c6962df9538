"""The discounted-OCO chapter's experiments and ``reproduce()``; the claims and glued numbers are in
:mod:`~iclr_lab.online.discounted_oco.claims`, the charts and the explorer in
:mod:`~iclr_lab.online.discounted_oco.figures`.

* Experiment 1: Theorem 1 (``discounted_oco-eq-thm1``) for OGD tuned to each memory, on random
  +-1 linear losses;
* Experiment 2: Theorem 2 (``discounted_oco-eq-thm2``) for the DNP on four bit streams, one of them
  adversarial;
* Experiment 3: SOGD, which does not know lambda, against OGD with every fixed step of the same grid,
  on a stream with two time scales (:func:`two_scale_stream`); the yardstick for each lambda is
  the worst discounted regret over the whole run, ``max_t D-Regret(t, lambda)``, the quantity
  Theorems 1 and 3 bound. Theorem 3 (``discounted_oco-eq-thm3``) is checked on the way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr_lab.core.validation import check_array, check_int, check_range
from iclr_lab.online.discounted_oco.learners import (
    DEFAULT_CN,
    DNP,
    OGD,
    SOGD,
    AbsoluteLoss,
    discounted_regret,
    discounted_sum,
    dnp_saturation,
    sogd_bound,
)

if TYPE_CHECKING:
    import pandas as pd

    from iclr_lab.core.report import Report
    from iclr_lab.core.tuning import Tuned

__all__ = ["SIZES", "checkpoints", "fixed_step_grid", "reproduce", "two_scale_stream", "worst_regret"]

#: Experiment 3 plays on W = [-1, 1] with |w - y_t|: diameter D = 2, Lipschitz constant G = 1.
D, G = 2.0, 1.0
SOGD_Z1 = "SOGD (Z = 1/T)"
SOGD_Z100 = "SOGD (Z = 100/T)"
SOGD_CN1 = "SOGD (Z = 1/T, c_n = 1)"
ORACLE = "OGD, best step for each λ"
SINGLE = "OGD, best single step"
TUNED = "OGD, Theorem 1 step for λ"
SLOW = "OGD, η = D/(G√T) (B0)"
FAST = "OGD, η = D/(2G)"
#: the prior threshold of the "SOGD matches the best fixed step" claims, fixed before any run of
#: Experiment 3: "roughly matches" read as "within a factor 2 at every lambda".
MATCH = 2.0

# ----------------------------------------------------------------------------------------------
# The stream of Experiment 3
# ----------------------------------------------------------------------------------------------


def two_scale_stream(T: int, rng: np.random.Generator, *, half_period: int = 100,
                     amp: float = 0.8, noise: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Targets ``y_t`` that change on two time scales, and the mask of volatile rounds.

    Three phases: **calm** (the first 30-40 % of the run), **volatile** (the next 25-35 %), **calm**
    again (the rest); the lengths are drawn from ``rng``.

    * Calm: a constant level drawn from ``U(-0.6, 0.6)`` (a new one for each calm phase). Sitting
      still is best, so a small step wins.
    * Volatile: a square wave ``+-amp`` that flips every ``half_period`` rounds (a fast time scale
      inside a slow one); only a large step follows it.

    Gaussian noise of standard deviation ``noise`` is added to every round. The first calm phase is
    long enough that every learner has a positive worst discounted regret at memories up to
    about ``T / 8``.

    ``T >= 8`` rounds, ``half_period >= 1``, ``amp`` and ``noise`` in ``[0, inf)``; ``rng`` is a
    ``numpy.random.Generator``.

    Returns:
        ``(y, volatile)``: the targets and a boolean mask of the rounds in the volatile phase.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    T = check_int("T", T, 8)
    half_period = check_int("half_period", half_period, 1)
    check_range("amp", amp, 0.0)
    check_range("noise", noise, 0.0)
    start = int(rng.uniform(0.3, 0.4) * T)
    stop = start + int(rng.uniform(0.25, 0.35) * T)
    mean = np.empty(T)
    mean[:start] = rng.uniform(-0.6, 0.6)
    mean[stop:] = rng.uniform(-0.6, 0.6)
    flips = (np.arange(stop - start) + int(rng.integers(2 * half_period))) // half_period
    mean[start:stop] = amp * np.where(flips % 2 == 0, 1.0, -1.0)
    volatile = np.zeros(T, dtype=bool)
    volatile[start:stop] = True
    return mean + noise * rng.standard_normal(T), volatile


def fixed_step_grid(T: int, tau: float = 2.0) -> np.ndarray:
    """The step sizes of SOGD's learners: ``B_0``'s ``D/(G sqrt T)``, then the Theorem 1 step of every
    discount of the grid ``discounted_oco-eq-grid`` (increasing). Each is a fixed-step baseline.

    ``T >= 2`` and ``2 <= tau <= T``, as for :meth:`~iclr_lab.online.discounted_oco.learners.SOGD.grid`.
    """
    T = check_int("T", T, 2)
    return np.concatenate([[D / (G * math.sqrt(T))], OGD.tuned_lr(SOGD.grid(T, tau), D, G)])


def checkpoints(T: int, n: float) -> np.ndarray:
    """Horizons at which Experiment 3 evaluates the discounted regret of memory ``n``: every
    ``min(n/4, 256)`` rounds (at least every round), so each memory is sampled several times.

    ``T >= 1`` rounds; the memory ``n`` is in ``[1, inf)``.
    """
    T = check_int("T", T, 1)
    n = check_range("n", n, 1.0)
    step = int(max(1, min(n // 4, 256)))
    return np.arange(step, T + 1, step)


def worst_regret(losses: np.ndarray, y: np.ndarray, n: float) -> tuple[np.ndarray, np.ndarray]:
    """``max_t D-Regret(t, lambda)`` with ``lambda = 1 - 1/n`` over :func:`checkpoints`, for each column
    of ``losses`` (``f_t(w_t)`` of several learners on ``|w - y_t|``, ``W = [-1, 1]``).

    ``y`` is a non-empty finite 1-D array of the ``T`` targets, ``losses`` a finite array of shape
    ``(T,)`` or ``(T, k)``, and the memory ``n`` is in ``(1, inf)`` (``lambda`` in ``(0, 1)``).

    Returns ``(worst, series)``: the maximum per learner and the regret at every checkpoint.
    """
    n = check_range("n", n, 1.0, low_open=True)
    y = np.asarray(check_array("y", y, ndim=1), dtype=float)
    losses = np.asarray(check_array("losses", losses, ndim=(1, 2)), dtype=float)
    if losses.shape[0] != y.size:
        raise ValueError(f"losses must have one row per target of y ({y.size}), got shape "
                         f"{losses.shape}")
    ts = checkpoints(y.size, n)
    series = discounted_regret(losses.reshape(y.size, -1), 1.0 - 1.0 / n, "absolute", y, times=ts)
    return series.max(axis=0), series


# ----------------------------------------------------------------------------------------------
# Sizes
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sizes:
    """Per-scale sizes of :func:`reproduce`."""

    seeds: int  # seeds of every experiment: seed, seed+1, ...
    T1: int  # rounds of Experiment 1 (Theorem 1)
    ns1: tuple[int, ...]  # memories n = 1/(1-lambda) of Experiment 1
    T2: int  # rounds of Experiment 2 (Theorem 2, DNP)
    dnp_ns: tuple[int, ...]  # DNP memories of Experiment 2
    T3: int  # rounds of Experiment 3 (SOGD)
    half_period: int  # rounds between flips of the square wave in volatile phases
    ns3: tuple[int, ...]  # memories at which Experiment 3 is judged


SIZES = {
    "smoke": _Sizes(seeds=2, T1=4000, ns1=(10, 30, 100, 300), T2=3000, dnp_ns=(30, 100),
                    T3=4096, half_period=50, ns3=(16, 64, 256, 1024)),
    "book": _Sizes(seeds=3, T1=50_000, ns1=(10, 30, 100, 300, 1000, 3000), T2=20_000,
                   dnp_ns=(100, 1000), T3=32_768, half_period=100,
                   ns3=(16, 64, 256, 1024, 4096)),
    "paper": _Sizes(seeds=5, T1=200_000, ns1=(10, 30, 100, 300, 1000, 3000, 10_000), T2=50_000,
                    dnp_ns=(100, 1000, 5000), T3=131_072, half_period=100,
                    ns3=(16, 64, 256, 1024, 4096, 16_384)),
}

# ----------------------------------------------------------------------------------------------
# Experiment 1: Theorem 1
# ----------------------------------------------------------------------------------------------


def _theorem1(T: int, ns: Sequence[int], seeds: Sequence[int]) -> list[dict[str, Any]]:
    """OGD tuned to each memory in ``ns`` on random +-1 linear losses, one stream per seed; all
    (seed, memory) pairs run as one vectorised bank. The bank also holds, per seed, the claims'
    control: OGD with one step for every memory, the horizon-``T`` step ``D/(G sqrt T)``
    (Theorem 1's contribution, a step tuned to lambda, removed); its worst regret at each memory
    is ``control_max_regret``."""
    g = np.stack([np.random.default_rng([s, 1]).choice([-1.0, 1.0], size=T) for s in seeds], axis=1)
    lams = 1.0 - 1.0 / np.asarray(ns, dtype=float)
    tuned = np.tile(OGD.tuned_lr(lams, D, G), len(seeds))  # seed-major
    fixed = np.full(len(seeds), D / (G * math.sqrt(T)))
    bank = OGD(np.concatenate([tuned, fixed]), radius=D / 2.0)
    cols = np.concatenate([np.repeat(np.arange(len(seeds)), len(ns)), np.arange(len(seeds))])
    losses = np.empty((T, cols.size))
    for t in range(T):
        losses[t] = bank.w[:, 0] * g[t, cols]
        bank.update(g[t, cols][:, None])
    rows = []
    for j, (k, n) in enumerate(zip(cols[:tuned.size], np.tile(ns, len(seeds)), strict=True)):
        lam = 1.0 - 1.0 / n
        reg = discounted_regret(losses[:, j], lam, "linear", g[:, k])
        ctrl = discounted_regret(losses[:, tuned.size + int(k)], lam, "linear", g[:, k])
        bound = OGD.bound(lam, D, G)
        rows.append({"seed": seeds[int(k)], "n": int(n), "lam": lam, "max_regret": float(reg.max()),
                     "bound": bound, "violations": int((reg > bound).sum()),
                     "control_max_regret": float(ctrl.max())})
    return rows


# ----------------------------------------------------------------------------------------------
# Experiment 2: Theorem 2
# ----------------------------------------------------------------------------------------------

NEMESIS = "adversarial (−1 whenever it bets)"


def _dnp_streams(T: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    sign = np.where((np.arange(T) // 3000) % 2 == 0, 1.0, -1.0)
    return {
        "iid ±1": rng.choice([-1.0, 1.0], size=T),
        "biased (mean +0.3)": np.where(rng.uniform(size=T) < 0.65, 1.0, -1.0),
        "switching (±0.5 every 3000)": np.clip(0.5 * sign + 0.5 * rng.uniform(-1, 1, T), -1, 1),
        NEMESIS: np.zeros(T),  # filled online: the bit is -1 whenever the DNP bets, +1 otherwise
    }


def _theorem2(T: int, ns: Sequence[int], seeds: Sequence[int]) -> list[dict[str, Any]]:
    """DNPs with memories ``ns`` and ``Z = 1/T`` on four bit streams per seed, one vectorised bank."""
    Z = 1.0 / T
    cases = []
    for s in seeds:
        for name, bits in _dnp_streams(T, np.random.default_rng([s, 2])).items():
            cases += [(s, name, float(n), bits) for n in ns]
    bits = np.stack([c[3] for c in cases], axis=1)
    nemesis = np.array([c[1] == NEMESIS for c in cases])
    dnp = DNP(np.array([c[2] for c in cases]), Z)
    om = np.empty_like(bits)
    for t in range(T):
        om[t] = dnp.predict()
        bits[t, nemesis] = np.where(om[t, nemesis] > 0, -1.0, 1.0)
        dnp.update(bits[t])
    rows = []
    for j, (s, name, n, _) in enumerate(cases):
        b, o = bits[:, j], om[:, j]
        rho = 1.0 - 1.0 / n
        pay = o * b
        shortfall = float((discounted_sum(b, rho) - discounted_sum(pay, rho)).max())
        xstar = dnp_saturation(n, Z)
        for label, eta in (("ρ", rho), ("1 − 0.5/n", 1 - 0.5 / n), ("1 − 0.1/n", 1 - 0.1 / n)):
            budget = Z / (2 * (1 - eta))
            low = float(discounted_sum(pay, eta).min())
            rows.append({"seed": s, "stream": name, "n": int(n), "eta": label, "eta_value": eta,
                         "min_payoff": low, "loss_budget": budget,
                         "budget_used": max(0.0, -low) / budget, "shortfall": shortfall,
                         "shortfall_bound": xstar + 1.0,
                         "frac_betting": float((o > 0).mean()),
                         "frac_all_in": float((o >= 1.0).mean())})
    return rows


# ----------------------------------------------------------------------------------------------
# Experiment 3: SOGD against every fixed step
# ----------------------------------------------------------------------------------------------


def _play_fixed_steps(y: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """``f_t(w_t)`` of OGD with each fixed step on ``|w - y_t|``.

    ``y`` has shape ``(T,)`` or ``(T, k)`` (``k`` streams); the result has shape
    ``(T, len(steps))`` or ``(T, k, len(steps))``. Everything runs as one vectorised bank.
    """
    y2 = y.reshape(y.shape[0], -1)
    target = np.repeat(np.arange(y2.shape[1]), steps.size)      # stream of each learner
    bank = OGD(np.tile(steps, y2.shape[1]), radius=D / 2.0)
    w = np.empty((y2.shape[0], target.size))
    for t in range(y2.shape[0]):
        w[t] = bank.w[:, 0]
        bank.update(np.sign(bank.w[:, 0] - y2[t, target])[:, None])  # gradient of |w - y_t|
    f = np.abs(w - y2[:, target])
    return f if y.ndim == 1 else f.reshape(y.shape[0], y2.shape[1], steps.size)


def _play_sogd(y: np.ndarray, Z: float, *, c_n: float | str = DEFAULT_CN,
               record: bool = False) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """SOGD's losses on ``|w - y_t|`` and, if ``record``, its combiner weights ``omega_t`` and the
    bits ``b_t`` fed to the combiners (both of shape ``(T, N+1)``, at every round)."""
    from iclr_lab.core.progress import progress

    T = y.size
    sogd = SOGD(T, D=D, G=G, tau=2.0, Z=Z, c_n=c_n)
    f = np.empty(T)
    omegas = np.empty((T, sogd.n_experts)) if record else None
    bits = np.empty((T, sogd.n_experts)) if record else None
    for t in progress(range(T), desc="SOGD", total=T):
        sogd.outputs()
        f[t] = sogd.update(AbsoluteLoss(y[t]))
        if omegas is not None and bits is not None:
            omegas[t] = sogd.omega
            bits[t] = sogd.bits
    return f, omegas, bits


def _bin_max(t: np.ndarray, v: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Upper envelope of a long series: the maximum of ``v`` over each of ``bins`` time bins."""
    if t.size <= bins:
        return t, v
    edges = np.linspace(0, t.size, bins + 1).astype(int)
    idx = np.array([lo + int(np.argmax(v[lo:hi])) for lo, hi in zip(edges[:-1], edges[1:],
                                                                    strict=True)])
    return t[idx], v[idx]


def _segments(omega: np.ndarray, tol: float = 0.02) -> list[tuple[int, int, float]]:
    """Runs of rounds over which ``omega`` stays within ``tol`` of its value at the run's start:
    ``(first round, last round, mean weight)``, rounds 1-based. The weight chart draws one
    rectangle per run, so it keeps every round's timing with a few hundred rows."""
    runs, lo = [], 0
    for t in range(1, omega.size + 1):
        if t == omega.size or abs(omega[t] - omega[lo]) > tol:
            runs.append((lo + 1, t, float(omega[lo:t].mean())))
            lo = t
    return runs


def _first(mask: np.ndarray) -> float:
    """Index of the first True of ``mask`` (NaN if none)."""
    idx = np.flatnonzero(mask)
    return float(idx[0]) if idx.size else math.nan


def _combiner_rows(s: int, T: int, Z: float, omegas: np.ndarray, bits: np.ndarray,
                   start: int, end: int) -> list[dict[str, Any]]:
    """What each combiner of one SOGD run did, from its weights and bits at every round.

    ``start`` and ``end`` are the first and last rounds (1-based) of the volatile phase. ``on_after``:
    rounds from ``start`` until the weight first reaches 1/2 (NaN if never); ``off_after``: for a
    combiner whose weight is at least 1/2 when the phase ends, rounds from ``end`` until it is
    below 1/2 again (NaN otherwise); ``mean_bit``: the mean bit from ``start`` until that
    switch (until ``end`` if none); ``max_omega_calm``: the largest weight before ``start``.
    """
    lams = SOGD.grid(T)
    steps = fixed_step_grid(T)
    rows = []
    for i, lam_i in enumerate(lams):
        om = omegas[:, i]
        n_i = float(1.0 / (1.0 - lam_i))
        on = _first(om[start - 1:] >= 0.5)
        off = _first(om[end:] < 0.5) if om[end - 1] >= 0.5 else math.nan  # on when it ends
        upto = end if math.isnan(on) else max(start + int(on) - 1, start)
        rows.append({"seed": s, "combiner": i + 1, "n_i": n_i, "step_i": float(steps[i + 1]),
                     "max_omega": float(om.max()), "max_omega_calm": float(om[:start - 1].max()),
                     "on_after": on, "off_after": off + 1 if not math.isnan(off) else math.nan,
                     "mean_bit": float(bits[start - 1:upto, i].mean()),
                     "xstar": dnp_saturation(n_i, Z)})
    return rows


#: the ranges of memories over which a control's single step is tuned: the claims' own ranges
CONTROL_RANGES = ("long", "short", "all")
#: tuning seeds of the controls (disjoint from the judging seeds: iclr_lab.core.tuning.tuning_seeds)
TUNING_SEEDS = 3


def _streams(sz: _Sizes, seeds: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    return [two_scale_stream(sz.T3, np.random.default_rng([s, 3]), half_period=sz.half_period)
            for s in seeds]


def _ranges(sz: _Sizes) -> dict[str, list[int]]:
    long, short = _memories(sz.T3, sz.ns3)
    return {"long": long, "short": short, "all": [int(n) for n in sz.ns3]}


def _worst_fixed(ys: np.ndarray, steps: Sequence[float], ns: Sequence[int]) -> np.ndarray:
    """``max_t D-Regret`` of OGD with each step, per stream and memory: shape (streams, ns, steps)."""
    f = _play_fixed_steps(ys, np.asarray(steps, dtype=float)).reshape(ys.shape[0], ys.shape[1], -1)
    return np.stack([np.stack([worst_regret(f[:, k], ys[:, k], n)[0] for n in ns])
                     for k in range(ys.shape[1])])


def _tune_controls(sz: _Sizes, seed: int) -> list[Tuned]:
    """The controls of the SOGD claims: OGD with one fixed step, the same for every memory (it does
    not adapt), tuned by :func:`iclr_lab.core.tuning.tune` on the same step grid as the per-memory
    oracle. Objective, for each range of memories in :data:`CONTROL_RANGES`: the median over the
    tuning seeds (disjoint from the judging seeds) of the worst ratio over the range of the step's
    ``max_t D-Regret`` to the oracle's (the best step of the grid for that memory and stream)."""
    from iclr_lab.core.tuning import tune, tuning_seeds

    ns = [int(n) for n in sz.ns3]
    ys = np.stack([y for y, _ in _streams(sz, tuning_seeds(seed, TUNING_SEEDS))], axis=1)
    grid = np.sort(fixed_step_grid(sz.T3))
    on_grid = _worst_fixed(ys, grid.tolist(), ns)
    oracle = on_grid.min(axis=2)                          # (streams, ns)
    cache = {float(e): on_grid[:, :, j] for j, e in enumerate(grid)}
    out = []
    for name, memories in _ranges(sz).items():
        cols = [ns.index(n) for n in memories]

        def score(values: Sequence[float], cols: list[int] = cols) -> list[float]:
            new = [float(v) for v in values if float(v) not in cache]
            if new:
                w = _worst_fixed(ys, new, ns)
                cache.update({v: w[:, :, j] for j, v in enumerate(new)})
            return [float(np.median((cache[float(v)] / oracle)[:, cols].max(axis=1)))
                    for v in values]

        out.append(tune(f"{SINGLE} ({name} memories)", score, float(grid[grid.size // 2]),
                        parameter="η", grid=grid.tolist()))
    return out


def _control_regrets(sz: _Sizes, seeds: Sequence[int], controls: Sequence[Tuned],
                     worst: pd.DataFrame) -> pd.DataFrame:
    """``max_t D-Regret`` of each control's chosen step on the judging streams, per seed and n:
    read from Experiment 3's runs when the step is on the grid, run afresh when tuning extended it."""
    import pandas as pd

    ns = [int(n) for n in sz.ns3]
    fixed = worst[worst["learner"].str.startswith("OGD, η")]
    played = fixed.set_index(["step", "seed", "n"])["max_regret"]
    off_grid = [t.choice for t in controls if t.choice not in set(fixed["step"])]
    if off_grid:
        ys = np.stack([y for y, _ in _streams(sz, seeds)], axis=1)
        w = _worst_fixed(ys, off_grid, ns)
        extra = pd.Series({(e, s, n): float(w[k, i, j]) for j, e in enumerate(off_grid)
                           for k, s in enumerate(seeds) for i, n in enumerate(ns)})
        played = pd.concat([played, extra])
    return pd.DataFrame([{"seed": s, "n": n, "control": t.method, "step": t.choice,
                          "max_regret": float(played[(t.choice, s, n)])}
                         for s in seeds for n in ns for t in controls])


def _experiment3(sz: _Sizes, seeds: Sequence[int]) -> dict[str, pd.DataFrame]:
    import pandas as pd

    T = sz.T3
    steps = fixed_step_grid(T)
    streams = _streams(sz, seeds)
    fixed = _play_fixed_steps(np.stack([y for y, _ in streams], axis=1), steps)
    names = [f"OGD, η = {e:.3g}" for e in steps] + [SOGD_Z1, SOGD_Z100, SOGD_CN1]
    worst_rows: list[dict[str, Any]] = []
    lens_rows: list[dict[str, Any]] = []
    weight_rows: list[dict[str, Any]] = []
    phase_rows: list[dict[str, Any]] = []
    combiner_rows: list[dict[str, Any]] = []
    for k, (s, (y, volatile)) in enumerate(zip(seeds, streams, strict=True)):
        f1, omegas, bits = _play_sogd(y, 1.0 / T, record=True)
        f100, _, _ = _play_sogd(y, 100.0 / T)
        fcn1, _, _ = _play_sogd(y, 1.0 / T, c_n=1.0)
        learners = np.column_stack([fixed[:, k], f1, f100, fcn1])
        for n in sz.ns3:
            lam = 1.0 - 1.0 / n
            worst, series = worst_regret(learners, y, n)
            ts = checkpoints(T, n)
            t_worst = ts[np.argmax(series, axis=0)]
            common = {"seed": s, "n": n, "lam": lam, "thm1_bound": OGD.bound(lam, D, G),
                      "thm3_bound": sogd_bound(lam, T, D, G)}
            for j, name in enumerate(names):
                worst_rows.append({**common, "learner": name,
                                   "step": steps[j] if j < steps.size else math.nan,
                                   "max_regret": float(worst[j]), "t_worst": int(t_worst[j])})
            if k == 0:  # the lambda lens: regret over the whole run, for the base seed
                best = int(np.argmin(worst[:steps.size]))
                for name, j in ((SOGD_Z1, steps.size), (ORACLE, best), (SLOW, 0)):
                    tt, vv = _bin_max(ts, series[:, j] / n, 150)  # per round of the window
                    lens_rows += [{"n": n, "learner": name, "t": int(a), "excess": float(b),
                                   "seed": s} for a, b in zip(tt, vv, strict=True)]
        edges = np.flatnonzero(np.diff(np.r_[False, volatile, False].astype(int)))
        start, end = int(edges[0]) + 1, int(edges[1])
        phase_rows.append({"seed": s, "start": start, "end": end})
        assert omegas is not None and bits is not None
        combiner_rows += _combiner_rows(s, T, 1.0 / T, omegas, bits, start, end)
        if k == 0:  # the weight chart: every round of the base seed, as runs of near-equal weight
            for i, lam_i in enumerate(SOGD.grid(T)):
                weight_rows += [{"combiner": i + 1, "n_i": float(1 / (1 - lam_i)),
                                 "step_i": float(steps[i + 1]), "t": a, "t_end": b + 1,
                                 "omega": w} for a, b, w in _segments(omegas[:, i])]
    worst_df = pd.DataFrame(worst_rows)
    return {"worst_regret": worst_df, "lens": pd.DataFrame(lens_rows),
            "weights": pd.DataFrame(weight_rows), "combiners": pd.DataFrame(combiner_rows),
            "volatile_phases": pd.DataFrame(phase_rows), "summary": _summary(worst_df, T)}


def _ratios(worst: pd.DataFrame) -> pd.DataFrame:
    """One row per (seed, n): every learner's worst regret divided by the best fixed step's."""
    wide = worst.pivot_table(index=["seed", "n"], columns="learner", values="max_regret")
    fixed = [c for c in wide.columns if c.startswith("OGD, η")]
    return wide.div(wide[fixed].min(axis=1), axis=0)


def _step_name(eta: float) -> str:
    return f"OGD, η = {eta:.3g}"


def _baselines(worst: pd.DataFrame, T: int) -> pd.DataFrame:
    """Per (seed, n): the ratio to the best fixed step of the three SOGD runs, of the best single
    step (chosen per seed for the whole grid), of Theorem 1's step for the memory n, of ``B_0``
    and of the paper's untuned step."""
    ratios = _ratios(worst)
    fixed = [_step_name(e) for e in fixed_step_grid(T)]
    single = ratios[fixed].groupby(level="seed").max().idxmin(axis=1)  # per seed
    out = ratios[[SOGD_Z1, SOGD_Z100, SOGD_CN1]].copy()
    out[SINGLE] = [ratios.loc[idx, single[idx[0]]] for idx in ratios.index]
    tuned = {n: _step_name(float(OGD.tuned_lr(1 - 1 / n, D, G)))
             for n in ratios.index.get_level_values("n").unique()}
    out[TUNED] = [ratios.loc[idx, tuned[idx[1]]] if tuned[idx[1]] in ratios else math.nan
                  for idx in ratios.index]
    out[SLOW] = ratios[fixed[0]]
    out[FAST] = ratios[_step_name(D / (2 * G))]
    return out


def _summary(worst: pd.DataFrame, T: int) -> pd.DataFrame:
    """The chapter's table: per memory n, medians over seeds of per-seed ratios."""
    import pandas as pd

    base = _baselines(worst, T)
    med = base.groupby(level="n").median()
    fixed = worst[worst["learner"].str.startswith("OGD, η")]
    best = fixed.loc[fixed.groupby(["seed", "n"])["max_regret"].idxmin()]
    wide = worst.pivot_table(index=["seed", "n"], columns="learner", values="max_regret")
    bound = worst.drop_duplicates(["seed", "n"]).set_index(["seed", "n"])["thm3_bound"]
    b0 = _step_name(fixed_step_grid(T)[0])

    def median(v: pd.Series) -> np.ndarray:
        return v.groupby(level="n").median().to_numpy()

    ns = med.index.to_numpy()
    return pd.DataFrame({
        "n": ns,
        "best step η*": best.groupby("n")["step"].median().to_numpy(),
        "SOGD / best": med[SOGD_Z1].to_numpy(),
        "B₀ / best": med[SLOW].to_numpy(),
        "SOGD / Thm 1 step": median(base[SOGD_Z1] / base[TUNED]),
        "Z = 100/T over Z = 1/T": median(wide[SOGD_Z100] / wide[SOGD_Z1]),
        "SOGD / Thm 3 bound": median(wide[SOGD_Z1] / bound),
        "B₀ / Thm 3 bound": median(wide[b0] / bound),
        "Thm 3 bound / (nGD)": (bound.groupby(level="n").first() / (ns * G * D)).to_numpy(),
    })


# reproduce
# ----------------------------------------------------------------------------------------------


def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Run the chapter's three experiments on seeds ``seed .. seed + seeds - 1``; return the Report.

    Every claim is judged on the median over the seeds, with the range shown next to it.
    """
    import pandas as pd

    from iclr_lab.core.report import Report, timed
    from iclr_lab.core.scales import pick, seed_everything
    from iclr_lab.online.discounted_oco.claims import _claims
    from iclr_lab.online.discounted_oco.figures import charts

    sz = pick(SIZES, scale)
    seed_everything(seed)
    seeds = [seed + k for k in range(sz.seeds)]
    with timed() as elapsed:
        tables = {"theorem1": pd.DataFrame(_theorem1(sz.T1, sz.ns1, seeds)),
                  "dnp": pd.DataFrame(_theorem2(sz.T2, sz.dnp_ns, seeds)),
                  **_experiment3(sz, seeds)}
        controls = _tune_controls(sz, seed)
        tables["control_regret"] = _control_regrets(sz, seeds, controls, tables["worst_regret"])
    return Report(slug="discounted_oco", scale=scale, seed=seed, tables=tables,
                  claims=_claims(tables, sz), seconds=elapsed(), chart_builder=charts,
                  tuning=controls)


def _memories(T: int, ns: Sequence[int]) -> tuple[list[int], list[int]]:
    """The memories where Theorem 3's bound is below the trivial ``n G D`` (long) and the rest."""
    long = [int(n) for n in ns if sogd_bound(1 - 1 / n, T, D, G) < n * G * D]
    return long, [int(n) for n in ns if n not in long]


def _horizon(report: Report) -> int:
    """The horizon of Experiment 3 in ``report``: the memory of the first combiner, ``n_1 = T``."""
    return int(round(report.tables["combiners"]["n_i"].max()))
