"""The L2FOB chapter's experiments: ``reproduce()``, its claims, charts and explorer.

Three settings of the paper's first-price auction (``v ~ N(0.6, 0.1)``, ``d ~ N(0.4, 0.1)``, utility
reward, full feedback, ``T = 10^4``), chosen from the fluid LP ``l2fob-eq-fluid`` before any bidder
ran:

* ``paper``: ``rho = 0.01``, ``gamma = 1.8`` (the paper's Fig. 1); the ROI constraint binds;
* ``tight budget``: ``rho = 0.002``, ``gamma = 1.8``; the budget binds and the ROI target is slack;
* ``high ROI target``: ``rho = 0.01``, ``gamma = 3``; the ROI target binds and the budget is slack.

In each, L2FOB runs on a grid of ROI-queue steps ``eta_gamma``, and the two baselines (budget-only
dual descent in the style of Wang et al. 2023, and the two-dual primal-dual bidder) on the grid of
dual steps ``{1, 3, 10, 30, 100} / sqrt(T)``, all on the same streams (common random numbers). A
fourth experiment runs the bidders at several horizons for the regret and violation rates of the
main theorem.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr_lab.core.validation import check_choice, check_int, check_range

from .bidding import (
    ALPHA,
    C_CONF,
    L2FOB,
    Auction,
    BiddingPolicy,
    FirstPriceAuction,
    PrimalDual,
    SecondPriceAuction,
    fluid_optimum,
)

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

    from iclr_lab.core.report import Claim, Report

__all__ = ["SETTINGS", "SIZES", "anatomy", "anatomy_chart", "charts", "explorer", "numbers",
           "reproduce", "trajectories", "trajectory_chart", "tuned_steps"]

L2 = "L2FOB"
WANG = "Wang et al. (budget only)"
PD = "primal–dual (two duals)"
METHODS = (L2, PD, WANG)
#: the primal-dual bidder at its tuned step, where it is the only baseline of a chart
PD_TUNED = "primal–dual, tuned step"
#: the paper's queue steps (its experiments use 0.6 for both)
ETA = 0.6
#: dual steps of the baselines, as multiples of 1/sqrt(T)
STEP_MULTS = (1.0, 3.0, 10.0, 30.0, 100.0)
#: L2FOB's ROI-queue steps: the paper's ablation {0.06, 0.6, 6, 60} and one more point in [0.6, 6]
ETAS = (0.06, 0.6, 1.9, 6.0, 60.0)
ROBUST_ETAS = (0.6, 1.9, 6.0)
#: confidence widths of the extra L2FOB runs (paper setting and high ROI target; C_CONF is the default)
C_CONFS = (0.0, 0.01, 0.02, C_CONF, 0.1)
#: one primal-dual step past the grid, as a multiple of 1/sqrt(T) (paper setting only)
EDGE_MULT = 300.0
#: thresholds fixed before any run (see each claim's statement)
ROBUST_SPREAD = 0.15
ROI_SHARE = 0.95
SATURATION = 0.03
SLOPE_MAX = 0.65


@dataclass(frozen=True)
class Setting:
    """One auction setting of the experiments."""

    name: str
    rho: float
    gamma: float


SETTINGS = (Setting("paper", 0.01, 1.8), Setting("tight budget", 0.002, 1.8),
            Setting("high ROI target", 0.01, 3.0))
PAPER, TIGHT, HIGH = (s.name for s in SETTINGS)
SHIFTED = (TIGHT, HIGH)


@dataclass(frozen=True)
class _Sizes:
    """Per-scale sizes of :func:`reproduce`."""

    seeds: int  # seeds of every experiment: seed, seed+1, ...
    T: int  # rounds of the three settings
    horizons: tuple[int, ...]  # horizons of the rate experiment
    checkpoints: int  # recorded points of each trajectory
    value_bins: int  # equally likely values of the fluid LP


SIZES = {
    "smoke": _Sizes(seeds=2, T=300, horizons=(150, 300), checkpoints=20, value_bins=40),
    "book": _Sizes(seeds=5, T=10_000, horizons=(2500, 5000, 10_000, 20_000), checkpoints=80,
                   value_bins=200),
    "paper": _Sizes(seeds=20, T=10_000, horizons=(2500, 5000, 10_000, 20_000, 40_000),
                    checkpoints=120, value_bins=800),
}


def _env(auction: str = "first") -> Auction:
    auction = check_choice("auction", auction, ("first", "second"))
    return FirstPriceAuction() if auction == "first" else SecondPriceAuction()


# ----------------------------------------------------------------------------------------------
# Running banks of bidders
# ----------------------------------------------------------------------------------------------


def _streams(env: Auction, T: int, seeds: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Values and competing bids of shape ``(T, len(seeds))``: the stream of seed ``s`` is the same
    in every experiment, and its first ``T'`` rounds are the stream of a run of ``T'`` rounds
    (:meth:`Auction.sample` draws round by round)."""
    pairs = [env.sample(T, np.random.default_rng([s, 7])) for s in seeds]
    return np.stack([p[0] for p in pairs], axis=1), np.stack([p[1] for p in pairs], axis=1)


def _simulate(policy: BiddingPolicy, env: Auction, values: np.ndarray, competing: np.ndarray,
              horizons: np.ndarray, n_points: int, desc: str,
              compact: bool = True) -> dict[str, np.ndarray]:
    """Run a bank; ``values``/``competing`` have one column per copy. Returns final totals, the
    peak ROI violation, the number of wins and the median winning bid, and the trajectory at
    ``n_points`` checkpoints of the longest run.

    A copy whose run has ended bids nothing, so its totals are final: with ``compact`` the bank
    drops it (``BiddingPolicy._keep``) and the rounds left cost only the copies still running.
    Every number is the same either way (the test runs both)."""
    from iclr_lab.core.progress import progress

    T = values.shape[0]
    policy.start(env, horizons)
    K = policy.K
    gamma = policy.gamma.copy()
    # the totals of every copy; those of the copies still in the bank (``live``) are in ``cur``
    final = {k: np.zeros(K) for k in ("reward", "spend", "peak")}
    won_all = np.zeros((K, env.grid.size))  # wins per grid bid
    live = np.arange(K)
    cur = {k: np.zeros(K) for k in final}
    won = np.zeros((K, env.grid.size))
    v_seg, d_seg, t0 = values, competing, 0
    ends = {int(h) for h in np.unique(horizons) if h < T} if compact else set()

    def flush(rows: np.ndarray) -> None:
        """Write the totals of the bank's copies ``rows`` into those of every copy."""
        for k in final:
            final[k][live[rows]] = cur[k][rows]
        won_all[live[rows]] = won[rows]

    marks = set(np.unique(np.linspace(1, T, n_points).round().astype(int)).tolist())
    rows: list[np.ndarray] = []
    ts: list[int] = []
    for t in progress(range(T), desc=desc, total=T):
        if t in ends:  # the runs of horizon t have ended: their totals are final
            keep = policy.T > t
            flush(~keep)
            policy._keep(keep)
            live = live[keep]
            cur = {k: x[keep] for k, x in cur.items()}
            won = won[keep]
            v_seg, d_seg, t0 = values[t:, live], competing[t:, live], t
        b = policy.bid(v_seg[t - t0])
        fb = env.outcome(b, v_seg[t - t0], d_seg[t - t0])
        policy.update(fb)
        cur["reward"] += fb.reward
        cur["spend"] += fb.cost
        won[np.arange(live.size), policy._last] += fb.win
        cur["peak"] = np.maximum(cur["peak"], policy.gamma * cur["spend"] - cur["reward"])
        if t + 1 in marks:
            flush(np.arange(live.size))
            ts.append(t + 1)
            rows.append(np.stack([final["reward"], final["spend"],
                                  gamma * final["spend"] - final["reward"]]))
    flush(np.arange(live.size))
    wins = won_all.sum(axis=1)
    half = np.argmax(np.cumsum(won_all, axis=1) >= wins[:, None] / 2.0, axis=1)
    return {"reward": final["reward"], "spend": final["spend"], "peak": final["peak"],
            "wins": wins, "median_win_bid": np.where(wins > 0, env.grid[half], np.nan),
            "t": np.array(ts), "trace": np.stack(rows)}  # trace: (points, 3, K)


def _bank_rows(method: str, steps: Sequence[float], seeds: Sequence[int],
               settings: Sequence[Setting], c_conf: float | None = None,
               extra: bool = False) -> list[dict[str, Any]]:
    return [{"method": method, "setting": s.name, "rho": s.rho, "gamma": s.gamma, "step": x,
             "c_conf": C_CONF if c_conf is None else c_conf, "seed": seed, "extra": extra}
            for s in settings for x in steps for seed in seeds]


