"""Tests for the data-curation chapter's module: the model, the curation rules, curated ridge, the
closed-form test error, the self-training loop and the chapter's experiments."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from iclr_lab.core.report import Report
from iclr_lab.data.data_curation import (
    SELF,
    STRONG,
    WEAK,
    Geometry,
    angle_error,
    explorer,
    keep_mask,
    kept_moments,
    limit_error,
    numbers,
    phase_table,
    ridge,
    sample,
    self_train,
    simulate,
    theory_error,
)

# ------------------------------------------------------------------ the model


def test_geometry_vectors_have_the_stated_cosines() -> None:
    geo = Geometry(0.9, 0.7, 0.6)
    w_star, w_g, w_o = geo.vectors(10)
    for v in (w_star, w_g, w_o):
        assert np.linalg.norm(v) == pytest.approx(1.0)
    assert w_g @ w_star == pytest.approx(0.9)
    assert w_o @ w_star == pytest.approx(0.7)
    assert w_o @ w_g == pytest.approx(0.6)


def test_geometry_rejects_an_impossible_triple() -> None:
    with pytest.raises(ValueError, match="positive semi-definite"):
        Geometry(0.99, 0.99, 0.0)
    with pytest.raises(ValueError, match="rho_star"):
        Geometry(0.9, 1.5, 0.5)


def test_test_error_is_the_angle_over_pi() -> None:
    rng = np.random.default_rng(0)
    w, w_star = rng.standard_normal(5), rng.standard_normal(5)
    X = rng.standard_normal((200_000, 5))
    mc = np.mean(np.sign(X @ w) != np.sign(X @ w_star))
    assert angle_error(w, w_star) == pytest.approx(mc, abs=0.005)
    assert angle_error(np.zeros(5), w_star) == 0.5


# ------------------------------------------------------------------ curation rules


@pytest.mark.parametrize("rule", ["keep_easy", "keep_hard"])
@pytest.mark.parametrize("p", [0.1, 0.3, 0.7])
def test_difficulty_rules_keep_the_requested_fraction(rule: str, p: float) -> None:
    t = np.random.default_rng(1).standard_normal(400_000)
    keep = keep_mask(rule, p, t, np.sign(t))
    assert keep.mean() == pytest.approx(p, abs=0.003)
    hard = np.abs(t[keep]).max() if rule == "keep_hard" else np.abs(t[~keep]).max()
    easy = np.abs(t[~keep]).min() if rule == "keep_hard" else np.abs(t[keep]).min()
    assert hard <= easy + 1e-12   # hard examples have the smaller margins


def test_label_aware_rule_drops_disagreeing_labels_only() -> None:
    t = np.array([-2.0, -0.1, 0.1, 2.0])
    y = np.array([-1.0, 1.0, -1.0, 1.0])
    assert keep_mask("agree", 1.0, t, y).tolist() == [True, False, False, True]
    assert keep_mask("agree_hard", 0.5, t, y).tolist() == [False, False, False, False]
    assert keep_mask("agree_easy", 0.5, t, y).tolist() == [True, False, False, True]


def test_keep_fraction_out_of_range_is_rejected() -> None:
    t = np.zeros(3)
    for bad in (0.0, 1.5, -0.2):
        with pytest.raises(ValueError, match="keep_fraction"):
            keep_mask("keep_hard", bad, t, t)
    with pytest.raises(ValueError, match="rule"):
        keep_mask("keep_medium", 0.5, t, t)
    with pytest.raises(ValueError, match="keep_fraction"):
        simulate("keep_hard", 0.0, 100, 10)
    with pytest.raises(ValueError, match="keep_fraction"):
        theory_error("keep_hard", 2.0, 0.1)


def test_bad_sizes_and_ridge_are_rejected() -> None:
    with pytest.raises(ValueError, match="n"):
        simulate("full", 1.0, 0, 10)
    with pytest.raises(ValueError, match="lam"):
        simulate("full", 1.0, 100, 10, lam=0.0)
    with pytest.raises(ValueError, match="phi"):
        theory_error("full", 1.0, -1.0)
    with pytest.raises(ValueError, match="rounds"):
        self_train("full", 1.0, 0, 100, 10)


@pytest.mark.parametrize("seed", [None, "0", 1.5])
def test_a_run_is_always_seeded(seed: Any) -> None:
    # seed=None would be numpy's "fresh entropy": silently a different run every time (issue 24)
    with pytest.raises(TypeError, match="seed must be an integer"):
        self_train("full", 1.0, 2, 50, 5, seed=seed)
    with pytest.raises(TypeError, match="seed must be an integer"):
        simulate("full", 1.0, 50, 5, seed=seed)


def test_arguments_are_checked_at_entry_and_named() -> None:
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 4294967295\]"):
        self_train("full", 1.0, 2, 50, 5, seed=-1)
    with pytest.raises(ValueError, match="lam"):  # before any round is drawn
        self_train("full", 1.0, 2, 50, 5, lam=float("nan"))
    with pytest.raises(TypeError, match="rho"):  # rho_g = rho * rho_star is not computed first
        self_train("full", 1.0, 2, 50, 5, rho="high")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rho_star"):
        phase_table(rho_star="high")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lam"):
        phase_table(lam=-1.0)
    X, y = np.random.default_rng(0).standard_normal((6, 2)), np.ones(6)
    keep = np.ones(6, dtype=bool)
    with pytest.raises(TypeError, match="keep must be a boolean mask"):
        ridge(X, y, np.ones(6), 0.1)
    with pytest.raises(ValueError, match="keep must have shape"):
        ridge(X, y, keep[:4], 0.1)
    with pytest.raises(ValueError, match="X must be finite"):
        ridge(np.full((6, 2), np.nan), y, keep, 0.1)
    with pytest.raises(ValueError, match="y must have shape"):
        ridge(X, np.ones((6, 2)), keep, 0.1)
    with pytest.raises(ValueError, match="w_g must be finite"):
        sample(5, 2, np.array([np.nan, 1.0]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="w_star must have shape"):
        angle_error(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="w must be finite"):
        angle_error(np.full(3, np.nan), np.ones(3))
    with pytest.raises(ValueError, match="t must be finite"):
        keep_mask("keep_hard", 0.5, np.full(3, np.nan), np.ones(3))
    with pytest.raises(ValueError, match="y must have shape"):
        keep_mask("agree", 1.0, np.ones(3), np.ones(4))
    with pytest.raises(TypeError, match="geometry must be a Geometry"):
        kept_moments((0.9, 0.9, 0.9), "full", 1.0)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the learner


def test_ridge_normalises_by_the_total_n() -> None:
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((300, 8)), rng.standard_normal(300)
    keep = rng.uniform(size=300) < 0.4
    w = ridge(X, y, keep, 0.1)
    D = np.diag(keep.astype(float))
    grad = X.T @ D @ (X @ w - y) / 300 + 0.1 * w   # gradient of the objective at its minimiser
    assert np.abs(grad).max() < 1e-10
    # the same as ridge on the kept rows alone with lam / p
    Xk, yk = X[keep], y[keep]
    p = keep.mean()
    w2 = np.linalg.solve(Xk.T @ Xk / keep.sum() + 0.1 / p * np.eye(8), Xk.T @ yk / keep.sum())
    assert np.allclose(w, w2)


# ------------------------------------------------------------------ the closed form


def test_label_agnostic_moments_match_the_four_scalars() -> None:
    geo = Geometry(0.9, 0.8, 0.7)
    tau = geo.tau
    alpha = norm.ppf(0.75)      # keep hard, p = 1/2

    def e(f: object) -> float:   # E[q(G) f(G)] for q(g) = 1[|g| <= alpha]
        return quad(lambda g: norm.pdf(g) * f(g), -alpha, alpha, epsabs=1e-12)[0]  # type: ignore[operator]

    p, gamma = e(lambda g: 1.0), e(lambda g: g * g)
    beta = 2 * e(lambda g: norm.pdf(tau * g))
    beta_t = 2 * e(lambda g: norm.cdf(tau * g) * g)
    m = kept_moments(geo, "keep_hard", 0.5)
    assert m.p == pytest.approx(p, rel=1e-9)
    assert np.allclose(m.cov, np.array([[gamma / p, 0.0], [0.0, 1.0]]), atol=1e-9)
    assert np.allclose(m.cross, [beta_t / p, beta / p], atol=1e-9)


@pytest.mark.parametrize("rule", ["keep_easy", "agree_hard", "agree"])
def test_kept_moments_match_monte_carlo(rule: str) -> None:
    geo = Geometry(0.8, 0.95, 0.6)
    rng = np.random.default_rng(3)
    u = rng.standard_normal((1_000_000, 2))
    y = np.sign(geo.rho_g * u[:, 0] + geo.s * u[:, 1])
    keep = keep_mask(rule, 0.4, u[:, 0], y)
    m = kept_moments(geo, rule, 0.4)
    uk, yk = u[keep], y[keep]
    assert m.p == pytest.approx(keep.mean(), abs=0.002)
    assert np.allclose(m.cov, uk.T @ uk / len(uk), atol=0.01)
    assert np.allclose(m.cross, uk.T @ yk / len(uk), atol=0.01)


def test_theory_matches_monte_carlo_and_the_bug_does_not() -> None:
    # a cell where the normalisation matters: keep hard, p = 0.3, lam = 0.3
    kw: dict[str, Any] = {"rho": 0.8, "rho_star": 0.999, "rho_g": 0.8, "lam": 0.3}
    mc = np.mean([simulate("keep_hard", 0.3, 4000, 100, seed=s, **kw) for s in range(8)])
    good = theory_error("keep_hard", 0.3, 100 / 4000, **kw)
    bug = theory_error("keep_hard", 0.3, 100 / 4000, normalise_by_kept=True, **kw)
    assert abs(good - mc) < 0.008
    assert abs(bug - mc) > 0.025


def test_theory_tends_to_the_limit() -> None:
    kw: dict[str, Any] = {"rho": 0.9, "rho_star": 0.95, "rho_g": 0.85}
    lim = limit_error("keep_hard", 0.3, **kw)
    near = theory_error("keep_hard", 0.3, 1e-6, lam=1e-7, **kw)
    assert near == pytest.approx(lim, abs=1e-4)


def test_ridgeless_full_data_matches_the_interpolation_formula() -> None:
    # full data, lam -> 0, phi < 1: the estimator's noise energy is sigma^2 phi / (1 - phi)
    kw: dict[str, Any] = {"rho": 0.9, "rho_star": 0.9, "rho_g": 1.0}
    phi = 0.25
    m = kept_moments(Geometry(0.9, 0.9, 1.0), "full", 1.0)
    a1 = m.a[0]
    nu = a1**2 + m.noise * phi / (1 - phi)
    want = math.acos(0.9 * a1 / math.sqrt(nu)) / math.pi
    assert theory_error("full", 1.0, phi, lam=0.0, **kw) == pytest.approx(want, rel=1e-9)


def test_self_curation_limit_is_the_generator_floor() -> None:
    # w_o = w_g: every rule's limit is the generator's own error arccos(rho)/pi
    for rule, p in (("keep_hard", 0.2), ("keep_easy", 0.5), ("full", 1.0)):
        assert limit_error(rule, p, rho=0.8, rho_star=0.8, rho_g=1.0) == pytest.approx(
            SELF.generator_error, abs=1e-9)


def test_limit_of_full_data_is_the_generator_and_keep_easy_wins_for_a_weak_one() -> None:
    # full data in the limit learns the generator's direction exactly (a is parallel to w_g)
    assert limit_error("full", 1.0, rho=STRONG.rho, rho_star=STRONG.rho_star,
                       rho_g=STRONG.rho_g) == pytest.approx(STRONG.generator_error, abs=1e-9)
    assert limit_error("keep_hard", 0.3, rho=WEAK.rho, rho_star=WEAK.rho_star,
                       rho_g=WEAK.rho_g) > limit_error("keep_easy", 0.3, rho=WEAK.rho,
                                                       rho_star=WEAK.rho_star, rho_g=WEAK.rho_g)


# ------------------------------------------------------------------ self-training


def test_self_training_full_data_degrades_and_is_reproducible() -> None:
    e = self_train("full", 1.0, 8, 1000, 60, seed=4)
    assert e.shape == (8,)
    assert e[-1] > e[0]
    assert np.array_equal(e, self_train("full", 1.0, 8, 1000, 60, seed=4))


def test_sample_labels_are_the_generators_signs() -> None:
    w_g = np.array([0.6, 0.8, 0.0])
    X, y = sample(50, 3, w_g, np.random.default_rng(5))
    assert np.array_equal(y, np.where(X @ w_g >= 0, 1.0, -1.0))
    with pytest.raises(ValueError, match="w_g"):
        sample(5, 4, w_g, np.random.default_rng(0))


# ------------------------------------------------------------------ the chapter


def test_phase_table_marks_keep_hard_with_abundant_data_and_a_strong_generator() -> None:
    tab = phase_table(rho=0.9999, rho_star=0.999, lam=1e-2)
    row = tab[(tab["p"] == 0.5) & (tab["n"] == tab["n"].unique()[-3])]
    assert row["best"].iloc[0] == "keep hard"
    # the gain is full data's error over the winner's: 1 exactly where full data wins, above 1 elsewhere
    assert np.allclose(tab["gain"], tab["full"] / tab["error"])
    assert (tab.loc[tab["best"] == "full data", "gain"] == 1.0).all()
    assert row["gain"].iloc[0] > 1.05


def test_keep_easy_learns_the_oracle_and_keep_hard_can_beat_both() -> None:
    # close oracle and generator: the easy examples carry the oracle's labels, so keep easy's limit
    # is the oracle's own error; near a tie keep hard mixes the two directions and beats it even
    # with a generator slightly worse than the oracle (the chapter's restatement of Theorem 2 (A))
    kw = {"rho": 0.9989, "rho_star": 0.999, "rho_g": 0.998}
    geo = Geometry(**kw)
    assert geo.generator_error > geo.oracle_error
    assert limit_error("keep_easy", 0.3, **kw) == pytest.approx(geo.oracle_error, rel=1e-3)
    assert limit_error("keep_hard", 0.3, **kw) < 0.9 * geo.oracle_error


def test_explorer_changes_with_the_oracle() -> None:
    w = explorer()
    first = w.result.to_dict()
    w.children[1].value = 0.9
    assert w.result.to_dict() != first


@pytest.fixture(scope="module")
def smoke(smoke_report) -> Report:
    return smoke_report("data_curation", 0)


def test_smoke_report_has_every_table_and_number(smoke: Report) -> None:
    assert {"formula", "abundant", "abundant_tuned", "scarce", "scarce_tuned", "limit_curves",
            "limit_sims", "collapse", "grid_theory", "grid_sims", "phase"} <= set(smoke.tables)
    assert [t.method for t in smoke.tuning] == ["full data", "keep hard", "keep easy",
                                                "full data (n = d)", "keep hard (n = d)",
                                                "keep easy (n = d)"]
    claims = {c.name: c for c in smoke.claims}
    assert claims["thm2_planned_limit"].measured > 0 and not claims["thm2_planned_limit"].expected
    assert claims["thm2_strong_limit"].source == claims["thm2_strong_sim"].source == "pilot"
    assert claims["less_is_more"].control and claims["scarce_more_is_more"].control
    assert claims["scarce_more_is_more"].source == "pilot"  # its ridge was fixed before the review
    nums = numbers(smoke)
    assert all(np.isfinite(v) for v in nums.values() if isinstance(v, float))
    assert set(smoke.charts()) == {"formula", "less_is_more", "limit", "collapse", "grid", "phase"}


def test_grouped_gram_matrices_equal_the_direct_ones() -> None:
    from iclr_lab.data.data_curation.experiments import _grams

    rng = np.random.default_rng(6)
    X, y = rng.standard_normal((500, 6)), np.sign(rng.standard_normal(500))
    t = X[:, 0]
    masks = [keep_mask(r, p, t, y) for r, p in (("keep_hard", 0.3), ("keep_easy", 0.5),
                                                ("agree_hard", 0.7), ("full", 1.0))]
    for keep, (A, b) in zip(masks, _grams(X, y, masks), strict=True):
        assert np.allclose(A, X[keep].T @ X[keep] / 500)
        assert np.allclose(b, X[keep].T @ y[keep] / 500)


def test_tuned_comparison_reads_the_grid_and_runs_an_off_grid_ridge_afresh() -> None:
    """Each rule's judged error at its tuned ridge and keep fraction: read from the abundant table
    when the ridge is on the grid, and equal to a fresh simulation when it is not."""
    from dataclasses import replace

    import pandas as pd

    from iclr_lab.core.scales import pick
    from iclr_lab.data.data_curation import experiments as ex

    sz = pick(ex.SIZES, "smoke")
    seeds = [0, 1]
    table = pd.DataFrame(ex._abundant(sz, seeds, sz.n_big, ex.LAM_GRID, sz.sims, 2))
    tuned, ps = ex._tune_abundant(sz, 0)
    on = ex._judged(sz, seeds, table, tuned, ps)
    off = [replace(t, choice=t.choice * 1.5) for t in tuned]
    fresh = ex._judged(sz, seeds, table, off, ps)
    fresh_table = pd.DataFrame(
        ex._abundant(sz, seeds, sz.n_big, [t.choice * 1.5 for t in tuned], sz.sims, 2))
    for t, rule in zip(off, ("full data", "keep hard", "keep easy"), strict=True):
        want = fresh_table[(fresh_table["rule"] == rule) & np.isclose(fresh_table["p"], ps[
            {"full data": "full", "keep hard": "keep_hard", "keep easy": "keep_easy"}[rule]])
            & np.isclose(fresh_table["lam"], t.choice)].sort_values("seed")["error"].to_numpy()
        got = fresh[fresh["rule"] == rule].sort_values("seed")["error"].to_numpy()
        assert np.allclose(got, want, rtol=1e-12)
    assert len(on) == len(fresh) == 3 * len(seeds)
    for t, rule in zip(tuned, ("full data", "keep hard", "keep easy"), strict=True):
        if t.choice in ex.LAM_GRID:  # on the grid: the very numbers of the abundant table
            mine = on[on["rule"] == rule].sort_values("seed")
            want = table[(table["rule"] == rule) & np.isclose(table["p"], mine["p"].iloc[0])
                         & np.isclose(table["lam"], t.choice)]
            assert mine["error"].tolist() == want.sort_values("seed")["error"].tolist()


def test_scarce_claim_reads_each_rule_at_its_own_tuned_ridge(smoke: Report) -> None:
    """The scarce comparison is tuned like the abundant one: one ridge per rule (the tuning
    record's choice), every keep fraction of the grid read at it, and the claim's per-seed ratio
    is keep hard's best over p against full data's, both at their own ridges."""
    from iclr_lab.data.data_curation import experiments as ex

    st = smoke.tables["scarce_tuned"]
    chosen = {t.method.removesuffix(" (n = d)"): t.choice for t in smoke.tuning
              if t.method.endswith("(n = d)")}
    for rule, g in st.groupby("rule"):
        assert np.allclose(g["lam"], chosen[rule])
        want = [1.0] if rule == "full data" else list(ex.P_GRID)
        assert sorted(g["p"].unique()) == want
    claim = {c.name: c for c in smoke.claims}["scarce_more_is_more"]
    for s, got in zip(sorted(st["seed"].unique()), claim.per_seed, strict=True):
        g = st[st["seed"] == s]
        ratio = g[g["rule"] == "keep hard"]["error"].min() / g[g["rule"] == "full data"]["error"].iloc[0]
        assert got == pytest.approx(ratio, rel=1e-12)
