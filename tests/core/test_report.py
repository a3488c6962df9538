import json
import math

import pandas as pd
import pytest

from iclr_lab.core.report import Claim, ClaimFailure, Report


def _claim(measured, threshold=1.0, op="<=", expected=True, name="c"):
    return Claim(name, "a statement", measured, threshold, op=op, paper="p", expected=expected)


@pytest.mark.parametrize(
    ("measured", "threshold", "op", "passed"),
    [
        (0.5, 1.0, "<=", True), (1.0, 1.0, "<=", True), (1.5, 1.0, "<=", False),
        (1.0, 1.0, "<", False), (2.0, 1.0, ">", True), (1.0, 1.0, ">=", True),
        (0.4, (0.35, 0.65), "in", True), (0.7, (0.35, 0.65), "in", False),
        (math.nan, 1.0, "<=", False), (math.nan, 1.0, ">=", False),
    ],
)
def test_passed_is_derived_from_the_numbers(measured, threshold, op, passed):
    assert _claim(measured, threshold, op).passed is passed


def test_status_words():
    assert _claim(0.5).status == "pass"
    assert _claim(2.0).status == "FAIL"
    assert _claim(2.0, expected=False).status == "not reproduced"
    assert _claim(0.5, expected=False).status == "holds anyway"


def test_bad_ops_and_thresholds_are_rejected():
    with pytest.raises(ValueError, match="op"):
        _claim(1.0, op="==")
    with pytest.raises(TypeError, match="pair"):
        _claim(1.0, threshold=1.0, op="in")
    with pytest.raises(TypeError, match="number"):
        _claim(1.0, threshold=(0.0, 1.0), op="<=")


def _report(*claims, scale="book"):
    return Report("demo", scale, 0, {"t": pd.DataFrame({"x": [1, 2]})}, list(claims), 1.25)


def test_check_raises_only_for_expected_failures():
    ok = _report(_claim(0.5, name="a"), _claim(9.0, expected=False, name="b"))
    assert ok.ok and ok.check() is ok
    bad = _report(_claim(9.0, name="a"))
    assert bad.failures == bad.claims
    with pytest.raises(ClaimFailure, match="a: measured 9"):
        bad.check()


def test_duplicate_claim_names_are_rejected():
    with pytest.raises(ValueError, match="unique"):
        _report(_claim(1.0), _claim(1.0))


def test_json_round_trip_and_scorecard():
    r = _report(_claim(0.5, name="a"), _claim(0.4, (0.35, 0.65), "in", name="b"))
    d = json.loads(r.to_json())
    assert d["slug"] == "demo" and d["ok"] is True
    assert [c["name"] for c in d["claims"]] == ["a", "b"]
    assert d["claims"][1]["threshold"] == [0.35, 0.65]
    card = r.scorecard()
    assert list(card["status"]) == ["pass", "pass"]
    assert list(card["bound"]) == ["<= 1", "in [0.35, 0.65]"]
    assert "<table" in r._repr_html_() and "2 pass" in r._repr_html_()
    mixed = _report(_claim(0.5, name="a"), _claim(9.0, name="b"), _claim(9.0, expected=False, name="c"))
    assert mixed.tally() == "1 pass, 1 FAIL, 1 not reproduced"
    assert r.claim("b").measured == 0.4
    with pytest.raises(KeyError, match="no claim"):
        r.claim("zzz")


def test_save_writes_tables_charts_and_claims(tmp_path):
    import altair as alt

    r = _report(_claim(0.5))
    r.chart_builder = lambda rep: {"line": alt.Chart(rep.tables["t"]).mark_line().encode(x="x", y="x")}
    written = {p.name for p in r.save(tmp_path)}
    assert written == {"t.csv", "line.html", "line.png", "claims.json"}
    assert (tmp_path / "line.png").read_bytes()[:4] == b"\x89PNG"


def test_smoke_runs_judge_no_claim():
    r = _report(_claim(9.0, name="a"), scale="smoke")
    assert r.ok and r.claim("a").expected is False and r.claim("a").status == "not reproduced"
