import pytest

from iclr_lab.core.widgets import explorer, log_slider, slider


def test_explorer_recomputes_when_a_control_moves():
    calls = []

    def square_plus(x: float, k: float) -> float:
        calls.append((x, k))
        return x**2 + k

    w = explorer(square_plus, x=slider("x", 1.0, 0.0, 3.0, 0.5), k=log_slider("k", 1.0, 0.01, 100))
    assert w.result == 2.0
    w.children[0].value = 2.0
    assert w.result == 5.0
    w.children[1].value = 10.0
    assert w.result == pytest.approx(14.0)
    assert calls[-1] == (2.0, pytest.approx(10.0))


def test_log_slider_rejects_non_positive_ranges():
    with pytest.raises(ValueError, match=r"min must be in \(0, inf\)"):
        log_slider("k", 1.0, 0.0, 10.0)
    with pytest.raises(ValueError, match=r"max must be in \(5, inf\)"):
        log_slider("k", 1.0, 5.0, 2.0)
    with pytest.raises(ValueError, match="value must be in"):
        log_slider("k", 100.0, 1.0, 10.0)


def test_the_display_bundle_carries_a_static_rendering_for_the_book():
    import altair as alt
    import pandas as pd

    def chart(k: float):
        return alt.Chart(pd.DataFrame({"x": [1, 2], "y": [k, 2 * k]})).mark_line().encode(x="x", y="y")

    w = explorer(chart, k=log_slider("scale k", 1.0, 0.1, 10.0))
    bundle = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle, "live frontends get the widget"
    static = bundle["text/html"]
    assert "altair-viz" in static and "Live explorer" in static
    assert "scale k</i> (0.1\u201310)" in static, "the note lists each control with its range"


def test_a_missing_ipywidgets_is_a_clear_error():
    import subprocess
    import sys

    code = ("import sys; sys.modules['ipywidgets'] = None\n"
            "try:\n    import iclr_lab.core.widgets\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install \"iclr-lab[widgets]\"" in out.stdout


def _line_chart(k: float):
    import altair as alt
    import pandas as pd

    return alt.Chart(pd.DataFrame({"x": [1, 2], "y": [k, 2 * k]})).mark_line().encode(x="x", y="y")


def test_a_chart_is_drawn_as_svg_and_nothing_that_needs_the_network():
    """No text/html (frontends rank it above SVG, and Altair's HTML loads vega from a CDN), and no
    Vega-Lite spec (no offline frontend renders v6; it carries every data row twice)."""
    from iclr_lab.core.widgets import live_bundle

    bundle = live_bundle(_line_chart(3.0))
    assert bundle["image/svg+xml"].lstrip().startswith("<svg") and "</svg>" in bundle["image/svg+xml"]
    assert set(bundle) == {"image/svg+xml", "text/plain"}
    assert "cdn" not in bundle["image/svg+xml"].lower()


def _shown(outputs) -> list[dict]:
    return [o.data for o in outputs]


def test_the_explorer_displays_each_result_in_a_shell():
    """In a kernel, interactive() alone displays nothing (no auto_display): the Explorer must."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    with capture_output() as first:
        w = explorer(_line_chart, k=log_slider("scale k", 1.0, 0.1, 10.0))
    with capture_output() as moved:
        w.children[0].value = 10.0
    for outputs in (first.outputs, moved.outputs):
        (data,) = _shown(outputs)
        assert "image/svg+xml" in data
    assert _shown(first.outputs)[0]["image/svg+xml"] != _shown(moved.outputs)[0]["image/svg+xml"]


def test_a_table_shows_as_itself_and_a_failing_call_leaves_no_stale_result():
    import pandas as pd
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()

    def table(n: int) -> pd.DataFrame:
        if n > 3:
            raise ValueError("n must be at most 3")
        return pd.DataFrame({"i": range(n)})

    import ipywidgets

    with capture_output() as first:
        w = explorer(table, n=ipywidgets.IntSlider(value=2, min=0, max=5))
    (data,) = _shown(first.outputs)
    assert "<table" in data["text/html"], "a DataFrame shows as its HTML table"
    with capture_output() as moved:
        w.children[0].value = 5
    assert w.result is None, "the failed call's explorer holds no result from before"
    assert not any("text/html" in d for d in _shown(moved.outputs)), "no stale table is shown"


def test_the_book_build_does_not_draw_the_live_output(monkeypatch):
    """Its pages show the static rendering; the live output area would only cost time and bytes."""
    from iclr_lab.core.widgets import STATIC_BUILD_ENV, LiveResult

    monkeypatch.setenv(STATIC_BUILD_ENV, "1")
    assert set(LiveResult(_line_chart(1.0))._repr_mimebundle_()) == {"text/plain"}
    monkeypatch.delenv(STATIC_BUILD_ENV)
    assert "image/svg+xml" in LiveResult(_line_chart(1.0))._repr_mimebundle_()
