"""Tests for iclr_lab.online.utility_learning: the payment set, Algorithm 1 (closed-form identity,
convergence), the agents, Algorithm 2 (signals), the CEP linear programme, dominance payments,
steering, the probing baseline, bad arguments and the explorer."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from iclr_lab.online.utility_learning import (
    BestResponse,
    Hedge,
    LearnerBank,
    NormalFormGame,
    RegretMatching,
    dominance_payments,
    equivalence_error,
    explorer,
    learn_utilities,
    naive_probing,
    optimal_cep,
    pay_against,
    payment_set_diameter,
    prisoners_dilemma,
    project_payments,
    random_game,
    random_utilities,
    single_agent,
    steer,
    strategic_center,
)
from iclr_lab.online.utility_learning.method import _Arena, _contexts, _learn

# ------------------------------------------------------------------ the payment set P


def _bisection_projection(y: np.ndarray) -> np.ndarray:
    lo, hi = y.min() - 3.0, y.max() + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.clip(y - mid, 0, 2).sum() > y.size else (lo, mid)
    return np.clip(y - 0.5 * (lo + hi), 0, 2)


@pytest.mark.parametrize("m", [2, 3, 5, 8])
def test_projection_is_feasible_and_matches_bisection(m: int) -> None:
    y = np.random.default_rng(m).normal(scale=2.0, size=(200, m))
    p = project_payments(y)
    assert np.allclose(p.sum(axis=1), m) and p.min() >= 0.0 and p.max() <= 2.0
    for a, b in zip(y, p, strict=True):
        assert np.allclose(_bisection_projection(a), b, atol=1e-9)


def test_projection_is_the_nearest_point_of_p() -> None:
    """Variational inequality: <y - Proj(y), q - Proj(y)> <= 0 for every q in P."""
    rng = np.random.default_rng(3)
    y = rng.normal(scale=2.0, size=5)
    p = project_payments(y)
    q = project_payments(rng.normal(scale=3.0, size=(500, 5)))  # arbitrary points of P
    assert np.max((q - p) @ (y - p)) <= 1e-9


def test_projection_leaves_points_of_p_alone() -> None:
    p = project_payments(np.random.default_rng(4).normal(size=(50, 4)))
    assert np.allclose(project_payments(p), p)
    assert np.allclose(project_payments(np.ones(6)), 1.0)


@pytest.mark.parametrize("m", [2, 3, 4, 5])
def test_diameter_is_the_largest_distance_between_vertices(m: int) -> None:
    # the vertices of P have coordinates in {0, 1, 2} (at most one 1) summing to m
    verts = [np.array(v, float) for v in itertools.product([0, 1, 2], repeat=m)
             if sum(v) == m and list(v).count(1) <= 1]
    best = max(np.linalg.norm(a - b) for a in verts for b in verts)
    assert payment_set_diameter(m) == pytest.approx(best)


# ------------------------------------------------------------------ Algorithm 1


def test_regret_identity_of_algorithm_1() -> None:
    """T * max_a (u + p̄ - 1)_a = R_0 + R_A exactly, with R_0 the principal's regret against 1 - u;
    the error is at most (m - 1)(R_0 + R_A)/T (the chapter's bound)."""
    u = np.stack([random_utilities(5, np.random.default_rng([s, 0])) for s in range(4)])
    for agent in (Hedge(), RegretMatching()):
        run = pay_against(u, agent, 1500)
        top = (u + 1.0 - run.estimate - 1.0).max(axis=1)
        assert np.allclose(1500 * top, run.principal_regret + run.agent_regret, atol=1e-9)
        assert np.all(run.error <= 4 * (run.principal_regret + run.agent_regret) / 1500 + 1e-12)


@pytest.mark.parametrize("agent", [Hedge(), RegretMatching(), BestResponse(), Hedge(head_start=100)])
def test_algorithm_1_learns_any_no_regret_agent(agent) -> None:
    u = np.stack([random_utilities(4, np.random.default_rng([s, 1])) for s in range(3)])
    short, long = pay_against(u, agent, 300).error, pay_against(u, agent, 3000).error
    assert np.all(long < 0.05)
    assert np.median(long) < np.median(short)


def test_estimate_of_a_zero_utility_is_zero_and_payments_stay_in_p() -> None:
    run = pay_against(np.zeros(4), Hedge(), 2000, checkpoints=[10, 100, 1000])
    assert run.error[0] < 0.01
    assert np.allclose(run.trace.sum(axis=-1), 0.0)  # 1 - mean payment sums to 0: payments in P


def test_row_horizons_are_independent_runs() -> None:
    u = random_utilities(3, np.random.default_rng(9))
    both = pay_against(np.stack([u, u]), Hedge(), [400, 1200])
    assert both.error[0] == pytest.approx(pay_against(u, Hedge(), 400).error[0])
    assert both.error[1] == pytest.approx(pay_against(u, Hedge(), 1200).error[0])


def test_sampled_actions_also_converge() -> None:
    u = np.stack([random_utilities(3, np.random.default_rng([s, 2])) for s in range(3)])
    run = pay_against(u, Hedge(), 4000, observe="sampled", seed=1)
    assert np.median(run.error) < 0.1


def test_hedge_keeps_one_learner_per_signal() -> None:
    bank = Hedge().bank(rows=1, contexts=2, m=2)
    for _ in range(50):
        bank.update(np.array([0]), np.array([[1.0, 0.0]]), bank.strategy(np.array([0])))
    assert bank.strategy(np.array([0]))[0, 0] > 0.9
    assert np.allclose(bank.strategy(np.array([1])), 0.5)  # the other signal learned nothing


# ------------------------------------------------------------------ strategic equivalence


def test_equivalence_error_ignores_opponent_only_terms() -> None:
    g = random_game((3, 2), np.random.default_rng(5))
    shifted = g.utilities.copy()
    shifted[0] += np.random.default_rng(6).normal(size=(1, 2))   # W_1(a_2)
    shifted[1] += np.random.default_rng(7).normal(size=(3, 1))   # W_2(a_1)
    assert float(equivalence_error(g, shifted)) < 1e-12
    other = shifted.copy()
    other[0, 1, 1] += 0.3
    assert float(equivalence_error(g, other)) == pytest.approx(0.3 * (1 - 1 / 3))


def test_random_games_meet_the_papers_normalisation() -> None:
    for s in range(20):
        g = random_game((3, 3), np.random.default_rng(s))
        assert g.normalised and np.allclose(strategic_center(g.utilities), g.utilities)


# ------------------------------------------------------------------ Algorithm 2


def test_two_agents_are_learned_with_signals_and_not_without() -> None:
    games = [random_game((2, 2), np.random.default_rng([s, 3])) for s in range(3)]
    U = np.concatenate([np.stack([g.utilities for g in games])] * 2)
    arena = _Arena(U, [Hedge(), Hedge()], _contexts((2, 2)))
    res = _learn(arena, 256, ["shared"] * 3 + ["none"] * 3)
    assert np.median(res.error[:3]) < 0.1
    assert np.median(res.error[3:]) > 0.3


def test_learn_utilities_uses_the_round_budget() -> None:
    g = random_game((2, 3), np.random.default_rng(8))
    res = learn_utilities(g, Hedge(), T=5 * 1000 + 3)
    assert res.rounds_per_phase == 1000 and res.rounds == 5000
    assert res.estimate.shape == g.utilities.shape and float(res.error) < 0.1
    one = learn_utilities(single_agent([0.5, -0.5, 0.0]), RegretMatching(), T=2000)
    assert float(one.error) < 0.05  # one agent: Algorithm 1


# ------------------------------------------------------------------ steering


def test_optimal_cep_of_the_prisoners_dilemma() -> None:
    g = prisoners_dilemma()
    cep = optimal_cep(g, g.welfare())
    assert cep.mu[0, 0] == pytest.approx(1.0)
    assert cep.payments[0, 0, 0] == pytest.approx(0.4) and cep.payments[1, 0, 0] == pytest.approx(0.4)
    assert cep.value == pytest.approx(0.4)


def test_cep_constraints_hold_on_a_random_game() -> None:
    g = random_game((3, 2), np.random.default_rng(10))
    objective = np.random.default_rng(11).uniform(-1, 1, size=(3, 2))
    cep = optimal_cep(g, objective)
    U, P = g.utilities, cep.payments
    for i, m in enumerate(g.shape):
        for d_i, b in itertools.product(range(m), repeat=2):
            gain = 0.0
            for d in itertools.product(*[range(k) for k in g.shape]):
                if d[i] != d_i:
                    continue
                dev = d[:i] + (b,) + d[i + 1:]
                gain += cep.mu[d] * (U[(i, *dev)] - U[(i, *d)] - P[(i, *d)])
            assert gain <= 1e-7
    # the principal can always do at least as well as the best pure profile paid to be dominant
    assert cep.value >= objective.min() - 1e-9


def test_dominance_payments_make_obeying_dominant_by_the_slack() -> None:
    g = random_game((3, 3), np.random.default_rng(12))
    P = dominance_payments(g.utilities, (2, 0), slack=0.1)
    obey0 = g.utilities[0][2] + P[0][2]          # agent 1 obeys, any action of agent 2
    assert np.allclose(obey0 - g.utilities[0].max(axis=0), 0.1)
    obey1 = g.utilities[1][:, 0] + P[1][:, 0]
    assert np.allclose(obey1 - g.utilities[1].max(axis=1), 0.1)
    assert np.all(P[0][:2] == 0) and np.all(P[1][:, 1:] == 0)  # nothing for disobeying


def test_steering_the_prisoners_dilemma() -> None:
    g = prisoners_dilemma()
    oracle = steer(g, Hedge(), T=6000, rule="oracle", margin=0.1)
    nobody = steer(g, Hedge(), T=6000, rule="none")
    learned = steer(g, Hedge(), T=6000, rule="dominance", margin=0.1)
    assert float(oracle.F_star) == pytest.approx(0.4)
    assert float(nobody.F) < -0.7                       # both defect: welfare 2 * (-0.4)
    assert float(oracle.obey) > 0.9 and float(learned.obey) > 0.9
    # every profile is worth at most 1.2 - 2 (0.4 + 0.1) = 0.2 to the oracle: (C, C) with both
    # paid to obey; the others are worth less. Its average lies below, above no principal.
    assert float(nobody.F) < float(oracle.F) <= 0.2 + 1e-9
    # not knowing the game costs the learner its learning rounds and a larger slack
    assert int(learned.learn_rounds) > 0 and float(learned.eps_hat) > 0
    assert float(learned.F) < float(oracle.F)
    assert float(learned.F_steer) < 0.4 - 2 * (0.1 + 2 * float(learned.eps_hat)) + 0.3


# ------------------------------------------------------------------ the probing baseline


@pytest.mark.parametrize("design", ["flip", "pairwise"])
def test_probing_is_exact_against_a_forgetful_agent_and_fails_against_hedge(design: str) -> None:
    u = np.stack([random_utilities(4, np.random.default_rng([s, 4])) for s in range(3)])
    forgetful = naive_probing(u, BestResponse(), 1200, probes=12, design=design)
    assert np.abs(forgetful - u).max() < 4 * 2.0 ** -12
    learner = naive_probing(u, Hedge(), 1200, probes=8, design=design)
    assert np.abs(learner - u).max(axis=1).min() > 0.2


# ------------------------------------------------------------------ bad arguments


def test_bad_games_are_rejected() -> None:
    with pytest.raises(ValueError, match="shape"):
        NormalFormGame(np.zeros((2, 3)))                 # two agents need (2, m1, m2)
    with pytest.raises(ValueError, match="at least 2 actions"):
        NormalFormGame(np.zeros((1, 1)))
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        NormalFormGame(np.full((1, 3), 1.5))
    with pytest.raises(ValueError, match="centred"):
        learn_utilities(single_agent([1.0, -1.0, -1.0]), Hedge(), 100)  # centred entry 4/3
    with pytest.raises(ValueError, match="temptation > reward"):
        prisoners_dilemma(reward=0.9, temptation=0.5)


def test_bad_horizons_and_options_are_rejected() -> None:
    g = random_game((2, 2), np.random.default_rng(0))
    with pytest.raises(ValueError, match="T must be"):
        pay_against([0.1, -0.1], Hedge(), 0)
    with pytest.raises(ValueError, match="T must be"):
        learn_utilities(g, Hedge(), 7)                   # 4 phases need at least 8 rounds
    with pytest.raises(TypeError, match="T must be an integer"):
        learn_utilities(g, Hedge(), 100.5)
    with pytest.raises(ValueError, match="signals must be one of"):
        learn_utilities(g, Hedge(), 100, signals="loud")
    with pytest.raises(ValueError, match="observe must be one of"):
        pay_against([0.1, -0.1], Hedge(), 10, observe="peek")
    with pytest.raises(ValueError, match="agents must be one agent or one per player"):
        learn_utilities(g, [Hedge()] * 3, 100)
    with pytest.raises(TypeError, match="agents\\[0\\] must be"):
        learn_utilities(g, ["hedge", "hedge"], 100)
    with pytest.raises(ValueError, match="margin must be in"):
        steer(g, Hedge(), T=100, margin=-0.1)
    with pytest.raises(ValueError, match="rule must be one of"):
        steer(g, Hedge(), T=100, rule="bribe")
    with pytest.raises(ValueError, match="target must have the profile shape"):
        steer(g, Hedge(), np.zeros(3), T=100)
    with pytest.raises(ValueError, match="lr must be in"):
        Hedge(lr=-1.0)
    with pytest.raises(ValueError, match="head_start must be"):
        Hedge(head_start=-5)
    with pytest.raises(ValueError, match="design must be one of"):
        naive_probing([0.1, -0.1], Hedge(), 100, design="guess")


def test_seeds_are_checked_where_they_enter() -> None:
    """Issue 24, item 4: ``pay_against(seed=None)`` drew fresh entropy (a run that cannot be
    repeated); ``seed=-1`` gave numpy's own message."""
    g = prisoners_dilemma()
    for call in (lambda s: pay_against([0.5, -0.5], Hedge(), 10, seed=s, observe="sampled"),
                 lambda s: learn_utilities(g, Hedge(), 16, seed=s),
                 lambda s: steer(g, Hedge(), T=40, seed=s)):
        with pytest.raises(TypeError, match=r"\bseed\b"):
            call(None)
        with pytest.raises(ValueError, match=r"\bseed\b"):
            call(-1)
        with pytest.raises(ValueError, match=r"\bseed\b"):
            call(2**32)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: strategic_center(np.full((2, 2, 2), np.nan)), "utilities"),
    (lambda: equivalence_error(prisoners_dilemma(), np.full((2, 2, 2), np.nan)), "estimate"),
    (lambda: dominance_payments(np.full((2, 2, 2), np.nan), (0, 0), 0.1), "estimate"),
    (lambda: dominance_payments(prisoners_dilemma().utilities, 0, 0.1), "recommended"),
    (lambda: optimal_cep(prisoners_dilemma(), np.full((2, 2), np.nan)), "objective"),
    (lambda: steer(prisoners_dilemma(), Hedge(), np.full((2, 2), np.nan), T=40), "target"),
    (lambda: project_payments(np.array([1.0, np.nan])), "y"),
    (lambda: project_payments(np.zeros((0, 3))), "y"),
    (lambda: random_game((2, 2), 0), "rng"),
    (lambda: LearnerBank(0, 1, 2), "rows"),
    (lambda: LearnerBank(1, 1, "2"), "m"),
    (lambda: pay_against(["a", "b"], Hedge(), 10), "u"),
    (lambda: pay_against([0.5, -0.5], Hedge(), 10.5), "T"),
])
def test_arrays_and_sizes_are_checked(call, name) -> None:
    """Issue 24, items 6 and 7 (this chapter's share): NaN utilities, payments or objectives passed
    through to a NaN answer or to the LP solver's own error; bad sizes reached numpy."""
    with pytest.raises((ValueError, TypeError), match=rf"(?<![A-Za-z0-9_]){name}(?![A-Za-z0-9_])"):
        call()


