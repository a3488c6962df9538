"""ipywidgets explorers: thin wrappers over pure functions of the package.

In a live kernel (Jupyter, Binder, Colab) moving a control re-runs the function and redraws its
result. A static web page has no kernel, so an explorer also carries a static rendering of its
first result (``text/html`` in its display bundle): the book shows that chart with a note on how
to make it live, instead of sliders that cannot do anything. Every chapter pairs an explorer with an
Altair :func:`~iclr_lab.core.charts.sweep` chart whose slider does work on the static page.

In a live frontend the explorer shows each result in its output area as a :class:`LiveResult`: an
Altair chart as an SVG drawn in the kernel by vl-convert; anything else (a table, a matplotlib figure) as
itself. An Altair chart's own HTML display loads vega from a CDN, and JupyterLab 4.6 renders
Vega-Lite v3-v5 but not Altair 6's v6, so without the SVG a reader with no network (``make lab``
offline, a firewalled campus) would see sliders and an empty output. Only the explorer's output
changes: the chapter's static charts keep Altair's interactive renderer.

Because the explorer *is* ``ipywidgets.interactive`` over a pure function, tests drive it without a
kernel: set ``w.children[i].value`` and read ``w.result``.

ipywidgets is an optional dependency (``pip install "iclr-lab[widgets]"``); importing this module
without it raises an ``ImportError`` that says so.
"""

from __future__ import annotations

import html
import io
import math
import os
from collections.abc import Callable
from typing import Any

try:
    import ipywidgets as widgets
except ImportError as err:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "The live explorers need ipywidgets, which is not installed. Install it with "
        "`pip install \"iclr-lab[widgets]\"` (in a notebook: `%pip install ipywidgets`), then "
        "restart the kernel. Everything else in iclr_lab works without it.") from err

from iclr_lab.core.validation import check_int, check_range

__all__ = ["Explorer", "LiveResult", "explorer", "live_bundle", "log_slider", "slider"]

_STYLE = {"description_width": "initial"}
_LAYOUT = widgets.Layout(width="420px")


def slider(description: str, value: float, min: float, max: float, step: float) -> widgets.FloatSlider:
    """A labelled float slider from ``min`` to ``max`` (finite, ``min < max``) in steps of
    ``step`` (> 0), starting at ``value`` (in ``[min, max]``), that only fires on release
    (``continuous_update=False``)."""
    min = check_range("min", min, low_open=True, high_open=True)
    max = check_range("max", max, min, math.inf, low_open=True, high_open=True)
    step = check_range("step", step, 0, max - min, low_open=True)
    value = check_range("value", value, min, max)
    return widgets.FloatSlider(value=value, min=min, max=max, step=step, description=description,
                               continuous_update=False, style=_STYLE, layout=_LAYOUT,
                               readout_format=".3g")


def log_slider(description: str, value: float, min: float, max: float,
               steps_per_decade: int = 4) -> widgets.FloatLogSlider:
    """A labelled log-scale slider from ``min`` to ``max`` (both positive and finite, ``min <
    max``), starting at ``value`` (in ``[min, max]``), with ``steps_per_decade`` (>= 1) stops per
    factor of ten."""
    min = check_range("min", min, 0, math.inf, low_open=True)
    max = check_range("max", max, min, math.inf, low_open=True)
    value = check_range("value", value, min, max)
    steps_per_decade = check_int("steps_per_decade", steps_per_decade, 1)
    return widgets.FloatLogSlider(value=value, base=10, min=math.log10(min), max=math.log10(max),
                                  step=1 / steps_per_decade, description=description,
                                  continuous_update=False, style=_STYLE, layout=_LAYOUT,
                                  readout_format=".3g")


def _control_range(w: Any) -> str:
    """``min–max`` of a slider in its own units (a log slider stores exponents)."""
    if isinstance(w, widgets.FloatLogSlider):
        lo, hi = w.base ** w.min, w.base ** w.max
    elif hasattr(w, "min") and hasattr(w, "max"):
        lo, hi = w.min, w.max
    else:
        return ""
    return f" ({lo:.4g}\u2013{hi:.4g})"


def _is_altair(result: Any) -> bool:
    return type(result).__module__.startswith("altair.") and hasattr(result, "to_dict")


