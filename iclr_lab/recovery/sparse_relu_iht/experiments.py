"""The sparse-ReLU-IHT chapter's experiments: ``reproduce()``, its claims, charts and explorer.

* Experiment 1 (recovery below the parameter count): planted networks with ``m = 5`` neurons of two
  nonzeros each on disjoint inputs (``d = 20``, ``s = 10``) and the planted activation patterns as
  generators, so ``A`` has ``d m = 100`` columns. IHT against least squares and OMP on the stored
  ``A``, 30 planted networks for each ``n`` below and at 100; the recovery claim is judged at
  ``n = 70``, below the count, with a binomial bar;
* Experiment 2 (the phase-transition grid): IHT with random generators and the sequential pattern
  update on planted networks of the authors' design (``d = 50``, ``n = 5000``), on a fixed
  3 x 4 subgrid of (width ``m``, nonzeros ``s``); IMP on the same networks and seeds, trained as the
  authors' runner trains it (as many full-batch epochs in every round as IHT runs outer steps), its
  learning rate tuned on a tuning seed;
* Experiment 3 (digits, even against odd): IHT against IMP under the same protocol, IMP's learning
  rate tuned on the validation splits of several tuning seeds (scored by the worst of them).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr_lab.core.validation import check_int, check_seed
from iclr_lab.recovery.sparse_relu_iht.method import (
    PlantedMLP,
    SensingOperator,
    iht,
    imp_sweep,
    least_squares,
    omp,
    planted_mlp,
    psnr,
)

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

    from iclr_lab.core.report import Claim, Report
    from iclr_lab.core.tuning import Tuned

__all__ = ["SIZES", "charts", "explorer", "numbers", "phase_grid", "phase_grid_chart", "reproduce"]

IHT = "IHT (10 support steps)"
NIHT = "IHT, no support steps"
OMP = "OMP (stored A)"
LSQ = "least squares (stored A)"
IMP = "IMP, 10 % per round"
ONESHOT = "IMP, one shot"
#: exact recovery: relative weight error at most this (the spec's A1 criterion)
EXACT = 1e-6
#: a grid cell counts as recovered at this PSNR (the paper's heat maps; the spec's A2)
PSNR_OK = 100.0
#: the share of exact cells quoted in the text (the chapter's former grid claim, bar 0.3; the
#: spec's A2 asks for 0.4 of its full 5 x 6 grid). IMP never exceeds ~40 dB, so it could not pass
#: that test whatever the data: a control that fails by construction
GRID_BAR = 0.3
#: the grid claim (the spec's A3): IHT's median PSNR over the grid minus the better IMP variant's,
#: at least this (dB)
GRID_MARGIN = -3.0
#: the linear-rate claim (the spec's A1): the median contraction of the recovery error per outer
#: step of the successful runs at the largest n is at most this
STEP_CONTRACTION = 0.5
#: IMP's learning-rate grid (Adam), fixed before any run; the authors' code uses 1e-3 (its default)
LRS = (1e-3, 1e-2, 1e-1)
IMP_DEFAULT_LR = 1e-3
#: the recovery claim: a count that a recovery rate of NULL_RATE reaches with probability at most
#: LEVEL (one-sided binomial test), so that passing rejects "IHT recovers at most half"
NULL_RATE = 0.5
LEVEL = 0.05
#: the digits claim: IHT's accuracy may trail the better IMP variant's by at most this (points)
DIGIT_MARGIN = -2.0


def _colors() -> dict[str, str]:
    from iclr_lab.core.charts import BASELINE_COLORS, METHOD_COLORS

    return {IHT: METHOD_COLORS[0], NIHT: METHOD_COLORS[1], OMP: BASELINE_COLORS[0],
            LSQ: BASELINE_COLORS[1], IMP: BASELINE_COLORS[2], ONESHOT: BASELINE_COLORS[3]}


# ----------------------------------------------------------------------------------------------
# Sizes
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sizes:
    """Per-scale sizes of :func:`reproduce`."""

    ns: tuple[int, ...]  # sample sizes of Experiment 1
    trials: int  # planted networks per sample size (Experiment 1)
    claim_n: int  # the sample size below the parameter count at which recovery is judged
    transition_n: int  # the sample size of the transition check
    steps: int  # IHT outer steps (Experiments 1 and 2), and IMP's epochs per round (Experiment 2)
    grid_ms: tuple[int, ...]  # widths of the phase-transition subgrid
    grid_ss: tuple[int, ...]  # nonzeros of the subgrid
    grid_n: int  # samples of Experiment 2
    grid_d: int  # input dimension of Experiment 2
    grid_seeds: int  # seeds of Experiment 2 (IHT and IMP)
    digit_ss: tuple[int, ...]  # nonzeros of Experiment 3
    digit_width: int  # neurons of Experiment 3
    digit_steps: int  # IHT outer steps of Experiment 3, and IMP's epochs per round there
    digit_seeds: int  # seeds of Experiment 3
    tune_seeds: int  # tuning seeds for IMP's learning rate on the grid (Experiment 2)
    digit_tune_seeds: int  # tuning seeds for IMP's learning rate on digits (Experiment 3)


SIZES = {
    "smoke": _Sizes(ns=(30, 70), trials=5, claim_n=70, transition_n=30, steps=8, grid_ms=(2, 5),
                    grid_ss=(2, 5), grid_n=400, grid_d=10, grid_seeds=1, digit_ss=(10,),
                    digit_width=5, digit_steps=3, digit_seeds=1, tune_seeds=1,
                    digit_tune_seeds=2),
    "book": _Sizes(ns=(30, 50, 70, 100), trials=30, claim_n=70, transition_n=50, steps=15,
                   grid_ms=(2, 5, 10), grid_ss=(2, 5, 10, 20), grid_n=5000, grid_d=50,
                   grid_seeds=3, digit_ss=(10, 20, 50), digit_width=20, digit_steps=20,
                   digit_seeds=3, tune_seeds=1, digit_tune_seeds=3),
    "paper": _Sizes(ns=(30, 50, 70, 100, 150, 200), trials=100, claim_n=70, transition_n=50,
                    steps=15, grid_ms=(2, 5, 10), grid_ss=(2, 5, 10, 20), grid_n=5000,
                    grid_d=50, grid_seeds=10, digit_ss=(10, 20, 50, 100), digit_width=20,
                    digit_steps=20, digit_seeds=10, tune_seeds=2,
                    digit_tune_seeds=3),
}

REFINE = 10  # support steps per outer step, the authors' value for the MLP tasks
D1, M1, K1 = 20, 5, 2  # Experiment 1: inputs, neurons, nonzeros per neuron


def _binomial_bar(trials: int, rate: float = NULL_RATE, level: float = LEVEL) -> int:
    """The smallest count ``k`` with ``P(Bin(trials, rate) >= k) <= level``: recovering ``k`` or
    more of ``trials`` networks rejects "the recovery rate is at most ``rate``" at ``level``
    (one-sided). ``trials + 1`` when no count is rare enough (too few trials)."""
    from iclr_lab.core.validation import check_range

    trials = check_int("trials", trials, 1)
    rate = check_range("rate", rate, 0.0, 1.0, low_open=True, high_open=True)
    level = check_range("level", level, 0.0, 1.0, low_open=True, high_open=True)
    tail = 0.0
    for k in range(trials, -1, -1):  # tail = P(X >= k), accumulated from the top
        tail += math.comb(trials, k) * rate**k * (1 - rate) ** (trials - k)
        if tail > level:
            return k + 1
    return 0


# ----------------------------------------------------------------------------------------------
# Experiment 1: recovery below the parameter count (planted patterns)
# ----------------------------------------------------------------------------------------------


def _rate(history: list[dict[str, Any]], floor: float = 1e-10) -> tuple[float, float]:
    """Per-gradient-evaluation contraction factor of the recovery error and the R^2 of the fit:
    a least-squares line through ``log(error)`` against the evaluation count, over the
    evaluations before the error first falls below ``floor`` (where float round-off takes over)."""
    ev = np.array([h["evals"] for h in history], dtype=float)
    err = np.array([h["error"] for h in history], dtype=float)
    below = np.nonzero(err < floor)[0]
    stop = int(below[0]) + 1 if below.size else err.size
    ev, err = ev[:stop], np.maximum(err[:stop], 1e-300)
    if ev.size < 3:
        return math.nan, math.nan
    y = np.log(err)
    slope, icpt = np.polyfit(ev, y, 1)
    resid = y - (slope * ev + icpt)
    tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / tot if tot > 0 else math.nan
    return float(math.exp(slope)), r2


def _recovery(sz: _Sizes, seed: int) -> dict[str, pd.DataFrame]:
    import pandas as pd

    from iclr_lab.core.progress import progress

    rows, curves = [], []
    budget = sz.steps * (1 + REFINE)
    cases = [(n, t) for n in sz.ns for t in range(sz.trials)]
    for n, t in progress(cases, desc="recovery", total=len(cases)):
        P = planted_mlp(n, D1, M1, K1 * M1, np.random.default_rng([seed, 1, n, t]), per_neuron=K1)
        G = P.fused
        norm = float(np.linalg.norm(G))
        op = SensingOperator(P.X, M1, generators=G)
        A = op.dense()
        gap = float(np.max(np.abs(A @ G.ravel() - P.y)) / np.max(np.abs(P.y)))
        runs = {
            IHT: iht(P.X, P.y, K1 * M1, generators=G, steps=sz.steps, refine=REFINE,
                     update_patterns=False, w_true=G),
            # the same gradient budget spent on plain (normalised) IHT steps
            NIHT: iht(P.X, P.y, K1 * M1, generators=G, steps=budget, refine=0,
                      update_patterns=False, w_true=G),
        }
        for name, r in runs.items():
            factor, r2 = _rate(r.history)
            err = float(r.history[-1]["error"])
            rows.append({"n": n, "trial": t, "method": name, "error": err,
                         "exact": err <= EXACT, "evals": int(r.history[-1]["evals"]),
                         "factor": factor, "r2": r2, "floats": r.working_floats,
                         "linear_gap": gap})
            # every fourth evaluation (a small table); a run that stopped early (its support
            # steps could not decrease the loss any more) keeps its last error to the budget
            ev = np.array([h["evals"] for h in r.history])
            er = np.array([h["error"] for h in r.history])
            for e in range(0, budget + 1, 4):
                last = float(er[np.searchsorted(ev, e, side="right") - 1])
                curves.append({"n": n, "trial": t, "method": name, "evals": e,
                               "log10_error": math.log10(max(last, 1e-16))})
        for name, w in ((LSQ, least_squares(A, P.y)), (OMP, omp(A, P.y, K1 * M1))):
            err = float(np.linalg.norm(w - G.ravel()) / norm)
            # both store A (n x d m) and the solution (d m)
            rows.append({"n": n, "trial": t, "method": name, "error": err, "exact": err <= EXACT,
                         "evals": 0, "factor": math.nan, "r2": math.nan,
                         "floats": A.size + A.shape[1], "linear_gap": gap})
    runs_df = pd.DataFrame(rows)
    summary = runs_df.groupby(["n", "method"], sort=False).agg(
        exact=("exact", "sum"), trials=("exact", "size"),
        median_error=("error", "median")).reset_index()
    summary["exact"] = summary["exact"].astype(int)
    summary["claim"] = summary["n"] == sz.claim_n  # the sample size the recovery claim judges
    # the mean over planted networks of log10(error), per n, method and evaluation (the sweep
    # chart's line; the per-network table would be 30 times longer than a chart should embed)
    cur = pd.DataFrame(curves).groupby(["n", "method", "evals"], sort=False)["log10_error"]
    mean_curves = cur.mean().reset_index()
    return {"recovery_runs": runs_df, "recovery": summary, "error_curves": mean_curves}


# ----------------------------------------------------------------------------------------------
# Experiment 2: the phase-transition grid
# ----------------------------------------------------------------------------------------------


def _cells(ms: Sequence[int], ss: Sequence[int], n: int, d: int, seed: int,
           diagonal: bool = False,
           cache: dict[tuple[int, ...], PlantedMLP] | None = None) -> list[tuple[int, int, PlantedMLP]]:
    """The planted network of every cell ``(m, s)`` with ``s <= d m`` (only those with ``s = m``
    if ``diagonal``), drawn from ``(seed, m, s)``: the same network for IHT and for IMP. A draw
    depends only on ``(n, d, m, s, seed)``, so ``cache`` (filled here) keeps each one for the
    next caller (nothing downstream writes into a network's arrays)."""
    out = []
    for m in ms:
        for s in ss:
            if s > d * m or (diagonal and s != m):
                continue
            key = (n, d, m, s, seed)
            P = None if cache is None else cache.get(key)
            if P is None:
                P = planted_mlp(n, d, m, s, np.random.default_rng([seed, 2, m, s]))
                if cache is not None:
                    cache[key] = P
            out.append((m, s, P))
    return out


def phase_grid(ms: Sequence[int], ss: Sequence[int], *, n: int, d: int, seed: int,
               steps: int = 15, refine: int = REFINE,
               update_patterns: bool = True) -> list[dict[str, Any]]:
    """PSNR of IHT on one planted network per cell ``(m, s)`` of the grid.

    The planted network of a cell is the authors' design
    (:func:`~iclr_lab.recovery.sparse_relu_iht.method.planted_mlp`, ``per_neuron=None``);
    IHT uses ``m`` random generators and, by default, the sequential pattern update. Cells with
    ``s > d m`` are skipped. This is the pure function behind :func:`explorer`.
    """
    n = check_int("n", n, 1)
    d = check_int("d", d, 1)
    seed = check_seed(seed)
    steps = check_int("steps", steps, 1)
    refine = check_int("refine", refine, 0)
    return _phase_grid(_cells(ms, ss, n, d, seed), seed=seed, steps=steps, refine=refine,
                       update_patterns=update_patterns)


def _phase_grid(cells: list[tuple[int, int, PlantedMLP]], *, seed: int, steps: int, refine: int,
                update_patterns: bool) -> list[dict[str, Any]]:
    """:func:`phase_grid` on the planted networks ``cells`` (:func:`_cells`)."""
    rows = []
    for m, s, P in cells:
        r = iht(P.X, P.y, s, width=m, steps=steps, refine=refine,
                update_patterns=update_patterns, seed=seed)
        rows.append({"seed": seed, "m": m, "s": s, "method": IHT,
                     "psnr": psnr(P.y, r.predict(P.X)), "stored": r.nonzeros,
                     "dense_params": 0, "floats": r.working_floats})  # IHT holds no dense net
    return rows


def _imp_grid(sz: _Sizes, seed: int, name: str, lr: float, diagonal: bool = False,
              cache: dict[tuple[int, ...], PlantedMLP] | None = None) -> list[dict[str, Any]]:
    """One IMP variant on every cell of the grid at ``seed`` (on its diagonal ``s = m`` only if
    ``diagonal``): as many full-batch Adam epochs in every round as IHT runs outer steps (the
    authors' runner passes one ``num_epochs`` to both)."""
    pf = 0.1 if name == IMP else None
    rows = []
    for m, s, P in _cells(sz.grid_ms, sz.grid_ss, sz.grid_n, sz.grid_d, seed, diagonal, cache):
        q = imp_sweep(P.X, P.y, m, [s], epochs=sz.steps, lr=lr, prune_fraction=pf, seed=seed)[0]
        rows.append({"seed": seed, "m": m, "s": s, "method": name, "lr": lr, "epochs": sz.steps,
                     "psnr": psnr(P.y, q.predict(P.X)), "stored": q.nonzeros,
                     "dense_params": q.dense_params, "floats": q.working_floats})
    return rows


def _tune_imp(name: str, score: Callable[[float], float]) -> Tuned:
    """IMP's learning rate by :func:`iclr_lab.core.tuning.tune` on :data:`LRS` (lower is better)."""
    from iclr_lab.core.tuning import tune

    return tune(name, lambda lrs: [score(float(lr)) for lr in lrs], IMP_DEFAULT_LR, grid=LRS)


def _chosen(t: Tuned) -> float:
    return t.choice if math.isfinite(t.choice) else t.default


def _grid(sz: _Sizes, seed: int) -> tuple[pd.DataFrame, list[Tuned]]:
    import pandas as pd

    from iclr_lab.core.progress import progress
    from iclr_lab.core.tuning import tuning_seeds

    seeds = [seed + k for k in range(sz.grid_seeds)]
    rows: list[dict[str, Any]] = []
    # each planted network is drawn once and serves IHT, both IMP variants and every tuning rate
    cache: dict[tuple[int, ...], PlantedMLP] = {}
    for sd in progress(seeds, desc="phase grid, IHT", total=len(seeds)):
        rows += _phase_grid(_cells(sz.grid_ms, sz.grid_ss, sz.grid_n, sz.grid_d, sd, cache=cache),
                            seed=sd, steps=sz.steps, refine=REFINE, update_patterns=True)
    tuned = []
    for name in (IMP, ONESHOT):
        # the objective: minus the median PSNR over the diagonal cells (s = m: every width, three
        # sparsities) of the tuning seeds' grids; the whole grid would cost four times as much,
        # which the chapter's CPU budget does not allow at four rates
        def score(lr: float, name: str = name) -> float:
            vals = [r["psnr"] for ts in tuning_seeds(seed, sz.tune_seeds)
                    for r in _imp_grid(sz, ts, name, lr, diagonal=True, cache=cache)]
            return -statistics.median(vals)

        t = _tune_imp(name, score)
        tuned.append(t)
        for sd in progress(seeds, desc=f"phase grid, {name}", total=len(seeds)):
            rows += _imp_grid(sz, sd, name, _chosen(t), cache=cache)
    return pd.DataFrame(rows), tuned


# ----------------------------------------------------------------------------------------------
# Experiment 3: digits, even against odd
# ----------------------------------------------------------------------------------------------


def _digit_split(seed: int) -> tuple[np.ndarray, ...]:
    """The digits split of ``seed``: the four fifths of the training split that both methods fit,
    the fifth held out for validation, and the test split; labels 1 for even digits."""
    from iclr_lab.core.datasets import digits

    split = digits(seed=seed)
    X = split.x_train.astype(float)
    y = (split.y_train % 2 == 0).astype(float)
    nv = len(y) // 5
    return (X[nv:], y[nv:], X[:nv], y[:nv], split.x_test.astype(float),
            (split.y_test % 2 == 0).astype(float))


def _digits(sz: _Sizes, seed: int) -> tuple[pd.DataFrame, list[Tuned]]:
    import pandas as pd

    from iclr_lab.core.progress import progress
    from iclr_lab.core.tuning import tuning_seeds

    rows = []
    m = sz.digit_width
    seeds = [seed + k for k in range(sz.digit_seeds)]
    splits = {sd: _digit_split(sd) for sd in seeds}
    cases = [(sd, s) for sd in seeds for s in sz.digit_ss]
    for sd, s in progress(cases, desc="digits, IHT", total=len(cases)):
        Xf, yf, _, _, Xte, yte = splits[sd]
        r = iht(Xf, yf, s, width=m, steps=sz.digit_steps, refine=REFINE, seed=sd)
        pred = r.predict(Xte) > 0.5
        rows.append({"seed": sd, "s": s, "method": IHT, "lr": math.nan, "epochs": 0,
                     "accuracy": 100 * float(np.mean(pred == yte)),
                     "one_class": bool(pred.all() or not pred.any()), "rounds": 0,
                     "stored": r.nonzeros, "dense_params": 0, "floats": r.working_floats,
                     "evals": int(r.history[-1]["evals"])})
    tuned = []
    tune_splits = {ts: _digit_split(ts) for ts in tuning_seeds(seed, sz.digit_tune_seeds)}
    for name in (IMP, ONESHOT):
        pf = 0.1 if name == IMP else None

        def runs(sd: int, lr: float, split: tuple[np.ndarray, ...], pf: float | None = pf) -> list[Any]:
            return imp_sweep(split[0], split[1], m, list(sz.digit_ss), epochs=sz.digit_steps,
                             lr=lr, prune_fraction=pf, seed=sd)

        # the objective: the worst, over the tuning seeds, of each seed's validation error (%)
        # averaged over s. A rate at which the network dies on some draws (every neuron pruned or
        # inactive: one-class predictions) must not be chosen because it survived on the tuning
        # seeds it happened to meet: the chapter's first version tuned on one seed and chose 0.1
        # at some base seeds, where IMP then died on judging seeds; the median over three tuning
        # seeds, tried next, still chose it at base seed 101, where it survived on two of three
        def score(lr: float, runs: Callable[..., list[Any]] = runs) -> float:
            per_seed = [float(np.mean([100 * float(np.mean((q.predict(sp[2]) > 0.5) != sp[3]))
                                       for q in runs(ts, lr, sp)]))
                        for ts, sp in tune_splits.items()]
            return max(per_seed)

        t = _tune_imp(name, score)
        tuned.append(t)
        lr = _chosen(t)
        for sd in progress(seeds, desc=f"digits, {name}", total=len(seeds)):
            Xte, yte = splits[sd][4], splits[sd][5]
            for s, q in zip(sz.digit_ss, runs(sd, lr, splits[sd]), strict=True):
                pred = q.predict(Xte) > 0.5
                rows.append({"seed": sd, "s": s, "method": name, "lr": lr,
                             "epochs": sz.digit_steps,
                             "accuracy": 100 * float(np.mean(pred == yte)),
                             "one_class": bool(pred.all() or not pred.any()),
                             "rounds": q.rounds, "stored": q.nonzeros,
                             "dense_params": q.dense_params, "floats": q.working_floats,
                             "evals": q.steps})
    return pd.DataFrame(rows), tuned


# ----------------------------------------------------------------------------------------------
# reproduce and the claims
# ----------------------------------------------------------------------------------------------


def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Run the chapter's three experiments (seeds ``seed, seed + 1, ...``) and return the Report."""
    from iclr_lab.core.report import Report, timed
    from iclr_lab.core.scales import pick, seed_everything

    sz = pick(SIZES, scale)
    seed_everything(seed)
    with timed() as elapsed:
        tables = _recovery(sz, seed)
        tables["grid"], tuned_grid = _grid(sz, seed)
        tables["digits"], tuned_digits = _digits(sz, seed)
        tables["memory"] = _memory(tables)
    tuned = [_label(t, "planted grid") for t in tuned_grid]
    tuned += [_label(t, "digits") for t in tuned_digits]
    return Report(slug="sparse_relu_iht", scale=scale, seed=seed, tables=tables,
                  claims=_claims(tables, sz), seconds=elapsed(), chart_builder=charts,
                  tuning=tuned)


def _label(t: Tuned, experiment: str) -> Tuned:
    from dataclasses import replace

    return replace(t, method=f"{t.method} ({experiment})")


def _memory(tb: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Floats each method holds (besides the data) and the weights it stores, per experiment."""
    import pandas as pd

    rec = tb["recovery_runs"]
    n_max = int(rec["n"].max())
    rows = []
    for name, g in rec[rec["n"] == n_max].groupby("method", sort=False):
        rows.append({"experiment": f"1: n = {n_max}", "method": name,
                     "working floats": int(g["floats"].median()), "stored weights": K1 * M1,
                     "dense parameters": D1 * M1})
    grid = tb["grid"]
    big = grid[(grid["m"] == grid["m"].max()) & (grid["s"] == grid["s"].max())]
    for name, g in big.groupby("method", sort=False):
        rows.append({"experiment": f"2: m = {int(g['m'].iloc[0])}, s = {int(g['s'].iloc[0])}",
                     "method": name, "working floats": int(g["floats"].median()),
                     "stored weights": int(g["stored"].median()),
                     "dense parameters": int(g["dense_params"].max())})
    dig = tb["digits"]
    for name, g in dig[dig["s"] == dig["s"].max()].groupby("method", sort=False):
        rows.append({"experiment": f"3: s = {int(g['s'].iloc[0])}", "method": name,
                     "working floats": int(g["floats"].median()),
                     "stored weights": int(g["stored"].median()),
                     "dense parameters": int(g["dense_params"].max())})
    return pd.DataFrame(rows)


def _count(summary: pd.DataFrame, n: int, method: str) -> float:
    sel = summary[(summary["n"] == n) & (summary["method"] == method)]
    return float(sel["exact"].iloc[0]) if len(sel) else math.nan


def _grid_shares(grid: pd.DataFrame) -> tuple[list[float], list[float]]:
    """Per grid seed: IHT's share of cells at PSNR >= PSNR_OK, and the better IMP variant's."""
    ok = grid.assign(ok=grid["psnr"] >= PSNR_OK).groupby(["seed", "method"])["ok"].mean()
    share = ok.unstack("method")
    return (share[IHT].tolist(), share[[IMP, ONESHOT]].max(axis=1).tolist())


def _grid_margins(grid: pd.DataFrame) -> list[float]:
    """Per grid seed: IHT's median PSNR over the cells minus the better IMP variant's (dB)."""
    med = grid.groupby(["seed", "method"])["psnr"].median().unstack("method")
    return [float(v) for v in med[IHT] - med[[IMP, ONESHOT]].max(axis=1)]


def _digit_margins(dig: pd.DataFrame) -> list[float]:
    """Per seed: IHT's test accuracy minus the better IMP variant's, at the worst ``s``."""
    wide = dig.pivot_table(index=["seed", "s"], columns="method", values="accuracy")
    margin = (wide[IHT] - wide[[IMP, ONESHOT]].max(axis=1)).groupby(level="seed").min()
    return [float(v) for v in margin]


def _claims(tb: dict[str, pd.DataFrame], sz: _Sizes) -> list[Claim]:
    from iclr_lab.core.report import Claim

    rec, runs, grid, dig = tb["recovery"], tb["recovery_runs"], tb["grid"], tb["digits"]
    n_hi, n_c, n_lo, t = max(sz.ns), sz.claim_n, sz.transition_n, sz.trials
    bar = _binomial_bar(t)
    ok = runs[(runs["n"] == n_hi) & (runs["method"] == IHT) & runs["exact"]]
    # the fitted factor per gradient evaluation, raised to the evaluations of one outer step
    step = float(np.median(ok["factor"] ** (1 + REFINE))) if len(ok) else math.nan
    grid_margins = _grid_margins(grid)
    margins = _digit_margins(dig)
    return [
        Claim("iht_recovers_below_count", f"Planted patterns, d m = {D1 * M1} unknowns, "
              f"n = {n_c} samples (below the parameter count): IHT recovers the {K1 * M1} weights "
              f"exactly (relative error <= {EXACT:g}) in >= {bar} of {t} planted networks, which "
              f"rejects a recovery rate <= {NULL_RATE:g} at the {LEVEL:.0%} level (one-sided "
              "binomial test)", _count(rec, n_c, IHT), bar, ">=",
              paper="exact recovery of planted sparse networks from fewer samples than unknowns "
                    "(Theorem 1; Fig. 1: near-zero error cells); the chapter's first version "
                    "asked 7 of 10 at n = 100, at the parameter count",
              expected=False, source="pilot", control=OMP,
              control_measured=_count(rec, n_c, OMP),
              regime=f"paper: its planted networks with random generators and the sequential "
                     f"update (d = 100, n = 50 000), no count of recoveries given; chapter: the "
                     f"theorem's setting, the planted patterns as generators, d = {D1}, m = {M1}, "
                     f"{K1} nonzeros per neuron on disjoint inputs"),
        Claim("iht_transition", f"At n = {n_lo} ({n_lo / (D1 * M1):.0%} of the parameter count) IHT "
              f"recovers at most "
              f"{t // 2} of {t}: the transition lies above n = {n_lo}",
              _count(rec, n_lo, IHT), t // 2, "<=",
              paper="(no location of the transition is given; the ceiling 'at most half at "
                    "n = 50' comes from a prototype of this experiment, first judged on 10 "
                    "networks, now on 30)",
              expected=False, kind="derivation", source="pilot", control=OMP,
              control_measured=_count(rec, n_lo, OMP)),
        Claim("linear_rate", f"Successful IHT runs at n = {n_hi} contract the recovery error "
              f"geometrically by at most {STEP_CONTRACTION:g} per outer step (median over the "
              f"successful runs; the factor of a least-squares line through log(error) against "
              f"the gradient-evaluation count, until the error reaches 1e-10, raised to the "
              f"{1 + REFINE} evaluations of an outer step)", step, STEP_CONTRACTION, "<=",
              paper="Theorem 1: ||w^k - w*|| <= rho^k ||w^0 - w*|| with rho < 1; the plan's A1 "
                    "asks rho <= 0.5 per outer step (its prototype: 0.32 to 0.20); the chapter's "
                    "first version tested the straightness of the line instead (R^2 >= 0.9)",
              kind="theorem", source="pilot"),
        Claim("linearisation", "Planted patterns: y = A w* holds to 1e-12 of max|y| (the largest "
              "gap over every planted network of Experiment 1)",
              float(runs["linear_gap"].max()), 1e-12, "<=",
              paper="the gated reformulation is exact for the true patterns", kind="sanity",
              source="prior"),
        Claim.over_seeds(
            "grid_vs_imp", f"Random generators with the sequential pattern update, n = "
            f"{sz.grid_n}, d = {sz.grid_d}, the {len(sz.grid_ms)} x {len(sz.grid_ss)} cells "
            f"(m in {list(sz.grid_ms)}, s in {list(sz.grid_ss)}): IHT's median PSNR over the "
            f"cells minus the better IMP variant's is >= {GRID_MARGIN:g} dB (median over seeds)",
            grid_margins, GRID_MARGIN, ">=",
            paper="Fig. 1: IHT recovers much of the (m, s) grid, where IMP does not; the plan's "
                  "A3 (IHT's median PSNR >= IMP's - 3 dB). The chapter's first version counted "
                  f"cells at PSNR >= {PSNR_OK:g} dB (>= {GRID_BAR:g} of them), a test its control "
                  "IMP (at most ~40 dB) could not pass whatever the data",
            expected=False, source="pilot",
            no_control=f"the test is itself the comparison with the strongest baseline (IMP, the "
                       f"better of its two variants at each seed, {sz.steps} full-batch epochs "
                       "per round, Adam's rate tuned on a tuning seed)",
            regime=f"paper: the full (m, s) grid, d = 100, n = 50 000, IMP with 15 full-batch "
                   f"epochs per round at Adam's rate 1e-3; chapter: a {len(sz.grid_ms)} x "
                   f"{len(sz.grid_ss)} subgrid, d = {sz.grid_d}, n = {sz.grid_n}, IMP with "
                   f"{sz.steps} epochs per round at a tuned rate"),
        # paired against zero: the per-seed value is already a difference (IHT minus IMP at the
        # worst s), so the t interval of its mean is the paired comparison's
        Claim.paired(
            "digits_vs_imp", f"Digits, even against odd, {sz.digit_width} neurons, s in "
            f"{list(sz.digit_ss)}: IHT's test accuracy minus the better IMP variant's, at the "
            f"worst s, is >= {DIGIT_MARGIN:g} points (95 % t interval over the seeds included); "
            f"IMP trains {sz.digit_steps} full-batch epochs in every round (IHT runs "
            f"{sz.digit_steps} outer steps), its rate tuned on the validation splits of "
            f"{sz.digit_tune_seeds} tuning seeds (scored by the worst)",
            margins, [0.0] * len(margins), DIGIT_MARGIN, ">=",
            paper="IHT is 'competitive with, and often exceeds' IMP (binary MNIST, Fig. 3); the "
                  "chapter's first version tuned IMP's rate on one tuning seed (then the median "
                  "over three was tried, before the worst of three)",
            expected=False, source="pilot",
            no_control="the test is itself the comparison with the strongest baseline (IMP, the "
                       "better of its two variants on the test split, rate tuned)",
            regime=f"paper: binary MNIST (zeros against ones, 10 000 training images, 784 inputs), "
                   f"m up to 1000, s up to 200, minibatches of 1000, 15 epochs (IMP: 15 per "
                   f"round); chapter: sklearn's 8 x 8 digits (64 "
                   f"inputs), m = {sz.digit_width}, full batch, {sz.digit_steps} epochs (IMP: "
                   f"{sz.digit_steps} per round)"),
    ]


def numbers(report: Report) -> dict[str, float]:
    """Numbers the chapter's prose quotes, computed from ``report.tables`` (glued by the chapter)."""
    tb = report.tables
    rec, runs, grid, dig = tb["recovery"], tb["recovery_runs"], tb["grid"], tb["digits"]
    ns = sorted(int(n) for n in rec["n"].unique())
    n_hi = ns[-1]
    trials = int(rec["trials"].max())

    def rate(method: str) -> float:
        ok = runs[(runs["n"] == n_hi) & (runs["method"] == method) & runs["exact"]]
        return float(ok["factor"].median()) if len(ok) else math.nan

    out: dict[str, float] = {"n_hi": float(n_hi), "trials": float(trials),
                             "params1": float(D1 * M1), "s1": float(K1 * M1),
                             "claim_bar": float(_binomial_bar(trials)),
                             "half_trials": float(trials // 2),
                             "claim_n": float(rec.loc[rec["claim"], "n"].iloc[0])}
    out["claim_tail"] = sum(math.comb(trials, k) for k in range(int(out["claim_bar"]), trials + 1)
                            ) / 2.0**trials
    for key, name in (("iht", IHT), ("niht", NIHT), ("omp", OMP), ("lsq", LSQ)):
        for n in ns:
            out[f"{key}_{n}"] = _count(rec, n, name)
    for key, name in (("iht", IHT), ("niht", NIHT)):
        ok = runs[(runs["n"] == n_hi) & (runs["method"] == name) & runs["exact"]]
        out[f"{key}_r2"] = float(ok["r2"].median()) if len(ok) else math.nan
    out["iht_factor"] = rate(IHT)
    out["niht_factor"] = rate(NIHT)
    out["iht_factor_step"] = rate(IHT) ** (1 + REFINE)
    out["evals_per_step"] = float(1 + REFINE)
    out["budget1"] = float(runs[runs["method"] == NIHT]["evals"].max())
    mem = tb["memory"].set_index(["experiment", "method"])["working floats"]
    first = mem[mem.index.get_level_values(0).str.startswith("1:")]
    out["floats_iht_1"] = float(first.xs(IHT, level=1).iloc[0])
    out["floats_dense_1"] = float(first.xs(OMP, level=1).iloc[0])
    out["floats_ratio_1"] = out["floats_dense_1"] / out["floats_iht_1"]

    g = grid[grid["method"] == IHT]
    out["grid_cells"] = float(g.groupby("seed").size().iloc[0])
    out["grid_seeds"] = float(g["seed"].nunique())
    out["grid_cells_needed"] = float(math.ceil(GRID_BAR * out["grid_cells"]))
    out["grid_bar"] = GRID_BAR
    iht_share, imp_share = _grid_shares(grid)
    out["grid_seeds_passing"] = float(sum(v >= GRID_BAR for v in iht_share))
    med = g.groupby(["m", "s"])["psnr"].median()
    out["grid_cells_ok_median"] = float((med >= PSNR_OK).sum())
    good, bad = g[g["psnr"] >= PSNR_OK]["psnr"], g[g["psnr"] < PSNR_OK]["psnr"]
    out["grid_ok_min"] = float(good.min()) if len(good) else math.nan
    out["grid_ok_max"] = float(good.max()) if len(good) else math.nan
    out["grid_fail_min"] = float(bad.min()) if len(bad) else math.nan
    out["grid_fail_max"] = float(bad.max()) if len(bad) else math.nan
    for key, name in (("imp", IMP), ("oneshot", ONESHOT)):
        rows = grid[grid["method"] == name]
        out[f"{key}_grid_max_psnr"] = float(rows["psnr"].max())
        out[f"{key}_grid_median_psnr"] = float(rows["psnr"].median())
        out[f"{key}_grid_lr"] = float(rows["lr"].iloc[0])
    out["imp_any_grid_max_psnr"] = max(out["imp_grid_max_psnr"], out["oneshot_grid_max_psnr"])
    out["grid_epochs"] = float(grid[grid["method"] == IMP]["epochs"].iloc[0])
    out["grid_margin"] = GRID_MARGIN
    gm = _grid_margins(grid)
    out["grid_margin_min"], out["grid_margin_max"] = min(gm), max(gm)
    out["iht_grid_median_psnr"] = float(g["psnr"].median())
    out["grid_share"] = float(statistics.median(iht_share))
    out["grid_share_control"] = float(statistics.median(imp_share))
    out["step_contraction"] = STEP_CONTRACTION

    wide = dig.groupby(["s", "method"])["accuracy"].median().unstack()
    for s in wide.index:
        out[f"digits_iht_{int(s)}"] = float(wide.loc[s, IHT])
        out[f"digits_imp_{int(s)}"] = float(wide.loc[s, IMP])
        out[f"digits_oneshot_{int(s)}"] = float(wide.loc[s, ONESHOT])
    for key, name in (("imp", IMP), ("oneshot", ONESHOT)):
        rows = dig[dig["method"] == name]
        out[f"digits_{key}_one_class"] = float(rows["one_class"].sum())
        out[f"digits_{key}_lr"] = float(rows["lr"].iloc[0])
    out["digit_tune_seeds"] = float(SIZES[report.scale].digit_tune_seeds)
    out["digits_runs_per_method"] = float((dig["method"] == IHT).sum())
    out["digit_budget"] = float(dig[dig["method"] == IHT]["evals"].max())
    s_min, s_max = int(dig["s"].min()), int(dig["s"].max())
    row = dig[(dig["s"] == s_min) & (dig["method"] == IMP)].iloc[0]
    out["digit_imp_rounds"] = float(row["rounds"])
    out["digit_imp_steps"] = float(row["evals"])
    out["digit_imp_epochs"] = float(row["epochs"])
    out["digits_s_min"] = float(s_min)
    out["digits_s_max"] = float(s_max)
    last = dig[dig["s"] == s_max]
    out["floats_iht_over_imp_3"] = float(last[last["method"] == IHT]["floats"].median()
                                         / last[last["method"] == IMP]["floats"].median())
    margins = _digit_margins(dig)
    out["digit_margin_min"] = min(margins)
    out["digit_margin_max"] = max(margins)
    return out


# ----------------------------------------------------------------------------------------------
# Charts and the explorer
# ----------------------------------------------------------------------------------------------


def _heat(df: pd.DataFrame, title: str) -> alt.Chart:
    import altair as alt

    base = alt.Chart(df).encode(
        x=alt.X("s:O", title="nonzero weights s"),
        y=alt.Y("m:O", title="neurons m", sort="descending"))
    rect = base.mark_rect().encode(
        color=alt.Color("psnr:Q", title="PSNR (dB)",
                        scale=alt.Scale(scheme="viridis", domain=[0, 320], clamp=True)),
        tooltip=["m", "s", alt.Tooltip("psnr:Q", format=".0f", title="PSNR (dB)")])
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("psnr:Q", format=".0f"),
        color=alt.condition(alt.datum.psnr > 200, alt.value("black"), alt.value("white")))
    return (rect + text).properties(width=190, height=150, title=title)


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """Named Altair charts built from ``report.tables``."""
    import altair as alt

    from iclr_lab.core.charts import curves, reference_line, sweep

    tb = report.tables
    colors = _colors()
    out: dict[str, alt.TopLevelMixin] = {}

    rec = tb["recovery"]
    trials = int(rec["trials"].max())
    rec = rec.assign(recovered=rec["exact"] / rec["trials"], seed=0)
    bar = _binomial_bar(trials)
    claim_n = int(rec.loc[rec["claim"], "n"].iloc[0])
    main = curves(rec, x="n", y="recovered", color="method", highlight=IHT,
                  colors=colors, x_title=f"samples n (the unknowns: d m = {D1 * M1})",
                  y_title=f"share of the {trials} planted networks recovered exactly",
                  color_title="method",
                  title="Planted patterns: exact recovery against the number of samples")
    out["recovery"] = alt.layer(main, reference_line(
        bar / trials, label=f"claim at n = {claim_n}: ≥ {bar} of {trials}"))

    cur = tb["error_curves"]
    err_chart = sweep(
        cur.assign(seed=0), x="evals", y="log10_error", param="n",
        color="method", highlight=IHT, colors=colors, start=float(cur["n"].max()),
        x_title="gradient evaluations", y_title="log₁₀ relative error ‖w − w*‖/‖w*‖",
        color_title="method", param_label="n",
        title="Recovery error per gradient evaluation (mean of log over planted networks)")
    # the slider's label sits in the top-left corner, where every error curve starts (near 1);
    # the bottom-left corner stays empty (no run is accurate before its first evaluations)
    from iclr_lab.core.charts import HEIGHT

    err_chart.layer[-1] = err_chart.layer[-1].mark_text(
        align="left", baseline="bottom", fontSize=13, fontWeight="bold").encode(
        y=alt.value(HEIGHT - 6))
    out["error_sweep"] = err_chart

    grid = tb["grid"]
    panels = []
    for name in (IHT, IMP, ONESHOT):
        med = grid[grid["method"] == name].groupby(["m", "s"])["psnr"].median().reset_index()
        panels.append(_heat(med, f"{name}: median over seeds"))
    out["grid"] = alt.hconcat(*panels).properties(
        title="Planted networks, n = 5000, d = 50: PSNR of the recovered network")

    dig = tb["digits"]
    out["digits"] = curves(dig, x="s", y="accuracy", color="method", highlight=IHT, colors=colors,
                           log_x=True, x_title="nonzero first-layer weights s",
                           y_title="test accuracy (%)", color_title="method", center="median",
                           title="Digits, even against odd: IMP with as many epochs per round as "
                                 "IHT's steps (median over seeds; band: range)")
    return out


def phase_grid_chart(n: int = 1000, steps: int = 15, refine: int = REFINE,
                     update_patterns: bool = True, seed: int = 0) -> alt.Chart:
    """Pure function behind :func:`explorer`: IHT's PSNR over widths ``m in {1, 2, 5, 10}`` and
    nonzeros ``s in {1, 2, 5, 10, 20}`` for planted networks with ``d = 20`` inputs and ``n``
    samples, as a heat map (``sparse_relu_iht-eq-psnr``)."""
    import pandas as pd

    n = check_int("n", n, 1)
    steps = check_int("steps", steps, 1)
    refine = check_int("refine", refine, 0)
    seed = check_seed(seed)
    rows = phase_grid((1, 2, 5, 10), (1, 2, 5, 10, 20), n=n, d=20, seed=seed, steps=steps,
                      refine=refine, update_patterns=bool(update_patterns))
    mode = "sequential patterns" if update_patterns else "fixed random patterns"
    return _heat(pd.DataFrame(rows), f"IHT, n = {n}, d = 20, {steps} steps, "
                                     f"{refine} support steps, {mode}").properties(
        width=300, height=200)


def explorer() -> Any:
    """ipywidgets explorer of the phase-transition grid: samples ``n``, outer steps, support steps
    per outer step, and the sequential pattern update (``sparse_relu_iht-eq-scp``) on or off."""
    import ipywidgets as widgets

    from iclr_lab.core.widgets import explorer as make_explorer

    def int_slider(description: str, value: int, lo: int, hi: int, step: int) -> Any:
        return widgets.IntSlider(value=value, min=lo, max=hi, step=step, description=description,
                                 continuous_update=False, style={"description_width": "initial"})

    return make_explorer(
        phase_grid_chart,
        n=int_slider("samples n", 1000, 100, 2000, 100),
        steps=int_slider("outer steps", 15, 1, 30, 1),
        refine=int_slider("support steps", REFINE, 0, 20, 1),
        update_patterns=widgets.Checkbox(value=True, description="sequential pattern update"),
        seed=widgets.fixed(0),
    )
