import numpy as np
import pandas as pd
import pytest
import vl_convert as vlc

from iclr_lab.core import charts


@pytest.fixture
def runs():
    rng = np.random.default_rng(0)
    rows = [
        {"method": m, "lr": lr, "step": s, "seed": seed, "loss": float(1 / s + lr + rng.random())}
        for m in ("A", "B") for lr in (1e-3, 1e-2, 1e-1) for s in range(1, 21)
        for seed in range(3)
    ]
    return pd.DataFrame(rows)


def _render(chart) -> bytes:
    png = vlc.vegalite_to_png(chart.to_dict())
    assert png[:4] == b"\x89PNG"
    return png


def test_curves_aggregates_seeds_into_a_band(runs):
    chart = charts.curves(runs[runs.lr == 1e-2], x="step", y="loss", color="method")
    d = chart.to_dict()  # validates against the Vega-Lite schema
    values = next(iter(d["datasets"].values()))
    assert len(values) == 2 * 20 and {"mean", "lo", "hi", "seeds"} <= set(values[0])
    assert all(v["lo"] <= v["mean"] <= v["hi"] and v["seeds"] == 3 for v in values)
    band, line = d["layer"]
    assert band["encoding"]["fill"]["legend"] is None, "the legend shows the lines, not the bands"
    assert d["resolve"]["legend"] == {"color": "independent", "fill": "independent"}, (
        "kept apart, the hidden band legend cannot hide the lines' legend")
    assert line["encoding"]["color"]["field"] == "method"
    _render(chart)



def test_curves_and_sweep_can_follow_the_median(runs):
    """Chapters whose claims report medians draw the median line; the band stays the min-max."""
    one = runs[runs.lr == 1e-2]
    d = charts.curves(one, x="step", y="loss", color="method", center="median").to_dict()
    values = next(iter(d["datasets"].values()))
    expected = one.groupby(["method", "step"])["loss"].median()
    assert all(v["median"] == pytest.approx(expected[(v["method"], v["step"])]) for v in values)
    assert any(v["median"] != pytest.approx(v["mean"]) for v in values), "median differs from the mean here"
    assert d["layer"][1]["encoding"]["y"]["field"] == "median"
    s = charts.sweep(runs, x="step", y="loss", param="lr", color="method", center="median").to_dict()
    assert s["layer"][1]["encoding"]["y"]["field"] == "median"
    with pytest.raises(ValueError, match="center"):
        charts.curves(one, x="step", y="loss", center="mode")  # type: ignore[arg-type]

def test_loglog_reports_the_fitted_slope_and_draws_the_bound():
    n = np.array([10, 30, 100, 300, 1000.0])
    df = pd.DataFrame({"n": n, "regret": 2 * n**0.5, "bound": 3 * n**0.5})
    chart = charts.loglog(df, x="n", y="regret", bound="bound", title="slope")
    d = chart.to_dict()
    labels = {v["series"] for ds in d["datasets"].values() for v in ds if "series" in v}
    assert labels == {"data (slope 0.50)"}
    assert any(layer["mark"].get("strokeDash") for layer in d["layer"])
    _render(chart)


def test_sweep_binds_a_slider_that_filters_the_grid(runs):
    chart = charts.sweep(runs, x="step", y="loss", param="lr", color="method",
                         param_label="learning rate", start=1e-2)
    d = chart.to_dict()
    (param,) = d["params"]
    assert param["bind"]["input"] == "range"
    assert (param["bind"]["min"], param["bind"]["max"], param["bind"]["step"]) == (0, 2, 1)
    assert param["value"] == 1
    assert all(layer["transform"][0]["filter"] == "(datum.grid_point === grid_point_param)"
               for layer in d["layer"])
    _render(chart)


def test_charts_refuse_too_many_rows_and_thin_keeps_the_ends():
    big = pd.DataFrame({"step": np.arange(1, 20001), "loss": 1.0, "seed": 0})
    with pytest.raises(ValueError, match="thin it first"):
        charts.curves(big, x="step", y="loss")
    small = charts.thin(big, "step", points=50, log=True)
    assert len(small) <= 50
    assert small.step.iloc[0] == 1 and small.step.iloc[-1] == 20000


