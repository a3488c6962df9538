"""The DOIT chapter's claims and the numbers its prose quotes, from the tables of
:func:`~iclr_lab.optimizers.doit.experiments.reproduce`.

Every ``paper`` claim names its control, measured by the same function on the same seeds at the same
budget: random switching (the same tuned candidates, the same cycles and state resets, without the
score and the surrogates) or round-robin switching. Comparisons of two methods are paired per seed
and judged with the 95 % t interval of the mean difference (:meth:`Claim.paired
<iclr_lab.core.report.Claim.paired>`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from iclr_lab.core.report import Claim
from iclr_lab.optimizers.doit.experiments import (
    AGREEMENT,
    BASELINES,
    BEATS_PP,
    DOIT_NAME,
    LITERAL,
    METHODS,
    RANDOM,
    ROUND_ROBIN,
    SPEARMAN,
    SWATS,
    TARGET_FACTOR,
    WITHIN_PP,
    digits_split,
)
from iclr_lab.optimizers.doit.method import OPTIMIZERS

if TYPE_CHECKING:
    from iclr_lab.core.report import Report

__all__ = ["best_single", "claims_and_acceptance", "numbers", "steps_to_target"]

#: the setting of the paper's accuracy claims and the one the chapter runs
REGIME = ("paper: ViT, ResNet, RoBERTa (LoRA) and other large models on CIFAR-10, STL10, ImageNet, "
          "MRPC, QQP, several fine-tuned from pre-trained weights, held-out accuracy, baselines' "
          "tuning not described; here: an MLP 64-64-64-10 trained from scratch on 8x8 digits "
          "(omega_t = 0), every optimizer tuned on one common grid on tuning seeds of its own, "
          "held-out test accuracy")
#: the setting of the convergence claim
REGIME_STEPS = ("paper: '2 to 10 % faster' in time and iterations, metric not defined in the sources "
                "read; here: the spec's metric, steps until the validation loss first falls below "
                f"{TARGET_FACTOR:g}x the best single optimizer's final validation loss at the same "
                "seed, read at every evaluation (a run that never gets there counts one evaluation "
                "past the budget)")
ABLATION = ("the test is itself the comparison with DOIT's ablation: random switching runs the same "
            "tuned candidates with the same cycles and state resets, without the score and the "
            "surrogates")

#: the expectations of the three claims added with the claims protocol, set once, before their first
#: book-scale run, from the previous experiment (rates tuned on judging seed 0 by validation
#: accuracy): on this session's machine at seeds 0-4 DOIT was 23.6 points below the median single
#: optimizer (median), -0.28 points from random switching with an interval from -21.7 to 13.3, and
#: never reached the target loss (the median single optimizer took 120-160 steps). The issue's
#: reviewer, at one seed outside 0-4, measured +0.56, +1.94 and 120 against 220 steps.
EXPECT_RANDOM = False
EXPECT_MEDIAN = False
EXPECT_STEPS = False


def _acc(final: pd.DataFrame, method: str, seeds: Sequence[int]) -> np.ndarray:
    f = final[final.method == method].set_index("seed").test_acc
    return 100.0 * f.reindex(list(seeds)).to_numpy()


def best_single(final: pd.DataFrame) -> str:
    """The single optimizer with the highest median final test accuracy over the seeds: the
    strongest baseline, chosen in hindsight on the test set (which favours it)."""
    singles = final[final.method.isin(OPTIMIZERS)]
    med = singles.groupby("method").test_acc.median()
    return str(med.idxmax())


def _text(values: Sequence[float], fmt: str = ".3g") -> str:
    v = np.asarray(values, dtype=float)
    med = float(np.nanmedian(v)) if np.isfinite(v).any() else math.nan
    return f"{med:{fmt}} [{np.nanmin(v):{fmt}}, {np.nanmax(v):{fmt}}]" if len(v) > 1 else f"{med:{fmt}}"


def steps_to_target(log: pd.DataFrame, final: pd.DataFrame, method: str,
                    seeds: Sequence[int]) -> np.ndarray:
    """Per seed, the first evaluated step at which ``method``'s validation loss is at most
    ``TARGET_FACTOR`` times the lowest final validation
    loss of the single optimizers at that seed; a run that never gets there counts one evaluation
    interval past the budget (a run that diverged, too)."""
    steps = np.sort(log.step.unique())
    every = float(np.diff(steps).min()) if len(steps) > 1 else float(steps.max())
    never = float(steps.max()) + every  # the budget, plus one evaluation
    out = []
    for s in seeds:
        singles = final[(final.seed == s) & final.method.isin(OPTIMIZERS)].val_loss
        target = TARGET_FACTOR * float(singles[np.isfinite(singles)].min())
        run = log[(log.method == method) & (log.seed == s)]
        hit = run[run.val_loss <= target].step
        out.append(float(hit.min()) if len(hit) else never)
    return np.asarray(out)


def _median_single(values: dict[str, np.ndarray]) -> np.ndarray:
    """Per seed, the median over the single optimizers."""
    return np.median(np.stack([values[m] for m in OPTIMIZERS]), axis=0)


def claims_and_acceptance(tables: dict[str, pd.DataFrame],
                          seeds: Sequence[int]) -> tuple[list[Claim], pd.DataFrame]:
    """The chapter's claims, and the acceptance table that runs each test on the rivals too."""
    final, dec = tables["final"], tables["decisions"]
    best = best_single(final)
    ref = _acc(final, best, seeds)
    gap = {m: _acc(final, m, seeds) - ref for m in METHODS}
    # the strongest other contender for each test: the best switching baseline / the runner-up single
    strongest = max(BASELINES, key=lambda m: float(np.median(gap[m])))
    runner_up = max((m for m in OPTIMIZERS if m != best), key=lambda m: float(np.median(gap[m])))
    acc = {m: _acc(final, m, seeds) for m in METHODS}
    median_single = _median_single(acc)
    steps = {m: steps_to_target(tables["log"], final, m, seeds) for m in METHODS}

    def per_seed(col: str, fn: Callable[[pd.Series], float]) -> list[float]:
        return [fn(dec[dec.seed == s][col]) if (dec.seed == s).any() else math.nan for s in seeds]

    hit = per_seed("doit_hit", lambda c: float(c.mean()))
    hit_free = per_seed("state_free_hit", lambda c: float(c.mean()))
    margin = [a - b for a, b in zip(hit, hit_free, strict=True)]
    rho = per_seed("rho_gp", lambda c: float(np.nanmedian(c)) if c.notna().any() else math.nan)
    rho_free = per_seed("rho_state_free",
                        lambda c: float(np.nanmedian(c)) if c.notna().any() else math.nan)
    replay = float(dec.replay_error.max()) if len(dec) else math.nan
    claims = [
        Claim.over_seeds(
            "beats_best_single",
            f"DOIT's final test accuracy is at least {BEATS_PP:g} percentage point above the best "
            f"single optimizer's ({best} at its tuned rate), seed by seed (difference in points). "
            f"The strongest switching baseline, {strongest}, scores {_text(gap[strongest])}; DOIT "
            f"with the literal acquisition {_text(gap[LITERAL])}.",
            gap[DOIT_NAME].tolist(), BEATS_PP, ">=",
            "1 % to 3 % higher accuracy than the best baseline (e.g. ViT on CIFAR-10: 98.04 against "
            "97.58 for SGDM)", expected=False, kind="paper", source="paper",
            control=f"{RANDOM} (the same candidates, no score)", control_values=gap[RANDOM].tolist(),
            regime=REGIME),
        Claim.over_seeds(
            "within_best_single",
            f"DOIT's final test accuracy is within {WITHIN_PP:g} point of the best single "
            f"optimizer's ({best}) (difference in points, >= -{WITHIN_PP:g}). The runner-up single "
            f"optimizer, {runner_up}, scores {_text(gap[runner_up])}; {RANDOM} "
            f"{_text(gap[RANDOM])}.",
            gap[DOIT_NAME].tolist(), -WITHIN_PP, ">=",
            "DOIT matches or beats every single optimizer", expected=False, kind="paper",
            # its expectation was changed after seeing results (the chapter says how): pilot
            source="pilot", control=f"{ROUND_ROBIN} (the same candidates, no score)",
            control_values=gap[ROUND_ROBIN].tolist(), regime=REGIME),
        Claim.paired(
            "beats_random_switching",
            "DOIT's final test accuracy is at least random switching's: the paired per-seed "
            "difference (points) is >= 0, the lower end of its 95% t interval included (the spec "
            "asks for the mean; the interval makes it stricter).",
            acc[DOIT_NAME].tolist(), acc[RANDOM].tolist(), 0.0, ">=",
            "Ablation: DOIT beats random switching", expected=EXPECT_RANDOM, kind="paper",
            source="prior", no_control=ABLATION, regime=REGIME),
        Claim.paired(
            "beats_median_single",
            "DOIT's final test accuracy is at least the median single optimizer's (per seed, the "
            "median of the five tuned single optimizers): the paired per-seed difference (points) "
            "is >= 0, the lower end of its 95% t interval included. Random switching is measured "
            "against the same baseline.",
            acc[DOIT_NAME].tolist(), median_single.tolist(), 0.0, ">=",
            "DOIT is the best method in every table", expected=EXPECT_MEDIAN, kind="paper",
            source="prior", control=f"{RANDOM} (the same candidates, no score)",
            control_values=acc[RANDOM].tolist(), regime=REGIME),
        Claim.paired(
            "steps_to_target",
            f"DOIT reaches the target validation loss ({TARGET_FACTOR:g}x the best single "
            "optimizer's final validation loss at the same seed) in no more steps than the median "
            "single optimizer: the paired per-seed difference in steps is <= 0, the upper end of "
            "its 95% t interval included. Random switching is measured against the same baseline.",
            steps[DOIT_NAME].tolist(), _median_single(steps).tolist(), 0.0, "<=",
            "2 to 10 % faster convergence (time and iterations)", expected=EXPECT_STEPS,
            kind="paper", source="prior", control=f"{RANDOM} (the same candidates, no score)",
            control_values=steps[RANDOM].tolist(), regime=REGIME_STEPS),
        Claim.over_seeds(
            "oracle_agreement",
            f"After the cold start, DOIT picks the per-cycle best candidate (all candidates branched "
            f"from the same state on the same minibatches) in at least {AGREEMENT:.0%} of the cycles. "
            f"The state-free rule (best mean score so far) scores {_text(hit_free, '.2f')}; a uniform "
            "random pick 0.2.",
            hit, AGREEMENT, ">=",
            "Not in the paper: DOIT's choice is meant to follow the state-dependent best optimizer",
            expected=False, kind="derivation", source="prior"),
        Claim.over_seeds(
            "oracle_vs_state_free",
            "DOIT picks the per-cycle best candidate more often than the state-free rule "
            "(difference of the two hit rates > 0): the state in its surrogates' input helps.",
            margin, 0.0, ">",
            "Not in the paper: the surrogates take the parameter state as input",
            expected=False, kind="derivation", source="prior"),
        Claim.over_seeds(
            "surrogate_spearman",
            f"After the cold start, the median over cycles of Spearman's rho between the surrogates' "
            f"predicted means and the realised scores of the candidates is at least {SPEARMAN:g}. "
            f"The state-free means so far score {_text(rho_free, '.2f')}.",
            rho, SPEARMAN, ">=",
            "Not in the paper: the surrogates predict each optimizer's short-term gain",
            expected=False, kind="derivation", source="prior"),
        Claim("branch_replays_run",
              "The branch of DOIT's own choice reproduces DOIT's cycle score (max |difference| over "
              "all branched cycles and seeds), so the branches are true counterfactuals",
              replay, 1e-9, "<=", "Not in the paper: a check of this chapter's harness",
              kind="sanity", source="prior"),
    ]
    acc_rows = [{"test": f"accuracy − {best}'s (points)", "needed": f"≥ {BEATS_PP:g} (paper), "
                 f"≥ −{WITHIN_PP:g} (within)", "method": m, "value": _text(gap[m])}
                for m in METHODS if m != best]
    acc_rows += [{"test": "accuracy − median single (points)", "needed": "≥ 0, interval included",
                  "method": m, "value": _text(acc[m] - median_single)} for m in METHODS]
    acc_rows += [{"test": "steps to target − median single's", "needed": "≤ 0, interval included",
                  "method": m, "value": _text(steps[m] - _median_single(steps))} for m in METHODS]
    acc_rows += [
        {"test": "picks the per-cycle best", "needed": f"≥ {AGREEMENT:g}", "method": DOIT_NAME,
         "value": _text(hit, ".2f")},
        {"test": "picks the per-cycle best", "needed": f"≥ {AGREEMENT:g}",
         "method": "state-free rule", "value": _text(hit_free, ".2f")},
        {"test": "Spearman ρ, prediction vs realised", "needed": f"≥ {SPEARMAN:g}",
         "method": DOIT_NAME + " surrogates", "value": _text(rho, ".2f")},
        {"test": "Spearman ρ, prediction vs realised", "needed": f"≥ {SPEARMAN:g}",
         "method": "state-free means", "value": _text(rho_free, ".2f")},
    ]
    return claims, pd.DataFrame(acc_rows)


