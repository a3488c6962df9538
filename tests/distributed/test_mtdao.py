"""MT-DAO: the optimizer against torch's Adam, a reference QHAdam, an independent multi-worker
implementation and DES-LOC's Local Adam; the exact byte counts; the time-scale formulas; the
training function; the experiments' plumbing; and the explorer."""

import functools
import math

import numpy as np
import pandas as pd
import pytest
import torch

from iclr_lab.core.collective import run_simulated
from iclr_lab.core.nn import FlatMLP
from iclr_lab.core.tuning import Tuned
from iclr_lab.distributed import DESLOC
from iclr_lab.distributed.mtdao import (
    MTDAO,
    DigitsSetup,
    Method,
    anchor_share,
    beta_omega,
    check_sync_periods,
    communication_cost,
    explorer,
    impulse_chart,
    information_kept,
    launch,
    methods,
    momentum_variance,
    sync_penalty,
    train_worker,
    units_per_step,
    update_weights,
    variance_check,
)
from iclr_lab.distributed.mtdao import experiments as ex
from iclr_lab.distributed.mtdao.stacked import train_stacked

torch.set_num_threads(1)
INF = math.inf


def _grad(x: torch.Tensor, rank: int, t: int) -> torch.Tensor:
    """A deterministic gradient stream that differs by worker and depends on the point."""
    gen = torch.Generator().manual_seed(1000 * rank + t)
    target = torch.linspace(-1, 1, x.numel(), dtype=x.dtype) * (rank + 1)
    return (x - target) * 0.5 + 0.3 * torch.randn(x.shape, generator=gen, dtype=x.dtype)


def _x0() -> torch.Tensor:
    return torch.linspace(0.5, -0.5, 7, dtype=torch.float64)


# --- the single-worker optimizer ------------------------------------------------------------------

def test_with_weight_one_and_no_workers_mtdao_is_torch_adam():
    x, y = _x0(), _x0()
    ours = MTDAO([x], lr=0.05, betas=(0.9, 0.99), weights=(1.0,))
    ref = torch.optim.Adam([y], lr=0.05, betas=(0.9, 0.99))
    for t in range(50):
        x.grad, y.grad = _grad(x, 0, t), _grad(y, 0, t)
        ours.step()
        ref.step()
    torch.testing.assert_close(x, y, rtol=0, atol=1e-12)
    torch.testing.assert_close(ours.state[x]["exp_avg"], ref.state[y]["exp_avg"], rtol=0, atol=1e-14)


def _qhadam_reference(grads, lr, beta1, beta2, nu1, eps=1e-8):
    """QHAdam (Ma and Yarats, 2019) with nu2 = 1, written out from its definition in numpy."""
    x = _x0().numpy().copy()
    m, s = np.zeros_like(x), np.zeros_like(x)
    for t, g in enumerate(grads, start=1):
        g = g(x)
        m = beta1 * m + (1 - beta1) * g
        s = beta2 * s + (1 - beta2) * g * g
        m_hat, s_hat = m / (1 - beta1**t), s / (1 - beta2**t)
        x = x - lr * ((1 - nu1) * g + nu1 * m_hat) / (np.sqrt(s_hat) + eps)
    return x


def test_one_momentum_is_qhadam_with_nu2_one_for_100_steps():
    grads = [lambda v, t=t: _grad(torch.from_numpy(v), 0, t).numpy() for t in range(100)]
    ref = _qhadam_reference(grads, lr=0.01, beta1=0.995, beta2=0.999, nu1=0.7)
    x = _x0()
    opt = MTDAO([x], lr=0.01, betas=(0.995, 0.999), weights=(0.7,))
    for t in range(100):
        x.grad = _grad(x.detach(), 0, t)
        opt.step()
    np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=1e-6)


