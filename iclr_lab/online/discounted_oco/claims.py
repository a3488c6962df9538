"""The discounted-OCO chapter's claims (``_claims``, which
:func:`~iclr_lab.online.discounted_oco.experiments.reproduce` attaches) and the numbers its prose glues
(:func:`numbers`), both computed from the tables of :mod:`~iclr_lab.online.discounted_oco.experiments`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr_lab.online.discounted_oco.experiments import (
    MATCH,
    NEMESIS,
    SINGLE,
    SLOW,
    SOGD_CN1,
    SOGD_Z1,
    SOGD_Z100,
    TUNED,
    D,
    G,
    _baselines,
    _horizon,
    _memories,
    _ranges,
    _ratios,
    _Sizes,
    _step_name,
    fixed_step_grid,
)
from iclr_lab.online.discounted_oco.learners import OGD, sogd_bound

if TYPE_CHECKING:
    import pandas as pd

    from iclr_lab.core.report import Claim, Report

__all__ = ["numbers"]


#: The control of the Theorem 1 checks, in the same bank on the same streams.
THM1_CONTROL = ("OGD with one step for every memory, the horizon-T step η = D/(G√T) (the step "
                "tuned to λ removed)")


def _best_single(ratios: pd.DataFrame, ns: Sequence[int]) -> list[float]:
    """Per seed: the worst ratio over ``ns`` of the single fixed step that minimises it."""
    fixed = [c for c in ratios.columns if c.startswith("OGD, η")]
    sel = ratios[ratios.index.get_level_values("n").isin(ns)][fixed]
    return [float(v) for v in sel.groupby(level="seed").max().min(axis=1)]


def _per_seed_max(values: pd.Series, ns: Sequence[int]) -> list[float]:
    """Per seed: the largest of ``values`` (indexed by seed and n) over the memories ``ns``."""
    sel = values[values.index.get_level_values("n").isin(ns)]
    return [float(v) for v in sel.groupby(level="seed").max()]


def _min_positive(g: pd.DataFrame) -> float:
    fixed = g[g["learner"].str.startswith("OGD, η")].groupby("n")["max_regret"].min()
    sogd = g[g["learner"] == SOGD_Z1]["max_regret"]
    return float(min(fixed.min(), sogd.min()))


def _per_seed(df: pd.DataFrame, fn: Callable[[pd.DataFrame], float]) -> list[float]:
    return [float(fn(g)) for _, g in df.groupby("seed", sort=True)]


def _wide(worst: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """Worst regrets with one row per (seed, n) and one column per learner; Theorem 3's bound."""
    wide = worst.pivot_table(index=["seed", "n"], columns="learner", values="max_regret")
    bound = worst.drop_duplicates(["seed", "n"]).set_index(["seed", "n"])["thm3_bound"]
    return wide, bound