def _finish(df: pd.DataFrame, nu: dict[str, float], T: int) -> pd.DataFrame:
    df["T"] = T
    df["fluid"] = df["setting"].map(nu) * T
    df["regret"] = df["fluid"] - df["reward"]
    df["roi"] = df["reward"] / df["spend"].where(df["spend"] > 0)
    df["roi_share"] = df["roi"] / df["gamma"]
    df["budget_share"] = df["spend"] / (df["rho"] * T)
    df["step_label"] = [_step_label(m, x, T) for m, x in zip(df["method"], df["step"], strict=True)]
    return df


def _run_settings(sz: _Sizes, seeds: Sequence[int],
                  nu: dict[str, float]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every bidder on its step grid in the three settings: one row per (method, setting, step,
    seed); the extra runs (L2FOB with other confidence widths, the primal-dual bidder one step past
    its grid); and the trajectories of the paper setting."""
    import pandas as pd

    env = FirstPriceAuction()
    T = sz.T
    v, d = _streams(env, T, seeds)
    col = {s: k for k, s in enumerate(seeds)}
    steps = [m / math.sqrt(T) for m in STEP_MULTS]
    paper_high = [s for s in SETTINGS if s.name in (PAPER, HIGH)]
    # two banks: L2FOB on its grid, and both dual-descent baselines in one PrimalDual bank (Wang
    # et al.'s pacing is the primal-dual bidder without its ROI dual)
    l2_rows = _bank_rows(L2, ETAS, seeds, SETTINGS) + [
        r for c in C_CONFS if c != C_CONF
        for r in _bank_rows(L2, [ETA], seeds, paper_high, c_conf=c, extra=True)]
    dual_rows = (_bank_rows(PD, steps, seeds, SETTINGS) + _bank_rows(WANG, steps, seeds, SETTINGS)
                 + _bank_rows(PD, [EDGE_MULT / math.sqrt(T)], seeds, SETTINGS[:1], extra=True))

    def arr(rows: list[dict[str, Any]], key: str) -> np.ndarray:
        return np.array([r[key] for r in rows])

    banks: list[tuple[list[dict[str, Any]], BiddingPolicy, str]] = [
        (l2_rows, L2FOB(rho=arr(l2_rows, "rho"), gamma=arr(l2_rows, "gamma"), eta_rho=ETA,
                        eta_gamma=arr(l2_rows, "step"), c_conf=arr(l2_rows, "c_conf")), "L2FOB"),
        (dual_rows, PrimalDual(rho=arr(dual_rows, "rho"), gamma=arr(dual_rows, "gamma"),
                               step=arr(dual_rows, "step"),
                               roi=[r["method"] == PD for r in dual_rows]), "dual descent"),
    ]
    out, traces = [], []
    for rows, pol, desc in banks:
        cols = [col[r["seed"]] for r in rows]
        res = _simulate(pol, env, v[:, cols], d[:, cols], np.full(len(rows), T), sz.checkpoints,
                        desc=desc)
        for k, r in enumerate(rows):
            out.append({**r, "reward": res["reward"][k], "spend": res["spend"][k],
                        "peak_violation": res["peak"][k], "wins": res["wins"][k],
                        "median_win_bid": res["median_win_bid"][k]})
            if r["setting"] == PAPER and not r["extra"]:
                tr = res["trace"][:, :, k]
                traces.append(pd.DataFrame({
                    "method": r["method"], "step": r["step"], "seed": r["seed"], "t": res["t"],
                    "cum_reward": tr[:, 0], "spend": tr[:, 1], "violation": tr[:, 2]}))
    df = _finish(pd.DataFrame(out), nu, T)
    traj = pd.concat(traces, ignore_index=True)
    traj["roi"] = traj["cum_reward"] / traj["spend"].where(traj["spend"] > 0)
    runs = df[~df["extra"]].drop(columns="extra").reset_index(drop=True)
    # the extra runs, with the grid runs they are compared with (L2FOB at the default width)
    base = (df["method"] == L2) & ~df["extra"] & np.isclose(df["step"], ETA) & df["setting"].isin(
        [PAPER, HIGH])
    extra = df[df["extra"] | base].drop(columns="extra").reset_index(drop=True)
    return runs, extra, traj


def _step_label(method: str, step: float, T: int) -> str:
    if method == L2:
        return f"η_γ = {step:g}"
    return f"step = {step * math.sqrt(T):g}/√T"


def _run_rates(sz: _Sizes, seeds: Sequence[int], pd_mult: float, nu: float) -> pd.DataFrame:
    """L2FOB (both queue rules) and the tuned primal-dual bidder at every horizon of ``sz``, in the
    paper setting with ``B = rho T``: final regret and peak ROI violation."""
    import pandas as pd

    env = FirstPriceAuction()
    paper = SETTINGS[0]
    Tmax = max(sz.horizons)
    v, d = _streams(env, Tmax, seeds)
    rows = [{"T": T, "seed": s} for T in sz.horizons for s in seeds]
    cols = [seeds.index(r["seed"]) for r in rows]
    horizons = np.array([r["T"] for r in rows], dtype=float)
    n = len(rows)
    names = ["L2FOB (look-ahead queue)", "L2FOB (signed queue, ablation)"]
    # both queue rules in one bank: the first n copies look ahead, the next n are the ablation
    l2 = L2FOB(rho=paper.rho, gamma=paper.gamma, eta_rho=ETA, eta_gamma=np.full(2 * n, ETA),
               queue=["lookahead"] * n + ["signed"] * n)
    banks: list[tuple[list[str], BiddingPolicy, int]] = [
        (names, l2, 2),
        ([PD_TUNED], PrimalDual(rho=paper.rho, gamma=paper.gamma,
                                           step=pd_mult / np.sqrt(horizons)), 1),
    ]
    out = []
    for labels, pol, copies in banks:
        res = _simulate(pol, env, np.tile(v[:, cols], copies), np.tile(d[:, cols], copies),
                        np.tile(horizons, copies), 2, desc=labels[0].split(" ")[0])
        for i, name in enumerate(labels):
            for k, r in enumerate(rows):
                reward = res["reward"][i * n + k]
                out.append({"method": name, **r, "reward": reward, "spend": res["spend"][i * n + k],
                            "regret": nu * r["T"] - reward, "peak_violation": res["peak"][i * n + k]})
    return pd.DataFrame(out)


# ----------------------------------------------------------------------------------------------
# Tuning, claims and the numbers of the prose
# ----------------------------------------------------------------------------------------------


def _median(df: pd.DataFrame, by: list[str], col: str) -> pd.Series:
    return df.groupby(by)[col].median()


def tuned_steps(runs: pd.DataFrame) -> dict[str, float]:
    """The step each bidder uses when it is frozen: L2FOB keeps the paper's ``eta_gamma = 0.6``;
    Wang's dual descent takes the step with the best median reward in the paper setting (it ignores
    ROI); the primal-dual bidder takes the step with the best median reward among those whose median
    final ROI is at least 0.95 gamma there (the best median ROI if none is)."""
    p = runs[runs["setting"] == PAPER]
    wang = _median(p[p["method"] == WANG], ["step"], "reward")
    pdm = p[p["method"] == PD]
    rew, roi = _median(pdm, ["step"], "reward"), _median(pdm, ["step"], "roi_share")
    ok = rew[roi >= ROI_SHARE]
    best_pd: Any = ok.idxmax() if len(ok) else roi.idxmax()
    best_wang: Any = wang.idxmax()
    return {L2: ETA, WANG: float(best_wang), PD: float(best_pd)}


def _rule_step(runs: pd.DataFrame, method: str) -> float:
    """The step the primal-dual bidder's tuning rule (best median reward among the steps whose
    median final ROI is at least 0.95 gamma in the paper setting) would give ``method``."""
    p = runs[(runs["setting"] == PAPER) & (runs["method"] == method)]
    rew, roi = _median(p, ["step"], "reward"), _median(p, ["step"], "roi_share")
    ok = rew[roi >= ROI_SHARE]
    best: Any = ok.idxmax() if len(ok) else roi.idxmax()
    return float(best)


def _pick(runs: pd.DataFrame, method: str, setting: str, step: float) -> pd.DataFrame:
    sel = runs[(runs["method"] == method) & (runs["setting"] == setting)
               & np.isclose(runs["step"], step)]
    return sel.sort_values("seed")


def _per_seed(runs: pd.DataFrame, method: str, setting: str, step: float, col: str) -> np.ndarray:
    return _pick(runs, method, setting, step)[col].to_numpy()


def _spread(runs: pd.DataFrame, method: str, setting: str, steps: Sequence[float]) -> np.ndarray:
    """Per seed: max over ``steps`` of the reward over its min."""
    sel = runs[(runs["method"] == method) & (runs["setting"] == setting)
               & runs["step"].isin(list(steps))]
    wide = sel.pivot_table(index="seed", columns="step", values="reward")
    return (wide.max(axis=1) / wide.min(axis=1)).to_numpy()


def _dominators(runs: pd.DataFrame) -> np.ndarray:
    """Per seed: how many primal-dual steps reach at least L2FOB's reward with at most its peak ROI
    violation in the paper setting."""
    p = runs[runs["setting"] == PAPER]
    me = _pick(p, L2, PAPER, ETA).set_index("seed")
    pdm = p[p["method"] == PD]
    out = []
    for seed, g in pdm.groupby("seed", sort=True):
        ref = me.loc[seed]
        out.append(int(((g["reward"] >= ref["reward"])
                        & (g["peak_violation"] <= ref["peak_violation"])).sum()))
    return np.array(out, dtype=float)


def _slope(rates: pd.DataFrame, method: str, col: str) -> float:
    """Log-log slope in ``T`` of the median over seeds of ``col`` (NaN if a median is not > 0)."""
    from iclr_lab.core.stats import loglog_slope

    med = rates[rates["method"] == method].groupby("T")[col].median()
    if len(med) < 2 or (med <= 0).any():
        return math.nan
    return loglog_slope(med.index.to_numpy(dtype=float), med.to_numpy())[0]


def _window(grid: Sequence[float], frozen: float) -> list[float]:
    """The three consecutive steps of ``grid`` centred on ``frozen`` (the nearest three at an edge):
    a 10x window on the dual-step grid ``{1, 3, 10, 30, 100} / sqrt(T)``."""
    g = sorted(grid)
    i = int(np.argmin(np.abs(np.log(np.asarray(g)) - math.log(frozen))))
    lo = min(max(i - 1, 0), len(g) - 3)
    return g[lo:lo + 3]


def windows(runs: pd.DataFrame) -> dict[str, list[float]]:
    """The 10x step window of each bidder in the robustness test: L2FOB's ``{0.6, 1.9, 6}`` (from
    the paper's step up, the range the paper says it tolerates), each baseline's centred on its
    frozen step."""
    tuned = tuned_steps(runs)
    out = {L2: list(ROBUST_ETAS)}
    for m in (PD, WANG):
        out[m] = _window(sorted(runs.loc[runs["method"] == m, "step"].unique()), tuned[m])
    return out


def _window_label(method: str, steps: Sequence[float], T: int) -> str:
    if method == L2:
        return "η_γ ∈ {" + ", ".join(f"{x:g}" for x in steps) + "}"
    return "{" + ", ".join(f"{x * math.sqrt(T):.3g}" for x in steps) + "}/√T"


def _text(values: Sequence[float] | np.ndarray, fmt: str = ".2f") -> str:
    """``median (min-max)`` of per-seed values, for a claim's statement."""
    x = np.asarray(values, dtype=float)
    return f"{np.median(x):{fmt}} ({x.min():{fmt}}–{x.max():{fmt}})"


