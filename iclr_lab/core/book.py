"""Helpers that only chapters call: glue a report's numbers into the page text.

myst-nb's ``glue`` stores a value under a key; the page then shows it with ``{glue:text}`key```
anywhere, including *above* the cell that computed it. That is how the "paper at a glance" box at the
top of each chapter shows the numbers measured in the "Reproduce" section at the bottom.
"""

from __future__ import annotations

from typing import Any

from iclr_lab.core.report import Report

__all__ = ["glue_report"]


def glue_report(report: Report, **extra: Any) -> None:
    """Glue the scorecard and each claim's numbers into the page.

    Keys: ``scorecard`` (the table; show it with ``{glue:} scorecard``), ``<claim>`` (the measured
    float; ``{glue:text}`<claim>:.3g```) and ``<claim>_status`` (markdown:
    ``{glue:md}`<claim>_status```). Keyword arguments glue further values (a chart to show
    above the cell that made it, say) under their names.

    Outside the book build (Colab, plain Jupyter) myst-nb may be missing; then this does nothing.
    """
    try:
        from myst_nb import glue
    except ImportError:  # running the notebook outside the book build (Colab, plain Jupyter)
        return
    from IPython.display import Markdown

    glue("scorecard", report, display=False)  # shown through Report._repr_html_
    for c in report.claims:
        glue(c.name, c.measured, display=False)
        glue(f"{c.name}_status", Markdown(f"**{c.status}**"), display=False)
    for key, value in extra.items():
        glue(key, value, display=False)
