"""The Frank–Wolfe chapter's charts and its explorer (built from ``reproduce()``'s tables)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr_lab.core.validation import check_choice, check_int, check_range
from iclr_lab.recovery.frank_wolfe_bregman.algorithms import Burg, Euclidean, Kernel, Quartic, Shannon
from iclr_lab.recovery.frank_wolfe_bregman.experiments import (
    BREG,
    BREG_CARRY,
    EUC,
    KL_BREG_AFW,
    KL_BREG_FW,
    KL_EUC_AFW,
    KL_EUC_FW,
    KL_OPEN,
    KL_SHORT,
    OPEN,
    RATIO_LP,
    RATIO_MAIN,
    SHORT,
    SIZES,
    THEORY,
    _common_end,
)

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

    from iclr_lab.core.report import Report

__all__ = ["charts", "explorer", "scaling_chart", "scaling_profile"]

# ----------------------------------------------------------------------------------------------
# Charts and the explorer
# ----------------------------------------------------------------------------------------------


def _method_colors() -> dict[str, str]:
    """One colour per method for every chart of the chapter: the paper's rule in the method colours,
    the baselines in muted ones (Euclidean adaptive blue, open loop green, short step grey)."""
    from iclr_lab.core.charts import BASELINE_COLORS, METHOD_COLORS

    return {BREG: METHOD_COLORS[0], BREG_CARRY: METHOD_COLORS[1], EUC: BASELINE_COLORS[0],
            OPEN: BASELINE_COLORS[2], SHORT: BASELINE_COLORS[1], KL_BREG_FW: METHOD_COLORS[0],
            KL_BREG_AFW: METHOD_COLORS[2], KL_EUC_FW: BASELINE_COLORS[0], KL_EUC_AFW: BASELINE_COLORS[3],
            KL_OPEN: BASELINE_COLORS[2], KL_SHORT: BASELINE_COLORS[1], THEORY: "#333333"}


def _colors(names: Sequence[str], highlight: Sequence[str] = ()) -> alt.Scale:
    """The colour scale of a hand-made chart: the chapter's fixed colour for each method in
    ``names`` (see :func:`_method_colors`), and the shared palette for any other series."""
    import altair as alt

    from iclr_lab.core.charts import palette

    fixed = _method_colors()
    if all(n in fixed for n in names):
        return alt.Scale(domain=list(names), range=[fixed[n] for n in names])
    return palette(names, [h for h in highlight if h in names])


def _recolor(chart: alt.TopLevelMixin, field: str = "method") -> alt.LayerChart:
    """Give the ``field`` colour and band fill of a chart made by the chart helpers the chapter's
    fixed colours, in the chapter's order, and room in the legend for long names."""
    import altair as alt

    colors = _method_colors()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("field") == field and "scale" in node:
                names = [n for n in colors if n in node["scale"].get("domain", [])]
                node["scale"] = {"domain": names, "range": [colors[n] for n in names]}
                if isinstance(node.get("legend"), dict):
                    node["legend"]["labelLimit"] = 320
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    spec = chart.to_dict()
    walk(spec)
    return alt.LayerChart.from_dict(spec, validate=False)


def _estimates_chart(trace: pd.DataFrame) -> alt.VConcatChart:
    """The accepted estimate ``M_t / M_0`` (top) and exponent ``kappa_t`` (bottom) of the adaptive
    rules on the first instance of phase retrieval (left) and of the l_p loss (right), where both
    readings of the kappa search run (restarted at 1, carried over)."""
    import altair as alt

    problems = list(dict.fromkeys(trace["problem"]))
    names = [n for n in (BREG, BREG_CARRY, EUC) if n in set(trace["method"])]
    scale = _colors(names)
    x = alt.X("t:Q", scale=alt.Scale(type="log", nice=False), title="iteration t",
              axis=alt.Axis(values=[1, 10, 100, 1000], format="~s"))
    top, bottom = [], []
    for i, prob in enumerate(problems):
        sub = trace[trace["problem"] == prob]
        top.append(alt.Chart(sub).mark_line().encode(
            x=x, y=alt.Y("log2_M:Q", title="log₂(M_t / M_0)" if i == 0 else None),
            color=alt.Color("method:N", scale=scale, title="step rule",
                            legend=alt.Legend(orient="bottom", labelLimit=320)),
            tooltip=["method", "t", alt.Tooltip("log2_M:Q", format=".2f")],
        ).properties(width=215, height=160, title=prob))
        bottom.append(alt.Chart(sub[sub["method"].isin([BREG, BREG_CARRY])]).mark_line().encode(
            x=x, y=alt.Y("kappa:Q", scale=alt.Scale(domain=[0, 1.05]),
                         title="accepted κ (Bregman)" if i == 0 else None),
            color=alt.Color("method:N", scale=scale, legend=None),
            tooltip=["method", "t", alt.Tooltip("kappa:Q", format=".3f")],
        ).properties(width=215, height=80))
    return alt.vconcat(alt.hconcat(*top).resolve_scale(y="shared"), alt.hconcat(*bottom))


