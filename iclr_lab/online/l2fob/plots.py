"""The L2FOB chapter's charts and its live explorer (``report.charts()`` and :func:`explorer`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .claims import tuned_steps, windows
from .experiments import (
    ETA,
    ETAS,
    L2,
    METHODS,
    PAPER,
    PD,
    PD_TUNED,
    SETTINGS,
    WANG,
    trajectories,
)

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

    from iclr_lab.core.report import Report

__all__ = ["anatomy_chart", "charts", "explorer", "trajectory_chart"]


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


def _rho_chart(rho_runs: pd.DataFrame) -> alt.TopLevelMixin:
    """Regret against the budget per round (log-log, budget only): L2FOB and Wang et al.'s pacing,
    median over seeds with every seed's run, and the two bounds' factors ``1 + nu*/rho`` and
    ``1 + nu*/rho^2`` scaled through each bidder's median at the largest budget (dashed)."""
    import altair as alt
    import pandas as pd

    med = rho_runs.groupby(["method", "rho"], as_index=False)["regret"].median()
    med = med[med["regret"] > 0]
    nu = rho_runs.groupby("rho")["fluid"].first() / rho_runs.groupby("rho")["T"].first()
    r = nu.index.to_numpy(dtype=float)
    guides = []
    for method, factor, label in ((L2, 1.0 + nu.to_numpy() / r, "L2FOB's bound, 1 + ν*/ρ"),
                                  (WANG, 1.0 + nu.to_numpy() / r ** 2,
                                   "Wang et al.'s bound, 1 + ν*/ρ²")):
        m = med[med["method"] == method].set_index("rho")["regret"]
        if len(m) and r.max() in m.index:
            guides.append(pd.DataFrame({"rho": r, "regret": factor * m[r.max()] / factor[-1],
                                        "method": method, "guide": label}))
    methods = [L2, WANG]
    color = alt.Color("method:N", scale=_scale(methods), title="bidder",
                      legend=alt.Legend(orient="bottom", columns=1))
    x = alt.X("rho:Q", scale=alt.Scale(type="log", nice=False), title="budget per round ρ")
    y = alt.Y("regret:Q", scale=alt.Scale(type="log"), title="regret T·ν*(ρ) − Σr")
    pos = rho_runs[rho_runs["regret"] > 0]
    layers: list[Any] = [
        alt.Chart(pos).mark_point(opacity=0.35, size=20).encode(x=x, y=y, color=color),
        alt.Chart(med).mark_line(point=True).encode(
            x=x, y=y, color=color,
            tooltip=["method", "rho", alt.Tooltip("regret:Q", format=".3g")])]
    if guides:
        layers.append(alt.Chart(pd.concat(guides, ignore_index=True)).mark_line(
            strokeDash=[5, 4], opacity=0.7).encode(x=x, y=y, color=color, detail="guide:N",
                                                    tooltip=["guide"]))
    return alt.layer(*layers).properties(width=320, height=240, title=[
        "Regret against the budget per round (budget only, T fixed; log-log)",
        "dots: seeds; line: median; dashed: each bound's factor through the median at the largest ρ"])


def _robustness_chart(runs: pd.DataFrame, extra: pd.DataFrame | None = None) -> alt.TopLevelMixin:
    """Every grid point's reward (over the fluid optimum) and final ROI (over the target) in each
    setting: thin rule over every step run (the baselines' grid and their step past it, from
    ``extra``), thick rule over the 10x window above the frozen step, ◆ the frozen step."""
    import altair as alt

    from .claims import _pool

    steps, win = tuned_steps(runs), windows(runs, extra=extra)
    r = _pool(runs, extra).groupby(["setting", "method", "step", "step_label"], as_index=False).agg(
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
               "(thin: every step run; thick: 10× window above the frozen step;",
               "◆ step frozen from the paper setting; dashed: 1)",
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
    out["robustness"] = _robustness_chart(runs, tb["extra"])

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

    if "rho" in tb:
        out["rho_rates"] = _rho_chart(tb["rho"])

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


def trajectory_chart(eta_gamma: float = ETA, gamma: float = 1.8, rho: float = 0.01,
                     auction: str = "first", T: int = 2000, seed: int = 0) -> alt.VConcatChart:
    """Pure function behind :func:`explorer`: budget, ROI and ``V_ROI(t)`` over time for L2FOB and
    the primal-dual bidder (``l2fob-eq-score``, ``l2fob-eq-pd``). The arguments and their ranges are
    those of :func:`~iclr_lab.online.l2fob.experiments.trajectories`."""
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
