"""The L2FOB chapter's claims, its summary tables and the numbers its prose quotes.

The runs come from :mod:`~iclr_lab.online.l2fob.experiments`; this module turns them into the
:class:`~iclr_lab.core.report.Claim` list of :func:`~iclr_lab.online.l2fob.experiments.reproduce`,
the tables ``summary``, ``robustness`` and ``optimism``, and :func:`numbers`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .bidding import ALPHA, C_CONF, FirstPriceAuction
from .experiments import (
    C_CONFS,
    ETA,
    ETAS,
    HIGH,
    L2,
    METHODS,
    PAPER,
    PD,
    ROBUST_SPREAD,
    ROI_SHARE,
    SATURATION,
    SETTINGS,
    SHIFTED,
    SLOPE_MAX,
    TIGHT,
    WANG,
    WINDOW_RATIO,
)

if TYPE_CHECKING:
    import pandas as pd

    from iclr_lab.core.report import Claim, Report

__all__ = ["numbers", "tuned_steps", "windows"]


# ----------------------------------------------------------------------------------------------
# Tuning, claims and the numbers of the prose
# ----------------------------------------------------------------------------------------------


def _median(df: pd.DataFrame, by: list[str], col: str) -> pd.Series:
    return df.groupby(by)[col].median()


def tuned_steps(runs: pd.DataFrame) -> dict[str, float]:
    """The step each bidder uses when it is frozen (the rows of ``runs`` marked ``frozen``): L2FOB
    keeps the paper's ``eta_gamma = 0.6``; each baseline takes the step that
    :func:`iclr_lab.core.tuning.tune` chose for it on the tuning seeds (Wang et al.'s pacing for
    reward; the primal-dual bidder for the best reward among the steps whose median final ROI is at
    least 0.95 gamma)."""
    f = runs[runs["frozen"]]
    return {m: float(f.loc[f["method"] == m, "step"].iloc[0]) for m in METHODS}


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


def _window(grid: Sequence[float], frozen: float, side: str) -> list[float]:
    """The steps of ``grid`` from ``frozen`` up to ``WINDOW_RATIO`` times it (``side="above"``) or
    from ``frozen / WINDOW_RATIO`` up to it (``side="below"``), ``frozen`` included."""
    g = np.asarray(sorted(grid), dtype=float)
    tol = 1e-9  # the grid's steps are products of floats
    if side == "above":
        keep = (g >= frozen * (1 - tol)) & (g <= frozen * WINDOW_RATIO * (1 + tol))
    else:
        keep = (g >= frozen / WINDOW_RATIO * (1 - tol)) & (g <= frozen * (1 + tol))
    return g[keep].tolist()


def _pool(runs: pd.DataFrame, extra: pd.DataFrame | None) -> pd.DataFrame:
    """``runs`` with the baselines' runs one step past their grid (from ``extra``): the steps a
    window may take. L2FOB's extra runs (other confidence widths at the same step) stay out."""
    if extra is None:
        return runs
    import pandas as pd

    edge = extra[extra["method"] != L2]
    if "frozen" in runs:
        edge = edge.assign(frozen=False)
    return pd.concat([runs, edge], ignore_index=True) if len(edge) else runs


def windows(runs: pd.DataFrame, side: str = "above",
            extra: pd.DataFrame | None = None) -> dict[str, list[float]]:
    """The step window of each bidder in the robustness tests, by one rule for every bidder: the
    steps it was run at (``runs``, and the baselines' step past their grid in ``extra``) from its
    frozen step ``x`` up to ``10 x`` (``side="above"``), or from ``x / 10`` up to ``x``
    (``side="below"``). L2FOB's frozen step is the paper's 0.6, so its windows are
    ``{0.6, 1.9, 6}`` and ``{0.06, 0.6}``; each baseline's frozen step is its tuned one. (Until a
    fresh-eyes review the baselines' windows were centred on their frozen step while L2FOB's
    started at it.)"""
    from iclr_lab.core.validation import check_choice

    side = check_choice("side", side, ("above", "below"))
    tuned = tuned_steps(runs)
    pool = _pool(runs, extra)
    return {m: _window(sorted(pool.loc[pool["method"] == m, "step"].unique()), tuned[m], side)
            for m in METHODS}


