"""The ccl_vrp chapter's experiments (iclr_lab.routing.ccl_vrp): the scoring of the shipped costs,
the claims' ability to fail, the live sample, and the helpers the explorers use."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from iclr_lab.routing import ccl_vrp
from iclr_lab.routing.ccl_vrp import experiments as ex
from iclr_lab.routing.evaluate import SOLVERS
from iclr_lab.routing.instances import ID_VARIANTS, MB_VARIANTS, concat, generate
from iclr_lab.routing.model import PolicyConfig, RoutingPolicy

torch.set_num_threads(1)
SMALL = {"dim": 16, "heads": 2, "layers": 1, "ffn": 32}


def _costs(gaps: dict[str, float], *, instances: int = 4, ok: bool = True) -> pd.DataFrame:
    """A synthetic shipped-costs table: PyVRP costs 10 on every instance, each solver ``s`` costs
    ``10 (1 + gaps[s] / 100)`` (nearest neighbour's key is ``nn``)."""
    rows = []
    for v in ID_VARIANTS + MB_VARIANTS:
        for i in range(instances):
            row: dict[str, object] = {"variant": v, "ood": v in MB_VARIANTS, "instance": i, "pyvrp": 10.0}
            for s in SOLVERS[1:]:
                row[s] = 10.0 * (1 + gaps[s] / 100)
                row[f"ok_{s}"] = ok
                row[f"okenv_{s}"] = True
            rows.append(row)
    return pd.DataFrame(rows)


def _live(rel_diff: dict[str, list[float]]) -> pd.DataFrame:
    """A live table: solver ``s`` has one row per entry of ``rel_diff[s]``."""
    return pd.DataFrame([{"variant": ID_VARIANTS[i % 16], "instance": i, "solver": s, "live": 1.0 + r,
                          "shipped": 1.0, "rel_diff": r, "ok": True}
                         for s, rs in rel_diff.items() for i, r in enumerate(rs)])


def _tables(costs: pd.DataFrame, probe_gain: float = 0.5, live_rel: float = 0.0,
            live: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    long = ex.instance_gaps(costs)
    gaps = ex._gap_table(long)
    if live is None:
        live = _live({"ccl_0": [live_rel]})
    probe = pd.DataFrame({"policy": [ccl_vrp.LABELS["ccl"]], "r2_step": [0.7],
                          "r2_encoder": [0.7 - probe_gain], "gain": [probe_gain]})
    return {"gaps": gaps, "summary": ex._summary(gaps), "live": live, "probe": probe}


GOOD = {"nn": 30.0, "ccl_0": 4.0, "ccl_1": 4.2, "ccl_2": 3.9,
        "static_0": 6.0, "static_1": 6.3, "static_2": 5.8}


def test_gaps_are_percent_above_pyvrp_and_nn_appears_once() -> None:
    long = ex.instance_gaps(_costs(GOOD))
    assert set(long.model) == {"CCL", "static decoder", "nearest neighbour"}
    nn = long[long.model == "nearest neighbour"]
    assert set(nn.seed) == {0} and np.allclose(nn.gap, 30.0)
    ccl1 = long[(long.model == "CCL") & (long.seed == 1)]
    assert np.allclose(ccl1.gap, 4.2)


def test_claims_pass_on_good_numbers_and_each_can_fail() -> None:
    claims = {c.name: c for c in ex._claims(_tables(_costs(GOOD)))}
    assert claims["near_reference"].measured == pytest.approx(4.0)
    assert claims["near_reference"].per_seed == pytest.approx((4.0, 4.2, 3.9))
    assert claims["near_reference_nn"].measured == pytest.approx(4.0 / 30.0)
    assert claims["ccl_vs_static"].per_seed == pytest.approx((4 / 6, 4.2 / 6.3, 3.9 / 5.8))
    assert claims["training_reproducible"].measured == pytest.approx(0.3)
    assert all(c.passed for c in claims.values())
    assert not claims["ccl_vs_static"].expected  # decided before the run, from the spec's prediction
    assert not claims["probe_gain"].expected  # fails on the shipped policies (gain about 0.04)
    # each claim fails when its quantity crosses the bar
    bad = dict(GOOD, ccl_0=9.0, ccl_1=9.0, ccl_2=9.0)
    assert not {c.name: c for c in ex._claims(_tables(_costs(bad)))}["near_reference"].passed
    bad = dict(GOOD, nn=7.0)
    assert not {c.name: c for c in ex._claims(_tables(_costs(bad)))}["near_reference_nn"].passed
    bad = dict(GOOD, static_0=4.5, static_1=4.5, static_2=4.5)
    assert not {c.name: c for c in ex._claims(_tables(_costs(bad)))}["ccl_vs_static"].passed
    bad = dict(GOOD, static_2=7.5)
    assert not {c.name: c for c in ex._claims(_tables(_costs(bad)))}["training_reproducible"].passed
    assert not {c.name: c for c in ex._claims(_tables(_costs(GOOD, ok=False)))}["feasible"].passed
    assert not {c.name: c for c in ex._claims(_tables(_costs(GOOD), probe_gain=0.1))}["probe_gain"].passed
    assert not {c.name: c for c in ex._claims(_tables(_costs(GOOD), live_rel=1e-3))}[
        "live_matches_shipped"].passed


def test_live_check_tolerates_a_rare_flip_but_not_a_wrong_csv() -> None:
    def claims(live: pd.DataFrame) -> dict[str, bool]:
        out = {c.name: c for c in ex._claims(_tables(_costs(GOOD), live=live))}
        return {k: out[k].passed for k in ("live_matches_shipped", "live_mean_difference")}

    exact = {s: [1e-8] * 128 for s in ("ccl_0", "static_0", "nn")} | {"pyvrp": [0.0] * 8}
    assert claims(_live(exact)) == {"live_matches_shipped": True, "live_mean_difference": True}
    # one argmax flip on another CPU: one tour of 128 changes by 3 %
    flip = dict(exact, ccl_0=[0.03] + [1e-8] * 127)
    assert claims(_live(flip)) == {"live_matches_shipped": True, "live_mean_difference": True}
    # a stale column: every cost of one solver off by 0.5 %
    stale = dict(exact, static_0=[5e-3] * 128)
    assert claims(_live(stale)) == {"live_matches_shipped": False, "live_mean_difference": False}
    # a few rows badly wrong: few enough for the share, too large for the mean
    wrong = dict(exact, nn=[0.5, 0.5] + [1e-8] * 126)
    assert claims(_live(wrong)) == {"live_matches_shipped": True, "live_mean_difference": False}
    # PyVRP's 8 rows: one mismatch is already too many (its integer search does not flip)
    assert not claims(_live(dict(exact, pyvrp=[1e-2] + [0.0] * 7)))["live_matches_shipped"]


def test_feasibility_claim_ignores_the_mixed_backhaul_variants_only() -> None:
    costs = _costs(GOOD)
    costs.loc[costs.ood, [str(c) for c in costs.columns if str(c).startswith("ok_")]] = False
    claims = {c.name: c for c in ex._claims(_tables(costs))}
    assert claims["feasible"].passed  # MB is reported, not asserted
    costs.loc[(costs.variant == "VRPLTW") & (costs.instance == 1), "ok_static_2"] = False
    claims = {c.name: c for c in ex._claims(_tables(costs))}
    assert claims["feasible"].measured == pytest.approx(75.0)


def test_difference_interval_brackets_the_mean_and_is_zero_width_without_noise() -> None:
    rng = np.random.default_rng(0)
    long = ex.instance_gaps(_costs(GOOD))
    d = ex._difference(long, 500, rng)
    assert len(d) == 24
    assert np.allclose(d.difference, (4.0 + 4.2 + 3.9 - 6.0 - 6.3 - 5.8) / 3)
    assert (d.lo <= d.difference + 1e-12).all() and (d.difference <= d.hi + 1e-12).all()
    # the same difference on every seed and instance: no spread at all
    same = ex.instance_gaps(_costs(dict(GOOD, ccl_1=4.0, ccl_2=4.0, static_1=6.0, static_2=6.0)))
    z = ex._difference(same, 200, rng)
    assert np.allclose(z.lo, z.hi) and np.allclose(z.difference, -2.0)


def test_live_sample_is_seeded_per_variant_and_validates() -> None:
    a = ex.live_sample(range(100), 8, seed=0)
    assert list(a) == list(ID_VARIANTS) and all(len(set(v)) == 8 for v in a.values())
    assert a == ex.live_sample(range(100), 8, seed=0)
    assert a != ex.live_sample(range(100), 8, seed=1)
    with pytest.raises(ValueError, match="per_variant"):
        ex.live_sample(range(5), 8, seed=0)
    with pytest.raises(ValueError, match="per_variant"):
        ex.live_sample(range(5), 0, seed=0)


def test_live_batch_puts_half_of_every_variant_in_each_half() -> None:
    # the probe fits on the first half of the batch and scores on the second
    sample = {v: [5, 17, 40, 81] for v in ID_VARIANTS[:3]}
    batch, keys = ex._live_batch(sample)
    first, second = keys[:6], keys[6:]
    assert {v for v, _ in first} == {v for v, _ in second} == set(sample)
    assert sorted(keys) == sorted((v, i) for v, idx in sample.items() for i in idx)
    assert batch.variants == tuple(v for v, _ in keys)
    assert torch.equal(batch[7].locs, ccl_vrp.test_instance(*keys[7]).locs)


def test_concat_keeps_instances_in_order_and_rejects_mixed_classes() -> None:
    a, b = generate("CVRP", 6, 2, seed=0), generate("VRPBLTW", 6, 3, seed=1)
    c = concat([a, b])
    assert c.batch_size == 5 and c.variants == a.variants + b.variants
    assert torch.equal(c.locs[2:], b.locs) and torch.equal(c.time_windows[:2], a.time_windows)
    assert torch.equal(c[3].limit, b[1].limit)
    with pytest.raises(ValueError, match="batches"):
        concat([a, generate("VRPMB", 6, 1, seed=0)])
    with pytest.raises(ValueError, match="batches"):
        concat([])


def test_gate_trace_zeroes_absent_constraints_and_stops_at_the_final_return() -> None:
    torch.manual_seed(0)
    pol = RoutingPolicy(PolicyConfig(decoder="ccl", **SMALL))
    inst = generate("OVRPTW", 8, 3, seed=2)
    trace = ccl_vrp.gate_trace(pol, inst)
    assert set(trace.constraint) == {"B", "L", "O", "TW"}
    assert (trace[trace.constraint.isin(["B", "L"])].gate == 0).all()
    assert (trace[trace.constraint.isin(["O", "TW"])].gate > 0).all()
    for _, t in trace[trace.constraint == "B"].groupby("instance"):
        t = t.sort_values("step")
        assert (t.kind != "depot").sum() == 8  # every customer once before the final return
        assert t.step.tolist() == list(range(1, len(t) + 1))
    with pytest.raises(ValueError, match="pol"):
        ccl_vrp.gate_trace(RoutingPolicy(PolicyConfig(decoder="static", **SMALL)), inst)


def test_route_stops_close_every_route_and_flag_free_returns() -> None:
    inst = generate("OVRPB", 6, 1, seed=0)
    stops = ccl_vrp.route_stops(inst, [[1, 2], [3, 4, 5, 6]])
    for _, r in stops.groupby("route"):
        assert r.node.iloc[0] == 0 and r.node.iloc[-1] == 0
        assert r.free.tolist() == [False] * (len(r) - 1) + [True]
    closed = ccl_vrp.route_stops(generate("VRPB", 6, 1, seed=0), [[1, 2, 3, 4, 5, 6]])
    assert not closed.free.any()
    assert set(stops.kind) <= {"depot", "delivery", "pickup"}


def test_bad_arguments_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="variant"):
        ccl_vrp.test_instance("VRPX", 0)
    with pytest.raises(ValueError, match="instance"):
        ccl_vrp.test_instance("CVRP", 100)
    with pytest.raises(ValueError, match="model"):
        ccl_vrp.policy("mtpomo")
    with pytest.raises(ValueError, match="seed"):
        ccl_vrp.policy("ccl", 3)
    with pytest.raises(ValueError, match="model"):
        ccl_vrp.route_chart("CVRP", 0, model="pyvrp")
    with pytest.raises(ValueError, match="variant"):
        ccl_vrp.gate_chart("TSP", 0)
    # the range is stated, and checked before the chart's solvers run
    with pytest.raises(ValueError, match=r"instance must be an integer in \[0, 99\]"):
        ccl_vrp.route_chart("CVRP", 100)
    with pytest.raises(ValueError, match="p_reembed"):
        ccl_vrp.gate_trace(RoutingPolicy(PolicyConfig(**SMALL)), generate("CVRP", 5, 1, seed=0),
                           p_reembed=2.0)
    with pytest.raises(TypeError, match="seed"):
        ccl_vrp.live_sample(range(10), 2, None)  # type: ignore[arg-type]


def test_smoke_run_reproduces_the_shipped_costs_live() -> None:
    report = ccl_vrp.reproduce(scale="smoke", seed=3)
    live = report.tables["live"]
    assert set(live.solver) == {"ccl_0", "static_0", "nn", "pyvrp"}
    assert report.claim("live_matches_shipped").passed and report.claim("feasible").passed
    # the offline claims do not depend on the chapter's seed
    other = ccl_vrp.reproduce(scale="smoke", seed=4)
    assert report.claim("near_reference").per_seed == other.claim("near_reference").per_seed
    assert not report.tables["live"].equals(other.tables["live"])


def test_near_reference_claims_are_sanity_checks_that_the_static_decoder_passes_too() -> None:
    claims = {c.name: c for c in ex._claims(_tables(_costs(GOOD)))}
    for name in ("near_reference", "near_reference_nn"):
        assert claims[name].kind == "sanity" and claims[name].control_passed
    assert claims["near_reference"].control_per_seed == pytest.approx((6.0, 6.3, 5.8))
    vs = claims["ccl_vs_static"]
    assert vs.kind == "paper" and vs.no_control and vs.regime


def test_noninferiority_is_judged_on_the_paired_interval() -> None:
    ok = {c.name: c for c in ex._claims(_tables(_costs(GOOD)))}["ccl_noninferior"]
    assert ok.passed and ok.measured == pytest.approx(-2.0) and ok.interval is not None
    # CCL 1 point behind at every seed: fails
    behind = dict(GOOD, ccl_0=7.0, ccl_1=7.3, ccl_2=6.8)
    assert not {c.name: c for c in ex._claims(_tables(_costs(behind)))}["ccl_noninferior"].passed
    # a median 0.2 behind, but too noisy for the interval to clear 0.5: fails
    noisy = dict(GOOD, ccl_0=4.0, ccl_1=6.5, ccl_2=7.2)
    c = {c.name: c for c in ex._claims(_tables(_costs(noisy)))}["ccl_noninferior"]
    assert c.measured < 0.5 and not c.passed
