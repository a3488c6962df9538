"""Helpers that only chapters call: glue a report's numbers into the page text.

myst-nb's ``glue`` stores a value under a key; the page then shows it with ``{glue:text}`key```
anywhere, including *above* the cell that computed it. That is how the "paper at a glance" box at the
top of each chapter shows the numbers measured in the "Reproduce" section at the bottom.

Outside the book build (a launch notebook on Colab or Binder, see ``tools/launch_notebooks.py``)
there is no myst-nb: :func:`glue_report` then keeps the values here, and :func:`show_markdown` and
:func:`glued` show them where the book would have typeset them.
"""

from __future__ import annotations

import re
from typing import Any

from iclr_lab.core.report import Report

__all__ = ["claim_keys", "glue_report", "glued", "show_markdown"]

#: Everything glued in this kernel: key -> value (numbers, charts, the report).
_GLUED: dict[str, Any] = {}
_ROLE = re.compile(r"\{glue(?::text|:md)?\}`(?P<key>[^`:]+)(?::(?P<fmt>[^`]*))?`")


def glue_report(report: Report, **extra: Any) -> None:
    """Glue the scorecard and each claim's numbers into the page.

    Keys: ``scorecard`` (the table; show it with ``{glue:} scorecard``), ``<claim>`` (the measured
    float; ``{glue:text}`<claim>:.3g```), ``<claim>_status`` and ``<claim>_verdict`` (markdown:
    ``{glue:md}`<claim>_verdict```), and where the claim has them ``<claim>_control`` (the
    control's median), ``<claim>_lo`` / ``<claim>_hi`` (a paired comparison's interval),
    ``<claim>_holds`` and ``<claim>_control_fails`` (seed blocks, of ``<claim>_blocks``).
    Keyword arguments glue further values (a chart to show
    above the cell that made it, say) under their names. A string is glued as Markdown: quote it
    with ``{glue:md}`key``` (``{glue:text}`` would show its quotes), for example the name of the
    optimizer that won.

    Outside the book build (Colab, plain Jupyter) myst-nb may be missing; the values are then only
    kept for :func:`glued` and :func:`show_markdown`.
    """
    from iclr_lab.core.scoreboard import record

    record(report)  # for the book's scoreboard page, when the build asks for it
    _GLUED["scorecard"] = report
    numbers: dict[str, float] = {}
    words: dict[str, str] = {}
    for c in report.claims:
        numbers.update(_claim_numbers(c))
        words[f"{c.name}_status"] = f"**{c.status}**"
        words[f"{c.name}_verdict"] = f"**{report.verdict_of(c)}**"
    _GLUED.update(numbers)
    _GLUED.update(words)
    extra = {k: _plain(v) for k, v in extra.items()}
    _GLUED.update(extra)
    try:
        from myst_nb import glue
    except ImportError:  # running the notebook outside the book build (Colab, plain Jupyter)
        return
    from IPython.display import Markdown

    glue("scorecard", report, display=False)  # shown through Report._repr_html_
    for key, number in numbers.items():
        glue(key, number, display=False)
    for key, word in words.items():
        glue(key, Markdown(word), display=False)
    for key, value in extra.items():
        glue(key, Markdown(value) if isinstance(value, str) else value, display=False)


def claim_keys(c: Any, *, blocks: bool = True) -> set[str]:
    """The number keys :func:`glue_report` glues for claim ``c``; with ``blocks`` also the
    seed-block counts it glues once the chapter's stability table ships (a book-scale run)."""
    keys = set(_claim_numbers(c))
    if blocks:
        keys |= {f"{c.name}_blocks", f"{c.name}_holds"}
        keys |= {f"{c.name}_control_fails"} if c.control else set()
    return keys


def _claim_numbers(c: Any) -> dict[str, float]:
    """The glue keys of one claim's numbers (see :func:`glue_report`)."""
    out = {c.name: c.measured}
    if c.control:
        out[f"{c.name}_control"] = c.control_measured
    if c.interval is not None:
        out[f"{c.name}_lo"], out[f"{c.name}_hi"] = c.interval
    if c.stability is not None:
        out[f"{c.name}_blocks"] = float(c.stability.blocks)
        out[f"{c.name}_holds"] = float(c.stability.holds)
        if c.stability.control_fails is not None:
            out[f"{c.name}_control_fails"] = float(c.stability.control_fails)
    return out


def _plain(value: Any) -> Any:
    """NumPy scalars as Python numbers: myst-nb formats glued text from ``repr``, and NumPy 2 writes
    ``np.float64(0.5)``, which ``{glue:text}`key:.2f``` cannot parse."""
    import numbers

    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def _smoke_run() -> bool:
    """Whether the report glued in this kernel is a smoke run (a launch notebook run with
    ``ICLR_LAB_SCALE=smoke``), whose tables lack some of the book's grid points."""
    report = _GLUED.get("scorecard")
    return isinstance(report, Report) and report.scale == "smoke"


def _not_measured(key: str) -> str:
    return f"[{key}: not measured at smoke scale]"


def glued(key: str) -> Any:
    """The value glued under ``key`` in this kernel (run the chapter's Reproduce section first).

    After a smoke run, a key that only the book scale measures reads as a placeholder saying so.
    """
    if key not in _GLUED and _smoke_run():
        return _not_measured(key)
    if key not in _GLUED:
        raise KeyError(f"nothing is glued under {key!r} yet: run the chapter's Reproduce section first"
                       f" (glued so far: {sorted(_GLUED)})")
    return _GLUED[key]


def render_markdown(text: str) -> str:
    """``text`` with each ``{glue:text}`key:fmt``` (and ``{glue:md}``) replaced by the glued value."""

    def value(m: re.Match[str]) -> str:
        if m.group("key") not in _GLUED and _smoke_run():
            return _not_measured(m.group("key"))
        v = glued(m.group("key"))
        fmt = m.group("fmt")
        return format(v, fmt) if fmt else str(v)

    return _ROLE.sub(value, text)


def show_markdown(text: str) -> Any:
    """Display ``text`` as Markdown with its glued numbers filled in (launch notebooks call this)."""
    from IPython.display import Markdown

    return Markdown(render_markdown(text))
