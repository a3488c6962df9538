"""The claims protocol: controls, three-way verdicts, paired comparisons, equal tuning, seed blocks."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from iclr_lab.core import stability
from iclr_lab.core.report import Claim, ClaimFailure, Report, Stability
from iclr_lab.core.stats import paired
from iclr_lab.core.tuning import TUNING_SEED_OFFSET, log_grid, tune, tuning_seeds


def _paper(measured, control=None, stab=None, name="c", no_control=""):
    kw = {"control": "null", "control_measured": control} if control is not None else {}
    return Claim(name, "s", measured, 1.0, "<=", kind="paper", no_control=no_control,
                 stability=stab, **kw)


@pytest.mark.parametrize(("measured", "control", "stab", "verdict"), [
    (0.5, 2.0, Stability(8, 8, 8), "reproduced"),
    (0.5, 2.0, Stability(8, 7, 7), "reproduced"),
    (0.5, 0.9, Stability(8, 8, 1), "not discriminating"),   # the control passes here too
    (0.5, 2.0, Stability(8, 8, 6), "not discriminating"),   # ... at two seed blocks
    (2.0, 3.0, Stability(8, 0, 8), "not reproduced"),
    (0.5, 2.0, Stability(8, 6, 8), "not reproduced"),       # fails at two seed blocks
    (0.5, 0.9, Stability(8, 6, 2), "not reproduced"),       # ... even where the control passes too
    (0.5, 2.0, None, "not judged (no stability table)"),
    (0.5, None, Stability(8, 8), "not judged (no control)"),
    (2.0, None, None, "not judged (no control)"),            # failing, but not through the protocol
    (2.0, 3.0, None, "not judged (no stability table)"),
])
def test_three_way_verdict(measured, control, stab, verdict):
    assert _paper(measured, control, stab).verdict == verdict


def test_a_claim_without_control_must_say_why_and_cannot_have_both():
    c = _paper(0.5, stab=Stability(8, 8), no_control="the comparison is with the ablation itself")
    assert c.verdict == "reproduced" and c.control_passed is None
    with pytest.raises(ValueError, match="not both"):
        Claim("c", "s", 0.5, 1.0, control="x", control_measured=1.0, no_control="why")
    with pytest.raises(ValueError, match="needs its value"):
        Claim("c", "s", 0.5, 1.0, control="x")
    with pytest.raises(ValueError, match="one number per seed"):
        Claim.over_seeds("c", "s", [1, 2, 3], 1.0, control="x", control_values=[1, 2])
    assert Claim("t", "s", 0.5, 1.0, kind="theorem").verdict == "holds"


def test_headline_counts_only_reproduced_and_smoke_judges_nothing():
    claims = [_paper(0.5, 2.0, Stability(8, 8, 8), "a"), _paper(0.5, 2.0, Stability(8, 8, 8), "b"),
              _paper(0.5, 0.5, Stability(8, 8, 0), "c"), _paper(2.0, 2.0, Stability(8, 0, 8), "d"),
              Claim("s", "s", 0.0, 1.0, kind="sanity")]
    book = Report("demo", "book", 0, {}, claims)
    assert book.protocol
    assert book.headline() == ("2 of 4 paper claims reproduced (discriminating, stable at \u2265 7/8 "
                               "seed blocks); 1 not discriminating; 1 not reproduced")
    failing_without_protocol = Report("demo", "book", 0, {}, [Claim("p", "s", 2.0, 1.0)])
    assert not failing_without_protocol.protocol, "failing claims without controls are not judged"
    assert failing_without_protocol.headline().startswith("claims protocol not applied yet")
    smoke = Report("demo", "smoke", 0, {}, claims)
    assert smoke.headline() == "smoke scale: claims not judged"
    assert set(smoke.scorecard().verdict) == {"not judged (smoke scale)"}
    assert "smoke scale: claims not judged" in smoke._repr_html_()
    assert list(smoke.scorecard().measured) == [0.5, 0.5, 0.5, 2.0, 0.0], "values still listed"


def test_json_carries_control_regime_verdict_and_stability():
    c = Claim.over_seeds("a", "s", [0.5, 0.6, 0.4], 1.0, control="null", control_values=[1, 2, 3],
                         regime="IID shards", kind="paper")
    c = Claim.from_dict(json.loads(json.dumps({**c.to_dict(), "stability": Stability(8, 7, 8).to_dict()})))
    d = c.to_dict()
    assert d["control"] == "null" and d["control_measured"] == 2.0
    assert d["control_per_seed"] == [1.0, 2.0, 3.0] and d["regime"] == "IID shards"
    assert d["verdict"] == "reproduced" and d["stability"] == {"blocks": 8, "holds": 7,
                                                               "control_fails": 8,
                                                               "seed_invariant": False}
    assert Claim.from_dict(d) == c


def test_paired_interval_is_a_t_interval_of_the_differences():
    a, b = np.array([1.0, 2.0, 3.0, 4.0, 6.0]), np.array([1.5, 2.1, 3.9, 4.2, 6.3])
    p = paired(a, b)
    d = a - b
    half = 2.776445105 * d.std(ddof=1) / math.sqrt(5)  # t_{0.975, 4}
    assert p.median == pytest.approx(np.median(d)) and p.differences == tuple(d)
    assert (p.lo, p.hi) == pytest.approx((d.mean() - half, d.mean() + half))
    with pytest.raises(ValueError, match="level"):
        paired(a, b, level=1.0)
    with pytest.raises(ValueError, match="equal length"):
        paired(a, b[:3])


@pytest.mark.parametrize("n", [2, 3, 5, 8, 24])
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_paired_interval_uses_scipy_stats_t_quantile_bit_for_bit(n, level):
    """paired() takes the t quantile from scipy.special (a lighter import); it is the number
    scipy.stats.t.ppf gives."""
    from scipy import stats

    rng = np.random.default_rng(n)
    a, b = rng.normal(size=n), rng.normal(size=n)
    d = a - b
    half = stats.t.ppf(0.5 + level / 2, n - 1) * d.std(ddof=1) / math.sqrt(n)
    p = paired(a, b, level=level)
    assert (p.lo, p.hi) == (float(d.mean()) - float(half), float(d.mean()) + float(half))

def test_beats_means_the_interval_clears_the_margin_not_only_the_median():
    base = [1.0, 1.0, 1.0, 1.0, 1.0]
    clear = Claim.paired("x", "s", [0.8, 0.82, 0.79, 0.81, 0.8], base, 0.0, "<", kind="sanity")
    noisy = Claim.paired("y", "s", [0.8, 0.7, 1.6, 0.9, 1.5], base, 0.0, "<", kind="sanity")
    assert clear.passed and clear.interval[1] < 0
    assert noisy.measured < 0, "the median difference is negative..."
    assert not noisy.passed, "... but the interval straddles zero: no win"
    assert "CI" in noisy.value_text
    ctrl = Claim.paired("z", "s", [0.8, 0.82, 0.79, 0.81, 0.8], base, 0.0, "<", kind="paper",
                        control="null", control_values=[1.0, 1.01, 0.99, 1.0, 1.0])
    assert ctrl.control_passed is False and ctrl.control_per_seed == pytest.approx((0, .01, -.01, 0, 0))


def test_log_grid_and_tuning_seeds():
    assert log_grid(1e-2, 5, 10.0) == pytest.approx([1e-4, 1e-3, 1e-2, 1e-1, 1.0])
    assert log_grid(1.0, 4, 2.0) == pytest.approx([0.5, 1.0, 2.0, 4.0])
    seeds = tuning_seeds(5, 3)
    assert seeds == [5 + TUNING_SEED_OFFSET + k for k in range(3)]
    assert not set(seeds) & set(range(8 * 5 * 5)), "disjoint from every judging seed and block"
    with pytest.raises(ValueError, match="points"):
        log_grid(1.0, 0)


def test_tune_picks_the_best_and_settles_an_interior_choice():
    calls = []

    def score(values):
        calls.append(list(values))
        return [(math.log10(v) + 2.0) ** 2 for v in values]  # best at 1e-2

    t = tune("m", score, 1e-2, ratio=10.0)
    assert t.choice == pytest.approx(1e-2) and not t.flags and not t.extended and len(calls) == 1


def test_tune_flags_a_grid_edge_and_extends_once():
    t = tune("m", lambda vs: [math.log10(v) for v in vs], 1.0, ratio=10.0)  # ever better lower
    assert t.extended and t.choice == pytest.approx(1e-3), "one point added below the edge"
    assert t.flags == ("at the grid's low edge",), "still at the edge after one extension"
    assert len(t.grid) == 6
    settles = tune("m", lambda vs: [(math.log10(v) + 2.0) ** 2 for v in vs], 1.0, ratio=10.0)
    assert settles.extended and settles.choice == pytest.approx(1e-2) and settles.flags == ()


def test_tune_flags_a_choice_next_to_a_divergence_and_probes_between():
    # grid 0.011, 0.033, 0.1, 0.3, 0.9; the loss falls with the rate until the runs diverge
    mid = math.sqrt(0.3 * 0.9)
    cliff = tune("m", lambda vs: [math.inf if v > 0.5 else 1.0 / v for v in vs], 0.1, ratio=3.0)
    assert cliff.extended and cliff.choice == pytest.approx(0.3)
    assert any(math.isclose(v, mid) for v in cliff.grid), "the midpoint towards 0.9 was scored"
    assert cliff.flags == ("next to a diverged point",), "the midpoint diverged too: flag remains"
    closer = tune("m", lambda vs: [math.inf if v > 0.6 else 1.0 / v for v in vs], 0.1, ratio=3.0)
    assert closer.choice == pytest.approx(mid) and closer.flags == ("next to a diverged point",)
    calm = tune("m", lambda vs: [math.inf if v > 0.6 else (v - 0.25) ** 2 for v in vs], 0.1,
                ratio=3.0)
    assert calm.extended and calm.choice == pytest.approx(0.3) and calm.flags == (), (
        "a finite point now sits between the choice and the divergence")
    none = tune("m", lambda vs: [math.nan] * len(vs), 0.1)
    assert math.isnan(none.choice) and none.flags == ("every point diverged",)


def _fake_chapter(monkeypatch, drift=0.0):
    def reproduce(scale="book", seed=0):
        vals = [0.5 + 0.01 * ((seed + k) % 7) + drift for k in range(3)]
        ctrl = [2.0 - 0.3 * ((seed + k) % 8) for k in range(3)]  # passes at a few seeds
        return Report("vradam", scale, seed, {"t": pd.DataFrame({"x": [1]})},
                      [Claim.over_seeds("c", "s", vals, 1.0, control="null", control_values=ctrl)])

    monkeypatch.setattr("iclr_lab.core.registry.reproduce", lambda slug, scale, seed:
                        reproduce(scale, seed))
    return reproduce


def test_stability_table_round_trip_and_block_zero_check(monkeypatch, tmp_path):
    reproduce = _fake_chapter(monkeypatch)
    table = stability.measure("vradam", 4)
    assert table["stride"] == 3 and table["seeds"] == [0, 3, 6, 9]
    stability.write(table, tmp_path)
    monkeypatch.setattr(stability, "DIRECTORY", tmp_path)
    report = reproduce("book", 0)
    c = report.claim("c")
    ctrl_fails = sum(not e["control_passed"] for e in table["claims"]["c"])
    assert c.stability == Stability(4, 4, ctrl_fails) and not report.stale
    report.check()
    drifted = _fake_chapter(monkeypatch, drift=1e-3)("book", 0)
    assert drifted.stale == ["c"] and drifted.claim("c").stability is None
    with pytest.raises(ClaimFailure, match="stability table"):
        drifted.check()
    other_seed = _fake_chapter(monkeypatch, drift=1e-3)("book", 5)
    assert not other_seed.stale, "block 0 is compared only with the run at base seed 0"
    assert table["machine"] == stability.machine() and not report.stability_machine


def test_block_zero_is_compared_only_on_the_kind_of_cpu_that_made_the_table(monkeypatch, tmp_path):
    _fake_chapter(monkeypatch)
    table = stability.measure("vradam", 4)
    stability.write(dict(table, machine="GenuineIntel Xeon AVX2"), tmp_path)
    monkeypatch.setattr(stability, "DIRECTORY", tmp_path)
    drifted = _fake_chapter(monkeypatch, drift=1e-2)("book", 0)
    assert not drifted.stale and drifted.stability_machine == "GenuineIntel Xeon AVX2"
    assert drifted.claim("c").stability is not None, "the k of 8 is still shown"
    drifted.check()  # another CPU's rounding does not fail the build
    assert "another kind of CPU" in drifted._repr_html_()
    assert drifted.to_dict()["stability_machine"] == "GenuineIntel Xeon AVX2"
    # a table that records no machine (made before machines were recorded) is treated alike
    stability.write({k: v for k, v in table.items() if k != "machine"}, tmp_path)
    assert not _fake_chapter(monkeypatch, drift=1e-2)("book", 0).stale


def test_tune_on_a_given_grid_steps_out_by_the_edge_factor():
    t = tune("m", lambda vs: [-v for v in vs], 1e-2, grid=[1e-3, 3e-3, 1e-2, 3e-2, 1e-1])
    assert t.grid[-1] == pytest.approx(1e-1 * (1e-1 / 3e-2)) and t.choice == t.grid[-1]
    with pytest.raises(ValueError, match="ascending"):
        tune("m", lambda vs: list(vs), 1.0, grid=[1.0, 0.5])


@pytest.mark.parametrize("slug", ["vradam", "discounted_oco"])
def test_the_exemplars_ship_a_stability_table_of_their_current_claims(slug):
    """The table covers 8 disjoint seed blocks of the chapter's claims (block 0 itself is checked
    against the book's own run by Report.check in the book build)."""
    from iclr_lab.core.registry import load

    table = stability.load(slug)
    assert table is not None, f"{slug}: no stability table; run `iclr-lab stability {slug}`"
    assert table["blocks"] == stability.BLOCKS == 8 and table["scale"] == "book"
    assert table["seeds"] == [b * table["stride"] for b in range(8)], "disjoint blocks of seeds"
    names = {c.name for c in load(slug).reproduce(scale="smoke").claims}
    assert names == set(table["claims"]), "the table has exactly the chapter's claims"
    for name, entries in table["claims"].items():
        assert [e["block"] for e in entries] == list(range(8)), name