def _overspend(runs: pd.DataFrame, extra: pd.DataFrame, rates: pd.DataFrame) -> float:
    """The largest spend over the budget ``rho T`` of any run of the chapter (1 is the budget)."""
    rho = SETTINGS[0].rho  # the rate experiment runs the paper setting
    return float(max(runs["budget_share"].max(), extra["budget_share"].max(),
                     (rates["spend"] / (rho * rates["T"])).max()))


def _claims(runs: pd.DataFrame, extra: pd.DataFrame, rates: pd.DataFrame) -> list[Claim]:
    from iclr_lab.core.report import Claim

    tuned = tuned_steps(runs)
    win = windows(runs)
    mine = _per_seed(runs, L2, PAPER, ETA, "reward")
    wang = _per_seed(runs, WANG, PAPER, tuned[WANG], "reward")
    l2_spread = np.max([_spread(runs, L2, s, win[L2]) for s in SHIFTED], axis=0) - 1.0
    pd_spread = np.max([_spread(runs, PD, s, win[PD]) for s in SHIFTED], axis=0) - 1.0
    pd_label = _window_label(PD, win[PD], int(runs["T"].iloc[0]))
    roi_paper = _per_seed(runs, L2, PAPER, ETA, "roi_share")
    roi_high = _per_seed(runs, L2, HIGH, ETA, "roi_share")
    pd_roi_paper = _per_seed(runs, PD, PAPER, tuned[PD], "roi_share")
    pd_roi_high = _per_seed(runs, PD, HIGH, tuned[PD], "roi_share")
    peak = {e: _per_seed(runs, L2, PAPER, e, "peak_violation") for e in (0.6, 6.0, 60.0)}
    rew = {e: _per_seed(runs, L2, PAPER, e, "reward") for e in (6.0, 60.0)}
    rises = np.maximum(peak[6.0] - peak[0.6], peak[60.0] - peak[6.0])
    main = "L2FOB (look-ahead queue)"
    return [
        Claim.over_seeds(
            "reward_vs_tuned_wang", "Paper setting (first price, ρ = 0.01, γ = 1.8, T = 10⁴): "
            "L2FOB's total reward (η_ρ = η_γ = 0.6) over that of Wang et al.'s dual descent with "
            "the best step of {1, 3, 10, 30, 100}/√T is >= 1.0",
            (mine / wang).tolist(), 1.0, ">=", paper="Fig. 1: L2FOB's reward is 'significantly' higher than "
            "Wang et al. (2023)'s (step not reported)", expected=False, source="paper"),
        Claim.over_seeds(
            "not_dominated", "Paper setting: number of primal–dual steps in {1, 3, 10, 30, "
            "100}/√T whose reward is at least L2FOB's (η_γ = 0.6) and whose peak ROI violation "
            "max_t V_ROI(t) is at most L2FOB's is 0",
            _dominators(runs).tolist(), 0.0, "<=", paper="L2FOB is safe *and* optimal: better reward and "
            "ROI than primal–dual baselines", expected=False, source="prior"),
        Claim.over_seeds(
            "robust_step", "Two settings shifted from the paper's, with no re-tuning (ρ = 0.002 "
            "with γ = 1.8; ρ = 0.01 with γ = 3): L2FOB's reward varies by at most "
            f"{ROBUST_SPREAD:.0%} across the 10× window η_γ ∈ {{0.6, 1.9, 6}} (its sensitivity to "
            "η_γ: max/min − 1, the larger of the two settings). The primal–dual bidder scores "
            f"{_text(pd_spread)} on the same test over its 10× window {pd_label} "
            "(robust_step_pd)", l2_spread, ROBUST_SPREAD, "<=",
            paper="η can range from Θ(1) to Θ(T) thanks to clipping; 6 and 60 give nearly the "
            "same curves", source="prior"),
        Claim.over_seeds(
            "robust_step_pd", "The primal–dual bidder on the same test, over a window of equal "
            f"width: its reward varies by more than {ROBUST_SPREAD:.0%} across the 10× window "
            f"{pd_label} centred on its frozen step (max/min − 1, the larger of the two shifted "
            "settings), so it fails the test L2FOB passes. (Until a review, this claim compared "
            "the primal–dual bidder's whole 100× grid with a 2× bound; windows of equal width "
            "are the fair test. The window was chosen after the review had measured the "
            "baseline on it, hence the source 'pilot'.)", pd_spread, ROBUST_SPREAD, ">",
            paper="(the baseline, same test: primal–dual methods need their step tuned)",
            kind="derivation", source="pilot"),
        Claim.over_seeds(
            "roi_met_paper", "Paper setting (the LP says the ROI target binds): L2FOB's final ROI "
            f"is at least {ROI_SHARE:g} γ (final ROI / γ; only the end of the run is tested). The "
            f"tuned primal–dual bidder scores {_text(pd_roi_paper, '.3f')} (its tuning rule "
            f"requires {ROI_SHARE:g})", roi_paper.tolist(), ROI_SHARE, ">=",
            paper="Fig. 1: L2FOB's ROI stays at the target 1.8", source="prior"),
        Claim.over_seeds(
            "roi_met_high_target", "High ROI target (ρ = 0.01, γ = 3, a setting the paper did not "
            "run; the LP says the ROI target binds): L2FOB's final ROI is at least "
            f"{ROI_SHARE:g} γ (final ROI / γ). The frozen primal–dual bidder scores "
            f"{_text(pd_roi_high, '.3f')}", roi_high.tolist(), ROI_SHARE, ">=",
            paper="Fig. 1: L2FOB's ROI stays at the target (there for γ = 1.8)",
            # expected=False after the first book run showed it failing (threshold unchanged): at
            # gamma = 3 the optimistic estimates overstate the ROI of the rarely winning low bids
            expected=False, source="prior"),
        Claim.over_seeds(
            "roi_met_slack", f"Where the ROI target is slack (ρ = 0.002, γ = 1.8), L2FOB's final "
            f"ROI is at least {ROI_SHARE:g} γ: any low bidder passes this",
            _per_seed(runs, L2, TIGHT, ETA, "roi_share").tolist(), ROI_SHARE, ">=",
            paper="(no claim of the paper: an implementation check)", kind="sanity",
            source="prior"),
        Claim(
            "budget_never_overspent", "Over every run of the chapter (every bidder, step, "
            "setting, seed and horizon), the largest spend over the budget ρT is at most 1 "
            "(+1e-12): the hard stop", _overspend(runs, extra, rates), 1.0 + 1e-12, "<=",
            paper="The budget is a hard constraint", kind="sanity", source="prior"),
        Claim.over_seeds(
            "eta_violation_monotone", "Paper setting: L2FOB's peak ROI violation does not "
            "increase from η_γ = 0.6 to 6 to 60 (the larger of the two increases; <= 0)",
            rises, 0.0, "<=", paper="Fig. 3: larger η_γ trades reward for lower violation",
            kind="derivation", source="pilot"),
        Claim.over_seeds(
            "eta_saturation", f"Paper setting: L2FOB's reward at η_γ = 60 is within "
            f"{SATURATION:.0%} of its reward at η_γ = 6 (|ratio − 1|)",
            np.abs(rew[60.0] / rew[6.0] - 1.0), SATURATION, "<=",
            paper="Fig. 3: η_γ = 60 is nearly identical to η_γ = 6", kind="derivation",
            source="pilot"),
        Claim(
            "regret_slope", "Log-log slope in T of L2FOB's regret T ν* − Σ r_t against the fluid "
            f"LP (median over seeds; B = ρT) is <= {SLOPE_MAX:g} (√T up to log factors)",
            _slope(rates, main, "regret"), SLOPE_MAX, "<=",
            paper="Theorem: regret Õ((1 + ν*/ρ) √T) for first price with full information",
            expected=False, kind="theorem", source="prior"),
        Claim(
            "violation_slope", "Log-log slope in T of L2FOB's peak ROI violation max_t V_ROI(t) "
            f"(median over seeds) is <= {SLOPE_MAX:g}", _slope(rates, main, "peak_violation"),
            SLOPE_MAX, "<=", paper="Theorem: anytime ROI violation Õ(√T)", kind="theorem",
            source="prior"),
    ]


