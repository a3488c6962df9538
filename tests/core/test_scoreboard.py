import pandas as pd

from iclr_lab.core import scoreboard
from iclr_lab.core.report import Claim, Report


def _report(slug="vradam"):
    claims = [Claim.over_seeds("a", "s", [0.9, 0.7, 0.76], 0.8, paper="0.47 vs 0.57", kind="paper"),
              Claim("b", "s", 2.0, 1.0, expected=False, kind="paper", source="pilot"),
              Claim("c", "s", 0.0, 1e-7, kind="sanity")]
    return Report(slug, "book", 0, {"t": pd.DataFrame({"x": [1]})}, claims)


def test_recorded_reports_come_back_as_the_same_scoreboard(tmp_path, monkeypatch):
    monkeypatch.delenv(scoreboard.ENV, raising=False)
    assert scoreboard.record(_report()) is None, "nothing is written unless the build asks"
    monkeypatch.setenv(scoreboard.ENV, str(tmp_path))
    scoreboard.record(_report("discounted_oco"))
    scoreboard.record(_report("vradam"))
    (tmp_path / "times.json").write_text('{"book/optimizers/vradam.md": {"cpu": 12.5, "wall": 14.0}}')
    reports, times = scoreboard.collect(tmp_path)
    assert [r["slug"] for r in reports] == ["vradam", "discounted_oco"], "book order"
    assert times == {"book/optimizers/vradam.md": {"cpu": 12.5, "wall": 14.0}}
    board = scoreboard.table(reports)
    direct = scoreboard.table([_report("vradam"), _report("discounted_oco")])
    pd.testing.assert_frame_equal(board, direct)
    row = board[(board.slug == "vradam") & (board.claim == "a")].iloc[0]
    assert (row["measured"], row["status"]) == ("0.76 [0.7\u20130.9]", "pass")
    assert row["verdict"] == "not judged (no control)", "no control: the protocol is not applied"
    assert row["needed"] == "<= 0.8 (prior)"
    assert board[board.claim == "b"].status.iloc[0] == "did not reproduce at this scale"
    assert board[board.claim == "b"].verdict.iloc[0] == "not judged (no control)", (
        "a failing claim of a chapter without the protocol is not counted either")
    heads = scoreboard.headlines(reports)
    assert heads.verdict.iloc[0].startswith("claims protocol not applied yet: 1 of 2 paper claims pass")
    assert list(heads.protocol) == ["not yet", "not yet"]
    spec = scoreboard.times_chart(times).to_dict()
    assert spec["layer"][0]["encoding"]["x"]["title"].startswith("CPU time")


def test_claims_round_trip_through_json():
    for c in _report().claims:
        back = Claim.from_dict(c.to_dict())
        assert back == c
