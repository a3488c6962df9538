"""Altair chart helpers shared by every chapter.

Three shapes cover most of the book:

* :func:`curves`: one line per method with a band over seeds (mean, min-max);
* :func:`loglog`: points on log-log axes with the fitted slope in the legend, optionally against a
  theoretical bound;
* :func:`sweep`: the "precomputed sweep": results for a grid of a hyper-parameter, with a slider that
  works on the static web page because Vega filters the embedded data in the browser.

All take tidy DataFrames (one row per method x x-value x seed) and return charts that validate with
``chart.to_dict()`` and render offline through vl-convert (:func:`save_chart`).

Conventions every chapter gets from here:

* **Axis titles are words and symbols, not column names**: pass ``x_title``/``y_title`` (``"α₀"``,
  ``"n = 1/(1−λ)"``); without them the column name is used.
* **The paper's method has one fixed colour** (:data:`METHOD_COLORS`, red first) and a thicker line;
  the baselines get muted colours (:data:`BASELINE_COLORS`). Name the method's series with
  ``highlight=``; :func:`palette` builds the same scale for hand-made charts.
* **Ranges fit the data**: linear axes do not start at zero, log axes end at the data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import altair as alt
import numpy as np
import pandas as pd

from iclr_lab.core.stats import loglog_slope, summarize_seeds
from iclr_lab.core.validation import check_int, check_range

__all__ = ["BASELINE_COLORS", "FONT", "MAX_ROWS", "METHOD_COLORS", "axis", "curves", "loglog",
           "palette", "recolor", "reference_line", "save_chart", "sweep", "thin"]

#: Altair refuses to embed more rows than this; chapters thin their logs first (see :func:`thin`).
MAX_ROWS = 5000
WIDTH, HEIGHT = 440, 260

#: Colours of the paper's method (first) and its variants; strong, warm, used for nothing else.
METHOD_COLORS = ("#d62728", "#ff7f0e", "#9e0142", "#f4a582")
#: Colours of the baselines; muted, distinguishable from one another, receding behind the method.
BASELINE_COLORS = ("#4c78a8", "#8c8c8c", "#72a17b", "#a48cb5", "#b7a16a", "#5b6770", "#9ecae9",
                   "#c2a5a5")

Highlight = str | Sequence[str] | None

#: One font with Greek letters and sub/superscript digits (alpha0, beta3, n = 1/(1-lambda)), so titles
#: do not fall back to a serif face for one glyph in offline PNG renders (vl-convert).
FONT = "DejaVu Sans, Verdana, Helvetica, Arial, sans-serif"


@alt.theme.register("iclr_lab", enable=True)
def _theme() -> alt.theme.ThemeConfig:
    # Enabled when this module is imported, i.e. for every chart a chapter builds.
    return {"config": {"font": FONT, "view": {"continuousWidth": WIDTH, "continuousHeight": HEIGHT}}}


def _as_list(highlight: Highlight) -> list[str]:
    if highlight is None:
        return []
    return [highlight] if isinstance(highlight, str) else list(highlight)


def palette(names: Iterable[object], highlight: Highlight = None,
            colors: Mapping[str, str] | None = None) -> alt.Scale:
    """A colour scale for the series ``names``: the ``highlight`` ones (the paper's method and its
    variants) in :data:`METHOD_COLORS`, every other one in a muted :data:`BASELINE_COLORS` shade.

    ``colors`` fixes the colour of named series (a chapter's ``{method: colour}`` table), so a method
    keeps its colour in every chart whichever other series a chart shows. The domain keeps the order
    of ``names``, so legends list series as the chapter does.
    """
    hl = _as_list(highlight)
    fixed = dict(colors or {})
    series = list(dict.fromkeys(str(n) for n in names))
    missing = [h for h in hl if h not in series]
    if missing:
        raise ValueError(f"highlight names {missing} are not among the series {series}")
    out, m, b = [], 0, 0
    for n in series:
        if n in fixed:
            out.append(fixed[n])
        elif n in hl:
            out.append(METHOD_COLORS[m % len(METHOD_COLORS)])
            m += 1
        else:
            out.append(BASELINE_COLORS[b % len(BASELINE_COLORS)])
            b += 1
    return alt.Scale(domain=series, range=out)


def _edit_encodings(chart: alt.TopLevelMixin,
                    edit: Callable[[str, dict[str, Any]], None]) -> alt.TopLevelMixin:
    """``chart`` rebuilt after ``edit(channel, encoding)`` has run on every encoding channel of every
    layer and panel (Altair has no API that reaches into composed charts)."""
    spec = chart.to_dict()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            encoding = node.get("encoding")
            if isinstance(encoding, dict):
                for channel, enc in encoding.items():
                    if isinstance(enc, dict):
                        edit(channel, enc)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    return type(chart).from_dict(spec, validate=False)  # type: ignore[attr-defined]


def recolor(chart: alt.TopLevelMixin, colors: Mapping[str, str], *,
            field: str | None = None) -> alt.TopLevelMixin:
    """``chart`` with every colour and fill encoding (of ``field``, or of any field) mapped through the
    fixed ``{series: colour}`` table, in every layer and panel; series missing from ``colors`` keep
    their place in the legend with a muted colour. Legends list the series in the order of
    ``colors`` (the chapter's table), then any others in the chart's own order. Use it on hand-made
    or composed charts so that a method has one colour across the whole chapter."""

    def edit(channel: str, enc: dict[str, Any]) -> None:
        wanted = field is None or enc.get("field") == field
        if channel in ("color", "fill", "stroke") and "field" in enc and wanted:
            old = enc.get("scale", {}).get("domain") if isinstance(enc.get("scale"), dict) else None
            shown = list(old) if isinstance(old, list) else list(colors)
            names = [n for n in colors if n in shown] + [n for n in shown if n not in colors]
            enc["scale"] = palette(names, colors=colors).to_dict()

    return _edit_encodings(chart, edit)


def axis(chart: alt.TopLevelMixin, field: str, channel: str = "x", **props: Any) -> alt.TopLevelMixin:
    """``chart`` with the axis properties ``props`` set wherever ``field`` is on ``channel``, in every
    layer and panel: e.g. ``axis(chart, "T", values=[500, 4000])`` ticks a log axis only at the
    values run, so that its labels do not collide."""

    def edit(ch: str, enc: dict[str, Any]) -> None:
        if ch == channel and enc.get("field") == field:
            enc["axis"] = {**(enc.get("axis") or {}), **props}

    return _edit_encodings(chart, edit)


def _stroke(color: str | None, highlight: Highlight) -> dict[str, Any]:
    hl = _as_list(highlight)
    if not (color and hl):
        return {}
    return {"strokeWidth": alt.condition(alt.FieldOneOfPredicate(field=color, oneOf=hl),
                                         alt.value(3.0), alt.value(1.6))}


def reference_line(value: float, *, axis: str = "y", label: str = "",
                   color: str = "black") -> alt.LayerChart:
    """A dashed rule at ``value`` on ``axis`` ("x" or "y") with an optional text label; layer it with
    ``+`` on a chart (a bound, a stability edge, a baseline's level)."""
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    value = check_range("value", value, low_open=True, high_open=True)
    df = pd.DataFrame({axis: [value], "label": [label]})
    enc = {axis: alt.X(f"{axis}:Q") if axis == "x" else alt.Y(f"{axis}:Q")}
    rule = alt.Chart(df).mark_rule(strokeDash=[6, 4], color=color).encode(**enc)
    # a y-rule's label sits above it at the left edge; an x-rule's label to its left at the top
    mark = (alt.MarkDef(type="text", align="left", dx=4, dy=-6, color=color, fontSize=11) if axis == "y"
            else alt.MarkDef(type="text", align="right", dx=-4, dy=8, color=color, fontSize=11))
    text = alt.Chart(df).mark_text(**{k: v for k, v in mark.to_dict().items() if k != "type"}).encode(
        text="label:N", **enc, **({"x": alt.value(4)} if axis == "y" else {"y": alt.value(0)}))
    return alt.LayerChart(layer=[rule, text] if label else [rule])


def _check(df: pd.DataFrame, cols: Sequence[str | None], *, limit: bool = True) -> None:
    missing = [c for c in cols if c is not None and c not in df.columns]
    if missing:
        raise ValueError(f"df is missing columns {missing}; it has {list(df.columns)}")
    if limit and len(df) > MAX_ROWS:
        raise ValueError(f"df has {len(df)} rows; charts embed at most {MAX_ROWS}: thin it first")


def _scale(log: bool) -> alt.Scale:
    # nice=False: a log axis ends at the data, not at the next power of ten
    return alt.Scale(type="log", nice=False) if log else alt.Scale(zero=False)


def thin(df: pd.DataFrame, x: str, points: int = 120, log: bool = False) -> pd.DataFrame:
    """Keep rows whose ``x`` lies on a grid of about ``points`` values (log-spaced if ``log``).

    Use it before charting long training logs: the chart keeps its shape at a fraction of the size.
    """
    points = check_int("points", points, 2)
    _check(df, [x], limit=False)
    values = np.sort(df[x].unique())
    if len(values) <= points:
        return df
    if log:
        pos = values[values > 0]
        grid = np.unique(np.geomspace(pos[0], pos[-1], points))
    else:
        grid = np.linspace(values[0], values[-1], points)
    keep = np.unique(values[np.clip(np.searchsorted(values, grid), 0, len(values) - 1)])
    return df[df[x].isin(keep)].reset_index(drop=True)


def _band_layers(data: pd.DataFrame, x: str, y: str, color: str | None, log_x: bool,
                 log_y: bool, *, x_title: str, y_title: str, color_title: str | None,
                 highlight: Highlight, domain: list[float] | None = None,
                 colors: Mapping[str, str] | None = None, center: str = "mean") -> list[alt.Chart]:
    base = alt.Chart(data)
    yscale = _scale(log_y)
    if domain is not None:
        yscale = alt.Scale(type="log" if log_y else "linear", domain=domain, zero=False)
    scale = palette(data[color].unique(), highlight, colors) if color else None
    # The legend comes from the lines alone, so its symbols are not washed out by the bands.
    line_color = ({"color": alt.Color(f"{color}:N", title=color_title or color, scale=scale,
                                      legend=alt.Legend(symbolOpacity=1))} if color else {})
    band_color = {"fill": alt.Fill(f"{color}:N", scale=scale, legend=None)} if color else {}
    line = base.mark_line(point=alt.OverlayMarkDef(size=18)).encode(
        x=alt.X(f"{x}:Q", scale=_scale(log_x), title=x_title),
        y=alt.Y(f"{center}:Q", scale=yscale, title=y_title),
        tooltip=[*([color] if color else []), x, alt.Tooltip(f"{center}:Q", format=".4g"),
                 alt.Tooltip("lo:Q", format=".4g"), alt.Tooltip("hi:Q", format=".4g"), "seeds"],
        **line_color, **_stroke(color, highlight),
    )
    band = base.mark_area(opacity=0.15).encode(
        x=f"{x}:Q", y=alt.Y("lo:Q", scale=yscale), y2="hi:Q", **band_color
    )
    return [band, line]


def _own_legends(chart: alt.LayerChart) -> alt.LayerChart:
    # The bands' fill shares the lines' field and scale; merged, the band's hidden legend would hide
    # the lines' legend too. Kept apart, the lines' legend shows and the fill's stays hidden.
    return chart.resolve_legend(color="independent", fill="independent")


Center = Literal["mean", "median"]


def _summary(df: pd.DataFrame, by: list[str], y: str, seed: str, center: Center) -> pd.DataFrame:
    """Per-group summary over seeds for the band charts; the line follows ``center``."""
    if center not in ("mean", "median"):
        raise ValueError(f"center must be 'mean' or 'median'; got {center!r}")
    df = df.assign(**{seed: df[seed] if seed in df else 0})
    data = summarize_seeds(df, by, y, seed)
    if center == "median":
        data["median"] = df.groupby(by, sort=True)[y].median().to_numpy()
    return data


def curves(df: pd.DataFrame, *, x: str, y: str, color: str | None = None, seed: str = "seed",
           log_x: bool = False, log_y: bool = False, title: str = "", x_title: str | None = None,
           y_title: str | None = None, color_title: str | None = None,
           highlight: Highlight = None, colors: Mapping[str, str] | None = None,
           center: Center = "mean") -> alt.LayerChart:
    """Mean (or, with ``center="median"``, median) of ``y`` against ``x`` per ``color`` group, with a
    min-max band over ``seed``.

    ``highlight`` names the paper's method (one or more ``color`` values): fixed colour, thick line.
    ``colors`` fixes the colour of named groups (see :func:`palette`). Use ``center="median"`` where
    the chapter's claims report medians, so that the line and the scorecard agree.
    """
    _check(df, [x, y, color])
    by = [c for c in (color, x) if c]
    data = _summary(df, by, y, seed, center)
    layers = _band_layers(data, x, y, color, log_x, log_y, x_title=x_title or x,
                          y_title=y_title or y, color_title=color_title, highlight=highlight,
                          colors=colors, center=center)
    return _own_legends(alt.LayerChart(layer=layers, width=WIDTH, height=HEIGHT, title=title))


def loglog(df: pd.DataFrame, *, x: str, y: str, color: str | None = None,
           bound: str | None = None, title: str = "", x_title: str | None = None,
           y_title: str | None = None, bound_title: str | None = None,
           highlight: Highlight = None) -> alt.LayerChart:
    """Points of ``y`` against ``x`` on log-log axes with a least-squares line per ``color`` group.

    The legend shows each group's fitted slope. If ``bound`` names a column, it is drawn as a dashed
    line (a theorem's bound, say), so the reader sees every point fall below it.
    ``highlight`` names the paper's method among the ``color`` groups.
    """
    _check(df, [x, y, color, bound])
    groups = df.groupby(color, sort=False) if color else [("data", df)]
    fits, points, labels, hl = [], [], [], []
    for name, g in groups:
        slope, icpt = loglog_slope(g[x], g[y])
        label = f"{name} (slope {slope:.2f})"
        labels.append(label)
        if str(name) in _as_list(highlight):
            hl.append(label)
        xs = np.geomspace(g[x].min(), g[x].max(), 30)
        fits.append(pd.DataFrame({x: xs, y: np.exp(icpt) * xs**slope, "series": label}))
        points.append(g.assign(series=label))
    pts = pd.concat(points, ignore_index=True)
    xs_ = alt.X(f"{x}:Q", scale=alt.Scale(type="log", nice=False), title=x_title or x)
    ys_ = alt.Y(f"{y}:Q", scale=alt.Scale(type="log", nice=False), title=y_title or y)
    col = alt.Color("series:N", title="fit", scale=palette(labels, hl or None))
    layers = [
        alt.Chart(pts).mark_point(filled=True, size=50).encode(
            x=xs_, y=ys_, color=col, tooltip=[x, alt.Tooltip(f"{y}:Q", format=".4g"), "series"]),
        alt.Chart(pd.concat(fits, ignore_index=True)).mark_line().encode(x=xs_, y=ys_, color=col),
    ]
    if bound:
        bd = df[[x, bound]].drop_duplicates().sort_values(x)
        layers.append(alt.Chart(bd).mark_line(strokeDash=[6, 4], color="black").encode(
            x=xs_, y=alt.Y(f"{bound}:Q", scale=alt.Scale(type="log", nice=False)),
            tooltip=[x, alt.Tooltip(f"{bound}:Q", format=".4g", title=bound_title or bound)]))
    return alt.LayerChart(layer=layers, width=WIDTH, height=HEIGHT, title=title)


def sweep(df: pd.DataFrame, *, x: str, y: str, param: str, color: str | None = None,
          seed: str = "seed", param_label: str | None = None, log_x: bool = False,
          log_y: bool = False, start: float | None = None, title: str = "",
          x_title: str | None = None, y_title: str | None = None, color_title: str | None = None,
          highlight: Highlight = None, colors: Mapping[str, str] | None = None,
          center: Center = "mean") -> alt.LayerChart:
    """A chart of ``y`` against ``x`` for one value of ``param``, chosen with a slider on the page.

    The whole grid is embedded and Vega filters it in the browser, so the slider works on the static
    book page with no kernel. The slider steps through the grid points (which may be log-spaced); a
    label in the corner shows the current value. The y-axis is fixed across the grid so that moving
    the slider compares like with like.

    Args:
        start: the grid value shown first (default: the middle of the grid).
        center: ``"mean"`` or ``"median"`` over seeds for the line (the band is the min-max).
    """
    _check(df, [x, y, param, color])
    if start is not None:
        start = check_range("start", start, low_open=True, high_open=True)
    values = sorted(df[param].unique())
    index = {v: i for i, v in enumerate(values)}
    by = [c for c in (param, color, x) if c]
    data = _summary(df, by, y, seed, center)
    data["grid_point"] = data[param].map(index)
    first = len(values) // 2 if start is None else index[min(values, key=lambda v: abs(v - start))]
    label = param_label or param
    slider = alt.param(name="grid_point_param", value=first, bind=alt.binding_range(
        min=0, max=len(values) - 1, step=1, name=f"{label} (grid point) "))
    lo, hi = float(data["lo"].min()), float(data["hi"].max())
    if log_y:
        lo = float(data.loc[data["lo"] > 0, "lo"].min())
    bands = _band_layers(data, x, y, color, log_x, log_y, x_title=x_title or x, y_title=y_title or y,
                         color_title=color_title, highlight=highlight, domain=[lo, hi], colors=colors,
                         center=center)
    layers = [layer.transform_filter(alt.datum.grid_point == slider) for layer in bands]
    labels = pd.DataFrame({"grid_point": range(len(values)),
                           "label": [f"{label} = {v:.4g}" for v in values]})
    layers.append(alt.Chart(labels).transform_filter(alt.datum.grid_point == slider).mark_text(
        align="left", baseline="top", fontSize=13, fontWeight="bold").encode(
        x=alt.value(6), y=alt.value(6), text="label:N"))
    chart = alt.LayerChart(layer=layers, width=WIDTH, height=HEIGHT, title=title)
    return _own_legends(chart.add_params(slider))


def save_chart(chart: alt.TopLevelMixin, stem: str | Path, *, png: bool = True) -> list[Path]:
    """Write ``stem.html`` (interactive) and, if ``png``, ``stem.png`` (rendered offline by vl-convert)."""
    stem = Path(stem)
    paths = [stem.with_suffix(".html")]
    chart.save(paths[0])
    if png:
        paths.append(stem.with_suffix(".png"))
        chart.save(paths[1], scale_factor=2)
    return paths