# ---------------------------------------------------------------------------------------------
# numbers the prose quotes
# ---------------------------------------------------------------------------------------------


def numbers(report: Report) -> dict[str, float]:
    """Every number the chapter's prose quotes that is not a claim's value, from ``report.tables``
    (medians over seeds). The chapter glues them, so the text cannot drift from the tables."""
    t = report.tables
    final, dec, cyc = t["final"], t["decisions"], t["cycles"]
    seeds = sorted(final.seed.unique())
    best = best_single(final)
    acc = {m: float(np.median(_acc(final, m, seeds))) for m in METHODS}
    main = cyc[cyc.method == DOIT_NAME]
    lit = cyc[cyc.method == LITERAL]
    switches = main.groupby("seed").switched.sum() - 1  # the first cycle is not a switch
    acq = main[main.phase == "acquisition"]
    share = acq.groupby("seed").choice.value_counts(normalize=True).unstack().fillna(0.0)
    values: dict[str, float] = {
        **{f"acc_{_key(m)}": v for m, v in acc.items()},
        "acc_best": acc[best],
        "switches_doit": float(switches.median()),
        "switches_literal": float((lit.groupby("seed").switched.sum() - 1).median()),
        "top_choice_share": float(share.median().max()) if len(share) else math.nan,
        "hit_random": 0.2,
        "regret_doit": float(dec.groupby("seed").regret_doit.sum().median()),
        "regret_state_free": float(dec.groupby("seed").regret_state_free.sum().median()),
        "regret_random": float(dec.groupby("seed").regret_random.sum().median()),
        "branched_cycles": float(dec.groupby("seed").size().median()),
        # the literal form's median per-seed difference from the best single optimizer (points)
        "gap_literal": float(np.median(_acc(final, LITERAL, seeds) - _acc(final, best, seeds))),
        # seeds on which DOIT is within WITHIN_PP of the best single optimizer on their own
        "within_seeds_pass": float(np.sum(_acc(final, DOIT_NAME, seeds) - _acc(final, best, seeds)
                                          >= -WITHIN_PP)),
        # one test image, in points of accuracy
        "test_step": 100.0 / float(len(digits_split().y_test)),
        # the state-free means' Spearman rho, aggregated as surrogate_spearman aggregates DOIT's
        "spearman_state_free": float(np.nanmedian([
            np.nanmedian(g.rho_state_free) if g.rho_state_free.notna().any() else math.nan
            for _, g in dec.groupby("seed")])) if len(dec) else math.nan,
        "cycles_total": float(main.groupby("seed").size().median()),
    }
    names = [c[3:-1] for c in main.columns if c.startswith("mu[")]

    def exploit_share(d: pd.DataFrame) -> float:
        """Share of acquisition cycles whose choice is also the largest surrogate mean."""
        a = d[d.phase == "acquisition"]
        top = a[[f"mu[{n}]" for n in names]].to_numpy().argmax(axis=1)
        return float(np.mean([names[k] == c for k, c in zip(top, a.choice, strict=True)]))

    prev = main.assign(prev=main.groupby("seed").choice.shift())[["seed", "cycle", "prev"]]
    dprev = dec.merge(prev, on=["seed", "cycle"])
    rs = t["restart"]
    up = rs[rs.l_end > rs.l0]
    grid = t["tuning"][~t["tuning"].extension].lr
    sizes = {
        "steps": float(final.step.max()),
        "cycle": float(main.groupby("seed").start_step.diff().dropna().min()),
        "n_ini": float((main.phase == "cold start").groupby(main.seed).sum().median()),
        "seeds": float(len(seeds)),
        "grid_min": float(grid.min()),
        "grid_max": float(grid.max()),
        "grid_points": float(grid.nunique()),
        "val_size": float(len(digits_split().y_val)),
    }
    values.update(sizes)
    values.update({
        "exploit_share_doit": exploit_share(main),
        "exploit_share_literal": exploit_share(lit),
        "best_was_previous": float((dprev.best == dprev.prev).mean()),
        "restart_count": float(len(rs)),
        "restart_up": float(len(up)),
        "restart_up_positive": float((up.score > 0).sum()),
        "restart_worst_ratio": float((rs.l_end / rs.l0).max()),
        "restart_worst_score": float(rs.score.to_numpy()[int(np.argmax((rs.l_end / rs.l0).to_numpy()))]),
        "restart_tuned_best_score": float(rs[rs.tuned].score.max()),
        "restart_at_step": float(rs.at_step.iloc[0]),
        "restart_l0": float(rs.l0.iloc[0]),
    })
    return {k: float(v) for k, v in values.items()}


def _key(method: str) -> str:
    return {DOIT_NAME: "doit", LITERAL: "literal", RANDOM: "random", ROUND_ROBIN: "round_robin",
            SWATS: "swats"}.get(method, method.lower())


