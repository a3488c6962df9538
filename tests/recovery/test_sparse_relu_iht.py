"""Tests for iclr_lab.recovery.sparse_relu_iht: the gated reformulation, the block-wise sensing
operator, IHT (streaming top-s, recovery, memory), the baselines and the chapter's experiments."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from iclr_lab.core.report import Report
from iclr_lab.recovery.sparse_relu_iht import (
    SensingOperator,
    hard_threshold,
    iht,
    imp,
    imp_rounds,
    imp_sweep,
    least_squares,
    omp,
    phase_grid_chart,
    planted_mlp,
    psnr,
    relu_net,
    reproduce,
)
from iclr_lab.recovery.sparse_relu_iht.experiments import _binomial_bar, _rate


def _planted(n: int = 120, seed: int = 0):
    return planted_mlp(n, 20, 5, 10, np.random.default_rng(seed), per_neuron=2)


# ------------------------------------------------------------------ the reformulation


def test_gated_network_with_true_patterns_is_the_relu_network() -> None:
    P = _planted()
    op = SensingOperator(P.X, 5, generators=P.fused)
    assert np.allclose(op.matvec(np.arange(100), P.fused.ravel()), P.y, atol=1e-12)
    assert np.allclose(op.dense() @ P.fused.ravel(), relu_net(P.X, P.W), atol=1e-12)


def test_operator_blocks_match_the_definition() -> None:
    rng = np.random.default_rng(1)
    X = rng.standard_normal((30, 4))
    H = rng.standard_normal((3, 4))
    op = SensingOperator(X, 3, generators=H)
    A = np.hstack([np.diag((X @ h > 0).astype(float)) @ X for h in H])
    assert np.allclose(op.dense(), A)
    idx = np.array([0, 5, 11])
    assert np.allclose(op.columns(idx), A[:, idx])
    r = rng.standard_normal(30)
    assert np.allclose(np.concatenate([op.rmatvec_block(j, r) for j in range(3)]), A.T @ r)


def test_random_generators_are_regenerated_not_stored() -> None:
    X = np.random.default_rng(2).standard_normal((10, 3))
    op = SensingOperator(X, 4, seed=7)
    assert np.array_equal(op.generator(2), op.generator(2))
    assert not np.array_equal(op.generator(1), op.generator(2))
    assert np.array_equal(op.generator(2), SensingOperator(X, 4, seed=7).generator(2))


def test_sequential_update_kills_empty_neurons() -> None:
    X = np.random.default_rng(3).standard_normal((50, 3))
    op = SensingOperator(X, 2)
    op.set_sparse_generators(np.array([1, 2]), np.array([1.0, -1.0]))  # neuron 0 only
    assert np.array_equal(op.pattern(0), X[:, 1] - X[:, 2] > 0)
    assert not op.pattern(1).any()


# ------------------------------------------------------------------ IHT


def test_hard_threshold_keeps_largest_magnitudes() -> None:
    v = np.array([0.1, -3.0, 2.0, 0.5, -2.5])
    assert list(hard_threshold(v, 2)) == [1, 4]
    assert hard_threshold(v, 0).size == 0


def test_iht_recovers_planted_weights_with_planted_patterns() -> None:
    P = _planted(200)
    r = iht(P.X, P.y, 10, generators=P.fused, update_patterns=False, w_true=P.fused)
    assert r.history[-1]["error"] < 1e-8
    assert np.allclose(r.weights(), P.fused, atol=1e-8)
    assert np.allclose(r.predict(P.X), P.y, atol=1e-7)


def test_iht_error_falls_linearly_per_evaluation() -> None:
    P = _planted(200)
    r = iht(P.X, P.y, 10, generators=P.fused, update_patterns=False, w_true=P.fused)
    factor, r2 = _rate(r.history)
    assert 0 < factor < 1 and r2 > 0.8


def test_iht_never_stores_more_than_s_weights() -> None:
    P = planted_mlp(300, 10, 4, 6, np.random.default_rng(4))
    for steps in (1, 3, 8):
        assert iht(P.X, P.y, 6, width=4, steps=steps).nonzeros <= 6


def test_iht_sequential_mode_predicts_with_a_relu_network() -> None:
    P = planted_mlp(2000, 10, 2, 4, np.random.default_rng(5))
    r = iht(P.X, P.y, 4, width=2, steps=15)
    assert r.generators is None
    assert np.allclose(r.predict(P.X), relu_net(P.X, r.weights().T))


def test_iht_memory_is_far_below_the_stored_matrix() -> None:
    # tracemalloc sees numpy's allocations: the run never holds anything of size n * d * p
    rng = np.random.default_rng(6)
    n, d, p, s = 400, 30, 60, 10
    X, y = rng.standard_normal((n, d)), rng.standard_normal(n)
    tracemalloc.start()
    r = iht(X, y, s, width=p, steps=2, refine=2)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    dense_bytes = 8 * n * d * p
    assert peak < dense_bytes / 10
    assert r.working_floats * 8 < dense_bytes / 10
    assert peak < 3 * 8 * r.working_floats  # the ledger is the right order of magnitude


def test_least_squares_and_omp_on_an_easy_problem() -> None:
    P = _planted(200)
    A = SensingOperator(P.X, 5, generators=P.fused).dense()
    assert np.allclose(least_squares(A, P.y), P.fused.ravel(), atol=1e-8)
    assert np.allclose(omp(A, P.y, 10), P.fused.ravel(), atol=1e-8)


def test_least_squares_fails_below_the_parameter_count() -> None:
    P = _planted(60)
    A = SensingOperator(P.X, 5, generators=P.fused).dense()
    assert np.linalg.norm(least_squares(A, P.y) - P.fused.ravel()) > 1e-3


def test_psnr_closed_form_and_floor() -> None:
    y = np.array([2.0, -1.0, 0.0, 1.0])
    assert psnr(y, y + 0.1) == pytest.approx(20 * np.log10(2.0) - 10 * np.log10(0.01))
    assert np.isfinite(psnr(y, y))
    with pytest.raises(ValueError, match="y"):
        psnr(np.zeros(3), np.zeros(3))


def test_planted_design_with_disjoint_supports() -> None:
    P = _planted()
    assert P.s == 10
    rows = [set(np.nonzero(P.W[:, j])[0]) for j in range(5)]
    assert all(len(r) == 2 for r in rows)
    assert len(set().union(*rows)) == 10


# ------------------------------------------------------------------ IMP


def test_imp_schedule() -> None:
    counts = imp_rounds(100, 10, 0.1)
    assert counts[0] == 90 and counts[-1] == 10
    assert all(a > b for a, b in zip(counts, counts[1:], strict=False))
    assert imp_rounds(100, 10, None) == [10]


def test_imp_respects_sparsity_and_budget() -> None:
    P = planted_mlp(200, 8, 3, 4, np.random.default_rng(7))
    q = imp(P.X, P.y, 3, 5, budget=60, lr=1e-2, seed=0)
    assert np.count_nonzero(q.W) <= 5
    assert q.steps <= 60
    assert q.nonzeros <= 5 + 3
    q2 = imp(P.X, P.y, 3, 5, budget=60, lr=1e-2, seed=0)
    assert np.array_equal(q.W, q2.W)


def test_imp_one_shot_trains() -> None:
    P = planted_mlp(300, 8, 3, 4, np.random.default_rng(8))
    q = imp(P.X, P.y, 3, 20, budget=400, lr=1e-2, prune_fraction=None, seed=0)
    assert q.rounds == 1
    assert q.losses[-1] < float(np.mean(P.y**2))


@pytest.mark.parametrize("pf", [0.1, None])
def test_imp_sweep_equals_one_run_per_sparsity(pf: float | None) -> None:
    # the shared rounds are trained once; every s still gets imp's numbers bit for bit
    P = planted_mlp(150, 6, 3, 4, np.random.default_rng(10))
    ss = [9, 2, 5]
    swept = imp_sweep(P.X, P.y, 3, ss, epochs=4, lr=1e-2, prune_fraction=pf, seed=3)
    for s, q in zip(ss, swept, strict=True):
        phases = len(imp_rounds(18, s, pf)) + 1
        one = imp(P.X, P.y, 3, s, budget=4 * phases, lr=1e-2, prune_fraction=pf, seed=3)
        assert np.array_equal(q.W, one.W) and np.array_equal(q.v, one.v)
        assert q.losses == one.losses and q.steps == one.steps == 4 * phases
        assert q.rounds == one.rounds and np.count_nonzero(q.W) <= s


def test_imp_sweep_trains_the_shared_rounds_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from iclr_lab.recovery.sparse_relu_iht import method

    calls = []
    real = method._mse_grads
    monkeypatch.setattr(method, "_mse_grads", lambda *a: calls.append(1) or real(*a))
    P = planted_mlp(80, 6, 3, 4, np.random.default_rng(11))
    phases = len(imp_rounds(18, 2, 0.1)) + 1  # 18 -> 16, 14, 12, 10, 9, ... -> 2
    # s = 11 follows the path to s = 2 until its last round, clipped to 11 (not 10): only its
    # final ticket is trained on top of that path
    imp_sweep(P.X, P.y, 3, [11, 2], epochs=2, lr=1e-2, seed=0)
    assert len(calls) == 2 * (phases + 1)
    # s = 9 is a count of the path itself: nothing more to train
    calls.clear()
    imp_sweep(P.X, P.y, 3, [9, 2], epochs=2, lr=1e-2, seed=0)
    assert len(calls) == 2 * phases


def test_imp_gradients_are_autograds() -> None:
    import torch

    from iclr_lab.recovery.sparse_relu_iht.method import _mse_grads

    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 5, generator=g, dtype=torch.float64)
    y = torch.randn(40, generator=g, dtype=torch.float64)
    u = torch.randn(5, 3, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)
    mask = (torch.rand(5, 3, generator=g) > 0.4).double()
    loss = torch.mean((torch.relu(X @ (u * mask)) @ v - y) ** 2)
    loss.backward()
    gu, gv = _mse_grads(X, y, u.detach(), v.detach(), mask)
    assert torch.equal(gu, u.grad) and torch.equal(gv, v.grad)


# ------------------------------------------------------------------ bad input


def test_bad_arguments_name_the_parameter() -> None:
    P = _planted()
    with pytest.raises(ValueError, match="s must"):
        iht(P.X, P.y, 101, generators=P.fused)  # s larger than the number of weights
    with pytest.raises(ValueError, match="s must"):
        iht(P.X, P.y, 0, width=5)
    with pytest.raises(ValueError, match="width"):
        iht(P.X, P.y, 5)
    with pytest.raises(ValueError, match="steps"):
        iht(P.X, P.y, 5, width=5, steps=0)
    with pytest.raises(ValueError, match="y must have shape"):
        iht(P.X, P.y[:-1], 5, width=5)
    with pytest.raises(TypeError, match="s must"):
        iht(P.X, P.y, 2.5, width=5)
    with pytest.raises(ValueError, match="generators"):
        SensingOperator(P.X, 3, generators=np.zeros((2, 20)))
    with pytest.raises(ValueError, match="per_neuron"):
        planted_mlp(10, 4, 3, 6, np.random.default_rng(0), per_neuron=2)
    with pytest.raises(ValueError, match="s must"):
        planted_mlp(10, 4, 2, 9, np.random.default_rng(0))
    with pytest.raises(ValueError, match="lr"):
        imp(P.X, P.y, 5, 5, budget=100, lr=-1.0)
    with pytest.raises(ValueError, match="budget"):
        imp(P.X, P.y, 5, 5, budget=1)
    with pytest.raises(ValueError, match="prune_fraction"):
        imp_rounds(100, 10, 1.5)
    bad = P.X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X must be finite"):
        imp(bad, P.y, 5, 5, budget=100)
    with pytest.raises(ValueError, match="epochs"):
        imp_sweep(P.X, P.y, 5, [5], epochs=0)
    with pytest.raises(ValueError, match="ss"):
        imp_sweep(P.X, P.y, 5, [5, 101], epochs=1)
    with pytest.raises(ValueError, match="seed"):
        iht(P.X, P.y, 5, width=5, seed=-1)


def test_non_finite_inputs_are_refused_by_name() -> None:
    # issue 24, item 6: omp printed a LAPACK line and raised LinAlgError on a NaN in A, and iht
    # ran on NaN data without a word
    P = _planted()
    A = SensingOperator(P.X, 5, generators=P.fused).dense()
    A[3, 7] = np.nan
    with pytest.raises(ValueError, match="A must be finite"):
        omp(A, P.y, 10)
    with pytest.raises(ValueError, match="A must be finite"):
        least_squares(A, P.y)
    X = P.X.copy()
    X[0, 0] = np.inf
    with pytest.raises(ValueError, match="X must be finite"):
        iht(X, P.y, 10, width=5)
    y = P.y.copy()
    y[1] = np.nan
    with pytest.raises(ValueError, match="y must be finite"):
        iht(P.X, y, 10, width=5)
    with pytest.raises(ValueError, match="generators must be finite"):
        iht(P.X, P.y, 10, generators=np.full((5, 20), np.nan))
    with pytest.raises(ValueError, match="w_true must have shape"):
        iht(P.X, P.y, 10, width=5, w_true=P.fused.ravel())
    with pytest.raises(ValueError, match="v must be finite"):
        hard_threshold(np.array([1.0, np.nan]), 1)
    with pytest.raises(ValueError, match="y_hat must have shape"):
        psnr(P.y, P.y[:-1])
    # a diverged fit's prediction propagates, as documented
    assert np.isnan(psnr(P.y, np.full_like(P.y, np.nan)))


# ------------------------------------------------------------------ the chapter's pieces


def test_explorer_function_gives_a_chart() -> None:
    chart = phase_grid_chart(n=200, steps=2, refine=1)
    spec = chart.to_dict()
    assert "layer" in spec


@pytest.fixture(scope="module")
def smoke() -> Report:
    return reproduce("smoke", seed=0)


def test_smoke_report(smoke: Report) -> None:
    names = {c.name for c in smoke.claims}
    assert {"iht_recovers_below_count", "iht_transition", "grid_vs_imp", "digits_vs_imp",
            "linear_rate", "linearisation"} == names
    assert smoke.claim("linearisation").measured < 1e-12
    assert set(smoke.charts()) == {"recovery", "error_sweep", "grid", "digits"}
    for table in smoke.tables.values():
        assert len(table) < 5000
    # every paper claim has a control or a reason for having none
    for c in smoke.claims:
        if c.kind == "paper":
            assert bool(c.control) != bool(c.no_control)
    assert {t.method.split(" (")[0] for t in smoke.tuning} == {"IMP, 10 % per round",
                                                               "IMP, one shot"}


def test_smoke_tables_and_numbers(smoke: Report) -> None:
    from iclr_lab.recovery.sparse_relu_iht import numbers

    grid = smoke.tables["grid"]
    iht_rows = grid[grid["method"].str.startswith("IHT")]
    imp_rows = grid[grid["method"].str.startswith("IMP")]
    assert (iht_rows["dense_params"] == 0).all() and (imp_rows["dense_params"] > 0).all()
    # IMP runs on the same seeds and cells as IHT, at its tuned rate
    cells = ["seed", "m", "s"]
    for _name, g in imp_rows.groupby("method"):
        assert g[cells].sort_values(cells).to_numpy().tolist() == iht_rows[cells].sort_values(
            cells).to_numpy().tolist()
        assert g["lr"].nunique() == 1
    num = numbers(smoke)
    assert num["imp_any_grid_max_psnr"] == max(num["imp_grid_max_psnr"],
                                               num["oneshot_grid_max_psnr"])
    dig = smoke.tables["digits"]
    imp_row = dig[dig["method"] == "IMP, 10 % per round"].iloc[0]
    # the paper's protocol: as many epochs in every phase as IHT runs outer steps
    assert imp_row["evals"] == imp_row["epochs"] * (imp_row["rounds"] + 1)
    assert 0 <= num["digits_oneshot_one_class"] <= num["digits_runs_per_method"]
    assert num["claim_bar"] == _binomial_bar(int(num["trials"]))


def test_grid_claim_compares_medians_and_can_fail() -> None:
    """grid_vs_imp: per seed, IHT's median PSNR minus the better IMP variant's; a grid where IMP
    fits better gives a negative margin (the claim can fail), one where IHT is exact a positive."""
    import pandas as pd

    from iclr_lab.recovery.sparse_relu_iht.experiments import IHT, IMP, ONESHOT, _grid_margins

    rows = []
    for seed, (iht_db, imp_db, one_db) in enumerate([((300, 300, 20), 30, 25),
                                                      ((10, 12, 14), 30, 40)]):
        for k, v in enumerate(iht_db):
            rows += [{"seed": seed, "m": 1, "s": k, "method": IHT, "psnr": v},
                     {"seed": seed, "m": 1, "s": k, "method": IMP, "psnr": imp_db + k},
                     {"seed": seed, "m": 1, "s": k, "method": ONESHOT, "psnr": one_db + k}]
    margins = _grid_margins(pd.DataFrame(rows))
    assert margins == [300 - 31, 12 - 41]


def test_linear_rate_claim_reads_the_contraction_per_outer_step(smoke: Report) -> None:
    """linear_rate is the fitted per-evaluation factor to the power of one outer step's
    evaluations (1 + the support steps), judged against 0.5: a theorem check that can fail."""
    from iclr_lab.recovery.sparse_relu_iht.experiments import REFINE, STEP_CONTRACTION

    c = smoke.claim("linear_rate")
    runs = smoke.tables["recovery_runs"]
    ok = runs[(runs["n"] == runs["n"].max()) & (runs["method"] == "IHT (10 support steps)")
              & runs["exact"]]
    if len(ok):
        assert c.measured == pytest.approx(float(np.median(ok["factor"] ** (1 + REFINE))))
    assert c.threshold == STEP_CONTRACTION == 0.5 and c.op == "<="


def test_digit_tuning_uses_several_seeds_and_their_median() -> None:
    """A rate that kills IMP's network on some draws cannot win by surviving on the one tuning
    seed it met: the digits tuning scores on two or more tuning seeds (by the worst of them)."""
    from iclr_lab.recovery.sparse_relu_iht.experiments import SIZES

    assert all(sz.digit_tune_seeds >= 2 for sz in SIZES.values())


def test_recovery_bar_is_the_binomial_five_percent_bar() -> None:
    """20 of 30 is the smallest count that a recovery rate of 1/2 reaches with probability <= 5 %."""
    from scipy.stats import binom

    from iclr_lab.recovery.sparse_relu_iht.experiments import LEVEL, SIZES

    book = SIZES["book"]
    bar = _binomial_bar(book.trials)
    assert bar == 20 and book.trials == 30
    assert binom.sf(bar - 1, book.trials, 0.5) <= LEVEL < binom.sf(bar - 2, book.trials, 0.5)
    for t in (5, 10, 31, 100):
        k = _binomial_bar(t)
        assert binom.sf(k - 1, t, 0.5) <= 0.05 < binom.sf(k - 2, t, 0.5)
    assert _binomial_bar(4) == 5  # 4 of 4 has probability 1/16 > 5 %: no count is rare enough
    assert book.claim_n < 20 * 5  # judged below the parameter count d m


def test_ledger_formula() -> None:
    rng = np.random.default_rng(9)
    n, d, p, s = 70, 6, 4, 5
    X = rng.standard_normal((n, d))
    r = iht(X, X[:, 1], s, width=p, steps=1)
    assert r.working_floats == n + n * d + 2 * (s + d) + n * s + 2 * s
