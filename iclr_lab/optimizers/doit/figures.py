"""The DOIT chapter's figures, built from the tables of
:func:`~iclr_lab.optimizers.doit.experiments.reproduce` only, and the timeline of one run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from iclr_lab.optimizers.doit.claims import _acc, best_single
from iclr_lab.optimizers.doit.experiments import (
    BEATS_PP,
    DOIT_NAME,
    LITERAL,
    METHODS,
    WITHIN_PP,
)
from iclr_lab.optimizers.doit.method import OPTIMIZERS

if TYPE_CHECKING:
    import altair as alt

    from iclr_lab.core.report import Report

__all__ = ["charts", "timeline_chart"]

def _optimizer_scale() -> Any:
    from iclr_lab.core.charts import palette

    return palette(OPTIMIZERS)


#: labels of a log axis of ratios: 0.5, 1, 20, 1k, 10M (not d3's "500m" for a half)
_LOG_LABEL = "datum.value >= 1000 ? format(datum.value, '~s') : format(datum.value, ',.2~f')"


def _decades(values: pd.Series, mantissas: tuple[float, ...] = (1,)) -> list[float]:
    """Tick values for a log axis: ``mantissas`` times the powers of ten that lie in the range of
    ``values`` (its positive, finite part), so that the labels neither crowd nor collide."""
    v = values.to_numpy(dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not len(v):
        return [1.0]
    lo, hi = float(v.min()), float(v.max())
    ticks = [m * 10.0 ** e for e in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
             for m in mantissas]
    inside = [float(t) for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
    return inside or [lo, hi]


def timeline_chart(cycles: pd.DataFrame, losses: pd.DataFrame, *, title: str = "",
                   param: Any = None, width: int = 440) -> alt.VConcatChart:
    """Which optimizer ran when (a coloured strip, one block per cycle), above the probe loss.

    ``cycles`` needs ``start``, ``end``, ``choice`` (and ``phase``, ``score``); ``losses`` needs
    ``step`` and ``probe_loss``. ``param``, an Altair parameter over a ``grid_point`` column present
    in both tables, filters them (the Explore slider). ``width`` (in pixels) is at least 1.
    """
    import altair as alt

    from iclr_lab.core.validation import check_int

    check_int("width", width, 1)

    x = alt.X("start:Q", title=None, axis=alt.Axis(labels=False, ticks=False),
              scale=alt.Scale(domain=[0, float(cycles.end.max())], nice=False))
    strip = alt.Chart(cycles).mark_rect(stroke="white", strokeWidth=0.3).encode(
        x=x, x2="end:Q",
        color=alt.Color("choice:N", title="optimizer", scale=_optimizer_scale()),
        opacity=alt.condition(alt.datum.phase == "cold start", alt.value(0.45), alt.value(1.0)),
        tooltip=["cycle", "choice", "phase", alt.Tooltip("score:Q", format=".3f"), "start", "end"])
    line = alt.Chart(losses).mark_line(color="black", strokeWidth=1.2).encode(
        x=alt.X("step:Q", title="step", scale=alt.Scale(domain=[0, float(cycles.end.max())],
                                                        nice=False)),
        y=alt.Y("probe_loss:Q", title="probe loss (log)", scale=alt.Scale(type="log", nice=False)),
        tooltip=["step", alt.Tooltip("probe_loss:Q", format=".4f")])
    if param is not None:
        strip = strip.transform_filter(alt.datum.grid_point == param)
        line = line.transform_filter(alt.datum.grid_point == param)
    top = strip.properties(width=width, height=46,
                           title=alt.TitleParams(title or "Optimizer per cycle (faded: cold start)",
                                                 fontSize=13))
    return alt.vconcat(top, line.properties(width=width, height=170), spacing=4)


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """The chapter's figures, built from ``report.tables`` only."""
    import altair as alt

    from iclr_lab.core.charts import curves, palette, reference_line, thin

    t = report.tables
    out: dict[str, alt.TopLevelMixin] = {}
    final = t["final"]
    seeds = sorted(final.seed.unique())
    best = best_single(final)
    highlight = [DOIT_NAME, LITERAL]

    # 1. the main claim: accuracy minus the best single optimizer's, per seed, every method
    gaps = []
    for m in METHODS:
        for s, g in zip(seeds, _acc(final, m, seeds) - _acc(final, best, seeds), strict=True):
            gaps.append({"method": m, "seed": int(s), "gap": float(g)})
    gdf = pd.DataFrame(gaps)
    order = list(METHODS)
    scale = palette(order, highlight)
    y = alt.Y("method:N", sort=order, title=None)
    dots = alt.Chart(gdf).mark_point(filled=True, size=40, opacity=0.55).encode(
        x=alt.X("gap:Q", title=f"final test accuracy − {best}'s (points)"), y=y,
        color=alt.Color("method:N", scale=scale, legend=None), tooltip=["method", "seed", "gap"])
    med = alt.Chart(gdf).mark_tick(thickness=3, size=16).encode(
        x="median(gap):Q", y=y, color=alt.Color("method:N", scale=scale, legend=None))
    # the three bounds, labelled above the plot area (not over the dots), at two heights so that
    # the labels do not collide
    rules = pd.DataFrame({"gap": [-WITHIN_PP, 0.0, BEATS_PP],
                          "label": [f"−{WITHIN_PP:g}: within", f"{best}", f"+{BEATS_PP:g}: paper"],
                          "dy": [-6, -20, -6], "color": ["#8c8c8c", "black", "#d62728"]})
    rule = alt.Chart(rules).mark_rule(strokeDash=[6, 4]).encode(
        x="gap:Q", color=alt.Color("color:N", scale=None))
    enc = {"x": "gap:Q", "y": alt.Y("dy:Q", scale=None), "text": "label:N",
           "color": alt.Color("color:N", scale=None)}
    left_text = alt.Chart(rules[rules.gap < 0]).mark_text(align="right", dx=-3, fontSize=11).encode(**enc)
    right_text = alt.Chart(rules[rules.gap >= 0]).mark_text(align="left", dx=3, fontSize=11).encode(**enc)
    out["accuracy_gap"] = (dots + med + rule + left_text + right_text).properties(
        width=420, height=260,
        title=alt.TitleParams("Each seed (dots) and the median (tick)", offset=28))

    # 2. DOIT's choices, every seed, both acquisitions
    cyc = t["cycles"]
    sub = cyc[cyc.method.isin(highlight)].copy()
    tau = int((sub.groupby(["method", "seed"]).start_step.diff().dropna()).min()) if len(sub) > 1 else 1
    sub["end"] = sub.start_step + tau
    sub["run"] = sub.method.map({DOIT_NAME: "intended", LITERAL: "literal"}) + ", seed " + \
        sub.seed.astype(str)
    out["choices"] = alt.Chart(sub).mark_rect(stroke="white", strokeWidth=0.3).encode(
        x=alt.X("start_step:Q", title="step"), x2="end:Q",
        y=alt.Y("run:N", title=None, sort=sorted(sub.run.unique())),
        color=alt.Color("choice:N", title="optimizer", scale=_optimizer_scale()),
        opacity=alt.condition(alt.datum.phase == "cold start", alt.value(0.45), alt.value(1.0)),
        tooltip=["run", "cycle", "choice", "phase", alt.Tooltip("score:Q", format=".3f")],
    ).properties(width=440, height=16 * sub.run.nunique(),
                 title="DOIT's choice per cycle (faded: cold start)")

    # 3. choosing: cumulative regret in score against the per-cycle best
    dec = t["decisions"]
    if len(dec):
        long = dec.melt(id_vars=["seed", "cycle"],
                        value_vars=["regret_doit", "regret_state_free", "regret_random"],
                        var_name="rule", value_name="regret")
        long["rule"] = long.rule.map({"regret_doit": DOIT_NAME,
                                      "regret_state_free": "state-free (best mean so far)",
                                      "regret_random": "uniform random (expected)"})
        long = long.sort_values(["rule", "seed", "cycle"])
        long["cumulative"] = long.groupby(["rule", "seed"]).regret.cumsum()
        out["regret"] = curves(long, x="cycle", y="cumulative", color="rule", highlight=DOIT_NAME,
                               x_title="cycle", y_title="cumulative regret in score s",
                               color_title="rule", title="Regret against the per-cycle best "
                               "candidate (band: seeds)").resolve_legend(fill="independent")

    # 4. the surrogates: predicted mean against realised score, every branched cycle
    br = t["branches"]
    main = cyc[cyc.method == DOIT_NAME]
    if len(br):
        names = [c[3:-1] for c in main.columns if c.startswith("mu[")]
        pred = main.melt(id_vars=["seed", "cycle"], value_vars=[f"mu[{n}]" for n in names],
                         var_name="candidate", value_name="predicted")
        pred["candidate"] = pred.candidate.str[3:-1]
        cal = br.merge(pred, on=["seed", "cycle", "candidate"]).dropna()
        cal = cal[cal.predicted.abs() > 0]  # drop the prior's exact zero (no data yet)
        out["calibration"] = alt.Chart(cal).mark_point(size=18, opacity=0.5, filled=True).encode(
            x=alt.X("predicted:Q", title="surrogate mean μ_j at the cycle's start"),
            y=alt.Y("branch_score:Q", title="realised score s_j of the branch"),
            color=alt.Color("candidate:N", title="optimizer", scale=_optimizer_scale()),
            tooltip=["seed", "cycle", "candidate", alt.Tooltip("predicted:Q", format=".3f"),
                     alt.Tooltip("branch_score:Q", format=".3f")],
        )
        lo, hi = float(min(cal.predicted.min(), cal.branch_score.min())), float(
            max(cal.predicted.max(), cal.branch_score.max()))
        diag = alt.Chart(pd.DataFrame({"predicted": [lo, hi], "branch_score": [lo, hi]})).mark_line(
            strokeDash=[6, 4], color="black").encode(x="predicted:Q", y="branch_score:Q")
        out["calibration"] = (out["calibration"] + diag).properties(
            width=300, height=260, title="Predicted against realised score (dashed: equal)")

    # 5. a switch half-way through: every candidate restarted with fresh state, at every rate
    rs = t["restart"].assign(first=lambda d: d.l1 / d.l0, end=lambda d: d.l_end / d.l0)
    rs["marker"] = np.where(rs.tuned, "tuned rate", "other rate")
    col = alt.Color("optimizer:N", title="optimizer", scale=_optimizer_scale())
    # Adam's and Adagrad's first fresh steps are the same sign step, and SGDM's first step is SGD's:
    # their curves coincide, so the second of each pair (drawn on top) is dashed and the one below
    # shows through the gaps
    rs["line"] = np.where(rs.optimizer.isin(["SGDM", "Adam"]), "on top", "below")
    dash = alt.StrokeDash("line:N", legend=None, scale=alt.Scale(domain=["below", "on top"],
                                                                 range=[[1, 0], [5, 4]]))
    width_ = alt.StrokeWidth("line:N", legend=None, scale=alt.Scale(domain=["below", "on top"],
                                                                    range=[3.2, 1.4]))
    size_ = alt.Size("marker:N", title=None, scale=alt.Scale(domain=["tuned rate", "other rate"],
                                                              range=[110, 25]))
    tips = ["optimizer", "lr", "tuned", alt.Tooltip("first:Q", format=".3g"),
            alt.Tooltip("end:Q", format=".3g"), alt.Tooltip("score:Q", format=".3f")]
    shock = alt.Chart(rs).mark_line(point=True).encode(
        x=alt.X("lr:Q", scale=alt.Scale(type="log", nice=False), title="learning rate",
                axis=alt.Axis(values=_decades(rs.lr), format="~g")),
        y=alt.Y("first:Q", scale=alt.Scale(type="log", nice=False),
                title="probe loss after 1 fresh step ÷ before",
                axis=alt.Axis(values=_decades(rs["first"]), labelExpr=_LOG_LABEL)),
        color=col, strokeDash=dash, strokeWidth=width_, detail="optimizer:N", tooltip=tips)
    tuned = alt.Chart(rs[rs.tuned]).mark_point(filled=True, size=110).encode(
        x="lr:Q", y="first:Q", color=col, tooltip=tips)
    left = (shock + tuned + reference_line(1.0, label="no change")).properties(
        width=250, height=230,
        title=alt.TitleParams("The first step after a switch",
                              subtitle="dashed: SGDM and Adam, where they lie on SGD and Adagrad"))
    right = (alt.Chart(rs).mark_point(filled=True, opacity=0.8).encode(
        x=alt.X("end:Q", scale=alt.Scale(type="log", nice=False),
                title="probe loss after the cycle ÷ before",
                axis=alt.Axis(values=_decades(rs.end, (1, 2, 5)), labelExpr=_LOG_LABEL)),
        y=alt.Y("score:Q", title="score s of the cycle"), color=col, size=size_, tooltip=tips)
        # unlabelled rules (a label would sit on the axis or on the markers): the subtitle names them
        + reference_line(0.0) + reference_line(1.0, axis="x")
    ).properties(width=250, height=230,
                 title=alt.TitleParams("The score against the loss change",
                                       subtitle="dashed: s = 0 and no change of the loss"))
    out["restart"] = alt.hconcat(left, right).resolve_scale(color="shared")

    # 6. the Explore slider over tau
    tc, tl = t["tau_cycles"], thin(t["tau_loss"], "step", points=200)
    taus = sorted(tc.tau.unique())
    index = {v: i for i, v in enumerate(taus)}
    tc, tl = tc.assign(grid_point=tc.tau.map(index)), tl.assign(grid_point=tl.tau.map(index))
    first = taus.index(10) if 10 in taus else len(taus) // 2
    param = alt.param(name="tau_param", value=first, bind=alt.binding_range(
        min=0, max=len(taus) - 1, step=1, name="τ (grid point) "))
    label = alt.Chart(pd.DataFrame({"grid_point": range(len(taus)),
                                    "label": [f"τ = {v} steps" for v in taus]})).transform_filter(
        alt.datum.grid_point == param).mark_text(align="left", baseline="bottom", fontSize=13,
                                                 fontWeight="bold").encode(
        x=alt.value(6), y=alt.value(164), text="label:N")
    chart = timeline_chart(tc, tl, param=param, title="Optimizer per cycle at the chosen τ")
    chart.vconcat[1] = chart.vconcat[1] + label
    out["tau_slider"] = chart.add_params(param)
    return out