def _claims(tables: dict[str, pd.DataFrame], sz: _Sizes) -> list[Claim]:
    from iclr_lab.core.report import Claim
    from iclr_lab.core.stats import loglog_slope

    thm1, dnp, worst = tables["theorem1"], tables["dnp"], tables["worst_regret"]
    T = sz.T3
    base = _baselines(worst, T)
    long, short = _memories(T, sz.ns3)
    ratios = _ratios(worst)
    fixed = [c for c in ratios.columns if c.startswith("OGD, η")]
    best_single = [float(v) for v in ratios[fixed].groupby(level="seed").max().min(axis=1)]
    wide, bound = _wide(worst)
    z_ratio = wide[SOGD_Z100] / wide[SOGD_Z1]
    z_factor = z_ratio.where(z_ratio >= 1.0, 1.0 / z_ratio)
    ctrl = tables["control_regret"].pivot_table(index=["seed", "n"], columns="control",
                                                values="max_regret")
    oracle = wide[fixed].min(axis=1)

    def control(range_name: str, over: pd.Series | None = None,
                memories: list[int] | None = None) -> dict[str, Any]:
        """The control of a test, through the same test: the single step tuned for that range of
        memories, its worst regret over ``over`` (default the oracle's), max over the range (or
        over ``memories``)."""
        name = f"{SINGLE} ({range_name} memories)"
        ns = _ranges(sz)[range_name] if memories is None else memories
        step = float(tables["control_regret"].query("control == @name").step.iloc[0])
        ratio = ctrl[name] / (oracle if over is None else over)
        where = {"long": "the long memories", "short": "the short memories",
                 "all": "every memory of the grid"}[range_name]
        return {"control": f"OGD with one fixed step for every λ (η = {step:.3g}), tuned by "
                           f"core.tuning on the oracle's grid for {where}, on tuning seeds",
                "control_values": _per_seed_max(ratio, ns)}

    regime = ("paper: ijcnn1 (T = 10⁴, logistic loss), discounted losses over λ in {0.999, 0.998, "
              "0.996}; here: a synthetic two-time-scale stream (calm, volatile, calm) on which the "
              "best fixed step changes with λ, absolute loss, T = 32768 at book scale")
    no_z = ("a claim that SOGD is insensitive to its own parameter Z: there is no method without "
            "the contribution to run on this test")
    return [
        Claim.over_seeds(
            "thm1_slope", "Fitted log-log slope of max_t D-Regret of Theorem-1-tuned OGD against "
            "the memory n, on random ±1 linear losses, is in [0.35, 0.65] (theory: 0.5)",
            _per_seed(thm1, lambda g: loglog_slope(g["n"], g["max_regret"])[0]), (0.35, 0.65),
            "in", paper="Theorem 1: D-Regret = O(1/sqrt(1-λ)), i.e. slope 1/2", kind="theorem",
            source="pilot", control=THM1_CONTROL,
            control_values=_per_seed(
                thm1, lambda g: loglog_slope(g["n"], g["control_max_regret"])[0])),
        Claim.over_seeds(
            "thm1_bound_ratio", "max over n and t of D-Regret / (√2 D G √n) for Theorem-1-tuned "
            "OGD is <= 1", _per_seed(thm1, lambda g: (g["max_regret"] / g["bound"]).max()), 1.0,
            "<=", paper="Theorem 1: D-Regret <= √2 D G / sqrt(1-λ) at every horizon",
            kind="theorem", source="paper", control=THM1_CONTROL,
            control_values=_per_seed(thm1, lambda g: (g["control_max_regret"] / g["bound"]).max())),
        Claim.over_seeds(
            "dnp_loss_budget", "Largest share of Theorem 2's loss budget Z/(2(1-η)) that the DNP "
            "uses, over four bit streams (one adversarial), n and η in {ρ, 1-0.5/n, 1-0.1/n}: "
            "max(-min_t payoff) / budget <= 1",
            _per_seed(dnp, lambda g: g["budget_used"].max()), 1.0, "<=",
            paper="Theorem 2: payoff >= -Z/(2(1-η)) for every η >= ρ", kind="theorem",
            source="paper",
            no_control="a bound check of the DNP's own worst payoff: the budget Z/(2(1-η)) is "
                       "set by the DNP's own Z, and a bettor that is not a DNP has no such budget "
                       "(always betting 1 exceeds it at its first loss, never betting meets it "
                       "trivially). A DNP made greedy on purpose (exercise "
                       "discounted_oco-ex-greedy) shows that the check can fail, but it is not a "
                       "baseline"),
        Claim.over_seeds(
            "dnp_shortfall_ratio", "Largest shortfall of the DNP against always betting 1 (under "
            "ρ), divided by the saturation level x* + 1, is <= 1",
            _per_seed(dnp, lambda g: (g["shortfall"] / g["shortfall_bound"]).max()), 1.0, "<=",
            paper="Theorem 2: shortfall O(sqrt(n log(1/Z))), constant not stated",
            kind="derivation", source="pilot"),
        Claim.over_seeds(
            "sogd_vs_best_step_long", f"Z = 1/T, c_n = √(n/8): at every memory n in {long} (where "
            "Theorem 3's bound is below the trivial n G D), SOGD's worst discounted regret "
            f"max_t D-Regret is within {MATCH:g}x of the best fixed-step OGD for that n (max "
            "ratio over n)", _per_seed_max(base[SOGD_Z1], long), MATCH, "<=",
            paper="ijcnn1, T = 10⁴: SOGD's discounted losses nearly overlap those of OGD tuned "
                  "for each λ in {0.999, 0.998, 0.996}; tested here where Theorem 3 bites "
                  "(λ = 0.999 is n = 1000). The control's step is tuned for the memories of the "
                  "test; the step tuned for every memory of the grid scores "
                  f"{_text(control('all', memories=long)['control_values'])} on it",
            source="prior", **control("long"), regime=regime),
        Claim.paired(
            "sogd_beats_one_step_long", "On the test of sogd_vs_best_step_long (worst ratio to the "
            f"per-λ oracle over n in {long}), SOGD scores lower than the control of that test, OGD "
            "with the one fixed step tuned for those memories: the paired per-seed difference "
            "(SOGD - one step) is below 0, its 95% t interval included. Formulated after the first "
            "run of the claims protocol showed the one step within 2x too",
            _per_seed_max(base[SOGD_Z1], long), control("long")["control_values"], 0.0, "<",
            paper="SOGD adapts to every λ at once; a learner that does not adapt must compromise",
            source="pilot", regime=regime,
            no_control="the test is itself the comparison with the control, the best "
                       "non-adaptive step"),
        Claim.over_seeds(
            "sogd_cn1_vs_best_step_long", "The same test with c_n = 1 (Kapralov and Panigrahy's "
            "constant; the DNP's c_n is uncertain) and Z = 1/T",
            _per_seed_max(base[SOGD_CN1], long), MATCH, "<=",
            paper="as sogd_vs_best_step_long, under the other reading of c_n", source="prior",
            **control("long"), regime=regime),
        Claim.over_seeds(
            "sogd_vs_best_step_short", f"Z = 1/T: the test of sogd_vs_best_step_long at the short "
            f"memories n in {short}, where Theorem 3 is vacuous", _per_seed_max(base[SOGD_Z1], short),
            MATCH, "<=", paper="claimed for every λ down to 1 - 1/τ (τ = 2 here); the experiments "
            "include λ = 0.996, n = 250", expected=False, source="prior", **control("short"),
            regime=regime),
        Claim.over_seeds(
            "sogd_vs_untuned", "At every memory n of the grid, SOGD's worst discounted regret is "
            "at most that of the paper's untuned OGD (η = D/(2G)): max over n of the ratio <= 1. "
            "Not expected at the short memories, where SOGD plays its slow baseline B₀",
            _per_seed_max(wide[SOGD_Z1] / wide[_step_name(D / (2 * G))], sz.ns3), 1.0, "<=",
            paper="ijcnn1: untuned OGD (η = D/(2G)) is worse than SOGD", expected=False,
            source="prior", **control("all", over=wide[_step_name(D / (2 * G))]), regime=regime),
        Claim.over_seeds(
            "sogd_z_insensitive", "SOGD with Z = 100/T and with Z = 1/T: at every memory n of the "
            f"grid their worst discounted regrets are within {MATCH:g}x of each other (max over "
            "n of the larger ratio). Not expected where a combiner's delay, which Z sets, is "
            "comparable with the memory", _per_seed_max(z_factor, sz.ns3), MATCH, "<=",
            paper="ablation: insensitive to Z in {1/(10T), 1/T, 10/T, 100/T}", expected=False,
            source="prior", no_control=no_z, regime=regime),
        Claim.over_seeds(
            "b0_long", "SOGD's own baseline B₀ alone (OGD, η = D/(G√T)) on the test of "
            f"sogd_vs_best_step_long: more than {MATCH:g}x the best step at some n in {long}, so "
            "the combiners, not B₀, pass that test", _per_seed_max(base[SLOW], long), MATCH, ">",
            paper="(the baseline inside SOGD, same test)", kind="derivation", source="prior"),
        Claim.over_seeds(
            "one_step_long", "The strongest one-run baseline on the test of "
            f"sogd_vs_best_step_long: OGD with the single fixed step that is best over n in {long} "
            f"(chosen in hindsight) is within {MATCH:g}x of the best step for each of those n too, "
            "so that test alone does not separate SOGD from a well-chosen fixed step",
            _best_single(ratios, long), MATCH, "<=", paper="(the strongest baseline, same test)",
            kind="derivation", source="prior"),
        Claim.over_seeds(
            "one_step_fails", "The strongest one-run baseline, OGD with the single fixed step "
            "that is best over the whole grid of memories (chosen in hindsight), is more than "
            f"{MATCH:g}x the best step for some n: no single step serves every λ. The stream was "
            "chosen after runs of the fixed steps so that this holds", best_single, MATCH, ">",
            paper="(premise of the test: the best step changes with λ)", kind="derivation",
            source="pilot"),
        Claim.over_seeds(
            "thm3_bound_ratio", f"max over n in {long} (where the bound is below n G D, so that a "
            "learner can exceed it) of SOGD's worst discounted regret / Theorem 3's bound is <= 1",
            _per_seed_max(wide[SOGD_Z1] / bound, long), 1.0, "<=",
            paper="Theorem 3: D-Regret <= 2GD/sqrt(1-λ)(4 sqrt(log T)+√2) + ... for all λ at once",
            kind="theorem", source="paper", **control("long", over=bound)),
        Claim.over_seeds(
            "regrets_positive", "The worst discounted regrets compared above are positive: min "
            "over the memory grid of SOGD's and of the best fixed step's max_t D-Regret is > 0 "
            "(so no ratio has a negative denominator and Theorem 3 is not passed by a negative "
            "regret)", _per_seed(worst, _min_positive), 0.0, ">",
            paper="(design of the checks)", kind="sanity", source="prior"),
    ]


