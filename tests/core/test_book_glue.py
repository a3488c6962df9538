"""Gluing a report's numbers into a launch notebook's text (iclr_lab.core.book)."""

import pandas as pd
import pytest

from iclr_lab.core import book
from iclr_lab.core.report import Claim, Report


def _glue(scale: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(book, "_GLUED", {})
    monkeypatch.delenv("ICLR_LAB_SCOREBOARD_DIR", raising=False)
    report = Report("vradam", scale, 0, {"t": pd.DataFrame({"x": [1]})},
                    [Claim("a", "s", 0.25, 1.0, kind="sanity")])
    book.glue_report(report, width=3.0)


def test_glued_numbers_are_filled_in_and_a_missing_one_is_an_error_at_book_scale(monkeypatch):
    _glue("book", monkeypatch)
    assert book.render_markdown("w = {glue:text}`width:.1f`, a = {glue:text}`a:.2f`") == "w = 3.0, a = 0.25"
    with pytest.raises(KeyError, match="nothing is glued under 'T3'"):
        book.render_markdown("{glue:text}`T3:.1f`")


def test_after_a_smoke_run_a_number_only_the_book_measures_says_so(monkeypatch):
    """A launch notebook run with ICLR_LAB_SCALE=smoke: smaller grids lack some glued keys."""
    _glue("smoke", monkeypatch)
    text = book.render_markdown("w = {glue:text}`width:.1f`, T3 = {glue:text}`T3:.1f`")
    assert text == "w = 3.0, T3 = [T3: not measured at smoke scale]"
    assert book.glued("chart_of_T3") == "[chart_of_T3: not measured at smoke scale]"
