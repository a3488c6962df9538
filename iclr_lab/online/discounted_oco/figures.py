"""The discounted-OCO chapter's charts (:func:`charts`, the report's chart builder), the DNP trace
chart and the explorer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr_lab.core.validation import check_int, check_range, check_seed
from iclr_lab.online.discounted_oco.experiments import (
    FAST,
    ORACLE,
    SINGLE,
    SLOW,
    SOGD_CN1,
    SOGD_Z1,
    SOGD_Z100,
    TUNED,
    D,
    G,
    _horizon,
    _ratios,
    _step_name,
    fixed_step_grid,
)
from iclr_lab.online.discounted_oco.learners import DEFAULT_CN, OGD, dnp_saturation, dnp_trace

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

    from iclr_lab.core.report import Report

__all__ = ["charts", "dnp_trace_chart", "explorer"]


# ----------------------------------------------------------------------------------------------
# Charts and the explorer
# ----------------------------------------------------------------------------------------------

_N_TITLE = "memory n = 1/(1−λ)"


def _learner_colors() -> dict[str, str]:
    """One colour per learner for every chart of the chapter: SOGD in the method colours, the
    baselines in muted ones."""
    from iclr_lab.core.charts import BASELINE_COLORS, METHOD_COLORS

    return {SOGD_Z1: METHOD_COLORS[0], SOGD_Z100: METHOD_COLORS[1], SOGD_CN1: METHOD_COLORS[2],
            ORACLE: BASELINE_COLORS[0], SINGLE: BASELINE_COLORS[1], TUNED: BASELINE_COLORS[2],
            FAST: BASELINE_COLORS[3], SLOW: BASELINE_COLORS[4]}


def _recolor(chart: alt.TopLevelMixin, *, y_scale: dict[str, Any] | None = None,
             y_ticks: Sequence[float] | None = None) -> alt.TopLevelMixin:
    """Give the ``learner`` colour (and band fill) of ``chart`` the chapter's fixed colours, so a
    learner has the same colour in every chart whatever other learners the chart shows; with
    ``y_scale``, also replace every y scale (the lens uses a per-memory symlog axis), with ticks
    at ``y_ticks``."""
    import altair as alt

    colors = _learner_colors()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("field") == "learner" and "scale" in node:
                names = [n for n in colors if n in node["scale"].get("domain", [])]
                node["scale"] = {"domain": names, "range": [colors[n] for n in names]}
            if y_scale is not None and isinstance(node.get("y"), dict) and "scale" in node["y"]:
                node["y"]["scale"] = dict(y_scale)
                if y_ticks is not None and "title" in node["y"]:
                    node["y"]["axis"] = {"values": list(y_ticks), "format": "~g"}
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    spec = chart.to_dict()
    walk(spec)
    return alt.LayerChart.from_dict(spec, validate=False)


def _worst_regret_chart(tb: dict[str, pd.DataFrame], T: int) -> alt.LayerChart:
    """The main comparison: median over seeds of each learner's worst regret (line) and its range
    (band), on log-log axes, with the bounds of Theorems 1 and 3."""
    import altair as alt

    data = _chart_learners(tb["worst_regret"], T)
    agg = data.groupby(["learner", "n"], sort=False)["max_regret"].agg(
        median="median", lo="min", hi="max").reset_index()
    colors = _learner_colors()
    order = list(dict.fromkeys(agg["learner"]))
    color = alt.Color("learner:N", title="learner", sort=order,
                      scale=alt.Scale(domain=order, range=[colors[n] for n in order]),
                      legend=alt.Legend(symbolOpacity=1, labelLimit=260))
    x = alt.X("n:Q", scale=alt.Scale(type="log", nice=False), title=_N_TITLE)
    ylog = alt.Scale(type="log", nice=False)
    methods = [SOGD_Z1, SOGD_Z100]
    band = alt.Chart(agg).mark_area(opacity=0.12).encode(
        x=x, y=alt.Y("lo:Q", scale=ylog), y2="hi:Q",
        fill=alt.Fill("learner:N", scale=alt.Scale(domain=order,
                                                   range=[colors[n] for n in order]), legend=None))
    line = alt.Chart(agg).mark_line(point=alt.OverlayMarkDef(size=18)).encode(
        x=x, y=alt.Y("median:Q", scale=ylog, title="worst discounted regret, max over t"),
        color=color,
        strokeWidth=alt.condition(alt.FieldOneOfPredicate(field="learner", oneOf=methods),
                                  alt.value(3.0), alt.value(1.6)),
        tooltip=["learner", "n", alt.Tooltip("median:Q", format=".4g"),
                 alt.Tooltip("lo:Q", format=".4g"), alt.Tooltip("hi:Q", format=".4g")])
    bounds = tb["worst_regret"].drop_duplicates("n")[["n", "thm1_bound", "thm3_bound"]].melt(
        id_vars="n", var_name="bound", value_name="value")
    bounds["bound"] = bounds["bound"].map({"thm1_bound": "Theorem 1 bound (λ known)",
                                           "thm3_bound": "Theorem 3 bound (SOGD)"})
    bound_lines = alt.Chart(bounds).mark_line(strokeDash=[6, 4], color="black").encode(
        x=x, y=alt.Y("value:Q", scale=ylog), detail="bound:N",
        tooltip=["bound", "n", alt.Tooltip("value:Q", format=".4g")])
    labels = alt.Chart(bounds[bounds["n"] == bounds["n"].max()]).mark_text(
        align="right", dy=-7, fontSize=10).encode(x="n:Q", y="value:Q", text="bound:N")
    return alt.layer(band, line, bound_lines, labels).resolve_legend(
        fill="independent").properties(
        width=440, height=300,
        title="One run of SOGD against OGD at every memory (median over seeds; band: range)")


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """Named Altair charts built from ``report.tables``."""
    import altair as alt

    from iclr_lab.core.charts import loglog, palette, sweep

    tb = report.tables
    T = _horizon(report)
    out: dict[str, alt.TopLevelMixin] = {}
    colors = _learner_colors()

    th1 = tb["theorem1"]
    th1 = th1[th1["seed"] == report.seed].assign(method=TUNED)
    thm1 = loglog(th1, x="n", y="max_regret", color="method", bound="bound", x_title=_N_TITLE,
                  y_title="worst discounted regret, max over t",
                  bound_title="Theorem 1 bound √2·DG·√n",
                  title="Theorem 1: tuned OGD stays under √2·DG·√n (dashed; first seed)")
    spec = thm1.to_dict()  # the Theorem 1 step has the same colour as in the main chart
    for layer in spec["layer"]:
        scale = layer.get("encoding", {}).get("color", {}).get("scale")
        if scale:
            scale["range"] = [colors[TUNED]] * len(scale["domain"])
            layer["encoding"]["color"]["legend"] = {"labelLimit": 360}
    out["theorem1"] = alt.LayerChart.from_dict(spec, validate=False)

    d = tb["dnp"].groupby(["seed", "stream", "n"], as_index=False, sort=False).agg(
        budget_used=("budget_used", "max"), shortfall=("shortfall", "first"),
        shortfall_bound=("shortfall_bound", "first"), frac_betting=("frac_betting", "first"))
    d = d.assign(shortfall_share=d["shortfall"] / d["shortfall_bound"],
                 case=d["stream"] + ", n = " + d["n"].astype(str))
    d = d.groupby("case", as_index=False, sort=False).agg(
        budget_used=("budget_used", "max"), shortfall_share=("shortfall_share", "max"),
        frac_betting=("frac_betting", "median"))
    cases = list(d["case"])  # the order of _dnp_streams: iid, biased, switching, adversarial
    long = d.melt(id_vars=["case", "frac_betting"], value_vars=["budget_used", "shortfall_share"],
                  var_name="measure", value_name="share")
    long["measure"] = long["measure"].map({
        "budget_used": "loss used / loss budget Z/(2(1−η))",
        "shortfall_share": "shortfall / (x* + 1)"})
    bars = alt.Chart(long).mark_bar().encode(
        y=alt.Y("case:N", title=None, sort=cases, axis=alt.Axis(labelLimit=320)),
        x=alt.X("share:Q", title="share of the bound (worst seed)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("measure:N", title=None, scale=palette(long["measure"].unique()),
                        legend=alt.Legend(orient="bottom")),
        yOffset="measure:N",
        tooltip=["case", "measure", alt.Tooltip("share:Q", format=".3f"),
                 alt.Tooltip("frac_betting:Q", format=".2f", title="share of rounds betting")])
    out["dnp"] = bars.properties(width=420, height=260,
                                 title="Theorem 2: the DNP within both halves of its guarantee")

    out["worst_regret"] = _worst_regret_chart(tb, T)

    rat = _ratios(tb["worst_regret"]).groupby(level="n").median()
    steps = fixed_step_grid(T)
    rows = [_step_name(e) for e in steps] + [SOGD_Z1, SOGD_Z100, SOGD_CN1]
    shown = {rows[0]: f"{rows[0]} (B0)", **{r: r for r in rows[1:]}}
    heat = rat[rows].reset_index().melt(id_vars="n", var_name="learner", value_name="ratio")
    heat["row"] = heat["learner"].map(shown)
    heat["label"] = heat["ratio"].map(lambda r: f"{r:.2g}" if r < 10 else f"{r:.0f}")
    base = alt.Chart(heat).encode(
        x=alt.X("n:O", title=_N_TITLE),
        y=alt.Y("row:N", sort=[shown[r] for r in rows], title=None,
                axis=alt.Axis(labelLimit=260)))
    out["step_heatmap"] = (base.mark_rect().encode(
        color=alt.Color("ratio:Q", title="ratio to the best step",
                        scale=alt.Scale(type="log", scheme="blueorange", domainMid=1,
                                        domain=[0.25, 256], clamp=True),
                        legend=alt.Legend(values=[0.25, 0.5, 1, 2, 4, 16, 64, 256])),
        tooltip=["learner", "n", alt.Tooltip("ratio:Q", format=".3g")])
        + base.mark_text(fontSize=9).encode(
            text="label:N",
            color=alt.condition((alt.datum.ratio > 40) | (alt.datum.ratio < 0.35),
                                alt.value("white"), alt.value("black")))).properties(
        width=360, height=400,
        title="Worst regret over that of the best step for each n (median over seeds)")

    lens = tb["lens"]
    phases = tb["volatile_phases"]
    phases = phases[phases["seed"] == report.seed]
    lens_chart = sweep(lens, x="t", y="excess", param="n", color="learner", param_label="n",
                       highlight=SOGD_Z1, start=1024, x_title="round t",
                       y_title="regret per round, (1−λ)·D-Regret(t, λ)", color_title="learner",
                       title="The whole run, judged with memory n (base seed; symlog axis)")
    shade = alt.Chart(phases).mark_rect(color="#f2c14e", opacity=0.18).encode(
        x=alt.X("start:Q"), x2="end:Q", tooltip=[alt.Tooltip("start:Q", title="volatile from"),
                                                 alt.Tooltip("end:Q", title="to")])
    zero = alt.Chart(phases.head(1).assign(zero=0.0)).mark_rule(color="#999999").encode(
        y="zero:Q")
    # a symlog axis whose range follows the memory on the slider: the small positive regrets of
    # the long memories and the large negative ones of the volatile phase are both visible
    out["lambda_lens"] = _recolor(
        alt.layer(shade, zero, lens_chart).resolve_legend(fill="independent"),
        y_scale={"type": "symlog", "constant": 0.002, "zero": False},
        y_ticks=[s * v for s in (-1, 1) for v in (1, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005)] + [0])

    w = tb["weights"]
    heat_w = alt.Chart(w).mark_rect(strokeWidth=0.6).encode(
        x=alt.X("t:Q", title="round t", scale=alt.Scale(nice=False, domain=[1, T + 1])),
        x2="t_end:Q",
        y=alt.Y("combiner:O", title="combiner i (memory n_i = T/2^(i−1))"),
        color=alt.Color("omega:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1]),
                        title="weight ω"),
        stroke=alt.Stroke("omega:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1]),
                          legend=None),
        tooltip=["combiner", alt.Tooltip("n_i:Q", format=".0f", title="memory n_i"),
                 alt.Tooltip("step_i:Q", format=".3g", title="expert step η_i"),
                 alt.Tooltip("t:Q", title="from round"), alt.Tooltip("t_end:Q", title="to round"),
                 alt.Tooltip("omega:Q", format=".3f")])
    strip = alt.Chart(phases.assign(kind="volatile")).mark_rect(color="#f2c14e").encode(
        x=alt.X("start:Q", title=None, axis=None, scale=alt.Scale(nice=False, domain=[1, T + 1])),
        x2="end:Q", y=alt.Y("kind:N", title=None))
    out["weights"] = alt.vconcat(
        strip.properties(width=440, height=14),
        heat_w.properties(width=440, height=260), spacing=2).properties(
        title="Combiner weights ω_t of SOGD (Z = 1/T, base seed); top strip: volatile phase")
    return out


def _chart_learners(worst: pd.DataFrame, T: int) -> pd.DataFrame:
    """Worst regret per (seed, n) of the learners the main chart shows."""
    import pandas as pd

    fixed = worst[worst["learner"].str.startswith("OGD, η")]
    best = fixed.loc[fixed.groupby(["seed", "n"])["max_regret"].idxmin()].assign(learner=ORACLE)
    ratios = _ratios(worst)
    cols = [_step_name(e) for e in fixed_step_grid(T)]
    single = ratios[cols].groupby(level="seed").max().idxmin(axis=1)
    parts = [worst[worst["learner"].isin([SOGD_Z1, SOGD_Z100])], best]
    parts.append(pd.concat([worst[(worst["seed"] == s) & (worst["learner"] == name)]
                            for s, name in single.items()]).assign(learner=SINGLE))
    tuned = pd.concat([worst[(worst["n"] == n)
                             & (worst["learner"] == _step_name(float(OGD.tuned_lr(1 - 1 / n, D, G))))]
                       for n in worst["n"].unique()])
    parts.append(tuned.assign(learner=TUNED))
    parts.append(worst[worst["learner"] == cols[0]].assign(learner=SLOW))
    parts.append(worst[worst["learner"] == _step_name(D / (2 * G))].assign(learner=FAST))
    order = [SOGD_Z1, SOGD_Z100, ORACLE, SINGLE, TUNED, SLOW, FAST]
    out = pd.concat(parts, ignore_index=True)[["seed", "n", "learner", "max_regret"]]
    out["learner"] = pd.Categorical(out["learner"], categories=order, ordered=True)
    return out.sort_values(["learner", "n", "seed"]).assign(
        learner=lambda x: x["learner"].astype(str)).reset_index(drop=True)


def dnp_trace_chart(n: float = 1000.0, Z: float = 1e-4, mean: float = 0.6,
                    noise: float = 1.0, T: int = 3000, seed: int = 0,
                    conservative: bool = True, lower_freeze: bool = False,
                    c_n: float | str = DEFAULT_CN) -> alt.VConcatChart:
    """Pure function behind :func:`explorer`: one DNP on bits ``clip(mean + noise U(-1,1))`` whose
    sign flips half-way; plots ``x_t`` with the saturation level ``x*`` and ``omega_t``.

    ``n >= 1``, ``Z`` in ``(0, 1]``, ``mean`` in ``[-1, 1]``, ``noise`` in ``[0, inf)``, ``T >= 2``,
    ``seed`` in ``[0, 2**32 - 1]``.
    """
    check_range("n", n, 1.0)
    check_range("Z", Z, 0.0, 1.0, low_open=True)
    check_range("mean", mean, -1.0, 1.0)
    check_range("noise", noise, 0.0)
    T = check_int("T", T, 2)
    seed = check_seed(seed)

    import altair as alt
    import pandas as pd

    from iclr_lab.core.charts import reference_line

    rng = np.random.default_rng(seed)
    sign = np.where(np.arange(T) < T // 2, 1.0, -1.0)
    bits = np.clip(mean * sign + noise * rng.uniform(-1, 1, T), -1, 1)
    x, om = dnp_trace(n, Z, bits, conservative=conservative, lower_freeze=lower_freeze, c_n=c_n)
    df = pd.DataFrame({"t": np.arange(1, T + 1), "x": x, "omega": om})
    xstar = dnp_saturation(n, Z, c_n)
    top = alt.Chart(df).mark_line(color="#4c78a8").encode(
        x=alt.X("t:Q", title=None), y=alt.Y("x:Q", title="evidence x_t"))
    bottom = alt.Chart(df).mark_line(color="#d62728", strokeJoin="round", clip=True).encode(
        x=alt.X("t:Q", title="round t"),
        y=alt.Y("omega:Q", title="weight ω_t = g(x_t)", scale=alt.Scale(domain=[0, 1])))
    return alt.vconcat(
        alt.layer(top, reference_line(xstar, label="saturation x*", color="#d62728")).properties(
            width=440, height=150, title=f"DNP, n = {n:.0f}, Z = {Z:.2g}: bits of mean {mean:+.2f}, "
                                         f"then {-mean:+.2f}"),
        bottom.properties(width=440, height=100))


def explorer() -> Any:
    """ipywidgets explorer of the DNP: memory n, prior scale Z, the mean of the bits, and the two
    freezing rules of ``discounted_oco-eq-update``."""
    import ipywidgets as widgets

    from iclr_lab.core.widgets import explorer as make_explorer
    from iclr_lab.core.widgets import log_slider, slider

    return make_explorer(
        dnp_trace_chart,
        n=log_slider("memory n", 1000.0, 10.0, 3000.0),
        Z=log_slider("Z", 1e-4, 1e-6, 1e-1),
        mean=slider("bit mean", 0.6, -1.0, 1.0, 0.05),
        noise=widgets.fixed(1.0), T=widgets.fixed(3000), seed=widgets.fixed(0),
        conservative=widgets.Checkbox(value=True, description="conservative updating"),
        lower_freeze=widgets.Checkbox(value=False, description="lower freeze"),
        c_n=widgets.fixed(DEFAULT_CN),
    )