def _window_label(method: str, steps: Sequence[float], T: int) -> str:
    if method == L2:
        return "η_γ ∈ {" + ", ".join(f"{x:g}" for x in steps) + "}"
    return "{" + ", ".join(f"{x * math.sqrt(T):.3g}" for x in steps) + "}/√T"


def _text(values: Sequence[float] | np.ndarray, fmt: str = ".2f") -> str:
    """``median (min-max)`` of per-seed values, for a claim's statement."""
    x = np.asarray(values, dtype=float)
    return f"{np.median(x):{fmt}} ({x.min():{fmt}}–{x.max():{fmt}})"


def _overspend(runs: pd.DataFrame, extra: pd.DataFrame, rates: pd.DataFrame,
               rho_runs: pd.DataFrame | None = None) -> float:
    """The largest spend over the budget ``rho T`` of any run of the chapter (1 is the budget)."""
    rho = SETTINGS[0].rho  # the rate experiment runs the paper setting
    shares = [runs["budget_share"].max(), extra["budget_share"].max(),
              (rates["spend"] / (rho * rates["T"])).max()]
    if rho_runs is not None:
        shares.append(rho_runs["budget_share"].max())
    return float(max(shares))


def _rho_slope(rho_runs: pd.DataFrame, method: str) -> float:
    """Log-log slope in ``rho`` of the median over seeds of ``method``'s regret against the
    budget-only fluid optimum (NaN if a median is not > 0)."""
    from iclr_lab.core.stats import loglog_slope

    med = rho_runs[rho_runs["method"] == method].groupby("rho")["regret"].median()
    if len(med) < 2 or (med <= 0).any():
        return math.nan
    return loglog_slope(med.index.to_numpy(dtype=float), med.to_numpy())[0]


def rho_bound_slopes(rho_runs: pd.DataFrame) -> tuple[float, float]:
    """The log-log slopes in ``rho``, over the chapter's budgets, of the two bounds' factors:
    L2FOB's ``1 + nu*/rho`` and Wang et al.'s ``1 + nu*/rho^2`` (``nu*`` from the fluid LP of each
    budget, before any bidder runs). Their midpoint is the threshold of ``rho_rate``."""
    from iclr_lab.core.stats import loglog_slope

    g = rho_runs.groupby("rho")["fluid"].first() / rho_runs.groupby("rho")["T"].first()
    r, nu = g.index.to_numpy(dtype=float), g.to_numpy()
    return (loglog_slope(r, 1.0 + nu / r)[0], loglog_slope(r, 1.0 + nu / r ** 2)[0])


def _joint(runs: pd.DataFrame, method: str, settings: Sequence[str],
           steps: Sequence[float]) -> np.ndarray:
    """Per seed, the joint robustness score of ``method`` over the step window ``steps`` in
    ``settings``: ``max(spread - ROBUST_SPREAD, ROI_SHARE - lowest ROI / gamma)``, where the spread
    is the reward's max/min - 1 over the window (the larger over the settings) and the ROI the
    lowest final ROI over gamma at any step of the window in any of the settings. It is <= 0 exactly
    when the reward varies by at most ``ROBUST_SPREAD`` **and** every step of the window meets
    ``ROI_SHARE`` gamma."""
    spread = np.max([_spread(runs, method, s, steps) for s in settings], axis=0) - 1.0
    sel = runs[(runs["method"] == method) & runs["setting"].isin(list(settings))
               & runs["step"].isin(list(steps))]
    roi = sel.groupby("seed")["roi_share"].min().sort_index().to_numpy()
    return np.maximum(spread - ROBUST_SPREAD, ROI_SHARE - roi)


def _window_roi(runs: pd.DataFrame, method: str, settings: Sequence[str],
                steps: Sequence[float]) -> float:
    """The median over seeds of the lowest final ROI / gamma over ``steps`` and ``settings``."""
    sel = runs[(runs["method"] == method) & runs["setting"].isin(list(settings))
               & runs["step"].isin(list(steps))]
    return float(sel.groupby("seed")["roi_share"].min().median())


