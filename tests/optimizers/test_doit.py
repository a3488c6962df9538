"""Behavioural tests of DOIT (book/optimizers/doit.md): the score, the features, the acquisition, the
controller's cold start, switching and surrogates, and the chapter's harness."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from iclr_lab.core.datasets import Split
from iclr_lab.core.nn import batch_indices
from iclr_lab.optimizers import DOIT, doit
from iclr_lab.optimizers.doit import experiments as ex

torch.set_num_threads(1)


# --- the score (doit-eq-score) --------------------------------------------------------------------

def _reference_score(l0, ls, alpha):
    """doit-eq-drops .. doit-eq-score written out again, with plain Python."""
    seq = [l0, *ls]
    d = [(a - b) / max(a, b) for a, b in zip(seq[:-1], seq[1:], strict=True)]
    mu = sum(d) / len(d)
    sd = math.sqrt(sum((x - mu) ** 2 for x in d) / len(d))
    up = (l0 - max(ls)) / (max(l0, max(ls)) * len(ls))
    lo = (l0 - min(ls)) / (max(l0, min(ls)) * len(ls))
    return math.tanh((mu + up + lo) / 3 + alpha * sd)


@pytest.mark.parametrize("ls", [[2.0, 1.5, 1.2, 1.1], [1.0, 3.0, 0.5, 0.7], [5.0], [0.9, 0.9, 1.4]])
@pytest.mark.parametrize("alpha", [0.0, 0.1, 2.0])
def test_score_matches_the_equations(ls, alpha):
    assert doit.score(1.7, ls, alpha) == pytest.approx(_reference_score(1.7, ls, alpha), abs=1e-14)


def test_score_hand_computed():
    # l0 = 2, l = (1, 1): drops (0.5, 0), mu 0.25, sigma 0.25, upper = lower = 0.5 / 2 = 0.25
    t = doit.score_terms(2.0, [1.0, 1.0], alpha=0.1)
    assert (t["mu"], t["sigma"], t["upper"], t["lower"]) == pytest.approx((0.25, 0.25, 0.25, 0.25))
    assert t["s"] == pytest.approx(math.tanh(0.75 / 3 + 0.025))


def test_score_signs_and_bounds():
    assert doit.score(1.0, [1.0] * 10) == 0.0
    assert doit.score(1.0, list(np.linspace(0.95, 0.5, 10)), alpha=0.1) > 0
    assert doit.score(0.5, list(np.linspace(0.55, 1.0, 10)), alpha=0.1) < 0
    rng = np.random.default_rng(0)
    for _ in range(200):
        s = doit.score(float(rng.uniform(0, 5)), rng.uniform(0, 5, 7).tolist(), alpha=5.0)
        assert -1.0 <= s <= 1.0


def test_bound_terms_separate_equal_mean_and_spread():
    # the same drops in another order: equal mu and sigma, but one sequence dips to a lower minimum
    # and never rises above l0, the other rises first: the bound terms rank them
    a = doit.score_terms(1.0, [0.5, 1.0])   # drops +0.5, -0.5 (a dip)
    b = doit.score_terms(1.0, [2.0, 1.0])   # drops -0.5, +0.5 (a spike)
    assert (a["mu"], a["sigma"]) == pytest.approx((b["mu"], b["sigma"]))
    assert a["s"] > 0 > b["s"]


def test_score_of_a_diverged_cycle_is_the_worst():
    assert doit.score(1.0, [0.9, math.nan]) == -1.0
    assert doit.score(1.0, [0.9, math.inf]) == -1.0


@pytest.mark.parametrize(("args", "match"), [
    ((1.0, []), "losses"), ((1.0, [-0.1]), "non-negative"), ((1.0, [1.0], -0.1), "alpha")])
def test_score_rejects_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        doit.score(*args)


# --- the features (doit-eq-features) ---------------------------------------------------------------

def test_features_are_basis_free_and_scale_as_documented():
    gen = torch.Generator().manual_seed(0)
    w1, w2 = torch.randn(16, 8, generator=gen), torch.randn(4, 16, generator=gen)
    f = doit.state_features([w1, w2], k=2)
    assert f.shape == (6,)
    q, _ = torch.linalg.qr(torch.randn(8, 8, generator=gen))
    rows = torch.randperm(16, generator=gen)
    g = doit.state_features([w1[rows] @ q, w2], k=2)          # rows permuted, inputs rotated
    assert np.allclose(f, g, atol=1e-10)
    h = doit.state_features([3.0 * w1, w2], k=2)
    assert np.allclose(h[:2], f[:2]) and h[2] == pytest.approx(f[2] + math.log(3.0))
    assert 0 < f[0] <= 1 and f[0] >= f[1] >= 0 and f[0] + f[1] <= 1 + 1e-12


def test_feature_weights_pick_the_last_matrices():
    net = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))
    assert [tuple(p.shape) for p in doit.feature_weights(net)] == [(4, 5), (2, 4)]
    with pytest.raises(ValueError, match="weight matrix"):
        doit.feature_weights(nn.Sequential(nn.ReLU()))


# --- the acquisition (doit-eq-coef, doit-eq-acq) ------------------------------------------------

def test_intended_coefficient_halves_and_literal_grows():
    intended = [doit.exploration_coefficient(i, 10, 0.4, "intended") for i in range(0, 40, 10)]
    literal = [doit.exploration_coefficient(i, 10, 0.4, "literal") for i in range(0, 40, 10)]
    assert intended == pytest.approx([0.6, 0.3, 0.15, 0.075])
    assert literal == pytest.approx([0.6, 0.8, 0.9, 0.95])
    assert doit.exploration_coefficient(55, 10, 0.0, "literal") == 1.0  # from scratch: plain UCB


def test_acquisition_is_a_monotone_squash_of_ucb():
    rng = np.random.default_rng(0)
    mu, sd = rng.normal(size=7), rng.uniform(0, 1, 7)
    e = doit.acquisition_values(mu, sd, 0.7)
    assert np.all((0 < e) & (e < 1)) and np.argmax(e) == np.argmax(mu + 0.7 * sd)
    with pytest.raises(ValueError, match="same shape"):
        doit.acquisition_values(mu, sd[:3], 1.0)


# --- the controller ---------------------------------------------------------------------------------

def _problem(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(96, 6, generator=gen)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 8), nn.Tanh(), nn.Linear(8, 2))
    batches = [torch.randint(0, 96, (16,), generator=gen) for _ in range(60)]
    return net, x, y, batches


def _train(ctl, net, x, y, batches):
    for idx in batches:
        ctl.step(doit.cross_entropy_closure(net, x[idx], y[idx]))


@pytest.mark.parametrize("name", doit.OPTIMIZERS)
def test_one_candidate_is_exactly_that_optimizer(name):
    net, x, y, batches = _problem()
    ref, _, _, _ = _problem()
    ctl = DOIT(net, {name: 0.05}, cycle=7, n_ini=2)
    opt = doit.make_optimizer(name, ref.parameters(), 0.05)
    _train(ctl, net, x, y, batches)
    for idx in batches:
        opt.zero_grad()
        nn.functional.cross_entropy(ref(x[idx]), y[idx]).backward()
        opt.step()
    assert all(torch.equal(p, q) for p, q in zip(net.parameters(), ref.parameters(), strict=True))
    assert sum(c.switched for c in ctl.history) == 1  # built once, state never reset


def test_a_switch_resets_the_state_and_staying_keeps_it():
    net, x, y, batches = _problem()
    ctl = DOIT(net, {"SGDM": 0.05, "Adam": 1e-2}, cycle=5, n_ini=100, seed=3)
    seen = []
    for k, idx in enumerate(batches):
        if k % 5 == 0:
            before = ctl.optimizer
            rec = ctl.begin_cycle()
            seen.append((rec.switched, ctl.optimizer is before))
            if rec.switched or before is None:
                assert not ctl.optimizer.state  # fresh: no momentum, no moments
        ctl.step(doit.cross_entropy_closure(net, x[idx], y[idx]))
    assert {s for s, _ in seen} == {True, False}, "the seed gives both switches and stays"
    assert all(same != switched for switched, same in seen[1:])
    net2, _, _, _ = _problem()
    fresh = DOIT(net2, {"SGDM": 0.05, "Adam": 1e-2}, cycle=5, n_ini=100, seed=3,
                 keep_state_if_same=False)
    objs = []
    for k, idx in enumerate(batches[:30]):
        fresh.step(doit.cross_entropy_closure(net2, x[idx], y[idx]))
        if k % 5 == 0:
            objs.append(fresh.optimizer)
    assert len({id(o) for o in objs}) == len(objs)  # a new optimizer every cycle


def test_cold_start_weights_and_sampling_follow_the_rule():
    net, x, y, batches = _problem()
    ctl = DOIT(net, {"SGD": 0.1, "Adagrad": 0.05, "Adam": 1e-2}, cycle=4, n_ini=10**6,
               omega_min=0.3, seed=1)
    _train(ctl, net, x, y, batches)
    w = np.ones(3)
    rng = np.random.default_rng(1)
    for c in ctl.history:
        assert c.phase == "cold start" and np.allclose(c.weights, w)
        assert ctl.names[int(rng.choice(3, p=w / w.sum()))] == c.choice  # the same draw
        j = ctl.names.index(c.choice)
        w[j] = max((c.score + 1) / 2, 0.3)


def test_logged_acquisition_is_recomputed_independently():
    net, x, y, batches = _problem()
    ctl = DOIT(net, {"SGD": 0.1, "SGDM": 0.05, "Adam": 1e-2}, cycle=3, n_ini=6, halving=3,
               omega_t=0.3, seed=2)
    _train(ctl, net, x, y, batches)
    acq = [c for c in ctl.history if c.phase == "acquisition"]
    assert len(acq) >= 10
    for c in acq:
        coef = (1 - 0.3) * 2.0 ** -(c.index // 3)
        assert c.coefficient == pytest.approx(coef)
        e = 1 / (1 + np.exp(-(c.mu + coef * c.sigma)))
        assert np.allclose(c.acq, e) and c.choice == ctl.names[int(np.argmax(e))]


def test_surrogates_start_at_the_prior_and_then_follow_the_data():
    net, x, y, batches = _problem()
    ctl = DOIT(net, {"SGD": 0.1, "Adam": 1e-2}, cycle=3, n_ini=4, seed=0)
    mu, sd = ctl.predict()
    assert np.allclose(mu, 0.0) and np.allclose(sd, math.sqrt(1.1))  # Matern(1) + White(0.1)
    _train(ctl, net, x, y, batches[:30])
    for name in ctl.names:
        gp = ctl.surrogate(name)
        data = [(c.features, c.score) for c in ctl.history if c.choice == name and c.losses]
        if len(data) >= 2:
            scaled = np.vstack([ctl._scaled(f) for f, _ in data])
            pred = gp.predict(scaled)
            ys = np.array([s for _, s in data])
            assert np.corrcoef(pred, ys)[0, 1] > 0.5 or np.ptp(ys) < 1e-9


def test_an_oracle_surrogate_picks_the_per_cycle_best():
    """With the true branch scores as its surrogate (no exploration), DOIT picks the branch best."""
    data = ex.digits_split()
    rates = {"SGD": 0.3, "Adagrad": 0.03, "Adam": 3e-3}
    model = ex._mlp(0)
    probe = ex._probe(data, 0, 64)
    batches = batch_indices(len(data.y_train), 40, 32, 0)
    truth: list[np.ndarray] = []

    class Oracle(DOIT):
        def predict(self, x=None):
            i = len(self.history)
            truth.append(ex._branch(self, batches[i * 5:(i + 1) * 5], data))
            return truth[-1], np.zeros(len(self.names))

    ctl = Oracle(model, rates, cycle=5, n_ini=2, probe=probe)
    for idx in batches:
        ctl.step(doit.cross_entropy_closure(model, data.x_train[idx], data.y_train[idx]))
    acq = [c for c in ctl.history if c.phase == "acquisition"]
    assert len(acq) == 6
    for c, s in zip(acq, truth, strict=True):
        assert c.choice == ctl.names[int(np.argmax(s))]
        assert c.score == pytest.approx(float(s.max()), abs=1e-12)  # the branch replays the cycle


def test_probe_scores_and_training_loss_scores():
    net, x, y, batches = _problem()
    probe = doit.probe_fn(x[:32], y[:32])
    ctl = DOIT(net, {"Adam": 1e-2}, cycle=5, probe=probe)
    _train(ctl, net, x, y, batches[:10])
    assert ctl.history[-1].losses[-1] == pytest.approx(probe(net))
    net2, _, _, _ = _problem()
    ctl2 = DOIT(net2, {"Adam": 1e-2}, cycle=5)  # no probe: training losses, l0 = previous loss
    _train(ctl2, net2, x, y, batches[:10])
    first, second = ctl2.history[:2]
    assert first.l0 == first.losses[0] and second.l0 == first.losses[-1]


def test_train_with_doit_on_a_split():
    gen = np.random.default_rng(0)
    xs = gen.normal(size=(200, 5)).astype(np.float32)
    ys = (xs[:, 0] > 0).astype(np.int64)
    split = Split(xs[:150], ys[:150], xs[150:], ys[150:])
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
    ctl, log = doit.train_with_doit(net, split, steps=40, cycle=5, n_ini=3, eval_every=10,
                                    probe_size=32, candidates=["SGDM", "Adam"])
    assert list(log.step) == [10, 20, 30, 40] and len(ctl.history) == 8
    assert log.test_acc.iloc[-1] > 0.7
    assert set(ctl.history_frame().choice) <= {"SGDM", "Adam"}


# --- bad input --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"candidates": {"Lion": 1e-3}}, ValueError, "candidate must be one of"),
    ({"candidates": ["SGD", "Nadam"]}, ValueError, "candidate must be one of"),
    ({"candidates": "Adam"}, TypeError, "candidates"),
    ({"candidates": {}}, ValueError, "at least one"),
    ({"candidates": {"Adam": 0.0}}, ValueError, "learning rate of Adam"),
    ({"candidates": ["SGD", "SGD"]}, ValueError, "repeat"),
    ({"cycle": 0}, ValueError, "cycle must be an integer in"),
    ({"cycle": 2.5}, TypeError, "cycle must be an integer"),
    ({"n_ini": -1}, ValueError, "n_ini"),
    ({"halving": 0}, ValueError, "halving"),
    ({"alpha": -0.1}, ValueError, "alpha"),
    ({"omega_t": 1.5}, ValueError, "omega_t must be in"),
    ({"omega_min": 0.0}, ValueError, "omega_min"),
    ({"acquisition": "greedy"}, ValueError, "acquisition must be one of"),
    ({"pca_components": 0}, ValueError, "pca_components"),
    ({"probe": 3}, TypeError, "probe"),
    ({"seed": -1}, ValueError, "seed"),
])
def test_doit_rejects_bad_arguments(kwargs, error, match):
    net, _, _, _ = _problem()
    with pytest.raises(error, match=match):
        DOIT(net, **kwargs)


def test_other_bad_inputs():
    with pytest.raises(TypeError, match="model"):
        DOIT("not a model")
    with pytest.raises(ValueError, match="name must be one of"):
        doit.make_optimizer("Lion", [torch.zeros(2, requires_grad=True)], 0.1)
    with pytest.raises(ValueError, match="k must be"):
        doit.state_features([torch.ones(2, 2)], k=0)
    with pytest.raises(ValueError, match="method must be one of"):
        doit.run_method("Lion", 0, {}, steps=5)
    with pytest.raises(ValueError, match="tau"):
        doit.explorer_chart(tau=0)
    with pytest.raises(ValueError, match="scale must be one of"):
        doit.reproduce("huge")


# --- the chapter's harness and explorer ---------------------------------------------------------------

def test_smoke_reproduce_branches_are_counterfactuals(smoke_report):
    r = smoke_report("doit", 0)
    dec = r.tables["decisions"]
    assert len(dec) and dec.replay_error.max() == 0.0
    assert r.claim("branch_replays_run").passed
    rates = r.tables["rates"].set_index("optimizer").lr
    # each tuned rate is on the grid or on its one extension (core.tuning.tune)
    tun = r.tables["tuning"]
    assert set(tun[~tun.extension].lr) == set(ex.SIZES["smoke"].grid)
    assert all(rates[n] in set(tun[tun.optimizer == n].lr) for n in doit.OPTIMIZERS)
    # the best single is the one with the highest median test accuracy
    fin = r.tables["final"]
    singles = fin[fin.method.isin(doit.OPTIMIZERS)].groupby("method").test_acc.median()
    assert doit.best_single(fin) == singles.idxmax()
    for chart in r.charts().values():
        chart.to_dict()
    # the prose's numbers agree with the claims they accompany
    nums = doit.numbers(r)
    within = r.claim("within_best_single")
    assert nums["within_seeds_pass"] == sum(v >= -ex.WITHIN_PP for v in within.per_seed)
    assert nums["test_step"] == pytest.approx(100 / len(ex.digits_split().y_test))


def test_restart_chart_ticks_are_decades_in_plain_numbers():
    import pandas as pd

    from iclr_lab.optimizers.doit.figures import _LOG_LABEL, _decades

    assert _decades(pd.Series([0.93, 92.0])) == [1.0, 10.0]
    assert _decades(pd.Series([0.4, 30.0]), (1, 2, 5)) == pytest.approx([0.5, 1, 2, 5, 10, 20])
    assert _decades(pd.Series([3e-4, 1.0])) == pytest.approx([1e-3, 1e-2, 1e-1, 1.0])
    assert _decades(pd.Series([float("nan"), -1.0])) == [1.0]
    # below 1000 a plain number (0.5, not d3's "500m"); above it an SI suffix (1k, 10M)
    assert "',.2~f'" in _LOG_LABEL and "1000" in _LOG_LABEL


def test_explorer_recomputes():
    w = doit.explorer()
    first = w.result.to_dict()
    w.children[0].value = 25
    assert w.result.to_dict() != first


def test_tuning_scores_the_median_validation_loss_on_tuning_seeds():
    from iclr_lab.core.tuning import tuning_seeds

    data = ex.digits_split()
    grid = (3e-2, 3e-1)
    rates, table, tuned = doit.tune_rates(grid, 3, steps=12, eval_every=6, data=data)
    seeds = tuning_seeds(3, ex.TUNING_SEEDS)
    assert not set(seeds) & set(range(3, 3 + ex.SIZES["book"].seeds))
    for t in tuned:
        for lr, got in zip(t.grid, t.scores, strict=True):
            losses = [float(doit.run_method(t.method, s, {t.method: lr}, steps=12, eval_every=6,
                                            data=data).log.val_loss.iloc[-1]) for s in seeds]
            # stacked and alone agree to rounding, which a run blowing up at lr 0.3 amplifies
            assert got == pytest.approx(float(np.median(losses)), rel=1e-3)
        assert rates[t.method] == t.choice
        assert t.choice == min((sc, lr) for lr, sc in zip(t.grid, t.scores, strict=True))[1]
    assert set(table.optimizer) == set(doit.OPTIMIZERS)
    assert table.groupby("optimizer").chosen.sum().eq(1).all()


def test_steps_to_target_reads_the_first_evaluation_below_the_target():
    import pandas as pd

    rows = [{"method": m, "seed": 0, "step": st, "val_loss": v}
            for m, vals in {"SGD": [2.0, 1.0, 0.5], "Adam": [1.5, 1.2, 1.0], "DOIT": [0.54, 0.4, 0.3],
                            "random switching": [3.0, 2.0, float("nan")]}.items()
            for st, v in zip((10, 20, 30), vals, strict=True)]
    log = pd.DataFrame(rows)
    final = log[log.step == 30]
    # the target is 1.1 x the best single optimizer's final loss: 1.1 * 0.5 = 0.55
    assert doit.steps_to_target(log, final, "DOIT", [0])[0] == 10
    assert doit.steps_to_target(log, final, "SGD", [0])[0] == 30
    assert doit.steps_to_target(log, final, "Adam", [0])[0] == 40  # never: budget + one evaluation
    assert doit.steps_to_target(log, final, "random switching", [0])[0] == 40


def test_every_paper_claim_has_a_control_and_a_regime(smoke_report):
    r = smoke_report("doit", 0)
    paper = [c for c in r.claims if c.kind == "paper"]
    assert {c.name for c in paper} >= {"beats_best_single", "within_best_single",
                                       "beats_random_switching", "beats_median_single",
                                       "steps_to_target"}
    for c in paper:
        assert (c.control and len(c.control_per_seed) == len(c.per_seed)) or c.no_control, c.name
        assert c.regime.startswith("paper:"), c.name
    assert r.tuning and {t.method for t in r.tuning} == set(doit.OPTIMIZERS)
    # the controls are the switching rules, measured by the same function on the same seeds
    fin = r.tables["final"]
    seeds = sorted(fin.seed.unique())
    acc = fin.set_index(["method", "seed"]).test_acc * 100
    best = doit.best_single(fin)
    within = r.claim("within_best_single")
    want = [acc[(ex.ROUND_ROBIN, s)] - acc[(best, s)] for s in seeds]
    assert list(within.control_per_seed) == pytest.approx(want)
