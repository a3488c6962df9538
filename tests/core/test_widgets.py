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