def _claims(runs: pd.DataFrame, extra: pd.DataFrame, rates: pd.DataFrame,
            rho_runs: pd.DataFrame | None = None) -> list[Claim]:
    from iclr_lab.core.report import Claim

    tuned = tuned_steps(runs)
    win, below = windows(runs, extra=extra), windows(runs, "below", extra)
    grid = runs
    runs = _pool(runs, extra)  # the windows' steps: the grid and the baselines' step past it
    T = int(runs["T"].iloc[0])
    mine = _per_seed(runs, L2, PAPER, ETA, "reward")
    wang = _per_seed(runs, WANG, PAPER, tuned[WANG], "reward")
    pd_spread = np.max([_spread(runs, PD, s, win[PD]) for s in SHIFTED], axis=0) - 1.0
    pd_label = _window_label(PD, win[PD], T)
    l2_label, l2_below = _window_label(L2, win[L2], T), _window_label(L2, below[L2], T)
    wang_label = _window_label(WANG, win[WANG], T)
    wang_below = _window_label(WANG, below[WANG], T)
    roi_paper = _per_seed(runs, L2, PAPER, ETA, "roi_share")
    roi_high = _per_seed(runs, L2, HIGH, ETA, "roi_share")
    pd_roi_paper = _per_seed(runs, PD, PAPER, tuned[PD], "roi_share")
    wang_roi_paper = _per_seed(runs, WANG, PAPER, tuned[WANG], "roi_share")
    pd_roi_high = _per_seed(runs, PD, HIGH, tuned[PD], "roi_share")
    peak = {e: _per_seed(runs, L2, PAPER, e, "peak_violation") for e in (0.6, 6.0, 60.0)}
    rew = {e: _per_seed(runs, L2, PAPER, e, "reward") for e in (6.0, 60.0)}
    rises = np.maximum(peak[6.0] - peak[0.6], peak[60.0] - peak[6.0])
    main = "L2FOB (look-ahead queue)"
    signed = "L2FOB (signed queue, ablation)"
    # the method without its contribution: the same bidder with signed queues (they may shrink)
    signed_ctrl = ("the signed-queue ablation (L2FOB with queues that may shrink instead of the "
                   "look-ahead queues, the same step, horizons and seeds: the method without its "
                   "contribution; made the control after a fresh-eyes review, its slopes were "
                   "already reported in the chapter)")
    paper_regime = ("the paper's Fig. 1: first price, v ~ N(0.6, 0.1), d ~ N(0.4, 0.1), ρ = 0.01, "
                    "γ = 1.8, T = 10⁴, full feedback (the paper's 20 seeds; here "
                    f"{runs['seed'].nunique()})")
    shifted_regime = ("the chapter's: two settings shifted from the paper's (ρ = 0.002, γ = 1.8 and "
                      "ρ = 0.01, γ = 3; the paper ran neither), steps frozen from the paper's")
    joint = (f"max(reward max/min − 1 − {ROBUST_SPREAD:.2f}, {ROI_SHARE:g} − lowest final ROI/γ "
             f"of the window) <= 0: the reward varies by at most {ROBUST_SPREAD:.0%} across the "
             f"window **and** every step of it ends at ROI >= {ROI_SHARE:g} γ")
    rule = ("each bidder's window is the steps it was run at (L2FOB its grid; each baseline its "
            "grid and one step past it, 300/√T, run for the window) from its frozen step x up to "
            "10x (the window above) or from x/10 up to x (the window below), the same rule for "
            "every bidder; every bidder's step is tuned by the same objective (the best reward among "
            f"the steps whose median final ROI is >= {ROI_SHARE:g} γ on the tuning seeds), L2FOB "
            "keeps the paper's 0.6")
    wang_ctrl = (f"Wang et al.'s pacing (ignores ROI) over its window above, {wang_label}, "
                 "same test")
    pd_ctrl = (f"the primal–dual bidder (two duals, the strongest baseline on this test) over its "
               f"window above, {pd_label}, same test")
    wang_joint = _joint(runs, WANG, [PAPER], win[WANG])
    before = ("(Until a second fresh-eyes review the control was Wang et al.'s pacing, which fails; "
              "the primal–dual bidder became the control after that run, by the rule that the "
              "control is the strongest baseline. The window above was widened to 10× for the "
              "baselines after a run on a window cut at the grid's top, 3.3×, where Wang et al.'s "
              "pacing passed at the book's seeds. Before a fresh-eyes review the baselines' windows "
              "were centred on their frozen "
              "step while L2FOB's started at it, and Wang et al.'s pacing was tuned for reward "
              "alone; both were changed before the run that produced these numbers. Before an "
              "earlier review the claim tested the reward spread alone, in the shifted settings "
              "only, and a bidder that ignores ROI passed it.)")
    rob_paper = "η can range from Θ(1) to Θ(T) thanks to clipping; 6 and 60 give nearly the same curves"
    claims = [
        Claim.over_seeds(
            "reward_vs_tuned_wang", "Paper setting (first price, ρ = 0.01, γ = 1.8, T = 10⁴): "
            "L2FOB's total reward (η_ρ = η_γ = 0.6) over that of Wang et al.'s dual descent with "
            "the step of {1, 3, 10, 30, 100}/√T tuned on the tuning seeds by the objective every "
            f"bidder gets (best reward subject to median final ROI >= {ROI_SHARE:g} γ) is >= 1.0. "
            "(Wang et al.'s pacing was tuned for reward alone until a fresh-eyes review.)",
            (mine / wang).tolist(), 1.0, ">=", paper="Fig. 1: L2FOB's reward is 'significantly' higher than "
            "Wang et al. (2023)'s (step not reported)", expected=False,
            source="pilot",  # the baseline's tuning objective changed after earlier runs
            no_control="the test is itself the comparison with the baseline, Wang et al.'s pacing "
            "at its tuned step", regime=paper_regime),
        Claim.over_seeds(
            "not_dominated", "Paper setting: number of primal–dual steps in {1, 3, 10, 30, "
            "100}/√T whose reward is at least L2FOB's (η_γ = 0.6) and whose peak ROI violation "
            "max_t V_ROI(t) is at most L2FOB's is 0",
            _dominators(grid).tolist(), 0.0, "<=", paper="L2FOB is safe *and* optimal: better reward and "
            "ROI than primal–dual baselines", expected=False, source="prior",
            no_control="the test is itself the comparison with the baseline, every step of the "
            "primal–dual bidder's grid", regime=paper_regime),
        Claim.over_seeds(
            "robust_step_paper", f"Paper setting, L2FOB over its window above, {l2_label} (the "
            "paper's step and up): " + joint + f"; {rule}. Control: {pd_ctrl}. Beside it, "
            f"{wang_ctrl}, scores {_text(wang_joint, '.3f')}. (At the book's seeds L2FOB's reward "
            "spread does not bind: its score is 0.95 minus its final ROI / γ at η_γ = 0.6.) "
            + before,
            _joint(runs, L2, [PAPER], win[L2]).tolist(), 0.0, "<=",
            paper=rob_paper, source="pilot", control=PD,  # control changed after a run
            control_values=_joint(runs, PD, [PAPER], win[PD]).tolist(), regime=paper_regime),
        Claim.over_seeds(
            "robust_step_shifted", "The two shifted settings (ρ = 0.002 with γ = 1.8; ρ = 0.01 "
            f"with γ = 3), no re-tuning, L2FOB over its window above, {l2_label}: the same joint "
            "test, the spread the larger of the two settings and the ROI the lowest of both. "
            f"Control: {pd_ctrl}. Beside it, {wang_ctrl}, scores "
            f"{_text(_joint(runs, WANG, SHIFTED, win[WANG]), '.3f')}. Expected to fail before the "
            f"run: L2FOB's ROI at γ = 3 is below {ROI_SHARE:g} γ (roi_met_high_target). (Until "
            "the session after robust_step_paper's control changed, the control here was still "
            "Wang et al.'s pacing; it is the primal–dual bidder by the same rule.)",
            _joint(runs, L2, SHIFTED, win[L2]).tolist(),
            0.0, "<=", paper=rob_paper, expected=False, source="pilot", control=PD,
            control_values=_joint(runs, PD, SHIFTED, win[PD]).tolist(), regime=shifted_regime),
        Claim.over_seeds(
            "robust_step_low", f"The window on the other side: L2FOB over its window below, "
            f"{l2_below} (the paper's step and down to a tenth of it), paper setting: the same "
            f"joint test. Control: Wang et al.'s pacing over its window below, {wang_below}. "
            "Expected to fail before the run (the ROI at η_γ = 0.06 misses the target). (Until "
            "a fresh-eyes review this window was {0.06, 0.6, 1.9}, 32× wide, with no control.)",
            _joint(runs, L2, [PAPER], below[L2]).tolist(), 0.0, "<=", paper=rob_paper,
            expected=False, kind="derivation", source="pilot", control=WANG,
            control_values=_joint(runs, WANG, [PAPER], below[WANG]).tolist(),
            regime=paper_regime),
        Claim.over_seeds(
            "robust_step_pd", "The primal–dual bidder, reward alone, over its window above: its "
            f"reward varies by more than {ROBUST_SPREAD:.0%} across {pd_label}, from its frozen "
            "step up to 10× it (max/min − 1, the larger of the two shifted settings). (Until a "
            "review, this claim compared the primal–dual bidder's whole 100× grid with a 2× "
            "bound; then a window centred on its frozen step; since a fresh-eyes review, the "
            "window above, by the rule of every bidder. The window was chosen after the review "
            "had measured the baseline on it, hence the source 'pilot'.)",
            pd_spread, ROBUST_SPREAD, ">",
            paper="(the baseline, same test: primal–dual methods need their step tuned)",
            kind="derivation", source="pilot"),
        Claim.over_seeds(
            "roi_met_paper", "Paper setting (the LP says the ROI target binds): L2FOB's final ROI "
            f"is at least {ROI_SHARE:g} γ (final ROI / γ; only the end of the run is tested). "
            f"Control: Wang et al.'s pacing at its tuned step, which ignores ROI, scores "
            f"{_text(wang_roi_paper, '.3f')}; the tuned primal–dual bidder "
            f"{_text(pd_roi_paper, '.3f')}. Every bidder's tuning asks for a median final ROI of "
            f"{ROI_SHARE:g} γ on the tuning seeds (Wang et al.'s asked for reward alone until a "
            "fresh-eyes review)",
            roi_paper.tolist(), ROI_SHARE, ">=",
            paper="Fig. 1: L2FOB's ROI stays at the target 1.8",
            source="pilot",  # the control's tuning objective changed after earlier runs
            control=WANG, control_values=wang_roi_paper.tolist(), regime=paper_regime),
        Claim.over_seeds(
            "roi_met_high_target", "Extension (a setting the paper did not run): high ROI target "
            "(ρ = 0.01, γ = 3; the LP says the ROI target binds): L2FOB's final ROI is at least "
            f"{ROI_SHARE:g} γ (final ROI / γ). The frozen primal–dual bidder scores "
            f"{_text(pd_roi_high, '.3f')}", roi_high.tolist(), ROI_SHARE, ">=",
            paper="Fig. 1: L2FOB's ROI stays at the target (there for γ = 1.8)",
            # expected=False after the first book run showed it failing (threshold unchanged): at
            # gamma = 3 the optimistic estimates overstate the ROI of the rarely winning low bids;
            # a derivation (was `paper`) since the paper never ran gamma = 3; pilot: expectation
            # set after a run
            expected=False, kind="derivation", source="pilot"),
        Claim.over_seeds(
            "roi_met_slack", f"Where the ROI target is slack (ρ = 0.002, γ = 1.8), L2FOB's final "
            f"ROI is at least {ROI_SHARE:g} γ: any low bidder passes this",
            _per_seed(runs, L2, TIGHT, ETA, "roi_share").tolist(), ROI_SHARE, ">=",
            paper="(no claim of the paper: an implementation check)", kind="sanity",
            source="prior"),
        Claim(
            "budget_never_overspent", "Over every run of the chapter (every bidder, step, "
            "setting, seed and horizon), the largest spend over the budget ρT is at most 1 "
            "(+1e-12): the hard stop", _overspend(runs, extra, rates, rho_runs), 1.0 + 1e-12, "<=",
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
            f"LP (median over seeds; B = ρT) is <= {SLOPE_MAX:g} (√T up to log factors). "
            f"Control: {signed_ctrl}, which scores {_slope(rates, signed, 'regret'):.2f}",
            _slope(rates, main, "regret"), SLOPE_MAX, "<=",
            paper="Theorem: regret Õ((1 + ν*/ρ) √T) for first price with full information",
            expected=False, kind="theorem", source="prior", control=signed,
            control_measured=_slope(rates, signed, "regret")),
        Claim(
            "violation_slope", "Log-log slope in T of L2FOB's peak ROI violation max_t V_ROI(t) "
            f"(median over seeds) is <= {SLOPE_MAX:g}. Control: {signed_ctrl}, which scores "
            f"{_slope(rates, signed, 'peak_violation'):.2f}", _slope(rates, main, "peak_violation"),
            SLOPE_MAX, "<=", paper="Theorem: anytime ROI violation Õ(√T)", kind="theorem",
            source="prior", control=signed,
            control_measured=_slope(rates, signed, "peak_violation")),
    ]
    if rho_runs is not None:
        l2_bound, wang_bound = rho_bound_slopes(rho_runs)
        mid = 0.5 * (l2_bound + wang_bound)
        rhos = ", ".join(f"{r:g}" for r in sorted(rho_runs["rho"].unique()))
        claims.append(Claim(
            "rho_rate", "Small budgets per round: the log-log slope in ρ of L2FOB's regret "
            "T ν*(ρ) − Σ r_t (median over seeds; budget only, so both bidders face the same "
            f"benchmark) is >= {mid:.2f}, the midpoint between the slopes of the two bounds' "
            f"factors over these ρ, {l2_bound:.2f} for L2FOB's 1 + ν*/ρ and {wang_bound:.2f} for "
            "Wang et al.'s 1 + ν*/ρ² (from the fluid LP, before any bidder ran): as ρ shrinks, "
            "L2FOB's regret grows no faster than halfway to Wang et al.'s bound. Control: Wang "
            "et al.'s pacing at its tuned step, same test, which scores "
            f"{_rho_slope(rho_runs, WANG):.2f}", _rho_slope(rho_runs, L2), mid, ">=",
            paper="Theorem: regret Õ((1 + ν*/ρ)√T), against Õ((1 + ν*/ρ²)√T) for Wang et al. "
            "(2023): the better rate when the budget per round ρ is small (a bound; the paper "
            "runs no ρ sweep)", source="prior", control=WANG,
            control_measured=_rho_slope(rho_runs, WANG),
            regime=f"the chapter's: first price, v ~ N(0.6, 0.1), d ~ N(0.4, 0.1), T = "
            f"{int(rho_runs['T'].iloc[0])}, ρ ∈ {{{rhos}}}, budget only (γ → 0: the setting of "
            "Wang et al.'s bound), full feedback, L2FOB at η = 0.6 and Wang et al.'s pacing at "
            "its step tuned in the paper setting"))
    return claims


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