def test_two_momenta_mix_their_bias_corrected_averages():
    """One step from zero state: u^j = (1 - b_j) g and bias correction gives back g, so the mix is
    g whatever the weights; the second step differs from Adam's by the weighted momenta."""
    x = torch.zeros(3, dtype=torch.float64)
    opt = MTDAO([x], lr=1.0, betas=(0.5, 0.9, 0.999), weights=(0.3, 0.5), eps=0.0)
    g = torch.tensor([1.0, -2.0, 4.0], dtype=torch.float64)
    x.grad = g.clone()
    opt.step()
    torch.testing.assert_close(x, -torch.sign(g))  # Adam's first step: -lr * sign(g)
    st = opt.state[x]
    torch.testing.assert_close(st["exp_avg"], 0.5 * g)
    torch.testing.assert_close(st["exp_avg_2"], 0.1 * g)


# --- several workers ------------------------------------------------------------------------------

def _mtdao_run(comm, periods, steps=12, betas=(0.99, 0.999), weights=(0.8,)):
    x = _x0()
    opt = MTDAO([x], lr=0.05, betas=betas, weights=weights, sync_periods=periods, comm=comm)
    for t in range(steps):
        x.grad = _grad(x, comm.rank, t)
        opt.step()
    return x.clone(), opt.state[x]["exp_avg"].clone(), comm.counts()


def _reference(world, periods, steps=12, lr=0.05, beta=0.99, beta2=0.999, omega=0.8, eps=1e-8):
    """MT-DAO with one momentum written out independently: the QH step on every worker, then each
    state replaced by the workers' mean when its own period divides the step count."""
    kx, ku, kv = periods
    xs = [_x0() for _ in range(world)]
    us = [torch.zeros(7, dtype=torch.float64) for _ in range(world)]
    vs = [torch.zeros(7, dtype=torch.float64) for _ in range(world)]
    for t in range(1, steps + 1):
        for m in range(world):
            g = _grad(xs[m], m, t - 1)
            us[m] = beta * us[m] + (1 - beta) * g
            vs[m] = beta2 * vs[m] + (1 - beta2) * g * g
            mix = (1 - omega) * g + omega * us[m] / (1 - beta**t)
            xs[m] = xs[m] - lr * mix / ((vs[m] / (1 - beta2**t)).sqrt() + eps)
        for states, k in ((xs, kx), (us, ku), (vs, kv)):
            if k != INF and t % k == 0:
                mean = sum(states) / world
                for m in range(world):
                    states[m] = mean.clone()
    return xs, us


@pytest.mark.parametrize("periods", [(4, 4, 4), (2, 6, 12), (3, INF, 1)])
def test_mtdao_equals_an_independent_multi_worker_implementation(periods):
    out = run_simulated(functools.partial(_mtdao_run, periods=periods), 3)
    xs, us = _reference(3, periods)
    for m in range(3):
        torch.testing.assert_close(out[m][0], xs[m], rtol=0, atol=1e-12)
        torch.testing.assert_close(out[m][1], us[m], rtol=0, atol=1e-12)


def test_weight_one_with_equal_periods_is_desloc_local_adam():
    def desloc_run(comm):
        x = _x0()
        opt = DESLOC([x], lr=0.05, betas=(0.9, 0.999), sync_periods=(4, 4, 4), comm=comm)
        for t in range(12):
            x.grad = _grad(x, comm.rank, t)
            opt.step()
        return x.clone(), comm.counts()

    ours = run_simulated(functools.partial(_mtdao_run, periods=(4, 4, 4), betas=(0.9, 0.999),
                                           weights=(1.0,)), 2)
    ref = run_simulated(desloc_run, 2)
    for (x, _, counts), (y, ref_counts) in zip(ours, ref, strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-12)
        assert counts == ref_counts