def _ratio_chart(tb: dict[str, pd.DataFrame], bars: dict[str, float]) -> alt.TopLevelMixin:
    """What the head-to-head claims test, per instance: each rule's smallest FW gap divided by the
    Euclidean adaptive rule's on the same instance (log scale), one column per problem, with the
    claims' bars as black lines (1 on phase retrieval, 0.1 on the l_p loss). The short step with
    the global constant is left out: it sits orders of magnitude above and would flatten the rest."""
    import altair as alt
    import pandas as pd

    rows = []
    for label, key in (("phase retrieval", "pr_summary"), ("l_p, Gaussian", "lp_summary"),
                       ("l_p, ill-conditioned", "lp_hard_summary")):
        wide = tb[key].pivot_table(index="seed", columns="method", values="best_gap")
        for name in wide.columns:
            if name in (EUC, SHORT):  # the short step sits orders of magnitude above (see the table)
                continue
            rows += [{"problem": label, "method": name, "seed": seed, "ratio": float(v)}
                     for seed, v in (wide[name] / wide[EUC]).items()]
    df = pd.DataFrame(rows)
    names = [n for n in _method_colors() if n in set(df["method"])]
    order = list(dict.fromkeys(df["problem"]))
    pts = alt.Chart(df).mark_point(filled=True, size=60, opacity=0.85).encode(
        x=alt.X("problem:N", sort=order, title=None, axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("method:N", sort=names),
        y=alt.Y("ratio:Q", scale=alt.Scale(type="log"),
                title="smallest FW gap / Euclidean adaptive's (per instance)"),
        color=alt.Color("method:N", scale=_colors(names), title="step rule",
                        legend=alt.Legend(orient="bottom", columns=2, labelLimit=320)),
        tooltip=["problem", "method", "seed", alt.Tooltip("ratio:Q", format=".3g")])
    lines = pd.DataFrame([{"problem": p, "bar": bars["lp" if p.startswith("l_p") else "pr"]}
                          for p in order])
    rules = alt.Chart(lines).mark_tick(color="black", thickness=1.5, size=120).encode(
        x=alt.X("problem:N", sort=order), y="bar:Q", tooltip=[alt.Tooltip("bar:Q", title="bar")])
    return alt.layer(pts, rules).properties(
        width=460, height=260, title="The tested ratios (black: the claims' bars)")


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """Named Altair charts built from ``report.tables``."""
    import altair as alt

    from iclr_lab.core.charts import curves, sweep
    from iclr_lab.core.scales import pick

    tb = report.tables
    sz = pick(SIZES, report.scale)
    out: dict[str, alt.TopLevelMixin] = {}
    pr = _common_end(tb["pr_curves"][tb["pr_curves"]["t"] >= 1])
    out["pr_gaps"] = _recolor(curves(
        pr, x="t", y="best_gap", color="method", log_x=True, log_y=True, highlight=BREG,
        x_title="iteration t", y_title="smallest FW gap so far", color_title="step rule",
        center="median",
        title=f"Phase retrieval, up to {sz.pr_budget} evaluations of f (median and range)"))

    out["estimates"] = _estimates_chart(tb["trace"])

    lp = _common_end(tb["lp_curves"][tb["lp_curves"]["t"] >= 1])
    out["lp_gaps"] = _recolor(curves(
        lp, x="t", y="best_gap", color="method", log_x=True, log_y=True, highlight=BREG,
        x_title="iteration t", y_title="smallest FW gap so far", color_title="step rule",
        center="median",
        title=f"l_p loss, p = 1.1, up to {sz.lp_budget} evaluations of f (median and range)"))
    out["ratios"] = _ratio_chart(tb, {"pr": RATIO_MAIN, "lp": RATIO_LP})

    kl = tb["kl_curves"]
    lo, hi = sz.window
    main = curves(kl, x="t", y="primal_gap", color="method", log_y=True,
                  highlight=[KL_BREG_AFW, KL_BREG_FW], x_title="iteration t",
                  y_title="primal gap f(x_t) − f*", color_title="method",
                  title="Poisson/KL: away steps against zig-zagging")
    shade = alt.Chart(_frame({"start": [lo], "end": [hi]})).mark_rect(
        color="#f2c14e", opacity=0.15).encode(x="start:Q", x2="end:Q")
    out["away"] = _recolor(alt.layer(shade, main).resolve_legend(fill="independent"))

    sw = tb["eta_sweep"]
    out["eta_sweep"] = _recolor(sweep(
        sw, x="t", y="evals_per_iter", param="eta", color="method", param_label="η", log_x=True,
        start=0.9, highlight=BREG, x_title="iteration t", y_title="evaluations of f per iteration",
        color_title="curve", title="The price of adaptivity depends on η"))
    return out


def _frame(data: dict[str, list[Any]]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(data)


KERNELS: dict[str, Kernel] = {"Euclidean": Euclidean(), "quartic": Quartic(), "Burg": Burg(),
                              "Shannon": Shannon()}


def scaling_profile(kernel: str = "quartic", x: float = 1.0, v: float = 0.2,
                    points: int = 101) -> tuple[np.ndarray, np.ndarray, float]:
    """``gamma -> D_phi(x + gamma (v - x), x) / D_phi(v, x)`` on ``[0, 1]`` for a 1-D kernel.

    Returns ``(gamma, ratio, nu)``, where ``nu`` is the largest exponent with
    ``ratio <= gamma^(1 + nu)`` on the grid (``frank_wolfe_bregman-eq-scaling``): 1 for the
    Euclidean kernel, smaller where the kernel curves up between ``x`` and ``v``.
    """
    check_choice("kernel", kernel, KERNELS)
    check_range("x", x, 0.0, low_open=True)
    check_range("v", v, 0.0, low_open=True)
    points = check_int("points", points, 3)
    k = KERNELS[kernel]
    xa, va = np.array([x]), np.array([v])
    gam = np.linspace(0.0, 1.0, points)
    total = k.divergence(va, xa)
    if total <= 0:  # v == x: the limit of the ratio is gamma^2 for every smooth kernel
        ratio = gam**2
    else:
        ratio = np.array([k.divergence(xa + g * (va - xa), xa) for g in gam]) / total
    inner = (gam > 0) & (gam < 1) & (ratio > 0)
    nu = float(np.min(np.log(ratio[inner]) / np.log(gam[inner])) - 1.0) if inner.any() else 1.0
    return gam, ratio, min(max(nu, 0.0), 1.0)


def scaling_chart(kernel: str = "quartic", v: float = 0.2, kappa: float = 0.5) -> alt.LayerChart:
    """Pure function behind :func:`explorer`: the scaling profile of a kernel between ``x = 1`` and
    ``v`` against ``gamma^2`` (the Euclidean model) and ``gamma^(1 + kappa)`` (a trial exponent of
    the adaptive search)."""
    check_range("kappa", kappa, 0.0, 1.0, low_open=True)
    gam, ratio, nu = scaling_profile(kernel, 1.0, v)

    import altair as alt
    import pandas as pd

    df = pd.concat([
        pd.DataFrame({"γ": gam, "value": ratio, "curve": f"D_φ(x+γd, x)/D_φ(v, x), {kernel}"}),
        pd.DataFrame({"γ": gam, "value": gam**2, "curve": "γ² (ν = 1)"}),
        pd.DataFrame({"γ": gam, "value": gam ** (1 + kappa), "curve": f"γ^(1+κ), κ = {kappa:.2f}"}),
    ], ignore_index=True)
    names = list(df["curve"].unique())
    fits = bool(np.all(ratio <= gam ** (1 + kappa) + 1e-12))
    return alt.Chart(df).mark_line().encode(
        x=alt.X("γ:Q", title="step γ"), y=alt.Y("value:Q", title="share of D_φ(v, x)"),
        color=alt.Color("curve:N", scale=_colors(names, [names[0]]), title=None,
                        legend=alt.Legend(orient="bottom", columns=1)),
        strokeDash=alt.condition(alt.datum.curve == names[0], alt.value([1, 0]), alt.value([5, 3])),
        tooltip=["curve", alt.Tooltip("γ:Q", format=".2f"), alt.Tooltip("value:Q", format=".4f")],
    ).properties(width=420, height=260, title=(
        f"x = 1, v = {v:.3g}: largest ν = {nu:.2f}; κ = {kappa:.2f} "
        f"{'is admissible' if fits else 'is too large'}"))


def explorer() -> Any:
    """ipywidgets explorer of the scaling exponent ``1 + nu`` (``frank_wolfe_bregman-eq-scaling``):
    a kernel, the vertex ``v`` (with ``x = 1``) and a trial exponent ``kappa``."""
    import ipywidgets as widgets

    from iclr_lab.core.widgets import explorer as make_explorer
    from iclr_lab.core.widgets import log_slider, slider

    return make_explorer(
        scaling_chart,
        kernel=widgets.Dropdown(options=list(KERNELS), value="quartic", description="kernel"),
        v=log_slider("vertex v (x = 1)", 0.2, 0.02, 50.0),
        kappa=slider("trial κ", 0.5, 0.05, 1.0, 0.05),
    )