def _text(values: Sequence[float]) -> str:
    """``median [min-max]`` of per-seed values."""
    v = [float(x) for x in values]
    return f"{float(np.median(v)):.3g} [{min(v):.3g}\u2013{max(v):.3g}]"


def _round_to(x: float, step: float) -> float:
    return float(step * round(x / step)) if not math.isnan(x) else math.nan


def numbers(report: Report) -> dict[str, float]:
    """Numbers the chapter's prose quotes, computed from ``report.tables`` (glued by the chapter).

    Medians over seeds unless the name says ``base`` (the base seed's run, which the weight and lens
    charts show). Round counts measured at single rounds are rounded (``_round_to``): they vary from
    seed to seed by more than their last digits.
    """
    from iclr_lab.core.stats import loglog_slope

    tb = report.tables
    worst, summary, dnp, comb = tb["worst_regret"], tb["summary"], tb["dnp"], tb["combiners"]
    T = _horizon(report)
    ns = sorted(int(n) for n in worst["n"].unique())
    long, short = _memories(T, ns)
    row = summary.set_index("n")
    base = _baselines(worst, T)
    med = base.groupby(level="n").median()
    wide, bound = _wide(worst)
    ratios = _ratios(worst)
    steps = fixed_step_grid(T)
    fixed = [_step_name(e) for e in steps]
    single = ratios[fixed].groupby(level="seed").max().idxmin(axis=1)
    single_eta = float(np.median([float(str(c).split("= ")[1]) for c in single]))

    def by_n(values: pd.Series) -> pd.Series:
        return values.groupby(level="n").median()

    untuned = by_n(wide[SOGD_Z1] / wide[_step_name(D / (2 * G))])
    to_tuned = by_n(base[SOGD_Z1] / base[TUNED])
    z_ratio = by_n(wide[SOGD_Z100] / wide[SOGD_Z1])
    z_factor = z_ratio.where(z_ratio >= 1.0, 1.0 / z_ratio)
    z_n = ns[int(np.argmax(z_factor.to_numpy()))]
    passes = wide[fixed].le(bound, axis=0).groupby(level="seed").all()  # (seed, step): every n
    thm3_pass = passes.sum(axis=1)
    fail_eta = [min((float(str(c).split("= ")[1]) for c in fixed if not ok[c]), default=math.nan)
                for _, ok in passes.iterrows()]

    s0 = report.seed
    c0 = comb[comb["seed"] == s0]
    fired = c0[c0["on_after"].notna()].sort_values("combiner")
    quiet = c0[c0["on_after"].isna() & (c0["combiner"] > (fired["combiner"].max()
                                                          if len(fired) else 0))]
    phase = tb["volatile_phases"][tb["volatile_phases"]["seed"] == s0]
    w0 = worst[(worst["seed"] == s0) & (worst["learner"] == SOGD_Z1)]
    t_worst = dict(zip(w0["n"].astype(int), w0["t_worst"].astype(float), strict=True))
    best_step = dict(zip(summary["n"].astype(int), summary["best step η*"].astype(float),
                         strict=True))
    iid = dnp[(dnp["stream"] == "iid ±1") & (dnp["eta"] == "ρ")]
    nem = dnp[dnp["stream"] == NEMESIS]
    th1 = tb["theorem1"][tb["theorem1"]["seed"] == s0]
    first = fired.sort_values("on_after").iloc[0] if len(fired) else None
    c_fired = np.sqrt(fired["n_i"].to_numpy() / 8.0)
    out = {
        "T3": float(T), "seeds": float(worst["seed"].nunique()), "n_min": float(ns[0]),
        "n_2": float(ns[1]), "n_max": float(ns[-1]), "n_long_min": float(long[0]),
        "n_short_max": float(short[-1]), "n_steps": float(steps.size),
        "thm1_slope_base": float(loglog_slope(th1["n"], th1["max_regret"])[0]),
        "best_step_short": float(row["best step η*"].iloc[0]),
        "best_step_long": float(row["best step η*"].iloc[-1]),
        "best_regret_nmin": float(by_n(wide[fixed].min(axis=1)).iloc[0]),
        "best_regret_n2": float(by_n(wide[fixed].min(axis=1)).iloc[1]),
        "sogd_ratio_nmin": float(med[SOGD_Z1].iloc[0]),
        "sogd_ratio_long_min": float(med[SOGD_Z1].iloc[ns.index(long[0])]),
        "b0_ratio_short": float(med[SLOW].iloc[0]),
        "b0_ratio_long_min": float(med[SLOW].iloc[ns.index(long[0])]),
        "b0_ratio_long": float(med[SLOW].iloc[-1]),
        "sogd_over_thm1_bound_nmin": float(by_n(wide[SOGD_Z1] / worst.drop_duplicates(
            ["seed", "n"]).set_index(["seed", "n"])["thm1_bound"]).iloc[0]),
        "single_step_eta": single_eta,
        "single_short_ratio": float(np.median(_best_single(ratios, short))),
        "untuned_nmin": float(untuned.iloc[0]), "untuned_n2": float(untuned.iloc[1]),
        "untuned_long_max": float(untuned.loc[long].max()),
        "untuned_beaten_from": float(min(n for n in ns if (untuned.loc[n:] < 1).all())),
        "tuned_short_min": float(to_tuned.loc[short].min()),
        "tuned_short_max": float(to_tuned.loc[short].max()),
        "tuned_long_min": float(1.0 / to_tuned.loc[long].max()),
        "tuned_long_max": float(1.0 / to_tuned.loc[long].min()),
        "tuned_step_factor_min": min(float(OGD.tuned_lr(1 - 1 / n, D, G)) / best_step[n]
                                     for n in long),
        "tuned_step_factor_max": max(float(OGD.tuned_lr(1 - 1 / n, D, G)) / best_step[n]
                                     for n in long),
        "z_n": float(z_n), "z_ratio_at_n": float(z_ratio.loc[z_n]),
        "z_factor_long": float(z_factor.loc[long].max()),
        "z100_ratio_at_n": float(med[SOGD_Z100].iloc[ns.index(z_n)]),
        "thm3_vacuous_factor": float(row["Thm 3 bound / (nGD)"].iloc[0]),
        "b0_thm3_long": float(by_n(wide[fixed[0]] / bound).loc[long].max()),
        "thm3_steps_pass": float(np.median(thm3_pass)),
        "thm3_fail_eta_min": float(np.median(fail_eta)),
        "sogd_ratio_short_max_n": float(med[SOGD_Z1].iloc[ns.index(short[-1])]),
        "tuned_at_short_max_n": float(to_tuned.iloc[ns.index(short[-1])]),
        "fast_thm3_long": float(by_n(wide[_step_name(D / (2 * G))] / bound).iloc[-1]),
        "paper_thm3_996": float(sogd_bound(0.996, 10_000, D, G) / (250 * G * D)),
        "paper_thm3_998": float(sogd_bound(0.998, 10_000, D, G) / (500 * G * D)),
        "iid_betting": float(iid["frac_betting"].median()),
        "iid_budget": float(dnp[dnp["stream"] == "iid ±1"]["budget_used"].max()),
        "nemesis_budget": float(nem["budget_used"].max()),
        "volatile_start_base": float(phase["start"].iloc[0]),
        "volatile_end_base": float(phase["end"].iloc[0]),
        "t_worst_long_base": t_worst[ns[-1]], "t_worst_long_min_base": t_worst[long[0]],
        "max_omega_calm_base": float(c0["max_omega_calm"].max()),
        "first_on_base": _round_to(float(first["on_after"]), 100) if first is not None else math.nan,
        "first_on_n_base": float(first["n_i"]) if first is not None else math.nan,
        "first_on_median": _round_to(float(comb.groupby("seed")["on_after"].min().median()), 100),
        "off_after_base": _round_to(float(fired["off_after"].max()), 10) if len(fired) else math.nan,
        "fired_first_base": float(fired["combiner"].min()) if len(fired) else math.nan,
        "fired_last_base": float(fired["combiner"].max()) if len(fired) else math.nan,
        "fired_n_max_base": float(fired["n_i"].max()) if len(fired) else math.nan,
        "fired_n_min_base": float(fired["n_i"].min()) if len(fired) else math.nan,
        "quiet_max_omega_base": float(quiet["max_omega"].max()) if len(quiet) else math.nan,
        # c_n Z T of the combiners that switch: with c_n = sqrt(n/8), Z = 1/T acts like Z = c_n/T
        "z_eff_min": float(c_fired.min()) if len(fired) else math.nan,
        "z_eff_max": float(c_fired.max()) if len(fired) else math.nan,
        # how many standard deviations sqrt(n/2) of a discounted +-1 walk the saturation level is,
        # for the longest-memory combiner that fired
        "xstar_sd": (float(fired["xstar"].iloc[0]) / math.sqrt(float(fired["n_i"].iloc[0]) / 2)
                     if len(fired) else math.nan),
    }
    return out
