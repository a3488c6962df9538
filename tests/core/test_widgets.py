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
    with pytest.raises(ValueError, match="0 < min < max"):
        log_slider("k", 1.0, 0.0, 10.0)


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