def test_counted_bytes_equal_the_formula():
    periods = (4, 2, 8, 4)  # two first moments
    steps = 16

    def run(comm):
        x = torch.zeros(10)
        opt = MTDAO([x], lr=0.01, betas=(0.9, 0.99, 0.999), weights=(0.3, 0.6),
                    sync_periods=periods, comm=comm)
        for t in range(steps):
            x.grad = _grad(x.double(), comm.rank, t).float()
            opt.step()
        return comm.counts()

    counts = run_simulated(run, 2)[0]
    expected = communication_cost(periods, steps, model_bytes=40)
    assert counts.bytes["parameters"] == expected.bytes["parameters"] == 4 * 40
    assert counts.bytes["first_moment"] == expected.bytes["first_moment"] == (8 + 2) * 40
    assert counts.bytes["second_moment"] == expected.bytes["second_moment"] == 4 * 40
    assert counts.total_bytes == expected.total_bytes
    assert units_per_step((32, 32, 32)) == pytest.approx(3 / 32)
    assert units_per_step((32, 32, 32, 32)) == pytest.approx(4 / 32)  # a second momentum costs 1/K
    assert units_per_step((INF, INF, INF)) == 0


def test_state_dict_keeps_the_schedule():
    x = _x0()
    opt = MTDAO([x], lr=0.01, sync_periods=(3, 3, 3))
    for t in range(5):
        x.grad = _grad(x, 0, t)
        opt.step()
    sd = opt.state_dict()
    y = _x0()
    other = MTDAO([y], lr=0.01, sync_periods=(3, 3, 3))
    other.load_state_dict(sd)
    assert other.local_steps == 5