def test_missing_columns_are_named(runs):
    with pytest.raises(ValueError, match="missing columns \\['acc'\\]"):
        charts.curves(runs, x="step", y="acc")


def test_summary_names_cannot_be_grouping_columns():
    from iclr_lab.core.stats import summarize_seeds

    df = pd.DataFrame({"mean": [1, 2], "y": [0.0, 1.0], "seed": [0, 1]})
    with pytest.raises(ValueError, match="summary column names"):
        summarize_seeds(df, ["mean"], "y")


def test_the_papers_method_has_the_fixed_colour_and_baselines_are_muted(runs):
    df = runs[runs.lr == 1e-2]
    d = charts.curves(df, x="step", y="loss", color="method", highlight="B",
                      x_title="step t", y_title="loss F(θ)", color_title="optimizer").to_dict()
    band, line = d["layer"]
    scale = line["encoding"]["color"]["scale"]
    assert dict(zip(scale["domain"], scale["range"], strict=True))["B"] == charts.METHOD_COLORS[0]
    assert dict(zip(scale["domain"], scale["range"], strict=True))["A"] in charts.BASELINE_COLORS
    assert band["encoding"]["fill"]["scale"] == scale, "bands take the lines' colours"
    assert line["encoding"]["strokeWidth"]["condition"]["value"] > line["encoding"]["strokeWidth"]["value"]
    assert line["encoding"]["x"]["title"] == "step t" and line["encoding"]["y"]["title"] == "loss F(θ)"
    assert line["encoding"]["color"]["title"] == "optimizer"
    with pytest.raises(ValueError, match="not among the series"):
        charts.curves(df, x="step", y="loss", color="method", highlight="C")
    _render(charts.curves(df, x="step", y="loss", color="method", highlight="B"))


def test_palette_and_reference_line():
    scale = charts.palette(["AdamW", "VRAdam", "SGD", "VRAdam (beta3=1)"],
                           highlight=["VRAdam", "VRAdam (beta3=1)"]).to_dict()
    assert scale["range"][1] == charts.METHOD_COLORS[0] and scale["range"][3] == charts.METHOD_COLORS[1]
    assert set(scale["range"][::2]) <= set(charts.BASELINE_COLORS)
    line = pd.DataFrame({"x": [1.0, 2.0], "y": [0.5, 2.0]})
    import altair as alt

    chart = alt.Chart(line).mark_line().encode(x="x:Q", y="y:Q") + charts.reference_line(1.0, label="edge")
    _render(chart)
    with pytest.raises(ValueError, match="axis"):
        charts.reference_line(1.0, axis="z")


def test_fixed_colours_follow_a_method_into_every_chart(runs):
    fixed = {"A": "#123456", "B": "#abcdef"}
    d = charts.curves(runs[runs.lr == 1e-2], x="step", y="loss", color="method", colors=fixed).to_dict()
    scale = d["layer"][1]["encoding"]["color"]["scale"]
    assert dict(zip(scale["domain"], scale["range"], strict=True)) == fixed
    import altair as alt

    hand = alt.hconcat(alt.Chart(runs).mark_line().encode(x="step", y="loss", color="method:N"),
                       alt.Chart(runs[runs.method == "B"]).mark_point().encode(
                           x="step", y="loss", color=alt.Color("method:N", scale=alt.Scale(domain=["B"]))))
    spec = charts.recolor(hand, fixed).to_dict()
    left, right = spec["hconcat"]
    assert left["encoding"]["color"]["scale"]["range"] == ["#123456", "#abcdef"]
    assert right["encoding"]["color"]["scale"] == {"domain": ["B"], "range": ["#abcdef"]}, (
        "a panel showing only B still draws it in B's colour")
    _render(charts.recolor(hand, fixed))
    backwards = charts.recolor(hand, {"B": "#abcdef", "A": "#123456"}).to_dict()["hconcat"][0]
    assert backwards["encoding"]["color"]["scale"]["domain"] == ["B", "A"], "the legend follows the table"


def test_charts_use_one_font_with_greek_letters(runs):
    spec = charts.curves(runs, x="step", y="loss", color="method", y_title="α₀").to_dict()
    assert spec["config"]["font"] == charts.FONT