def _summary(runs: pd.DataFrame, extra: pd.DataFrame) -> pd.DataFrame:
    """The paper setting at a glance: medians over seeds for L2FOB and each baseline at the first
    and tuned steps of its grid, the primal-dual bidder's largest step and one step past its grid."""
    import pandas as pd

    tuned = tuned_steps(runs)
    p = runs[runs["setting"] == PAPER]
    steps = sorted(p.loc[p["method"] == PD, "step"].unique())
    edge = extra[(extra["method"] == PD) & (extra["setting"] == PAPER)]
    picks = [(p, L2, ETA, "paper's step"), (p, WANG, steps[0], "1/√T"), (p, WANG, tuned[WANG], "tuned"),
             (p, PD, steps[0], "1/√T"), (p, PD, tuned[PD], "tuned"), (p, PD, steps[-1], "largest step"),
             (edge, PD, float(edge["step"].iloc[0]), "past the grid")]
    rows = []
    for data, method, step, why in picks:
        g = _pick(data, method, PAPER, step)
        rows.append({"method": method, "step": g["step_label"].iloc[0], "which": why,
                     "reward": g["reward"].median(), "regret": g["regret"].median(),
                     "final ROI": g["roi"].median(), "peak violation": g["peak_violation"].median(),
                     "budget spent": g["budget_share"].median()})
    return pd.DataFrame(rows)


def _robustness(runs: pd.DataFrame) -> pd.DataFrame:
    """Each bidder with its frozen step in each setting, and how its reward and ROI vary over its
    10x step window (see :func:`windows`) and over its whole grid (medians over seeds)."""
    import pandas as pd

    tuned = tuned_steps(runs)
    win = windows(runs)
    T = int(runs["T"].iloc[0])
    rows = []
    for s in SETTINGS:
        for method in METHODS:
            g = runs[(runs["setting"] == s.name) & (runs["method"] == method)]
            frozen = _pick(g, method, s.name, tuned[method])
            roi = g[g["step"].isin(win[method])].groupby("step")["roi_share"].median()
            rows.append({
                "setting": s.name, "method": method, "frozen step": frozen["step_label"].iloc[0],
                "reward / T·ν* (frozen)": frozen["reward"].median() / g["fluid"].iloc[0],
                "final ROI / γ (frozen)": frozen["roi_share"].median(),
                "10× window": _window_label(method, win[method], T),
                "reward max/min (window)": float(np.median(_spread(runs, method, s.name,
                                                                   win[method]))),
                "ROI / γ, lowest (window)": roi.min(), "ROI / γ, highest (window)": roi.max(),
                "reward max/min (whole grid)": float(np.median(_spread(
                    runs, method, s.name, sorted(g["step"].unique()))))})
    return pd.DataFrame(rows)


def _optimism(extra: pd.DataFrame) -> pd.DataFrame:
    """L2FOB (eta = 0.6) against its confidence width ``c_conf`` in the paper setting and with the
    high ROI target: medians over seeds of the reward, the peak violation, the final ROI over the
    target and where its winning bids lie."""
    g = extra[extra["method"] == L2].groupby(["setting", "c_conf"], as_index=False, sort=False).agg(
        reward=("reward", "median"), peak=("peak_violation", "median"), roi=("roi_share", "median"),
        wins=("wins", "median"), bid=("median_win_bid", "median"))
    g = g.assign(order=g["setting"].map({PAPER: 0, HIGH: 1})).sort_values(["order", "c_conf"])
    return g.drop(columns="order").reset_index(drop=True).rename(columns={
        "peak": "peak violation", "roi": "final ROI / γ", "wins": "auctions won",
        "bid": "median winning bid"})