# ------------------------------------------------------------------ the explorer


def test_explorer_recomputes_when_a_control_moves() -> None:
    w = explorer()
    first = w.result.to_dict()
    names = [c.description for c in w.children if hasattr(c, "description")]
    rule = w.children[names.index("principal")]
    rule.value = "oracle_cep"
    second = w.result.to_dict()
    assert first != second and "known utilities" in str(second["title"])
    assert math.isfinite(float(str(second["title"]).split("F(T) = ")[1].split(",")[0]))


def test_cep_payments_enforce_obedience_exactly_when_iterated_dominance_says_so() -> None:
    from iclr_lab.online.utility_learning.experiments import MARGIN, _cep_payment_enforces

    # canonical dilemma: the CEP pays 0.4, the sucker's loss is 0.6: not enough, and CEP-only fails
    assert not _cep_payment_enforces(prisoners_dilemma(), MARGIN)
    fails = steer(prisoners_dilemma(), Hedge(), T=3000, rule="oracle_cep", margin=MARGIN)
    assert float(fails.obey) < 0.1
    # a sucker's loss of 0.4 < 0.4 + margin: cooperating (paid) is dominant, and the agents obey
    easy = prisoners_dilemma(sucker=-0.8)
    assert _cep_payment_enforces(easy, MARGIN)
    assert float(steer(easy, Hedge(), T=3000, rule="oracle_cep", margin=MARGIN).obey) > 0.5


