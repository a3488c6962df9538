"""ipywidgets explorers: thin wrappers over pure functions of the package.

In a live kernel (Jupyter, Binder, Colab) moving a control re-runs the function and redraws its
result. On the static book page the controls render but cannot recompute; every chapter therefore
pairs an explorer with an Altair :func:`~iclr_lab.core.charts.sweep` chart that does work statically.

Because the explorer *is* ``ipywidgets.interactive`` over a pure function, tests drive it without a
kernel: set ``w.children[i].value`` and read ``w.result``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

__all__ = ["explorer", "log_slider", "slider"]

_STYLE = {"description_width": "initial"}
_LAYOUT = widgets.Layout(width="420px")


def slider(description: str, value: float, min: float, max: float, step: float) -> widgets.FloatSlider:
    """A labelled float slider that only fires on release (``continuous_update=False``)."""
    return widgets.FloatSlider(value=value, min=min, max=max, step=step, description=description,
                               continuous_update=False, style=_STYLE, layout=_LAYOUT,
                               readout_format=".3g")


def log_slider(description: str, value: float, min: float, max: float,
               steps_per_decade: int = 4) -> widgets.FloatLogSlider:
    """A labelled log-scale slider from ``min`` to ``max`` (both positive)."""
    import math

    if not 0 < min < max:
        raise ValueError(f"log_slider needs 0 < min < max, got min={min}, max={max}")
    return widgets.FloatLogSlider(value=value, base=10, min=math.log10(min), max=math.log10(max),
                                  step=1 / steps_per_decade, description=description,
                                  continuous_update=False, style=_STYLE, layout=_LAYOUT,
                                  readout_format=".3g")


def explorer(fn: Callable[..., Any], **controls: widgets.ValueWidget | Any) -> widgets.interactive:
    """``ipywidgets.interactive(fn, **controls)`` with the book's styling.

    ``fn`` must be a pure function of the controls' values that returns something displayable
    (an Altair chart, a DataFrame). The returned widget keeps the last result in ``.result``.
    Call ``IPython.display.display(w)`` (or leave it last in a cell) to show it.
    """
    w = widgets.interactive(fn, {"manual": False}, **controls)
    w.layout = widgets.Layout(border="1px solid #ddd", padding="6px")
    return w
