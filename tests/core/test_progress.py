import io

from iclr_lab.core import progress as prog


def test_only_the_outermost_loop_draws_a_bar(monkeypatch):
    monkeypatch.setenv("ICLR_LAB_PROGRESS", "1")
    err = io.StringIO()
    monkeypatch.setattr(prog.sys, "stderr", err)
    seen = []
    for i in prog.progress(range(3), desc="outer"):
        inner = prog.progress(range(2), desc="inner")
        assert isinstance(inner, type(iter(range(0)))), "nested loops are not wrapped"
        seen += [(i, j) for j in inner]
    assert len(seen) == 6
    text = err.getvalue()
    assert "outer" in text and "inner" not in text
    assert prog._active == 0
    assert "outer" in "".join(prog.progress(["outer"]))  # a new top-level loop draws again


def test_silent_when_disabled(monkeypatch):
    monkeypatch.setenv("ICLR_LAB_PROGRESS", "0")
    err = io.StringIO()
    monkeypatch.setattr(prog.sys, "stderr", err)
    assert list(prog.progress(range(3))) == [0, 1, 2]
    assert err.getvalue() == ""
