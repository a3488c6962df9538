import json
import math

import pandas as pd
import pytest

from iclr_lab.core.report import Claim, ClaimFailure, Report


def _claim(measured, threshold=1.0, op="<=", expected=True, name="c", kind="paper", source="prior"):
    return Claim(name, "a statement", measured, threshold, op=op, paper="p", expected=expected,
                 kind=kind, source=source)


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
    assert _claim(2.0, expected=False).status == "did not reproduce"
    assert _claim(0.5, expected=False).status == "pass (not expected)"
    assert _claim(0.5, expected=False).result == "pass" and _claim(2.0).result == "fail"


def test_kind_and_source_are_validated_and_exported():
    with pytest.raises(ValueError, match="kind"):
        _claim(1.0, kind="hunch")
    with pytest.raises(ValueError, match="source"):
        _claim(1.0, source="vibes")
    d = _claim(0.5, kind="sanity", source="pilot").to_dict()
    assert (d["kind"], d["source"], d["status"]) == ("sanity", "pilot", "pass")


def test_over_seeds_reports_the_median_and_the_range():
    c = Claim.over_seeds("c", "s", [0.9, 0.7, 0.74, 0.89, 0.76], 0.8, "<=", kind="paper",
                         source="prior")
    assert c.measured == 0.76 and c.spread == (0.7, 0.9)
    assert c.passed and c.seeds_passing == 3
    assert c.value_text == "0.76 [0.7\u20130.9]"
    signed = Claim.over_seeds("gap", "a signed gap", [-1.67, -0.83, 2.22], -1.0, ">=", kind="paper",
                              source="prior")
    assert signed.value_text == "-0.83 [-1.67 to 2.22]", "no dash between signed numbers"
    assert c.to_dict()["per_seed"] == [0.9, 0.7, 0.74, 0.89, 0.76]
    with pytest.raises(ValueError, match="median"):
        Claim("c", "s", 0.7, 0.8, per_seed=(0.9, 0.7, 0.8))  # a favourable seed is not the value
    with pytest.raises(ValueError, match="one number per seed"):
        Claim.over_seeds("c", "s", [], 0.8)
    assert math.isnan(Claim.over_seeds("c", "s", [1.0, math.nan], 2.0).measured)
    assert _claim(0.5).spread is None and _claim(0.5).seeds_passing is None


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
    assert "<table" in r._repr_html_() and "2 of 2 paper claims pass" in r._repr_html_()
    assert d["headline"].startswith("claims protocol not applied yet: 2 of 2 paper claims pass")
    assert d["protocol"] is False and d["judged"] is True
    mixed = _report(_claim(0.5, name="a"), _claim(9.0, name="b"), _claim(9.0, expected=False, name="c"))
    assert mixed.tally() == ("claims protocol not applied yet: 1 of 3 paper claims pass at these "
                             "seeds (no control or no stability table; not counted); 1 expected "
                             "to hold FAILED")
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
    assert r.ok and r.claim("a").expected is False and r.claim("a").status == "did not reproduce"


def test_headline_counts_only_paper_claims_and_lists_the_other_kinds():
    r = _report(_claim(0.5, name="p1"), _claim(2.0, name="p2", expected=False),
                _claim(0.5, name="s1", kind="sanity"), _claim(0.5, name="t1", kind="theorem"),
                _claim(2.0, name="d1", kind="derivation", expected=False))
    unjudged = ("claims protocol not applied yet: 1 of 2 paper claims pass at these seeds (no "
                "control or no stability table; not counted)")
    assert r.headline() == unjudged
    assert r.tally() == (unjudged + "; theorem checks: 1 of 1 holds; "
                         "derivation checks: 0 of 1 holds; sanity checks: 1 of 1 holds")
    assert [c.name for c in r.ordered_claims()] == ["p1", "p2", "t1", "d1", "s1"]
    only_sanity = _report(_claim(0.5, name="s", kind="sanity"))
    assert only_sanity.headline() == "no claim of the paper is checked at this scale"
    page = r._repr_html_()
    assert page.count("<tr>") == 1 + 5, "one header row and one row per claim: the table is compact"
    assert "<details>" in page and "a statement" in page, "statements open from the claim's name"


def test_pilot_thresholds_are_flagged():
    r = _report(_claim(0.5, name="a", source="pilot"))
    assert "<b>pilot</b>" in r._repr_html_()


def test_a_value_is_never_printed_as_the_threshold_it_misses():
    from iclr_lab.core.report import Claim

    near = Claim("near", "a ratio below 1", 1.003, 1.0, "<", kind="sanity", source="prior",
                 expected=False)
    assert near.value_text == "1.003"
    exact = Claim("exact", "a ratio below 1", 1.0, 1.0, "<", kind="sanity", source="prior",
                  expected=False)
    assert exact.value_text == "1"
    assert Claim("far", "a ratio below 1", 0.7612, 1.0, "<", kind="sanity",
                 source="prior").value_text == "0.761"