@pytest.mark.parametrize("kwargs, match", [
    ({"lr": -1.0}, "lr"),
    ({"betas": (0.9,)}, "betas"),
    ({"betas": (1.0, 0.999)}, "betas"),
    ({"weights": (0.7, 0.5), "betas": (0.9, 0.99, 0.999)}, "sum to at most 1"),
    ({"weights": (-0.1,)}, "weights"),
    ({"weights": (0.5,), "betas": (0.9, 0.99, 0.999)}, "betas"),
    ({"sync_periods": (0, 32, 32)}, "sync_periods"),
    ({"sync_periods": (32, 32)}, "sync_periods"),
    ({"sync_periods": (2.5, 32, 32)}, "sync_periods"),
    ({"eps": -1e-8}, "eps"),
    ({"maximize": 1}, "maximize"),
])
def test_bad_optimizer_arguments_name_the_parameter(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        MTDAO([torch.zeros(2)], **kwargs)


@pytest.mark.parametrize("call, match", [
    (lambda: momentum_variance(1.0, 3), "beta"),
    (lambda: momentum_variance(0.9, -1), "K"),
    (lambda: communication_cost((4, 4, 4), -1), "steps"),
    (lambda: Method("x", lr=0.0), "lr"),
    (lambda: Method("x", lr=0.1, period=0), "period must"),  # the field, not an alias
    (lambda: Method("x", lr=0.1, period=INF), "period"),
    (lambda: DigitsSetup(batch_size=0), "batch_size"),
    (lambda: DigitsSetup(split="dirichlet"), "split"),
    (lambda: sync_penalty(0.0, (0.5,), (0.9,), (1.0,)), "px"),
    (lambda: impulse_chart(omega=1.5), "omega"),
    (lambda: methods(0.1, 0), "period"),
])
def test_bad_arguments_name_the_parameter(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# --- the theory -----------------------------------------------------------------------------------

def test_variance_formula_closed_form_and_monte_carlo():
    assert momentum_variance(0.9, 0) == 0
    # K -> infinity: the stationary variance of an EMA, (1 - b) / (1 + b)
    assert momentum_variance(0.9, 10_000) == pytest.approx(0.1 / 1.9)
    assert momentum_variance(0.5, 1, sigma=2.0) == pytest.approx(0.25 * 4)  # one step: (1-b)^2 s^2
    table = variance_check((0.9, 0.99), (1, 16), chains=20_000, seed=3)
    assert table["rel_error"].max() < 0.05
    # the check can fail: a wrong formula (without the 1 - b^(2K) factor) is far off at small K
    wrong = table["empirical"] / ((1 - table["beta"]) / (1 + table["beta"]))
    assert (abs(wrong - 1) > 0.5).any()


def test_information_kept_shrinks_with_k_and_grows_with_beta():
    assert information_kept(0.9, 32) < information_kept(0.9, 8) < information_kept(0.9, 1)
    assert information_kept(0.999, 32) > information_kept(0.9, 32)
    assert information_kept(0.9, 0) == math.inf


def test_impulse_response_sums_to_one_and_anchor_share_matches_its_sum():
    w = update_weights((0.99,), (0.7,), 20_000)
    assert w.sum() == pytest.approx(1.0, abs=1e-9)
    assert w[0] == pytest.approx(0.3 + 0.7 * 0.01)
    adam = update_weights((0.9,), (1.0,), 5)
    np.testing.assert_allclose(adam, 0.1 * 0.9 ** np.arange(5))
    k = 32
    direct = np.mean([0.9**j for j in range(1, k + 1)])
    assert anchor_share((0.9,), (1.0,), k) == pytest.approx(direct)
    assert anchor_share((0.995,), (0.9,), k) > anchor_share((0.9,), (1.0,), k)


def test_theorem_constants():
    assert beta_omega((0.9,), (1.0,)) == pytest.approx(9.0)
    assert beta_omega((0.99,), (0.5,)) == pytest.approx(0.5 * 99)
    # psi vanishes as beta -> 1 and with syncing every step
    assert sync_penalty(0.1, (0.1,), (0.9999,), (1.0,)) < sync_penalty(0.1, (0.1,), (0.9,), (1.0,))
    assert sync_penalty(1.0, (0.1,), (0.9,), (1.0,)) == 0


# --- the training function and the experiments -----------------------------------------------------

def test_the_written_out_gradient_equals_autograd():
    gen = torch.Generator().manual_seed(0)
    model = FlatMLP(64, 8, 10, gen)
    x = torch.randn(5, 64, generator=gen)
    y = torch.randint(0, 10, (5,), generator=gen)
    model.grad(x, torch.nn.functional.one_hot(y, 10).float())
    theta = model.theta.detach().clone().requires_grad_(True)
    w1, b1, w2, b2 = torch.split(theta, [8 * 64, 8, 10 * 8, 10])
    h = torch.relu(x @ w1.view(8, 64).T + b1)
    loss = torch.nn.functional.cross_entropy(h @ w2.view(10, 8).T + b2, y)
    loss.backward()
    torch.testing.assert_close(model.theta.grad, theta.grad, rtol=1e-5, atol=1e-6)


SMALL = DigitsSetup(steps=16, warmup=2, eval_every=8, hidden=8)


def test_train_worker_counts_exactly_and_ddp_keeps_replicas_identical():
    mt = Method("mt", 0.01, betas=(0.995, 0.999), weights=(0.9,), period=4)
    rows = run_simulated(functools.partial(train_worker, method=mt, setup=SMALL, seed=0), 2)
    log = rows[0]
    assert rows[1].empty and list(log["step"]) == [0, 8, 16]
    payload = ex.model_bytes(SMALL.hidden)
    last = log.iloc[-1]
    assert last["bytes_parameters"] == last["bytes_first_moment"] == last["bytes_second_moment"] \
        == 4 * payload
    assert log["alignment"].iloc[1:].between(-1, 1).all()

    def ddp_params(comm):
        method = Method("ddp", 0.01, period=INF, ddp=True)
        train_worker(comm, method, SMALL, 0)
        return comm.counts()

    counts = run_simulated(ddp_params, 2)
    assert counts[0].bytes["gradients"] == SMALL.steps * payload


def test_experiment_tables_and_claims_at_smoke_scale(smoke_report):
    report = smoke_report("mtdao", 1)
    final = report.tables["final"]
    assert set(final["method"]) == set(ex.METHODS)
    # the gap is measured against DDP on the same seed
    ddp = final[final["method"] == ex.DDP]
    assert (ddp["gap"] == 0).all()
    assert report.claim("bytes_counted").passed
    tuning = report.tables["tuning"]
    assert tuning.groupby("method")["best"].sum().eq(1).all()
    assert ex.tuned_local_adam(tuning) in ex.SLOW_ADAMS
    assert report.claim("runs_finite").passed
    charts = report.charts()
    assert {"gaps", "tuning", "loss_vs_bytes", "loss_vs_time", "variance",
            "anchor_slider"} <= set(charts)
    for chart in charts.values():
        chart.to_dict()


def _tuned(name: str, score: float) -> Tuned:
    return Tuned(name, "lr", 0.01, (0.003, 0.01, 0.03), (score + 1, score, score + 1), 0.01,
                    False, ())


def _claims_on(gaps: dict[str, list[float]], scores: dict[str, float]):
    """The chapter's claims on made-up held-out gaps (one list per method, one value per seed)."""
    size = ex._sizes("book")
    rows = []
    for m in ex.METHODS:
        for seed, g in enumerate(gaps.get(m, [0.0, 0.0, 0.0])):
            rows.append({"method": m, "seed": seed, "lr": 0.01, "gap": g, "train_gap": g,
                         "test_loss": 0.1 + g, "bytes_parameters": 1.0, "bytes_first_moment": 1.0,
                         "bytes_second_moment": 1.0, "bytes_gradients": 32.0})
    tables = {"final": pd.DataFrame(rows),
              "variance": pd.DataFrame({"rel_error": [0.01]})}
    tuned = [_tuned(m, scores.get(m, 1.0)) for m in ex.METHODS]
    claims, acceptance = ex._claims(tables, tuned, size)
    return {c.name: c for c in claims}, acceptance


def test_the_control_is_never_the_reference_and_can_pass():
    """The control is MT-DAO without its gradient term (a slow beta1), never standard Local Adam,
    even when standard Local Adam has the lowest validation loss of all (the earlier control, the
    best of beta1 in {0.9, 0.99, 0.995}, was then the reference itself and could not pass)."""
    assert ex.LOCAL_ADAM not in ex.SLOW_ADAMS and len(ex.SLOW_ADAMS) == len(ex.MTDAOS)
    scores = {ex.LOCAL_ADAM: 0.1, ex.LOCAL_ADAM_999: 0.2, ex.MTDAO_99_75: 0.2}
    gaps = {ex.LOCAL_ADAM: [0.04, 0.05, 0.06], ex.LOCAL_ADAM_999: [0.00, 0.005, 0.01],
            ex.MTDAO_99_75: [0.03, 0.04, 0.05]}
    claims, acceptance = _claims_on(gaps, scores)
    c = claims["mtdao_closes_gap_iid"]
    assert ex.LOCAL_ADAM_999 in c.control and ex.MTDAO_99_75 in c.statement
    # the slow Local Adam closes more than half of the gap: the control passes, MT-DAO does not
    assert c.control_passed and not c.passed
    assert c.control_per_seed == pytest.approx((-0.02, -0.02, -0.02))
    assert c.per_seed == pytest.approx((0.01, 0.015, 0.02))
    assert c.source == "pilot"  # the control was replaced after a run
    assert list(acceptance["control − half of Local Adam's (< 0?)"]) == pytest.approx([-0.02] * 3)
    # and both pass when both close the gap: "not discriminating", not "reproduced"
    gaps[ex.MTDAO_99_75] = [0.0, 0.004, 0.011]
    c = _claims_on(gaps, scores)[0]["mtdao_closes_gap_iid"]
    assert c.passed and c.control_passed


def test_a_diverged_run_is_named_not_hidden():
    gaps = {ex.LOCAL_ADAM: [0.04, 0.05, 0.06], ex.MTDAO_NAME: [0.0, math.nan, 0.0]}
    claims = _claims_on(gaps, {})[0]
    finite = claims["runs_finite"]
    assert finite.measured == 1 and not finite.passed
    assert f"{ex.MTDAO_NAME} (seed 1)" in finite.statement
    closes = claims["mtdao_closes_gap_iid"]
    assert math.isnan(closes.measured) and "diverged" in closes.statement
    # no gap to close: NaN with that reason, not a silent failure
    claims = _claims_on({ex.LOCAL_ADAM: [0.0, 0.01, 0.0]}, {})[0]
    closes = claims["mtdao_closes_gap_iid"]
    assert math.isnan(closes.measured) and "not testable" in closes.statement
    assert claims["runs_finite"].passed


def test_seed_blocks_give_every_nan_its_reason():
    def entry(b, measured, passed, control=None, control_passed=None):
        return {"block": b, "seed": 3 * b, "measured": measured, "passed": passed,
                "control_measured": control, "control_passed": control_passed}

    table = {"claims": {
        "gap_exists_iid": [entry(0, 0.03, True), entry(1, 0.01, False), entry(2, 0.03, True),
                           entry(3, None, False)],
        "runs_finite": [entry(0, 0.0, True), entry(1, 0.0, True), entry(2, 2.0, False),
                        entry(3, 1.0, False)],
        "mtdao_closes_gap_iid": [entry(0, -0.01, True, 0.01, False),
                                 entry(1, None, False, None, False),
                                 entry(2, None, False, 0.01, False),
                                 entry(3, None, False, None, False)]}}
    blocks = ex.seed_blocks(table)
    assert list(blocks["outcome"]) == ["tested", "not testable", "diverged", "diverged"]
    assert list(blocks["diverged_runs"]) == [0, 0, 2, 1]
    assert blocks["mtdao_passes"].tolist() == [True, False, False, False]
    # the shipped table: one row per block, and every block has an outcome
    shipped = ex.seed_blocks()
    assert len(shipped) == 8 and set(shipped["outcome"]) <= {"tested", "not testable", "diverged"}


def test_launch_gives_the_tables_of_reproduce():
    out = run_simulated(functools.partial(launch, scale="smoke", seed=0), 2)
    final = out[0]["final"]
    assert isinstance(final, pd.DataFrame) and "final_loss" in final
    assert set(final["method"]) == set(ex.METHODS)
    assert out[1]["final"].empty


def test_explorer_moves_its_chart():
    w = explorer()
    before = w.result.to_dict()
    w.children[1].value = 0.2
    assert w.result.to_dict() != before


@pytest.mark.parametrize("call, match", [
    (lambda: ex.model_bytes(0), "hidden"),
    (lambda: ex.model_bytes(4, n_in=1.5), "n_in"),
    (lambda: impulse_chart(period=math.nan), "period"),
    (lambda: impulse_chart(period="32"), "period"),
    (lambda: check_sync_periods((4, 4, 4), 0), "n_moments"),
    (lambda: variance_check(betas=(1.0,)), r"betas\[0\]"),
    (lambda: variance_check(periods=(0,)), r"periods\[0\]"),
    (lambda: variance_check(seed=2**32), "seed"),
    (lambda: variance_check(seed=None), "seed"),
    (lambda: Method("x", lr=0.1, betas=(0.9, 1.0)), "betas"),
    (lambda: Method("x", lr=0.1, betas=(0.9, 0.9, 0.999), weights=(0.5, 0.7)), "weights"),
    (lambda: methods(math.nan, 4), "lr"),
    (lambda: train_stacked([(Method("x", 0.01, period=4), -1)], DigitsSetup(steps=8, warmup=1), 1),
     r"runs\[0\] seed"),
    (lambda: run_simulated(lambda comm: train_worker(comm, Method("x", 0.01, period=4),
                                                     DigitsSetup(steps=8, warmup=1), 2**32), 1),
     "seed"),
    (lambda: launch("gloo"), "comm"),
])
def test_bad_arguments_are_refused_at_entry_and_name_the_parameter(call, match):
    """Issue 24: these took an alias's name, a NaN, or nothing at all."""
    with pytest.raises((ValueError, TypeError), match=match):
        call()