def live_bundle(result: Any) -> dict[str, Any]:
    """The display bundle of ``result`` in an explorer's output, drawn with no network.

    An Altair chart becomes ``image/svg+xml`` (vl-convert, in the kernel) and a short
    ``text/plain``. No ``text/html``: frontends rank it above SVG, and Altair's HTML loads vega from
    a CDN. No Vega-Lite spec either: JupyterLab 4.6 renders no v6 spec, and the spec holds every
    data row, which the output widget then carries twice (a 64 x 64 image explorer's spec made
    nbclient wait out its whole cell timeout). Anything else is formatted by IPython as it would be
    on its own (a DataFrame as a table, a matplotlib figure as a PNG).
    """
    if _is_altair(result):
        buf = io.StringIO()
        result.save(buf, format="svg")
        return {"image/svg+xml": buf.getvalue(),
                "text/plain": f"<{type(result).__name__}: an Altair chart drawn as SVG>"}
    from IPython.core.interactiveshell import InteractiveShell

    formatter = InteractiveShell.instance().display_formatter if InteractiveShell.initialized() else None
    if formatter is not None:
        data, _ = formatter.format(result)
        return dict(data)
    return {"text/plain": repr(result)}


#: Set by the book build (``tools/build_book.py``): its pages show each explorer's static rendering
#: (the ``text/html`` of :class:`Explorer`), never the live output area, so there the first result
#: is not drawn again as an SVG (about 1 CPU s a chapter, and up to 1.7 MB of page).
STATIC_BUILD_ENV = "ICLR_LAB_STATIC_BUILD"


class LiveResult:
    """One explorer result as a live frontend shows it (:func:`live_bundle`), drawn only when a
    frontend asks for it (a test without a kernel never pays for the SVG), and not in the book
    build (``ICLR_LAB_STATIC_BUILD=1``)."""

    def __init__(self, result: Any) -> None:
        self.result = result

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if os.environ.get(STATIC_BUILD_ENV) == "1":
            return {"text/plain": f"{self!r}: drawn live only"}
        return live_bundle(self.result)

    def __repr__(self) -> str:
        return f"LiveResult({type(self.result).__name__})"


class Explorer(widgets.interactive):
    """``ipywidgets.interactive`` that shows each result offline, and whose display bundle also
    holds a static HTML rendering.

    A live frontend renders the widget: its controls and, in its output area, the latest result as
    a :class:`LiveResult` (``interactive`` itself displays nothing unless asked to, and Altair's own
    display would need the network). The book's static pages render the ``text/html`` part: the
    first result (an Altair chart or a table) under a note that lists the controls and says how to
    make them live.
    """

    def update(self, *args: Any) -> None:
        """Recompute the result (``interactive.update``) and display it in the output area."""
        self.result = None  # a call that raises leaves no stale chart behind its traceback
        super().update(*args)
        from IPython.core.interactiveshell import InteractiveShell

        # without a shell (a test driving the widget) there is nowhere to show it
        if self.result is not None and InteractiveShell.initialized():
            from IPython.display import display

            with self.out:
                display(LiveResult(self.result))

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        bundle = dict(bundle)
        static = _static_html(self.result)
        if static:
            controls = ", ".join(f"<i>{html.escape(str(c.description))}</i>{_control_range(c)}"
                                 for c in self.children if getattr(c, "description", ""))
            note = ("<p class='iclr-lab-explorer-note' style='font-size:0.9em;margin:0 0 4px'>"
                    "<b>Live explorer.</b> Launch this page on Binder or Colab (the rocket icon at "
                    f"the top) to move its controls: {controls}. Shown here: its first result.</p>")
            bundle["text/html"] = (f"<div class='iclr-lab-explorer' style='border:1px solid #ddd;"
                                   f"padding:6px'>{note}{static}</div>")
        return bundle


def _static_html(result: Any) -> str:
    """HTML for ``result`` as a static page shows it: Altair's own loader, or a table."""
    if result is None:
        return ""
    repr_bundle = getattr(result, "_repr_mimebundle_", None)
    if callable(repr_bundle):
        out = repr_bundle()
        data = out[0] if isinstance(out, tuple) else out
        if isinstance(data, dict) and "text/html" in data:
            return str(data["text/html"])
    repr_html = getattr(result, "_repr_html_", None)
    if callable(repr_html):
        return str(repr_html())
    return f"<pre>{html.escape(repr(result))}</pre>"


def explorer(fn: Callable[..., Any], **controls: widgets.ValueWidget | Any) -> Explorer:
    """An :class:`Explorer`: ``ipywidgets.interactive(fn, **controls)`` with the book's styling.

    ``fn`` must be a pure function of the controls' values that returns something displayable
    (an Altair chart, a DataFrame). The returned widget keeps the last result in ``.result``.
    Call ``IPython.display.display(w)`` (or leave it last in a cell) to show it.
    """
    w = Explorer(fn, {"manual": False}, **controls)
    w.layout = widgets.Layout(border="1px solid #ddd", padding="6px")
    return w