def reproduce(scale: str = "book", seed: int = 0) -> Report:
    """Run the chapter's experiments on seeds ``seed .. seed + seeds - 1``; return the Report.

    Tables: ``runs`` (every bidder, step, setting and seed), ``extra`` (L2FOB with other
    confidence widths, the primal-dual bidder one step past its grid), ``trajectories`` (the paper
    setting over time), ``rates`` (regret and violation against the horizon), ``summary``,
    ``robustness``, ``optimism``, ``lp`` (the fluid optimum of each setting) and ``anatomy`` (one
    round of L2FOB, for the chart of the method).
    """
    import pandas as pd

    from iclr_lab.core.report import Report, timed
    from iclr_lab.core.scales import pick, seed_everything

    sz = pick(SIZES, scale)
    seed_everything(seed)
    seeds = [seed + k for k in range(sz.seeds)]
    env = FirstPriceAuction()
    with timed() as elapsed:
        lps: list[dict[str, Any]] = []
        for s in SETTINGS:
            lp = fluid_optimum(env, s.rho, s.gamma, value_bins=sz.value_bins)
            # the LP's resolution, checked in the paper setting: the same LP with half the values
            coarse = (fluid_optimum(env, s.rho, s.gamma, value_bins=sz.value_bins // 2).nu * sz.T
                      if s.name == PAPER else math.nan)
            lps.append({"setting": s.name, "T": sz.T, "ρ": s.rho, "γ": s.gamma, "T ν*": lp.nu * sz.T,
                        "budget spent": lp.spend / s.rho, "ROI": lp.roi, "win rate": lp.win_rate,
                        "budget price": lp.dual_budget, "ROI price": lp.dual_roi,
                        "T ν* (half the values)": coarse, "value bins": sz.value_bins})
        nu = {row["setting"]: row["T ν*"] / sz.T for row in lps}
        runs, extra, traj = _run_settings(sz, seeds, nu)
        tuned = tuned_steps(runs)
        rates = _run_rates(sz, seeds, tuned[PD] * math.sqrt(sz.T), nu[PAPER])
        tables = {"runs": runs, "extra": extra, "trajectories": traj, "rates": rates,
                  "summary": _summary(runs, extra), "robustness": _robustness(runs),
                  "optimism": _optimism(extra), "lp": pd.DataFrame(lps),
                  "anatomy": _anatomy_sweep()}
    return Report(slug="l2fob", scale=scale, seed=seed, tables=tables,
                  claims=_claims(runs, extra, rates), seconds=elapsed(), chart_builder=charts)


def _at(df: pd.DataFrame, key: Any, col: str) -> float:
    value: Any = df.loc[key, col]
    return float(value)


def _settles(traj: pd.DataFrame, method: str, step: float, level: float) -> float:
    """The first recorded round from which the median over seeds of the running ROI stays at or
    above ``level`` to the end of the run (NaN if it ends below)."""
    g = traj[(traj["method"] == method) & np.isclose(traj["step"], step)]
    med = g.groupby("t")["roi"].median()
    below = med.index[~(med >= level)]
    if len(below) == 0:
        return float(med.index.min())
    after = med.index[med.index > below.max()]
    return float(after.min()) if len(after) else math.nan


def _dominated(runs: pd.DataFrame, extra: pd.DataFrame, c_conf: float, edge: bool) -> bool:
    """Whether a primal-dual step (of the grid, and one step past it if ``edge``) reaches at least
    the median reward of L2FOB with width ``c_conf`` with at most its median peak violation (paper
    setting, medians over seeds)."""
    me = extra[(extra["method"] == L2) & (extra["setting"] == PAPER)
               & np.isclose(extra["c_conf"], c_conf)]
    pdm = runs[(runs["method"] == PD) & (runs["setting"] == PAPER)]
    if edge:
        import pandas as pd

        pdm = pd.concat([pdm, extra[(extra["method"] == PD) & (extra["setting"] == PAPER)]])
    g = pdm.groupby("step")[["reward", "peak_violation"]].median()
    return bool(((g["reward"] >= me["reward"].median())
                 & (g["peak_violation"] <= me["peak_violation"].median())).any())


def numbers(report: Report) -> dict[str, float]:
    """Numbers the chapter's prose quotes, computed from ``report.tables`` (medians over seeds)."""
    tb = report.tables
    runs, extra, summary, rob, lp, rates, opt, traj = (
        tb["runs"], tb["extra"], tb["summary"], tb["robustness"], tb["lp"], tb["rates"],
        tb["optimism"], tb["trajectories"])
    T = int(lp["T"].iloc[0])
    s = summary.set_index(["method", "which"])
    r = rob.set_index(["setting", "method"])
    o = opt.set_index(["setting", "c_conf"])
    lpi = lp.set_index("setting")
    tuned = tuned_steps(runs)
    win = windows(runs)
    main = "L2FOB (look-ahead queue)"
    signed = "L2FOB (signed queue, ablation)"
    l2_rates = rates[rates["method"] == main].groupby("T")[["spend", "regret"]].median()
    spend_share = l2_rates["spend"] / (l2_rates.index.to_numpy() * SETTINGS[0].rho)
    horizons = l2_rates.index.to_numpy()

    def med(method: str, setting: str, step: float, col: str) -> float:
        return float(_pick(runs, method, setting, step)[col].median())

    def spread(method: str, setting: str, steps: Sequence[float]) -> float:
        return float(np.median(_spread(runs, method, setting, steps)))

    # one round of L2FOB at v = 0.6 (the chart of the method)
    an = tb["anatomy"]
    score = an[(an["term"] == "score") & (an["q_gamma"] == 0.0)]
    reward = an[(an["term"] == "reward estimate r̂(v, b)") & (an["q_gamma"] == 0.0)]
    # how much the optimistic estimates overstate the ROI of L2FOB's median winning bid at
    # gamma = 3 after T/2 observations, with the package's default width: (G + eps) / (G - eps)
    env = FirstPriceAuction()
    gamma_high = SETTINGS[2].gamma
    b_high = _at(o, (HIGH, C_CONF), "median winning bid")
    G = env.competing_cdf()[int(round(b_high / env.step))]
    eps = C_CONF * math.sqrt(math.log(2 * T / ALPHA) / (2 * (T // 2)))
    pd_grid = runs[(runs["method"] == PD) & (runs["setting"] == PAPER)].groupby("step")[
        "peak_violation"].median()
    edge = extra[(extra["method"] == PD) & (extra["setting"] == PAPER)]
    level = ROI_SHARE * SETTINGS[0].gamma
    pd_steps = sorted(runs.loc[runs["method"] == PD, "step"].unique())
    out = {
        "seeds": float(runs["seed"].nunique()), "value_bins": float(lp["value bins"].iloc[0]),
        "fluid_paper": _at(lpi, PAPER, "T ν*"),
        "fluid_spend_paper": _at(lpi, PAPER, "budget spent"),
        "fluid_spend_high": _at(lpi, HIGH, "budget spent"),
        "wang_mult": tuned[WANG] * math.sqrt(T),
        "pd_mult": tuned[PD] * math.sqrt(T),
        "l2_rule_eta": _rule_step(runs, L2),
        "lp_gap": _at(lpi, PAPER, "T ν*") - _at(lpi, PAPER, "T ν* (half the values)"),
        "high_win_rate": _at(lpi, HIGH, "win rate"),
        "l2_reward": _at(s, (L2, "paper's step"), "reward"),
        "l2_roi": _at(s, (L2, "paper's step"), "final ROI"),
        "l2_peak": _at(s, (L2, "paper's step"), "peak violation"),
        "l2_spent": _at(s, (L2, "paper's step"), "budget spent"),
        "wang1_roi": _at(s, (WANG, "1/√T"), "final ROI"),
        "wang1_peak": _at(s, (WANG, "1/√T"), "peak violation"),
        "wang_reward": _at(s, (WANG, "tuned"), "reward"),
        "wang_roi": _at(s, (WANG, "tuned"), "final ROI"),
        "wang_peak": _at(s, (WANG, "tuned"), "peak violation"),
        "pd_reward": _at(s, (PD, "tuned"), "reward"),
        "pd_peak": _at(s, (PD, "tuned"), "peak violation"),
        "pdmax_reward": _at(s, (PD, "largest step"), "reward"),
        "pdmax_peak": _at(s, (PD, "largest step"), "peak violation"),
        "pdedge_mult": float(edge["step"].iloc[0]) * math.sqrt(T),
        "pdedge_reward": _at(s, (PD, "past the grid"), "reward"),
        "pdedge_peak": _at(s, (PD, "past the grid"), "peak violation"),
        "pd_lowest_peak": float(pd_grid.min()),
        "pd_lowest_peak_mult": float(pd_grid.index.to_numpy()[pd_grid.to_numpy().argmin()])
        * math.sqrt(T),
        "l2_vs_wang1": _at(s, (L2, "paper's step"), "reward") / _at(s, (WANG, "1/√T"), "reward"),
        "l2_eta006_reward": med(L2, PAPER, 0.06, "reward"),
        "l2_eta006_peak": med(L2, PAPER, 0.06, "peak_violation"),
        "l2_eta60_reward": med(L2, PAPER, 60.0, "reward"),
        "l2_eta60_peak": med(L2, PAPER, 60.0, "peak_violation"),
        # the confidence width: reward, peak violation and final ROI / gamma at c_conf = 0 and 0.1
        "c_conf": C_CONF, "alpha": ALPHA,
        "c_conf_max": max(C_CONFS),
        "n_c_conf": float(len(C_CONFS)),
        "n_dominated_grid": float(sum(_dominated(runs, extra, c, False) for c in C_CONFS)),
        "n_dominated_edge": float(sum(_dominated(runs, extra, c, True) for c in C_CONFS)),
        "l2_point_reward": _at(o, (PAPER, 0.0), "reward"),
        "l2_point_peak": _at(o, (PAPER, 0.0), "peak violation"),
        "l2_wide_reward": _at(o, (PAPER, max(C_CONFS)), "reward"),
        "l2_wide_peak": _at(o, (PAPER, max(C_CONFS)), "peak violation"),
        # the ROI target over time (paper setting) and with gamma = 3
        "roi_level": level,
        "l2_settles": _settles(traj, L2, ETA, level),
        "pd_settles": _settles(traj, PD, tuned[PD], level),
        "l2_high_roi": _at(o, (HIGH, C_CONF), "final ROI / γ"),
        "l2_high_shortfall": 1.0 - _at(o, (HIGH, C_CONF), "final ROI / γ"),
        "l2_high_shortfall_point": 1.0 - _at(o, (HIGH, 0.0), "final ROI / γ"),
        "l2_high_win_bid": b_high,
        "high_boundary": env.value_mean / (1.0 + gamma_high),
        "optimism_factor": (G + eps) / (G - eps),
        "pd_high_roi": _at(r, (HIGH, PD), "final ROI / γ (frozen)"),
        "wang_high_roi": _at(r, (HIGH, WANG), "final ROI / γ (frozen)"),
        # frozen steps in the shifted settings: the 10x windows and the whole grids
        "l2_tight_frozen": med(L2, TIGHT, ETA, "reward") / float(
            runs[(runs["method"] == L2) & (runs["setting"] == TIGHT)].groupby("step")[
                "reward"].median().max()),
        "pd_tight_frozen": med(PD, TIGHT, tuned[PD], "reward") / float(
            runs[(runs["method"] == PD) & (runs["setting"] == TIGHT)].groupby("step")[
                "reward"].median().max()),
        "l2_win_tight": spread(L2, TIGHT, win[L2]), "l2_win_high": spread(L2, HIGH, win[L2]),
        "pd_win_tight": spread(PD, TIGHT, win[PD]), "pd_win_high": spread(PD, HIGH, win[PD]),
        "l2_grid_tight": spread(L2, TIGHT, ETAS), "l2_grid_high": spread(L2, HIGH, ETAS),
        "pd_grid_tight": spread(PD, TIGHT, pd_steps), "pd_grid_high": spread(PD, HIGH, pd_steps),
        "l2_win_high_roi_lo": _at(r, (HIGH, L2), "ROI / γ, lowest (window)"),
        "l2_win_high_roi_hi": _at(r, (HIGH, L2), "ROI / γ, highest (window)"),
        "high_reward_lo": float((runs.loc[runs["setting"] == HIGH].groupby(["method", "step"])[
            "reward"].median() / _at(lpi, HIGH, "T ν*")).min()),
        "high_reward_hi": float((runs.loc[runs["setting"] == HIGH].groupby(["method", "step"])[
            "reward"].median() / _at(lpi, HIGH, "T ν*")).max()),
        # the rates
        "signed_slope_regret": _slope(rates, signed, "regret"),
        "signed_slope_violation": _slope(rates, signed, "peak_violation"),
        "anatomy_bid_free": float(score["bid"].to_numpy()[score["value"].to_numpy().argmax()]),
        "anatomy_best_response": float(reward["bid"].to_numpy()[reward["value"].to_numpy().argmax()]),
        "anatomy_boundary": 0.6 / (1.0 + SETTINGS[0].gamma),
    }
    for k, h in enumerate(horizons):
        out[f"l2_regret_T{k}"] = float(l2_rates["regret"].iloc[k])
        out[f"l2_spend_T{k}"] = float(spend_share.iloc[k])
        out[f"T{k}"] = float(h)
    return out


# ----------------------------------------------------------------------------------------------
# One round of L2FOB, laid open
# ----------------------------------------------------------------------------------------------


def anatomy(value: float = 0.6, q_rho: float = 0.0, q_gamma: float = 0.0, *, rho: float = 0.01,
            gamma: float = 1.8, eta_rho: float = ETA, eta_gamma: float = ETA,
            auction: str = "first") -> pd.DataFrame:
    """Every term of ``l2fob-eq-score`` against the bid, for one round of L2FOB with queues
    ``q_rho``, ``q_gamma`` and context ``value``, when the oracle knows the true win probability.

    Columns: ``bid``, ``term`` (reward estimate, budget penalty, ROI penalty, score) and ``value``;
    the chosen bid is where the score peaks.
    """
    import pandas as pd

    check_range("value", value, 0.0, 1.0)
    check_range("q_rho", q_rho, 0.0)
    check_range("q_gamma", q_gamma, 0.0)
    env = _env(auction)
    pol = L2FOB(rho=rho, gamma=gamma, eta_rho=eta_rho, eta_gamma=eta_gamma, c_conf=0.0)
    pol.start(env, 1)
    G = env.competing_cdf()
    pol.oracle.yes[:] = G * 1e6  # an oracle that has seen a million rounds: G_hat = G
    pol.oracle.seen[:] = 1e6
    pol.q_rho[:], pol.q_gamma[:] = q_rho, q_gamma
    la = pol.lookahead(env, np.array([value]))
    er, eg = pol.eta_rho[0], pol.eta_gamma[0]
    terms = {"reward estimate r̂(v, b)": la["r_hat"][0],
             "budget penalty": 2 * la["Q_rho"][0] * er * la["d_rho"][0],
             "ROI penalty": 2 * la["Q_gamma"][0] * eg * la["d_gamma"][0],
             "score": la["score"][0]}
    return pd.concat([pd.DataFrame({"bid": env.grid, "term": k, "value": v}) for k, v in terms.items()],
                     ignore_index=True)


ANATOMY_Q = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def _anatomy_sweep() -> pd.DataFrame:
    import pandas as pd

    parts = [anatomy(0.6, 0.0, q).assign(q_gamma=q) for q in ANATOMY_Q]
    df = pd.concat(parts, ignore_index=True)
    return df[df["bid"] <= 0.6].reset_index(drop=True)


def anatomy_chart(df: pd.DataFrame) -> alt.TopLevelMixin:
    """The terms of ``l2fob-eq-score`` against the bid, with a slider over ``Q_gamma`` that works on
    the static page (``df`` from ``report.tables["anatomy"]``); the dotted rule marks the bid."""
    import altair as alt

    from iclr_lab.core.charts import palette

    qs = [float(q) for q in sorted(df["q_gamma"].unique())]
    data = df.assign(q_gamma=df["q_gamma"].astype(float))
    score = data[data["term"] == "score"]
    best = score.loc[score.groupby("q_gamma")["value"].idxmax(), ["q_gamma", "bid"]]
    best["label"] = [f"Q_γ(t−1) = {q:g}: bids {b:.2f}" for q, b in zip(best["q_gamma"], best["bid"],
                                                                         strict=True)]
    # the control lists the queue values themselves (they are not evenly spaced)
    slider = alt.param(name="q_param", value=min(qs, key=lambda q: abs(q - 1.0)),
                       bind=alt.binding_radio(options=qs, labels=[f"{q:g}\u2002" for q in qs],
                                              name="ROI queue Q_γ(t−1): "))
    terms = list(dict.fromkeys(data["term"]))
    lines = alt.Chart(data).mark_line(clip=True).encode(
        x=alt.X("bid:Q", title="bid b"),
        y=alt.Y("value:Q", title="per-round value", scale=alt.Scale(domain=[-0.08, 0.12])),
        color=alt.Color("term:N", scale=palette(terms, "score"), title=None,
                        legend=alt.Legend(orient="bottom", columns=2)),
        strokeWidth=alt.condition(alt.datum.term == "score", alt.value(3.0), alt.value(1.6)),
        tooltip=["term", "bid", alt.Tooltip("value:Q", format=".4f")],
    ).transform_filter(alt.datum.q_gamma == slider)
    rule = alt.Chart(best).mark_rule(strokeDash=[2, 3], color="black").encode(
        x="bid:Q").transform_filter(alt.datum.q_gamma == slider)
    text = alt.Chart(best).mark_text(align="left", baseline="top", fontSize=13,
                                     fontWeight="bold").encode(
        x=alt.value(6), y=alt.value(6), text="label:N").transform_filter(
        alt.datum.q_gamma == slider)
    return alt.layer(lines, rule, text).add_params(slider).properties(
        width=440, height=260,
        title="One round of L2FOB (v = 0.6, Q_ρ = 0): score = reward estimate − penalties")


# ----------------------------------------------------------------------------------------------
# Charts
# ----------------------------------------------------------------------------------------------


def _colors() -> dict[str, str]:
    """Each bidder's colour, the same in every chart of the chapter."""
    from iclr_lab.core.charts import BASELINE_COLORS, METHOD_COLORS

    return {L2: METHOD_COLORS[0], "L2FOB (look-ahead queue)": METHOD_COLORS[0],
            "L2FOB (signed queue, ablation)": METHOD_COLORS[1], PD: BASELINE_COLORS[0],
            PD_TUNED: BASELINE_COLORS[0], WANG: BASELINE_COLORS[3]}


def _scale(names: Sequence[str]) -> Any:
    from iclr_lab.core.charts import palette

    return palette(names, colors=_colors())


def _round_axis(chart: Any) -> Any:
    """Fewer, shorter tick labels on the round axis ``t`` (``2.5k``, ``10k``) in every panel."""
    from iclr_lab.core.charts import axis

    return axis(chart, "t", tickCount=4, labelOverlap=True,
                labelExpr="datum.value == 0 ? '0' : datum.value / 1000 + 'k'")


def tradeoff_chart(runs: pd.DataFrame, extra: pd.DataFrame | None = None) -> alt.TopLevelMixin:
    """Reward against peak ROI violation in the paper setting: every bidder on its step grid
    (median over seeds; bars: min-max), the primal-dual bidder one step past its grid (open circle,
    from ``extra``) and the fluid optimum."""
    import altair as alt
    import pandas as pd

    p = runs[runs["setting"] == PAPER]

    def agg(df: pd.DataFrame) -> pd.DataFrame:
        return df.groupby(["method", "step", "step_label"], as_index=False).agg(
            reward=("reward", "median"), r_lo=("reward", "min"), r_hi=("reward", "max"),
            peak=("peak_violation", "median"), p_lo=("peak_violation", "min"),
            p_hi=("peak_violation", "max"), roi=("roi", "median"))

    g = agg(p)
    g["order"] = g.groupby("method")["step"].rank()
    g["paper_step"] = (g["method"] == L2) & np.isclose(g["step"], ETA)
    color = alt.Color("method:N", scale=_scale(list(METHODS)), title="bidder",
                      legend=alt.Legend(orient="bottom", columns=1))
    x = alt.X("peak:Q", title="peak ROI violation max_t V_ROI(t) (lower is safer)",
              scale=alt.Scale(type="symlog", constant=1),
              axis=alt.Axis(values=[0, 1, 2, 5, 10, 20, 50, 100]))
    y = alt.Y("reward:Q", title="total reward over T rounds", scale=alt.Scale(zero=False))
    base = alt.Chart(g)
    tips = ["method", "step_label", alt.Tooltip("reward:Q", format=".1f"),
            alt.Tooltip("peak:Q", format=".1f"), alt.Tooltip("roi:Q", format=".2f", title="final ROI")]
    lines = base.mark_line(opacity=0.6).encode(x=x, y=y, color=color, order="order:Q")
    ebx = base.mark_rule(opacity=0.35).encode(x="p_lo:Q", x2="p_hi:Q", y="reward:Q", color=color)
    eby = base.mark_rule(opacity=0.35).encode(x="peak:Q", y="r_lo:Q", y2="r_hi:Q", color=color)
    pts = base.mark_point(filled=True, size=70).encode(
        x=x, y=y, color=color, shape=alt.Shape("paper_step:N", legend=None,
                                               scale=alt.Scale(domain=[False, True],
                                                               range=["circle", "diamond"])),
        size=alt.condition(alt.datum.paper_step, alt.value(220), alt.value(60)), tooltip=tips)
    layers: list[Any] = [lines, ebx, eby, pts]
    # labels of L2FOB's steps: the largest to the left, the paper's above, the smallest to the
    # right; the primal-dual bidder's smallest and largest steps below their points (the other
    # steps, and Wang's, are in the tooltips)
    l2 = g[g["method"] == L2]
    marks: list[tuple[pd.Series, dict[str, Any]]] = [
        (l2["order"] == l2["order"].max(), {"dx": -9, "align": "right"}),
        (l2["paper_step"], {"dy": -16, "align": "center"}),
        (l2["order"] == 1, {"dx": 9, "align": "left"})]
    for sel, mark in marks:
        layers.append(alt.Chart(l2[sel]).mark_text(fontSize=10, **mark).encode(
            x=x, y=y, text="step_label:N", color=color))
    pdg = g[g["method"] == PD]
    pd_ends = pdg[(pdg["order"] == 1) | (pdg["order"] == pdg["order"].max())]
    layers.append(alt.Chart(pd_ends).mark_text(dy=14, align="center", fontSize=10).encode(
        x=x, y=y, text="step_label:N", color=color))
    if extra is not None:
        edge = agg(extra[(extra["method"] == PD) & (extra["setting"] == PAPER)])
        if len(edge):
            edge["label"] = edge["step_label"].str.replace("step = ", "") + " (past the grid)"
            eb = alt.Chart(edge)
            layers += [
                eb.mark_rule(opacity=0.35).encode(x="p_lo:Q", x2="p_hi:Q", y="reward:Q",
                                                  color=color),
                eb.mark_rule(opacity=0.35).encode(x="peak:Q", y="r_lo:Q", y2="r_hi:Q",
                                                  color=color),
                eb.mark_point(filled=False, size=80, strokeWidth=2).encode(
                    x=x, y=y, color=color, tooltip=tips),
                eb.mark_text(dx=-8, dy=-14, align="left", fontSize=10).encode(
                    x=x, y=y, text="label:N", color=color)]
    fluid = float(p["fluid"].iloc[0])
    ref = pd.DataFrame({"y": [fluid], "label": [f"fluid optimum T·ν* = {fluid:.0f}"]})
    layers.append(alt.Chart(ref).mark_rule(strokeDash=[6, 4], color="black").encode(y="y:Q"))
    # the label at the right end, away from the bidders' labels (their low violations sit left)
    layers.append(alt.Chart(ref).mark_text(align="right", dx=-4, dy=-6, fontSize=11).encode(
        y="y:Q", x=alt.value(456), text="label:N"))
    return alt.layer(*layers).properties(
        width=460, height=320,
        title="Paper setting: reward against safety for every step (◆ L2FOB with the paper's 0.6)")


def _median_panel(df: pd.DataFrame, y: str, y_title: str) -> Any:
    """One panel of the trajectories: the median over seeds of ``y`` against ``t`` per bidder (the
    statistic of the tables and claims), with a band over the range of the seeds."""
    import altair as alt

    g = df.dropna(subset=[y]).groupby(["method", "t"], as_index=False)[y].agg(
        median="median", lo="min", hi="max")
    names = [m for m in METHODS if m in set(g["method"])]
    base = alt.Chart(g).encode(x=alt.X("t:Q", title="round t"))
    band = base.mark_area(opacity=0.15).encode(
        y=alt.Y("lo:Q", title=y_title, scale=alt.Scale(zero=False)), y2="hi:Q",
        fill=alt.Fill("method:N", scale=_scale(names), legend=None))
    line = base.mark_line().encode(
        y=alt.Y("median:Q", title=y_title, scale=alt.Scale(zero=False)),
        color=alt.Color("method:N", scale=_scale(names), title="bidder (tuned or paper step)",
                        legend=alt.Legend(orient="bottom", columns=1, symbolOpacity=1)),
        strokeWidth=alt.condition(alt.datum.method == L2, alt.value(3.0), alt.value(1.6)),
        tooltip=["method", "t", alt.Tooltip("median:Q", format=".4g"),
                 alt.Tooltip("lo:Q", format=".4g"), alt.Tooltip("hi:Q", format=".4g")])
    return alt.layer(band, line).resolve_legend(color="independent", fill="independent")


def _trajectory_curves(traj: pd.DataFrame, steps: dict[str, float], runs: pd.DataFrame) -> Any:
    import altair as alt
    import pandas as pd

    from iclr_lab.core.charts import reference_line

    parts = [traj[(traj["method"] == m) & np.isclose(traj["step"], steps[m])] for m in METHODS]
    df = pd.concat(parts, ignore_index=True)
    T = float(df["t"].max())
    paper = runs[runs["setting"] == PAPER]
    B = float(paper["rho"].iloc[0]) * T
    gamma = float(paper["gamma"].iloc[0])
    df = df.assign(spend_share=df["spend"] / B)
    a = _median_panel(df, "spend_share", "share of the budget spent")
    b = alt.layer(_median_panel(df, "roi", "ROI so far Σr/Σc"),
                  reference_line(gamma, label=f"target γ = {gamma:g}"))
    c = alt.layer(_median_panel(df, "violation", "V_ROI(t) = Σ (γc − r)"), reference_line(0.0))
    chart = alt.vconcat(a.properties(width=440, height=150), b.properties(width=440, height=170),
                        c.properties(width=440, height=170)).properties(
        title="Paper setting over time (lines: median over seeds; bands: range)")
    # one legend, under the last panel: the three panels share their colours
    spec = chart.to_dict()

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            if "color" in node and isinstance(node["color"], dict) and "field" in node["color"]:
                node["color"]["legend"] = None
            for value in node.values():
                strip(value)
        elif isinstance(node, list):
            for value in node:
                strip(value)

    for panel in spec["vconcat"][:-1]:
        strip(panel)
    return _round_axis(alt.VConcatChart.from_dict(spec, validate=False))


def _robustness_chart(runs: pd.DataFrame) -> alt.TopLevelMixin:
    """Every grid point's reward (over the fluid optimum) and final ROI (over the target) in each
    setting: thin rule over the whole grid, thick rule over the 10x window, ◆ the frozen step."""
    import altair as alt

    steps, win = tuned_steps(runs), windows(runs)
    r = runs.groupby(["setting", "method", "step", "step_label"], as_index=False).agg(
        reward=("reward", "median"), fluid=("fluid", "first"), roi=("roi_share", "median"))
    r["frozen"] = [bool(np.isclose(s, steps[m])) for m, s in zip(r["method"], r["step"], strict=True)]
    r["in_window"] = [bool(np.isclose(s, win[m]).any())
                      for m, s in zip(r["method"], r["step"], strict=True)]
    r = r.assign(**{"reward / T·ν*": r["reward"] / r["fluid"], "final ROI / γ": r["roi"]}).melt(
        id_vars=["setting", "method", "step_label", "frozen", "in_window"],
        value_vars=["reward / T·ν*", "final ROI / γ"], var_name="measure", value_name="ratio")
    order = [s.name for s in SETTINGS]
    base = alt.Chart(r).encode(
        x=alt.X("ratio:Q", title=None, scale=alt.Scale(zero=False)),
        y=alt.Y("method:N", title=None, sort=list(METHODS)),
        color=alt.Color("method:N", scale=_scale(list(METHODS)), legend=None))
    grid = base.mark_rule(strokeWidth=1.5, opacity=0.45).encode(
        x=alt.X("min(ratio):Q"), x2="max(ratio):Q")
    window = base.transform_filter(alt.datum.in_window).mark_rule(strokeWidth=6, opacity=0.5).encode(
        x=alt.X("min(ratio):Q"), x2="max(ratio):Q")
    dots = base.mark_point(filled=True, opacity=0.85).encode(
        size=alt.condition(alt.datum.frozen, alt.value(200), alt.value(45)),
        shape=alt.condition(alt.datum.frozen, alt.value("diamond"), alt.value("circle")),
        tooltip=["setting", "method", "step_label", "measure", alt.Tooltip("ratio:Q", format=".3f")])
    one = alt.Chart(r).mark_rule(strokeDash=[4, 3], color="black").encode(x=alt.datum(1.0))
    return alt.layer(one, grid, window, dots).properties(width=230, height=80).facet(
        row=alt.Row("setting:N", sort=order, title=None,
                    header=alt.Header(labelAngle=0, labelAlign="left")),
        column=alt.Column("measure:N", sort=["reward / T·ν*", "final ROI / γ"], title=None),
    ).resolve_scale(x="independent").properties(
        title=["Every step of each bidder's grid, medians over seeds",
               "(thin: whole grid; thick: 10× window; ◆ step frozen from the paper setting; "
               "dashed: 1)",
               "High ROI target: every bidder earns more than T·ν* because none meets the target"])


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """Named Altair charts built from ``report.tables``."""
    import altair as alt
    import pandas as pd

    from iclr_lab.core.charts import reference_line, sweep

    tb = report.tables
    runs = tb["runs"]
    steps = tuned_steps(runs)
    out: dict[str, alt.TopLevelMixin] = {}
    out["tradeoff"] = tradeoff_chart(runs, tb["extra"])
    out["trajectories"] = _trajectory_curves(tb["trajectories"], steps, runs)
    out["robustness"] = _robustness_chart(runs)

    rates = tb["rates"]
    med = rates.groupby(["method", "T"], as_index=False)[["regret", "peak_violation"]].median()
    long = med.melt(id_vars=["method", "T"], var_name="quantity", value_name="value")
    long["quantity"] = long["quantity"].map({"regret": "regret T·ν* − Σr",
                                             "peak_violation": "peak ROI violation"})
    long = long[long["value"] > 0]
    names = sorted(rates["method"].unique(), key=lambda n: (not n.startswith("L2FOB"), n))
    xs = alt.X("T:Q", scale=alt.Scale(type="log", nice=False), title="horizon T (budget ρT)")
    ys = alt.Y("value:Q", scale=alt.Scale(type="log"), title=None)
    col = alt.Color("method:N", scale=_scale(names), title="bidder",
                    legend=alt.Legend(orient="bottom", columns=1))
    # a sqrt(T) guide through the first point of L2FOB's curve in each panel
    main = long[long["method"] == "L2FOB (look-ahead queue)"]
    first = main.loc[main.groupby("quantity")["T"].idxmin()]
    Ts = np.sort(long["T"].unique())
    guide = pd.concat([pd.DataFrame({"quantity": q, "T": Ts, "value": v * np.sqrt(Ts / t0),
                                     "method": "∝ √T"})
                       for q, t0, v in zip(first["quantity"], first["T"], first["value"], strict=True)])
    pts = alt.Chart().mark_line(point=True).encode(
        x=xs, y=ys, color=col, tooltip=["method", "T", alt.Tooltip("value:Q", format=".3g")]
    ).transform_filter(alt.datum.method != "∝ √T")
    ref = alt.Chart().mark_line(strokeDash=[5, 4], color="black").encode(
        x=xs, y=ys).transform_filter(alt.datum.method == "∝ √T")
    out["rates"] = alt.layer(ref, pts, data=pd.concat([guide, long], ignore_index=True)).properties(
        width=220, height=220).facet(column=alt.Column("quantity:N", title=None)).resolve_scale(
        y="independent").properties(
        title="Medians over seeds against the horizon (log-log; dashed: slope 1/2)")

    traj = tb["trajectories"]
    l2 = traj[traj["method"] == L2]
    T = float(traj["t"].max())
    gamma = float(runs.loc[runs["setting"] == PAPER, "gamma"].iloc[0])
    pdl = traj[(traj["method"] == PD) & np.isclose(traj["step"], steps[PD])]
    sw = pd.concat(
        [l2.assign(bidder=L2)] + [pdl.assign(step=e, bidder=PD_TUNED) for e in ETAS],
        ignore_index=True).dropna(subset=["roi"])
    sw = sw[sw["t"] >= T / 40]
    out["eta_sweep"] = _round_axis(alt.layer(sweep(
        sw, x="t", y="roi", param="step", color="bidder", param_label="η_γ", highlight=L2,
        start=ETA, x_title="round t", y_title="ROI so far Σr/Σc", color_title="bidder",
        colors=_colors(),
        title=f"Paper setting: L2FOB's ROI over time for each η_γ (dashed: target γ = {gamma:g})"),
        reference_line(gamma)))
    out["anatomy"] = anatomy_chart(tb["anatomy"])
    return out


# ----------------------------------------------------------------------------------------------
# The live explorer
# ----------------------------------------------------------------------------------------------


def trajectories(eta_gamma: float = ETA, gamma: float = 1.8, rho: float = 0.01,
                 auction: str = "first", T: int = 2000, seed: int = 0,
                 pd_mult: float = 30.0) -> pd.DataFrame:
    """L2FOB (``eta_rho = 0.6``) and the primal-dual bidder (step ``pd_mult / sqrt(T)``) on one stream
    of ``auction``: spend share, ROI and ``V_ROI(t)`` every ``T / 100`` rounds."""
    import pandas as pd

    check_range("eta_gamma", eta_gamma, 0.0, low_open=True)
    check_range("gamma", gamma, 0.0, low_open=True)
    check_range("rho", rho, 0.0, low_open=True)
    T = check_int("T", T, 10)
    env = _env(auction)
    v, d = _streams(env, T, [seed])
    out = []
    for name, pol in ((L2, L2FOB(rho=rho, gamma=gamma, eta_gamma=eta_gamma)),
                      (PD, PrimalDual(rho=rho, gamma=gamma, step=pd_mult / math.sqrt(T)))):
        res = _simulate(pol, env, v, d, np.array([T]), 100, desc=name.split(" ")[0])
        tr = res["trace"][:, :, 0]
        spend = tr[:, 1]
        out.append(pd.DataFrame({"method": name, "t": res["t"], "spend_share": spend / (rho * T),
                                 "roi": np.where(spend > 0, tr[:, 0] / np.maximum(spend, 1e-12),
                                                 0.0),
                                 "violation": tr[:, 2]}))
    return pd.concat(out, ignore_index=True)


def trajectory_chart(eta_gamma: float = ETA, gamma: float = 1.8, rho: float = 0.01,
                     auction: str = "first", T: int = 2000, seed: int = 0) -> alt.VConcatChart:
    """Pure function behind :func:`explorer`: budget, ROI and ``V_ROI(t)`` over time for L2FOB and
    the primal-dual bidder (``l2fob-eq-score``, ``l2fob-eq-pd``)."""
    df = trajectories(eta_gamma, gamma, rho, auction, T, seed)  # checks the arguments first

    import altair as alt

    from iclr_lab.core.charts import reference_line

    color = alt.Color("method:N", scale=_scale([L2, PD]), title="bidder",
                      legend=alt.Legend(orient="bottom"))
    x = alt.X("t:Q", title="round t")

    def panel(y: str, title: str, ref: float | None = None, label: str = "") -> Any:
        line = alt.Chart(df).mark_line().encode(x=x, y=alt.Y(f"{y}:Q", title=title), color=color)
        layers: list[Any] = [line]
        if ref is not None:
            layers.append(reference_line(ref, label=label))
        return alt.layer(*layers).properties(width=420, height=110)

    return alt.vconcat(
        panel("spend_share", "share of budget spent", 1.0, "budget"),
        panel("roi", "ROI so far", gamma, f"γ = {gamma:g}"),
        panel("violation", "V_ROI(t)", 0.0),
    ).properties(title=f"{auction}-price auction, ρ = {rho:.3g}, γ = {gamma:.3g}, "
                       f"η_γ = {eta_gamma:.3g}, T = {T}")


def explorer() -> Any:
    """ipywidgets explorer: the ROI-queue step ``eta_gamma``, the ROI target ``gamma``, the budget
    per round ``rho`` and the auction format, recomputed live (``l2fob-eq-score``)."""
    import ipywidgets as widgets

    from iclr_lab.core.widgets import explorer as make_explorer
    from iclr_lab.core.widgets import log_slider, slider

    return make_explorer(
        trajectory_chart,
        eta_gamma=log_slider("η_γ (ROI queue step)", ETA, 0.01, 100.0),
        gamma=slider("γ (ROI target)", 1.8, 1.0, 4.0, 0.1),
        rho=log_slider("ρ (budget per round)", 0.01, 0.001, 0.1),
        auction=widgets.Dropdown(options=["first", "second"], value="first",
                                 description="auction"),
        T=widgets.fixed(2000), seed=widgets.fixed(0),
    )