def test_a_claim_with_the_same_value_at_every_block_is_flagged_seed_invariant(monkeypatch, tmp_path):
    def reproduce(scale="book", seed=0):
        varying = [0.5 + 0.01 * ((seed + k) % 7) for k in range(3)]
        return Report("vradam", scale, seed, {"t": pd.DataFrame({"x": [1]})},
                      [Claim("fixed", "a closed form", 0.25, 1.0, kind="theorem"),
                       Claim.over_seeds("varies", "s", varying, 1.0, kind="theorem")])

    monkeypatch.setattr("iclr_lab.core.registry.reproduce", lambda slug, scale, seed:
                        reproduce(scale, seed))
    stability.write(stability.measure("vradam", 4), tmp_path)
    monkeypatch.setattr(stability, "DIRECTORY", tmp_path)
    report = reproduce("book", 0)
    fixed, varies = report.claim("fixed").stability, report.claim("varies").stability
    assert fixed.seed_invariant and "seed-invariant" in fixed.text
    assert not varies.seed_invariant and "seed-invariant" not in varies.text
    assert report.to_dict()["claims"][0]["stability"]["seed_invariant"] is True


def test_stability_blocks_in_worker_processes_equal_the_serial_run():
    serial = stability.measure("imitation_reward_class", 2, scale="smoke")
    parallel = stability.measure("imitation_reward_class", 2, scale="smoke", jobs=2)
    assert parallel["claims"] == serial["claims"] and parallel["seeds"] == serial["seeds"]
    with pytest.raises(ValueError, match="jobs"):
        stability.measure("imitation_reward_class", 2, jobs=0)