def _robustness(runs: pd.DataFrame, extra: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each bidder with its frozen step in each setting, and how its reward and ROI vary over its
    10x step windows above and below the frozen step (see :func:`windows`) and over its whole grid
    (medians over seeds)."""
    import pandas as pd

    tuned = tuned_steps(runs)
    wins = {"above": windows(runs, extra=extra), "below": windows(runs, "below", extra)}
    pool = _pool(runs, extra)
    T = int(runs["T"].iloc[0])
    rows = []
    for s in SETTINGS:
        for method in METHODS:
            g = runs[(runs["setting"] == s.name) & (runs["method"] == method)]
            gp = pool[(pool["setting"] == s.name) & (pool["method"] == method)]
            frozen = _pick(g, method, s.name, tuned[method])
            row = {"setting": s.name, "method": method, "frozen step": frozen["step_label"].iloc[0],
                   "reward / T·ν* (frozen)": frozen["reward"].median() / g["fluid"].iloc[0],
                   "final ROI / γ (frozen)": frozen["roi_share"].median()}
            for side, win in wins.items():
                roi = gp[gp["step"].isin(win[method])].groupby("step")["roi_share"].median()
                row |= {f"window {side}": _window_label(method, win[method], T),
                        f"reward max/min ({side})": float(np.median(_spread(pool, method, s.name,
                                                                            win[method]))),
                        f"ROI / γ, lowest ({side})": roi.min(),
                        f"ROI / γ, highest ({side})": roi.max()}
            row["reward max/min (whole grid)"] = float(np.median(_spread(
                runs, method, s.name, sorted(g["step"].unique()))))
            rows.append(row)
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
    win, below = windows(runs, extra=extra), windows(runs, "below", extra)
    pool = _pool(runs, extra)
    main = "L2FOB (look-ahead queue)"
    signed = "L2FOB (signed queue, ablation)"
    l2_rates = rates[rates["method"] == main].groupby("T")[["spend", "regret"]].median()
    spend_share = l2_rates["spend"] / (l2_rates.index.to_numpy() * SETTINGS[0].rho)
    horizons = l2_rates.index.to_numpy()

    def med(method: str, setting: str, step: float, col: str) -> float:
        return float(_pick(runs, method, setting, step)[col].median())

    def spread(method: str, setting: str, steps: Sequence[float]) -> float:
        return float(np.median(_spread(pool, method, setting, steps)))

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
        "l2_rule_eta": float(next(t.choice for t in report.tuning if t.method == L2)),
        # the joint robustness test: the reward spread and the lowest ROI / gamma of each window
        "l2_win_paper": spread(L2, PAPER, win[L2]),
        "wang_win_paper": spread(WANG, PAPER, win[WANG]),
        "pd_win_paper": spread(PD, PAPER, win[PD]),
        "pd_win_paper_roi": _window_roi(pool, PD, [PAPER], win[PD]),
        "wang_win_paper_score": float(np.median(_joint(pool, WANG, [PAPER], win[WANG]))),
        # L2FOB's score is its ROI shortfall at the paper's step at how many of the seeds
        "l2_score_is_roi": float(np.sum(np.isclose(
            _joint(pool, L2, [PAPER], win[L2]),
            ROI_SHARE - _per_seed(pool, L2, PAPER, ETA, "roi_share")))),
        "l2_win_paper_roi": _window_roi(pool, L2, [PAPER], win[L2]),
        "wang_win_paper_roi": _window_roi(pool, WANG, [PAPER], win[WANG]),
        "l2_win_shifted_roi": _window_roi(pool, L2, SHIFTED, win[L2]),
        "wang_win_shifted_roi": _window_roi(pool, WANG, SHIFTED, win[WANG]),
        "l2_low_spread": spread(L2, PAPER, below[L2]),
        "l2_low_roi": _window_roi(pool, L2, [PAPER], below[L2]),
        "l2_low_spread_high": spread(L2, HIGH, below[L2]),
        "wang_low_spread": spread(WANG, PAPER, below[WANG]),
        "wang_low_roi": _window_roi(pool, WANG, [PAPER], below[WANG]),
        "l2_wide_low_spread": spread(L2, PAPER, ETAS[:3]),
        # the first run of this revision took the windows from the grid alone: Wang et al.'s
        # window above its tuned step was cut at the grid's top (disclosed in the chapter)
        "wang_grid_window_width": max(_window(sorted(runs.loc[runs["method"] == WANG, "step"]
                                                     .unique()), tuned[WANG], "above"))
        / tuned[WANG],
        "wang_grid_window_score": float(np.median(_joint(runs, WANG, [PAPER], _window(
            sorted(runs.loc[runs["method"] == WANG, "step"].unique()), tuned[WANG], "above")))),
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
        "l2_win_high_roi_lo": _at(r, (HIGH, L2), "ROI / γ, lowest (above)"),
        "l2_win_high_roi_hi": _at(r, (HIGH, L2), "ROI / γ, highest (above)"),
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
    if "rho" in tb:  # the small-rho experiment (budget only)
        rr = tb["rho"]
        rmed = rr.groupby(["method", "rho"])["regret"].median()
        lo, hi = float(rr["rho"].min()), float(rr["rho"].max())
        l2_bound, wang_bound = rho_bound_slopes(rr)
        out |= {"rho_lo": lo, "rho_hi": hi, "rho_n": float(rr["rho"].nunique()),
                "rho_l2_slope": _rho_slope(rr, L2), "rho_wang_slope": _rho_slope(rr, WANG),
                "rho_l2_bound": l2_bound, "rho_wang_bound": wang_bound,
                "rho_mid": 0.5 * (l2_bound + wang_bound),
                "rho_l2_lo": float(rmed[(L2, lo)]), "rho_l2_hi": float(rmed[(L2, hi)]),
                "rho_wang_lo": float(rmed[(WANG, lo)]), "rho_wang_hi": float(rmed[(WANG, hi)]),
                "rho_wang_below_l2": float((rmed[WANG] < rmed[L2]).sum())}
    for k, h in enumerate(horizons):
        out[f"l2_regret_T{k}"] = float(l2_rates["regret"].iloc[k])
        out[f"l2_spend_T{k}"] = float(spend_share.iloc[k])
        out[f"T{k}"] = float(h)
    return out