def test_the_bound_from_realised_regrets_holds_for_every_run_and_agent() -> None:
    """Theorem 4.2's proof: error <= (m - 1)(R_0 + R_A)/T, from the regrets of the run itself."""
    import pandas as pd

    from iclr_lab.online.utility_learning.experiments import _bound_ratios

    rng = np.random.default_rng(0)
    u = np.stack([random_utilities(4, rng) for _ in range(3)])
    for agent in (Hedge(), RegretMatching()):
        run = pay_against(u, agent, 600)
        df = pd.DataFrame({"seed": range(3), "T": 600, "error": run.error,
                           "principal_regret": run.principal_regret,
                           "agent_regret": run.agent_regret})
        assert max(_bound_ratios(df, 4)) <= 1.0 + 1e-12


def test_smoke_claims_split_the_cep_games_by_mode_and_drop_the_hedge_slope() -> None:
    from iclr_lab.online.utility_learning import reproduce

    r = reproduce(scale="smoke", seed=0)
    names = {c.name for c in r.claims}
    assert {"single_bound_hedge", "single_bound_rm", "cep_payments_fail_fresh",
            "cep_payments_work_dominant", "steer_gap"} <= names
    assert "single_slope_hedge" not in names
    easy = r.tables["steering"].drop_duplicates("seed")["cep_enforces"].astype(bool)
    n_easy, n_hard = int(easy.sum()), int((~easy).sum())
    assert len(r.claim("cep_payments_work_dominant").per_seed) == max(n_easy, 1)
    assert len(r.claim("cep_payments_fail_fresh").per_seed) == max(n_hard, 1)
    assert r.claim("single_bound_hedge").passed and r.claim("single_bound_rm").passed


def test_smoke_theorem_claims_face_a_control_through_the_same_test() -> None:
    from iclr_lab.online.utility_learning import reproduce
    from iclr_lab.online.utility_learning.experiments import PROBE, SIGNAL_NAMES

    r = reproduce(scale="smoke", seed=0)
    for c in r.claims:
        if c.kind == "theorem":
            assert bool(c.control) != bool(c.no_control), c.name
    single, two = r.tables["single"], r.tables["two_agent"]
    T = int(single[single["agent"] == "best response (forgetful)"]["T"].iloc[0])
    probe = single[(single["method"] == PROBE) & (single["agent"] == "Hedge") & (single["T"] == T)]
    assert r.claim("single_error_hedge").control_per_seed == tuple(
        probe.sort_values("seed")["error"])
    none = two[(two["signals"] == SIGNAL_NAMES["none"]) & (two["L"] == two["L"].max())]
    assert r.claim("two_agent_error").control_per_seed == tuple(none.sort_values("seed")["error"])
    # the controls are real measurements on the same test, not failures by construction: each
    # could pass it (finite values on the test's scale)
    for name in ("single_error_hedge", "single_error_rm", "two_agent_error", "steer_gap"):
        assert np.isfinite(r.claim(name).control_per_seed).all(), name
