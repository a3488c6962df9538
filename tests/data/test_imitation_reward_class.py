"""Tests for iclr_lab.data.imitation_reward_class: the reward classes, Algorithm 1 (hard and soft),
its online-to-batch policy, MLE over the induced and the uniform policy classes, and the chapter's
experiments."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from iclr_lab.data.imitation_reward_class import (
    RewardClassLearner,
    check_reward_class,
    make_instance,
    mistakes_chart,
    mle_policy,
    numbers,
    policy_value,
    run_online,
    theorem4_ratio,
)

# ------------------------------------------------------------------ bad input


def test_empty_reward_class_is_rejected() -> None:
    with pytest.raises(ValueError, match="S must hold at least one hypothesis"):
        check_reward_class(np.zeros((0, 3, 2), dtype=bool))
    with pytest.raises(ValueError, match="S must hold at least one hypothesis"):
        RewardClassLearner(np.zeros((0, 3, 2), dtype=bool))


def test_malformed_reward_class_is_rejected() -> None:
    with pytest.raises(ValueError, match="S must have shape"):
        check_reward_class(np.ones((3, 2), dtype=bool))
    S = np.ones((2, 3, 2), dtype=bool)
    S[1, 2] = False  # hypothesis 1 has no correct answer on context 2
    with pytest.raises(ValueError, match="S must give every hypothesis"):
        check_reward_class(S)


@pytest.mark.parametrize("gamma", [0.0, -0.1, 1.5, math.nan])
def test_gamma_outside_unit_interval_is_rejected(gamma: float) -> None:
    with pytest.raises(ValueError, match=r"gamma must be in \(0, 1\]"):
        RewardClassLearner(np.ones((2, 3, 2), dtype=bool), gamma)


def test_other_bad_arguments_are_rejected() -> None:
    S = np.ones((2, 3, 2), dtype=bool)
    with pytest.raises(ValueError, match="tie must be one of"):
        RewardClassLearner(S, tie="random")
    with pytest.raises(ValueError, match="x must be an integer in"):
        RewardClassLearner(S).predict(3)
    with pytest.raises(ValueError, match="kind must be one of"):
        make_instance("huge")
    with pytest.raises(ValueError, match="size must be an integer in"):
        make_instance("paired", size=0)
    with pytest.raises(ValueError, match="density must be in"):
        make_instance("random", density=0.0)
    with pytest.raises(TypeError, match="size must be an integer"):
        make_instance("tight", size=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"gamma must be in \(0, 1\]"):
        theorem4_ratio(1, 0, 4, 0.0)
    with pytest.raises(ValueError, match="n_hyp must be an integer in"):
        theorem4_ratio(1, 0, 1, 0.5)
    with pytest.raises(ValueError, match="o2b_policy needs track=True"):
        RewardClassLearner(S).o2b_policy()
    with pytest.raises(ValueError, match="q must be in"):
        mistakes_chart(q=1.5)


def test_mle_needs_a_consistent_hypothesis_and_truth_for_the_adversarial_tie() -> None:
    tight = make_instance("tight", size=1)  # {0} and {1} on one context
    with pytest.raises(ValueError, match="no hypothesis of S accepts"):
        mle_policy(tight.S, np.array([0, 0]), np.array([0, 1]), policy_class="uniform")
    inst = make_instance("sigma01", n_contexts=5)
    with pytest.raises(ValueError, match="needs truth"):
        mle_policy(inst.S, np.array([0]), np.array([0]))
    with pytest.raises(ValueError, match="policy_class must be one of"):
        mle_policy(inst.S, np.array([0]), np.array([0]), policy_class="softmax")
    with pytest.raises(ValueError, match="xs must be context indices"):
        mle_policy(inst.S, np.array([5]), np.array([0]), policy_class="uniform")
    with pytest.raises(ValueError, match="ys must be answer indices"):
        mle_policy(inst.S, np.array([0]), np.array([2]), policy_class="uniform")
    with pytest.raises(ValueError, match="xs and ys must be 1-d arrays of the same length"):
        mle_policy(inst.S, np.array([0, 1]), np.array([0]), policy_class="uniform")
    with pytest.raises(ValueError, match="truth must have shape"):
        run_online(RewardClassLearner(inst.S), np.array([0]), np.array([0]), inst.S[0][:2])


def test_nan_and_non_boolean_entries_are_not_read_as_true() -> None:
    # np.asarray(x, dtype=bool) takes NaN (and 0.5) for True: a class of NaNs accepted everything
    inst = make_instance("sigma01", n_contexts=3)
    for bad in (np.full(inst.S.shape, np.nan), np.full(inst.S.shape, 0.5)):
        with pytest.raises(ValueError, match="S must"):
            check_reward_class(bad)
    assert check_reward_class(inst.S.astype(float)).dtype == bool  # 0/1 numbers are fine
    truth = inst.S[0]
    nan = np.full(truth.shape, np.nan)
    with pytest.raises(ValueError, match="truth must"):
        run_online(RewardClassLearner(inst.S), np.array([0]), np.array([0]), nan)
    with pytest.raises(ValueError, match="truth must"):
        mle_policy(inst.S, np.array([0]), np.array([0]), truth=nan)
    with pytest.raises(ValueError, match="truth must have shape"):
        mle_policy(inst.S, np.array([0]), np.array([0]), truth=truth[:1])
    with pytest.raises(ValueError, match="truth must"):
        policy_value(truth / 1.0, nan)
    with pytest.raises(ValueError, match="probs must be finite"):
        policy_value(nan, truth)
    with pytest.raises(ValueError, match="probs must be a policy"):
        policy_value(2.0 * truth, truth)
    with pytest.raises(ValueError, match="xs must be finite"):
        run_online(RewardClassLearner(inst.S), np.array([np.nan]), np.array([0]), truth)
    with pytest.raises(ValueError, match="ys must hold whole-number indices"):
        mle_policy(inst.S, np.array([0]), np.array([0.5]), truth=truth)


def test_every_argument_of_make_instance_is_checked_and_seeds_are_integers() -> None:
    with pytest.raises(ValueError, match="kappa"):  # "random" does not use kappa, but -1 is wrong
        make_instance("random", kappa=-1)
    with pytest.raises(ValueError, match="decoy_sizes"):
        make_instance("tight", size=2, decoy_sizes=(0,))
    with pytest.raises(ValueError, match="kappa"):
        make_instance("decoy", n_answers=8, kappa=8)
    for call in (lambda s: make_instance("random", seed=s), lambda s: mistakes_chart(seed=s)):
        with pytest.raises(TypeError, match="seed must be an integer"):
            call(None)
        with pytest.raises(ValueError, match="seed must be an integer in"):
            call(-1)


# ------------------------------------------------------------------ Algorithm 1


def test_hard_update_removes_rejectors_and_doubles_those_that_rejected_the_answer() -> None:
    # three hypotheses on one context with answers {0, 1, 2}
    S = np.zeros((3, 1, 3), dtype=bool)
    S[0, 0, [0]] = True  # accepts the learner's answer 0 only
    S[1, 0, [1]] = True  # accepts the demonstration 1 only
    S[2, 0, [0, 1]] = True  # accepts both
    learner = RewardClassLearner(S)
    assert learner.update(0, 1) == 0  # votes: 0 -> 2, 1 -> 2: tie, smallest index
    w = np.exp(learner.logw)
    assert w.tolist() == [0.0, 2.0, 1.0]


def test_accepted_demonstration_never_removes_a_hypothesis_at_gamma_one() -> None:
    S = np.ones((2, 1, 2), dtype=bool)  # 0^0 = 1: both accept everything
    learner = RewardClassLearner(S, 1.0)
    learner.update(0, 1)
    assert np.isfinite(learner.logw).all() and (learner.logw == 0).all()


def test_total_weight_never_increases_and_truth_weight_is_the_potential() -> None:
    rng = np.random.default_rng(0)
    inst = make_instance("random", size=40, n_contexts=30, n_answers=5, seed=3)
    truth = inst.S[inst.truth]
    for gamma in (0.2, 0.6, 1.0):
        learner = RewardClassLearner(inst.S, gamma)
        total, M, D = 40.0, 0, 0  # noqa: N806
        for _ in range(200):
            x = int(rng.integers(30))
            # a suboptimal demonstrator (errors only when gamma < 1, so the truth survives)
            wrong = gamma < 1 and rng.uniform() < 0.2 and (~truth[x]).any()
            y = int(np.flatnonzero(~truth[x])[0]) if wrong else int(rng.choice(np.flatnonzero(truth[x])))
            yhat = learner.update(x, y)
            M += int(not truth[x, yhat])  # noqa: N806
            D += int(wrong)  # noqa: N806
            new = float(np.exp(learner.logw).sum())
            assert new <= total * (1 + 1e-12)
            total = new
        expected = M * math.log1p(gamma) + (D * math.log1p(-gamma) if D else 0.0)
        assert learner.logw[inst.truth] == pytest.approx(expected)
        assert theorem4_ratio(M, D, 40, gamma) <= 1 + 1e-12


def test_mistake_bound_holds_for_every_order_and_every_correct_demonstration() -> None:
    # brute force on tiny classes: |R| <= 8, N = 3 contexts, all orders and all demonstrated answers
    for seed in range(6):
        inst = make_instance("random", size=8, n_contexts=3, n_answers=3, density=0.5, seed=seed)
        truth = inst.S[inst.truth]
        choices = [np.flatnonzero(truth[x]) for x in range(3)]
        worst = 0
        for order in itertools.permutations(range(3)):
            for answers in itertools.product(*choices):
                for rounds in (1, 2):  # each context shown once or twice
                    learner = RewardClassLearner(inst.S)
                    xs = np.array(list(order) * rounds)
                    ys = np.array([answers[x] for x in xs])
                    mis, _ = run_online(learner, xs, ys, truth)
                    worst = max(worst, int(mis.sum()))
        assert worst <= math.floor(math.log2(8))


def test_tight_class_forces_log2_r_mistakes() -> None:
    inst = make_instance("tight", size=6)
    learner = RewardClassLearner(inst.S)
    for i in range(6):
        yhat = learner.predict(i)
        learner.update(i, 1 - yhat)  # the adaptive truth: the answer the learner did not give
    # every round was a mistake, and the truth's weight reached 2^k = |R|
    assert learner.logw.max() == pytest.approx(6 * math.log(2))
    assert np.isfinite(learner.logw).sum() == 1


def test_paired_decoys_separate_algorithm_1_from_majority_vote() -> None:
    M = 20  # noqa: N806
    inst = make_instance("paired", size=M)
    counts = {}
    for promote in (True, False):
        for tie in ("first", "last"):
            mis, _ = run_online(RewardClassLearner(inst.S, promote=promote, tie=tie), np.arange(M),
                                np.zeros(M, int), inst.S[0])
            counts[promote, tie] = int(mis.sum())
    assert counts[False, "first"] == counts[False, "last"] == M
    assert counts[True, "first"] == 1 and counts[True, "last"] == 2


def test_o2b_policy_is_the_mixture_of_the_snapshots() -> None:
    rng = np.random.default_rng(1)
    inst = make_instance("decoy", size=30, n_contexts=20, n_answers=12, kappa=5, decoy_sizes=(1, 3),
                         seed=2)
    truth = inst.S[inst.truth]
    xs, ys = inst.sample(25, rng)
    learner = RewardClassLearner(inst.S, track=True)
    run_online(learner, xs, ys, truth)
    per_snapshot = [policy_value(np.eye(12)[p], truth) for p in learner.snapshots]
    assert len(per_snapshot) == 25
    assert policy_value(learner.o2b_policy(), truth) == pytest.approx(np.mean(per_snapshot))
    assert np.allclose(learner.o2b_policy().sum(axis=1), 1.0)


# ------------------------------------------------------------------ MLE


def test_mle_over_induced_class_on_sigma01_values_equal_the_seen_fraction() -> None:
    inst = make_instance("sigma01", n_contexts=50)
    truth = inst.S[inst.truth]
    xs, ys = inst.sample(40, np.random.default_rng(4))
    seen = np.unique(xs).size / 50
    adv = mle_policy(inst.S, xs, ys, truth=truth)
    ent = mle_policy(inst.S, xs, ys, tie="maxent")
    unif = mle_policy(inst.S, xs, ys, policy_class="uniform")
    assert policy_value(adv, truth) == pytest.approx(seen)
    assert policy_value(ent, truth) == pytest.approx(seen + 0.5 * (1 - seen))
    assert policy_value(unif, truth) == 1.0  # sigma0 has the larger uniform likelihood
    assert np.allclose(adv.sum(axis=1), 1.0)
    # Algorithm 1 answers 0 everywhere: both hypotheses vote for it
    learner = RewardClassLearner(inst.S)
    run_online(learner, xs, ys, truth)
    assert (learner.predict_all() == 0).all()


@pytest.mark.parametrize("k", [1, 3, 7])
def test_mle_over_uniform_policies_picks_the_smallest_decoy(k: int) -> None:
    inst = make_instance("decoy", size=40, n_contexts=30, n_answers=32, kappa=16, decoy_sizes=(k, 9),
                         seed=k)
    truth = inst.S[inst.truth]
    xs, ys = inst.sample(60, np.random.default_rng(k))
    probs = mle_policy(inst.S, xs, ys, policy_class="uniform")
    assert policy_value(probs, truth) == pytest.approx(1 / (k + 1))
    assert (inst.S[:, xs, ys].all(axis=1)[[0, 1, 2]]).all()  # truth and decoys stay consistent


# ------------------------------------------------------------------ the chapter's experiments


def test_smoke_reproduce_claims_and_numbers(smoke_report) -> None:
    report = smoke_report("imitation_reward_class", 0)
    claims = {c.name: c for c in report.claims}
    assert {c.kind for c in report.claims} >= {"paper", "theorem", "derivation"}
    assert claims["paired_alg1"].measured <= 4.0  # floor(log2 17)
    assert claims["paired_alg1"].control == "majority vote over the version space (the same class and runs)"
    assert claims["paired_majority"].measured == 8.0
    assert claims["tight_mistakes"].measured == 0.0
    assert claims["thm4_exact"].measured <= 1.0 + 1e-9
    assert claims["thm4_majority"].measured > 1.0
    nums = numbers(report)
    assert nums["mle_unif_loss_last"] == pytest.approx(0.5)
    assert nums["thm4_tight_gamma1"] == pytest.approx(1.0)
    assert nums["log_form_rhs"] < nums["log_form_lhs"]  # the natural-log form is broken
    assert set(report.charts()) == {"sigma01", "o2b", "theorem4", "sweep"}
    # the explore sweep: both learners see the same demonstrator errors, the bound uses them, and
    # Algorithm 1 stays under it in every run (Theorem 4, exact form)
    sw = report.tables["sweep"]
    per_run = sw.groupby(["q", "log2R", "run"])
    assert (per_run["errors"].nunique() == 1).all()
    wide = sw.pivot_table(index=["q", "log2R", "run"], columns="learner", values="mistakes")
    assert (wide["Algorithm 1"] <= wide["Theorem 4 bound"] + 1e-9).all()


def test_explorer_recomputes() -> None:
    from iclr_lab.data.imitation_reward_class import explorer

    w = explorer()
    before = w.result.to_dict()
    w.children[0].value = 0.4  # demonstrator error rate
    after = w.result.to_dict()
    assert before != after


def test_permuted_paired_decoys_keep_the_truth_and_the_bound_under_both_tie_breaks() -> None:
    """The label-permuted paired decoys: the truth accepts exactly the demonstrated answer, the
    class is the original one with answers swapped on the chosen contexts, and over many seeds
    Algorithm 1 stays within floor(log2|R|) mistakes under both tie-breaks while majority vote errs
    on every context; the two tie-breaks of the unpermuted class differ (1 against 2)."""
    from iclr_lab.data.imitation_reward_class import RewardClassLearner, make_instance, run_online
    from iclr_lab.data.imitation_reward_class.experiments import _paired, _permuted_paired

    M = 20  # noqa: N806
    base = make_instance("paired", size=M).S
    swapped = set()
    for seed in range(30):
        S, ys = _permuted_paired(M, seed)  # noqa: N806
        assert S[0, np.arange(M), ys].all() and S[0].sum() == M
        assert np.array_equal(S[:, ys == 0], base[:, ys == 0])
        assert np.array_equal(S[:, ys == 1], base[:, ys == 1, ::-1])
        swapped.add(tuple(ys))
        for tie in ("first", "last"):
            alg = run_online(RewardClassLearner(S, tie=tie), np.arange(M), ys, S[0])[0].sum()
            maj = run_online(RewardClassLearner(S, promote=False, tie=tie), np.arange(M), ys, S[0])[0].sum()
            assert alg <= math.floor(math.log2(2 * M + 1))
            assert maj == M
    assert len(swapped) > 20
    fixed = _paired(M).set_index(["learner", "tie-break"])["mistakes"]
    assert fixed[("Algorithm 1", "smallest index")] == 1
    assert fixed[("Algorithm 1", "largest index")] == 2
