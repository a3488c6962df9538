"""The CCL chapter's charts, its picture of the variants, and its two live explorers.

Every chart colours a solver the same way (:data:`COLORS`) and a constraint's gate the same way
(:data:`GATE_COLORS`). Altair and matplotlib are imported inside the functions, so that importing
the chapter's module for its experiments stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from iclr_lab.core.report import Report
from iclr_lab.core.validation import check_choice, check_int
from iclr_lab.routing.ccl_vrp.data import (
    LABELS,
    MODELS,
    PICTURE_VARIANTS,
    PYVRP_SETTINGS,
    gate_trace,
    policy,
    route_stops,
    test_instance,
)
from iclr_lab.routing.evaluate import TEST_COUNT
from iclr_lab.routing.instances import ID_VARIANTS, MB_VARIANTS
from iclr_lab.routing.model import GATE_NAMES, solve

if TYPE_CHECKING:
    import altair as alt
    import matplotlib.figure

__all__ = ["COLORS", "GATE_COLORS", "charts", "explorer", "gate_chart", "gate_explorer", "route_chart",
           "variant_figure"]

#: one colour per solver across the chapter (CCL, the paper's method, in the method colour)
COLORS = {LABELS["ccl"]: "#d62728", LABELS["static"]: "#4c78a8", LABELS["nn"]: "#8c8c8c",
          LABELS["pyvrp"]: "#72a17b"}
#: one colour per RGCR constraint gate
GATE_COLORS = {"B": "#1b9e77", "L": "#d95f02", "O": "#7570b3", "TW": "#e7298a"}
_ROUTE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22", "#17becf")
_VARIANTS = ID_VARIANTS + MB_VARIANTS


def _median_band(df: pd.DataFrame, by: list[str], value: str) -> pd.DataFrame:
    g = df.groupby(by, sort=False)[value]
    return g.agg(median="median", lo="min", hi="max").reset_index()


def charts(report: Report) -> dict[str, alt.TopLevelMixin]:
    """The chapter's charts: ``gaps`` (each solver's gap per variant, median and range over training
    seeds), ``difference`` (CCL minus static per variant, 95% bootstrap interval), ``curves``
    (training curves), ``gates`` (RGCR's gates along a tour, a variant menu that works on the
    static page) and ``flops`` (the cost of one re-embedding, shared or per trajectory)."""
    import altair as alt

    from iclr_lab.core.charts import curves, loglog, palette

    t = report.tables
    order = [v for v in _VARIANTS if v in set(t["gaps"].variant)]
    solvers = [LABELS[m] for m in (*MODELS, "nn")]
    scale = palette(solvers, colors=COLORS)
    band = _median_band(t["gaps"], ["variant", "ood", "model"], "gap")
    panels = []
    groups = ((False, "in distribution (trained on)"), (True, "mixed backhaul (out of distribution)"))
    for ood, title in groups:
        d = band[band.ood == ood]
        if d.empty:
            continue
        names = [v for v in order if v in set(d.variant)]
        y = alt.Y("variant:N", sort=names, title=None)
        x = alt.X("median:Q", scale=alt.Scale(type="log", nice=False),
                  title="mean gap to PyVRP, % (log scale)")
        pts = alt.Chart(d).mark_point(filled=True, size=60).encode(
            x=x, y=y, color=alt.Color("model:N", scale=scale, title="solver"),
            # the shape scale shares the colour scale's domain, so the two merge into one legend
            shape=alt.Shape("model:N", scale=alt.Scale(domain=solvers), title="solver"),
            tooltip=["variant", "model", alt.Tooltip("median:Q", format=".2f"),
                     alt.Tooltip("lo:Q", format=".2f"), alt.Tooltip("hi:Q", format=".2f")])
        # no legend=None here: a layer that hides the colour legend hides it for the points too
        rules = alt.Chart(d).mark_rule(strokeWidth=2).encode(
            x=alt.X("lo:Q", scale=alt.Scale(type="log", nice=False)), x2="hi:Q", y=y,
            color=alt.Color("model:N", scale=scale, title="solver"))
        panels.append(alt.layer(rules, pts).properties(width=420, height=14 * len(names), title=title))
    gaps_chart = alt.vconcat(*panels).properties(
        title="Gap to PyVRP per variant (point: median over 3 training seeds; bar: min–max)")

    diff = t["difference"].assign(group=lambda d: d.ood.map({False: "in distribution",
                                                             True: "mixed backhaul (OOD)"}))
    yd = alt.Y("variant:N", sort=[v for v in order if v in set(diff.variant)], title=None)
    diff_title = "CCL gap − static gap, percentage points"
    xd = alt.X("difference:Q", title=diff_title)
    group_scale = alt.Scale(domain=["in distribution", "mixed backhaul (OOD)"], range=["#d62728", "#8c8c8c"])
    diff_chart = alt.layer(
        alt.Chart(diff).mark_rule(strokeWidth=2).encode(
            x=alt.X("lo:Q", title=diff_title), x2="hi:Q", y=yd,
            color=alt.Color("group:N", scale=group_scale, legend=None)),
        alt.Chart(diff).mark_point(filled=True, size=60).encode(
            x=xd, y=yd, color=alt.Color("group:N", scale=group_scale, title=None),
            tooltip=["variant", alt.Tooltip("difference:Q", format=".2f"), alt.Tooltip("lo:Q", format=".2f"),
                     alt.Tooltip("hi:Q", format=".2f")]),
        alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(strokeDash=[4, 3], color="black").encode(x="x:Q"),
    ).properties(width=420, height=14 * len(diff), title=alt.TitleParams(
        "CCL minus static decoder, per variant",
        subtitle="mean over the 3 training seeds and the test instances; bar: 95% two-stage bootstrap"))

    cur = t["curves"]
    curve_chart = curves(cur, x="step", y="cost", color="model", center="median", highlight=LABELS["ccl"],
                         colors=COLORS, x_title="training step (batches of 32 instances)",
                         y_title="mean best-of-starts cost on the training batch", color_title="model",
                         title="Learning curves (median over 3 training seeds; band: min–max)")

    gates = t["gates"]
    options = [v for v in ID_VARIANTS if v in set(gates.variant)]
    pick_variant = alt.param(name="gate_variant", value=options[-1],
                             bind=alt.binding_select(options=options, name="variant "))
    base = alt.Chart(gates).transform_filter(alt.datum.variant == pick_variant)
    at_depot = (alt.datum.kind == "depot") & (alt.datum.constraint == GATE_NAMES[0])
    depot = base.transform_filter(at_depot).mark_rule(color="#bbbbbb").encode(x="step:Q")
    lines = base.mark_line(point=alt.OverlayMarkDef(size=20)).encode(
        x=alt.X("step:Q", title="decoding step (grey rules: the vehicle is at the depot)"),
        y=alt.Y("gate:Q", title="gate g^k", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("constraint:N", title="constraint",
                        scale=alt.Scale(domain=list(GATE_COLORS), range=list(GATE_COLORS.values()))),
        tooltip=["variant", "step", "node", "kind", "constraint", alt.Tooltip("gate:Q", format=".3f")])
    gate_chart_ = alt.layer(depot, lines).add_params(pick_variant).properties(
        width=440, height=220, title="RGCR's gates along CCL's tour of one test instance")

    flops = loglog(t["flops"], x="customers", y="flops", color="scheme", highlight="shared (TSNR)",
                   x_title="customers n (n trajectories, n + 1 nodes)",
                   y_title="FLOPs of one re-embedding step",
                   title="Re-embedding the nodes once for all trajectories, or once per trajectory")
    return {"gaps": gaps_chart, "difference": diff_chart, "curves": curve_chart, "gates": gate_chart_,
            "flops": flops}


def variant_figure(report: Report) -> matplotlib.figure.Figure:
    """PyVRP's routes on the picture's test instance under several variants (matplotlib): squares
    the depot, dots deliveries, triangles pickups; a dotted last arc is a free return (open routes)."""
    import matplotlib.pyplot as plt

    st = report.tables["picture"]
    names = [v for v in PICTURE_VARIANTS if v in set(st.variant)]
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.3 * cols, 2.5 * rows), dpi=80, squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, name in zip(axes.flat, names, strict=False):
        d = st[st.variant == name]
        for r, (_, route) in enumerate(d.groupby("route", sort=True)):
            color = _ROUTE_COLORS[r % len(_ROUTE_COLORS)]
            xs, ys, free = route.x.to_numpy(), route.y.to_numpy(), route.free.to_numpy()
            for k in range(1, len(xs)):
                ax.plot(xs[k - 1:k + 1], ys[k - 1:k + 1], color=color, lw=1.2,
                        ls=":" if free[k] else "-", alpha=0.5 if free[k] else 1.0)
        nodes = d.drop_duplicates("node")
        for kind, marker, size in (("delivery", "o", 14), ("pickup", "^", 22), ("depot", "s", 40)):
            these = nodes[nodes.kind == kind]
            ax.scatter(these.x, these.y, marker=marker, s=size, c="black", zorder=3)
        ax.set_title(f"{name}: {float(d.cost.iloc[0]):.2f}", fontsize=9)
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
        ax.set_aspect("equal")
    from matplotlib.lines import Line2D

    keys = [Line2D([], [], ls="", marker="s", color="black", label="depot"),
            Line2D([], [], ls="", marker="o", ms=4, color="black", label="delivery"),
            Line2D([], [], ls="", marker="^", ms=5, color="black", label="pickup"),
            Line2D([], [], ls=":", color="grey", label="free return (open routes)")]
    fig.legend(handles=keys, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    plt.close(fig)
    return fig


# -- the live explorers ---------------------------------------------------------------------------

def _segments(stops: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r, (_, route) in enumerate(stops.groupby("route", sort=True)):
        p = route.sort_values("order").to_dict("records")
        for a, b in zip(p, p[1:], strict=False):
            rows.append({"route": f"route {r + 1}", "x": a["x"], "y": a["y"], "x2": b["x"], "y2": b["y"],
                         "free": bool(b["free"])})
    return pd.DataFrame(rows)


def route_chart(variant: str = "VRPBLTW", instance: int = 0, model: str = "ccl") -> alt.TopLevelMixin:
    """The routes of the shipped seed-0 policy ``model`` (x8 augmentation, greedy multi-start) beside
    PyVRP's on test instance ``instance`` of ``variant``, both solved live, with their costs and
    the policy's gap. ``instance`` is in ``[0, 99]``."""
    check_choice("variant", variant, _VARIANTS)
    check_choice("model", model, MODELS)
    instance = check_int("instance", instance, 0, TEST_COUNT - 1)
    import altair as alt

    from iclr_lab.routing.solvers import pyvrp_solve

    inst = test_instance(variant, instance)
    sol = solve(policy(model, 0), inst, augment=8)
    ref_cost, ref_routes = pyvrp_solve(inst, **PYVRP_SETTINGS)
    cost = float(sol.cost[0])
    panels = []
    for label, routes, c in ((LABELS[model], sol.routes[0], cost), (LABELS["pyvrp"], ref_routes, ref_cost)):
        stops = route_stops(inst, routes)
        seg = _segments(stops)
        nodes = stops.drop_duplicates("node")
        scale = alt.Scale(domain=[f"route {r + 1}" for r in range(len(routes))],
                          range=[_ROUTE_COLORS[r % len(_ROUTE_COLORS)] for r in range(len(routes))])
        xy = {"x": alt.X("x:Q", scale=alt.Scale(domain=[0, 1]), title=None),
              "y": alt.Y("y:Q", scale=alt.Scale(domain=[0, 1]), title=None)}
        arcs = alt.Chart(seg).mark_rule(strokeWidth=2).encode(
            **xy, x2="x2:Q", y2="y2:Q", color=alt.Color("route:N", scale=scale, legend=None),
            strokeDash=alt.condition(alt.datum.free, alt.value([2, 3]), alt.value([1, 0])),
            opacity=alt.condition(alt.datum.free, alt.value(0.4), alt.value(1.0)))
        pts = alt.Chart(nodes).mark_point(filled=True, color="black").encode(
            **xy, shape=alt.Shape("kind:N", scale=alt.Scale(domain=["depot", "delivery", "pickup"],
                                                           range=["square", "circle", "triangle-up"]),
                                  title="node"),
            size=alt.condition(alt.datum.kind == "depot", alt.value(120), alt.value(35)),
            tooltip=["node", "kind"])
        gap = f", gap {100 * (c - ref_cost) / ref_cost:.1f} %" if label != LABELS["pyvrp"] else ""
        panels.append(alt.layer(arcs, pts).properties(width=230, height=230,
                                                      title=f"{label}: {c:.3f}{gap}"))
    return alt.hconcat(*panels).properties(
        title=f"{variant}, test instance {instance} (dotted: free return of an open route)")