def test_a_claim_whose_premise_fails_is_not_testable_and_leaves_the_headline(monkeypatch, tmp_path):
    from dataclasses import replace

    from iclr_lab.core.report import NOT_TESTABLE

    # a premise that fails at this run: the verdict says so whatever the numbers, and it is no failure
    nan = Claim.over_seeds("p", "s", [math.nan] * 3, 1.0, control="null",
                           control_values=[math.nan] * 3, not_testable="no gap to close here")
    assert nan.verdict == NOT_TESTABLE and not nan.passed
    ok = _paper(0.5, 2.0, Stability(8, 8, 8), name="ok")
    report = Report("vradam", "book", 0, {}, [ok, nan], stale=["x"])
    assert not report.failures, "a claim not testable here does not fail the build"
    assert report.headline().startswith("1 of 1 paper claim reproduced")
    assert "1 not testable here" in report.headline()
    # testable at only 3 of 8 blocks: not testable, even where this run's premise held
    held_here = _paper(0.5, 2.0, Stability(8, 3, 8, testable=3))
    assert held_here.verdict == NOT_TESTABLE and "testable at 3/8" in held_here.stability.text
    assert _paper(0.5, 2.0, Stability(8, 7, 8, testable=7)).verdict == "reproduced"
    assert Claim.from_dict(json.loads(json.dumps(nan.to_dict()))).not_testable == "no gap to close here"
    # the stability table records the premise per block
    def reproduce(scale="book", seed=0):
        gap = 0.05 if seed % 4 == 0 else 0.0  # blocks at base seeds 0, 2, 4, 6: testable at 0, 4
        claim = Claim.over_seeds("c", "s", [0.5, 0.4], 1.0, control="null",
                                 control_values=[2.0, 3.0])
        return Report("vradam", scale, seed, {"t": pd.DataFrame({"x": [1]})},
                      [claim if gap else replace(claim, not_testable="no gap")])

    monkeypatch.setattr("iclr_lab.core.registry.reproduce", lambda slug, scale, seed:
                        reproduce(scale, seed))
    table = stability.measure("vradam", 4)
    assert [e["testable"] for e in table["claims"]["c"]] == [True, False, True, False]
    stability.write(table, tmp_path)
    monkeypatch.setattr(stability, "DIRECTORY", tmp_path)
    c = reproduce("book", 0).claim("c")
    assert c.stability.testable == 2 and c.verdict == NOT_TESTABLE


def test_headline_when_no_paper_claim_is_testable():
    nan = Claim.over_seeds("p", "s", [math.nan] * 2, 1.0, control="null",
                           control_values=[math.nan] * 2, not_testable="no gap")
    report = Report("vradam", "book", 0, {}, [nan], stale=["x"])
    assert report.headline() == ("no paper claim is testable at this scale; 1 not testable here "
                                 "(its premise does not hold at this scale)")