def explorer() -> Any:
    """Live explorer: pick a variant, a test instance and a policy, and compare its routes with
    PyVRP's (:func:`route_chart`)."""
    from ipywidgets import Dropdown, IntSlider

    from iclr_lab.core.widgets import explorer as make

    style = {"description_width": "initial"}
    return make(route_chart,
                variant=Dropdown(options=list(_VARIANTS), value="VRPBLTW", description="variant",
                                 style=style),
                instance=IntSlider(value=0, min=0, max=99, description="test instance",
                                   continuous_update=False, style=style),
                model=Dropdown(options=[(LABELS[m], m) for m in MODELS], value="ccl", description="policy",
                               style=style))


def gate_chart(variant: str = "VRPBLTW", instance: int = 0) -> alt.TopLevelMixin:
    """RGCR's gates (eq. ``ccl_vrp-eq-gate``) along the shipped seed-0 CCL policy's greedy tour of
    test instance ``instance`` of ``variant``, one line per constraint; the gate of an attribute
    the instance does not have stays at 0. ``instance`` is in ``[0, 99]``."""
    check_choice("variant", variant, _VARIANTS)
    instance = check_int("instance", instance, 0, TEST_COUNT - 1)
    import altair as alt

    trace = gate_trace(policy("ccl", 0), test_instance(variant, instance))
    depot = alt.Chart(trace[(trace.kind == "depot") & (trace.constraint == GATE_NAMES[0])]).mark_rule(
        color="#bbbbbb").encode(x="step:Q")
    lines = alt.Chart(trace).mark_line(point=alt.OverlayMarkDef(size=20)).encode(
        x=alt.X("step:Q", title="decoding step (grey rules: at the depot)"),
        y=alt.Y("gate:Q", title="gate g^k", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("constraint:N", title="constraint",
                        scale=alt.Scale(domain=list(GATE_COLORS), range=list(GATE_COLORS.values()))),
        tooltip=["step", "node", "kind", "constraint", alt.Tooltip("gate:Q", format=".3f")])
    return alt.layer(depot, lines).properties(width=440, height=220,
                                              title=f"RGCR's gates, {variant}, test instance {instance}")


def gate_explorer() -> Any:
    """Live explorer: RGCR's gates along CCL's tour for any variant and test instance
    (:func:`gate_chart`)."""
    from ipywidgets import Dropdown, IntSlider

    from iclr_lab.core.widgets import explorer as make

    style = {"description_width": "initial"}
    return make(gate_chart,
                variant=Dropdown(options=list(_VARIANTS), value="VRPBLTW", description="variant",
                                 style=style),
                instance=IntSlider(value=0, min=0, max=99, description="test instance",
                                   continuous_update=False, style=style))
