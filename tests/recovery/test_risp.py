"""Tests for iclr_lab.recovery.risp: forward operators, the Cauchy prior, RED, RISP, Nesterov with
restart, and the chapter's experiments."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from iclr_lab.core.report import Report
from iclr_lab.recovery.risp import (
    SIZES,
    CauchyPrior,
    Problem,
    explore,
    explorer,
    image_figure,
    make_operator,
    make_problem,
    nesterov_restart,
    numbers,
    psnr,
    red,
    reproduce,
    risp,
)


@pytest.fixture(scope="module")
def small() -> Problem:
    return make_problem(24, seed=3)


# ------------------------------------------------------------------ forward operators


@pytest.mark.parametrize("kind", ["blur", "inpaint", "downsample"])
def test_adjoint_passes_the_dot_product_test(kind: str) -> None:
    op = make_operator(kind, (16, 20), seed=1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 20))
    r = rng.standard_normal(op.forward(x).shape)
    assert np.vdot(op.forward(x), r) == pytest.approx(np.vdot(x, op.adjoint(r)), rel=1e-12)


@pytest.mark.parametrize("kind", ["blur", "inpaint", "downsample"])
def test_norm2_is_the_largest_eigenvalue_of_AtA(kind: str) -> None:
    op = make_operator(kind, (16, 16), seed=2)
    x = np.random.default_rng(1).standard_normal((16, 16))
    for _ in range(300):  # power iteration on A^T A
        x = op.adjoint(op.forward(x))
        x /= np.linalg.norm(x)
    rayleigh = float(np.vdot(x, op.adjoint(op.forward(x))))
    assert rayleigh == pytest.approx(op.norm2, rel=1e-6)


def test_blur_preserves_constants_and_inpaint_keeps_about_keep() -> None:
    blur = make_operator("blur", (32, 32), blur=2.0)
    assert np.allclose(blur.forward(np.full((32, 32), 0.7)), 0.7)
    mask = make_operator("inpaint", (100, 100), keep=0.3, seed=0).forward(np.ones((100, 100)))
    assert abs(mask.mean() - 0.3) < 0.02
    down = make_operator("downsample", (8, 8), factor=4)
    assert down.forward(np.arange(64.0).reshape(8, 8)).shape == (2, 2)


# ------------------------------------------------------------------ prior and objective


def test_prior_gradient_matches_finite_differences() -> None:
    prior = CauchyPrior(mu=3.0, delta=0.2)
    rng = np.random.default_rng(4)
    x, d = rng.random((10, 12)), rng.standard_normal((10, 12))
    h = 1e-6
    fd = (prior.value(x + h * d) - prior.value(x - h * d)) / (2 * h)
    assert float(np.vdot(prior.grad(x), d)) == pytest.approx(fd, rel=1e-6)


def test_prior_is_nonconvex() -> None:
    # along a 1-D edge the penalty log(1 + t^2/delta^2) is concave past |t| = delta
    prior = CauchyPrior(mu=1.0, delta=0.1)
    x = np.zeros((4, 4))
    e = np.zeros((4, 4))
    e[:, 2:] = 1.0
    vals = [prior.value(x + t * e) for t in (0.2, 0.3, 0.4)]
    assert vals[1] > 0.5 * (vals[0] + vals[2])  # midpoint above the chord: not convex


def test_objective_gradient_and_lipschitz_constant(small: Problem) -> None:
    rng = np.random.default_rng(5)
    x, d = rng.random(small.op.shape), rng.standard_normal(small.op.shape)
    h = 1e-6
    fd = (small.value(x + h * d) - small.value(x - h * d)) / (2 * h)
    assert float(np.vdot(small.grad(x), d)) == pytest.approx(fd, rel=1e-5)
    for _ in range(5):
        a, b = rng.random(small.op.shape), rng.random(small.op.shape)
        b = a + 0.01 * (b - a)
        ratio = np.linalg.norm(small.grad(a) - small.grad(b)) / np.linalg.norm(a - b)
        assert ratio <= small.lipschitz


def test_psnr_closed_form() -> None:
    t = np.zeros((4, 4))
    assert psnr(t + 0.1, t) == pytest.approx(20.0)
    assert psnr(t, t) == math.inf


# ------------------------------------------------------------------ RED, RISP, Nesterov


def test_red_with_step_one_over_L_decreases_F(small: Problem) -> None:
    tr = red(small, iters=60)
    assert np.all(np.diff(tr.value) <= 1e-9 * abs(tr.value[0]))  # the descent lemma
    assert tr.grad_evals == 60 and len(tr.value) == 61


def test_theta_one_is_red_exactly(small: Problem) -> None:
    a = red(small, iters=40)
    b = risp(small, theta=1.0, restart=1e-3, iters=40)
    assert np.array_equal(a.x, b.x)
    assert np.allclose(a.grad_norm, b.grad_norm, rtol=0, atol=0)


def test_restart_every_step_is_red(small: Problem) -> None:
    # with B^2 below any movement the rule fires after every step: the momentum is always zero
    a = red(small, iters=30)
    b = risp(small, theta=0.1, restart=1e-300, iters=30)
    assert len(b.restarts) == 30
    assert np.allclose(a.x, b.x, rtol=0, atol=1e-13)


def test_risp_without_restart_is_heavy_ball(small: Problem) -> None:
    eta, th = 1.0 / small.lipschitz, 0.3
    x_prev = x = small.start()
    for _ in range(25):
        z = x + (1 - th) * (x - x_prev)
        x_prev, x = x, z - eta * small.grad(z)
    tr = risp(small, theta=th, restart=None, iters=25)
    assert np.allclose(tr.x, x, rtol=0, atol=1e-13) and tr.restarts == []


def test_restart_rule_matches_its_definition(small: Problem) -> None:
    # replay the rule j * sum ||x_{i+1} - x_i||^2 > B^2 on the iterates and find the same restarts
    b2 = 0.05
    keep = tuple(range(41))
    tr = risp(small, theta=0.05, restart=b2, iters=40, keep=keep)
    j, moved, found = 0, 0.0, []
    for k in range(40):
        j += 1
        moved += float(np.sum((tr.snapshots[k + 1] - tr.snapshots[k]) ** 2))
        if j * moved > b2:
            found.append(k + 1)
            j, moved = 0, 0.0
    assert found == tr.restarts and len(found) >= 1


def test_momentum_beats_red_on_the_gradient(small: Problem) -> None:
    a = red(small, iters=150)
    b = risp(small, theta=0.2, restart=1.0, iters=150)
    c = nesterov_restart(small, iters=150)
    assert b.grad_norm.min() < 0.5 * a.grad_norm.min()
    assert c.grad_norm.min() < 0.5 * a.grad_norm.min()


def test_nesterov_restart_fires_only_uphill(small: Problem) -> None:
    tr = nesterov_restart(small, iters=80, keep=tuple(range(81)))
    assert tr.restarts  # the rule does fire on this nonconvex problem
    # right after a restart the previous point equals the current one: the next step is plain GD
    k = tr.restarts[0]
    x = tr.snapshots[k]
    assert np.allclose(tr.snapshots[k + 1], x - small.grad(x) / small.lipschitz, atol=1e-13)


def test_record_false_keeps_only_the_end(small: Problem) -> None:
    tr = risp(small, iters=20, record=False)
    full = risp(small, iters=20)
    assert len(tr.value) == 1 and tr.value[0] == pytest.approx(full.value[-1])


# ------------------------------------------------------------------ shared work, same bits
# The solvers get F and grad F together at a recorded iterate (Problem.value_and_grad), reuse the
# record's gradient as the step's when there is no momentum, and take image differences by slices.
# These tests hold them to the plain path bit for bit: separate value and grad calls, np.roll.


def _reference(problem: Problem, method: str, iters: int, **kw: float | None) -> dict[str, Any]:
    """The solvers written out with a separate ``grad`` and ``value`` at every recorded iterate and
    a fresh gradient at every step (the path before the shared work)."""
    eta, x = 1.0 / problem.lipschitz, problem.start()
    x_prev, j, moved, restarts = x, 0, 0.0, []
    value, gn, ps = [], [], []
    th = float(kw.get("theta") or 1.0)
    b2 = kw.get("restart")
    for k in range(iters + 1):
        gn.append(float(np.linalg.norm(problem.grad(x))))
        value.append(problem.value(x))
        assert problem.truth is not None
        ps.append(psnr(x, problem.truth))
        if k == iters:
            break
        if method == "nesterov":
            z = x + (j / (j + 3.0)) * (x - x_prev)
            g = problem.grad(z)
            x_new = z - eta * g
            if float(np.vdot(g, x_new - x)) > 0:
                x_prev, x, j = x_new, x_new, 0
                restarts.append(k + 1)
            else:
                x_prev, x, j = x, x_new, j + 1
            continue
        z = x + (1.0 - th) * (x - x_prev)
        x_new = z - eta * problem.grad(z)
        j += 1
        moved += float(np.sum((x_new - x) ** 2))
        x_prev, x = x, x_new
        if b2 is not None and j * moved > b2:
            x_prev, j, moved = x, 0, 0.0
            restarts.append(k + 1)
    return {"x": x, "value": np.array(value), "grad_norm": np.array(gn), "psnr": np.array(ps),
            "restarts": restarts}


def test_image_differences_by_slices_are_the_rolls() -> None:
    from iclr_lab.recovery.risp.method import _grad2, _grad2_adjoint

    rng = np.random.default_rng(8)
    x, u, v = rng.standard_normal((3, 7, 9))
    du, dv = _grad2(x)
    assert np.array_equal(du, np.roll(x, -1, axis=1) - x)
    assert np.array_equal(dv, np.roll(x, -1, axis=0) - x)
    assert np.array_equal(_grad2_adjoint(u, v),
                          (np.roll(u, 1, axis=1) - u) + (np.roll(v, 1, axis=0) - v))


@pytest.mark.parametrize("kind", ["blur", "inpaint", "downsample"])
def test_value_and_grad_is_value_and_grad(kind: str) -> None:
    p = make_problem(16, kind=kind, seed=2)
    x = np.random.default_rng(9).random((16, 16))
    value, grad = p.value_and_grad(x)
    assert value == p.value(x) and np.array_equal(grad, p.grad(x))
    # a prior without a value_and_grad of its own: the problem calls its grad, then its value

    class Plain:
        lipschitz = p.prior.lipschitz
        value = p.prior.value
        grad = p.prior.grad

    q = Problem(p.op, p.y, p.lam, Plain(), p.truth)
    value, grad = q.value_and_grad(x)
    assert value == p.value(x) and np.array_equal(grad, p.grad(x))


@pytest.mark.parametrize(("method", "kw"), [
    ("red", {}), ("risp", {"theta": 0.2, "restart": 0.05}), ("risp", {"theta": 1.0, "restart": 0.05}),
    ("risp", {"theta": 0.002, "restart": 0.01}), ("risp", {"theta": 0.3, "restart": None}),
    ("nesterov", {})])
def test_solvers_equal_the_plain_path_bit_for_bit(small: Problem, method: str,
                                                  kw: dict[str, float | None]) -> None:
    solver = {"red": red, "risp": risp, "nesterov": nesterov_restart}[method]
    tr = solver(small, iters=60, **kw)
    ref = _reference(small, method, 60, **kw)
    for name in ("x", "value", "grad_norm", "psnr"):
        assert np.array_equal(getattr(tr, name), ref[name]), name
    assert tr.restarts == ref["restarts"]
    if method != "red":
        assert tr.restarts or kw.get("restart") is None  # the no-momentum reuse ran
    end = solver(small, iters=60, record=False, **kw)
    assert np.array_equal(end.x, tr.x) and end.value[0] == tr.value[-1]
    assert end.grad_norm[0] == tr.grad_norm[-1]


# ------------------------------------------------------------------ bad arguments


def test_bad_arguments_name_the_parameter(small: Problem) -> None:
    with pytest.raises(ValueError, match="kind"):
        make_operator("warp", (8, 8))
    with pytest.raises(ValueError, match="factor"):
        make_operator("downsample", (9, 9), factor=2)
    with pytest.raises(ValueError, match="keep"):
        make_operator("inpaint", (8, 8), keep=1.5)
    with pytest.raises(ValueError, match="blur"):
        make_operator("blur", (8, 8), blur=-1.0)
    with pytest.raises(ValueError, match="shape"):
        make_operator("blur", (8,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="x0"):
        red(small, x0=np.zeros((5, 5)))
    with pytest.raises(ValueError, match="x"):
        small.op(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="step"):
        risp(small, step=-0.1)
    with pytest.raises(ValueError, match="theta"):
        risp(small, theta=0.0)
    with pytest.raises(ValueError, match="theta"):
        risp(small, theta=1.5)
    with pytest.raises(ValueError, match="restart"):
        risp(small, restart=-1.0)
    with pytest.raises(ValueError, match="iters"):
        nesterov_restart(small, iters=-3)
    with pytest.raises(ValueError, match="mu"):
        CauchyPrior(mu=0.0)
    with pytest.raises(ValueError, match="noise"):
        make_problem(16, noise=0.0)
    with pytest.raises(TypeError, match="problem"):
        red("not a problem")  # type: ignore[arg-type]


# ------------------------------------------------------------------ the chapter's experiments


def test_sizes_fix_the_issue_horizons() -> None:
    book = SIZES["book"]
    assert (book.short, book.risp_long, book.red_long) == (300, 1000, 5000)
    assert (book.learned_size, book.learned_iters) == (64, 300)  # fixed before the learned runs
    assert 0.002 in book.thetas and 1.0 in book.thetas
    # the restart claims need their theta in the sweep (heavy ball at that theta is its control)
    from iclr_lab.recovery.risp.experiments import FIRE_THETA

    assert all(FIRE_THETA in sz.thetas for sz in SIZES.values())


def test_reproduce_smoke_is_deterministic_and_consistent() -> None:
    a, b = reproduce("smoke", seed=1), reproduce("smoke", seed=1)
    assert isinstance(a, Report)
    for key in a.tables:
        pd.testing.assert_frame_equal(a.tables[key], b.tables[key])
    names = {c.name for c in a.claims}
    assert {"theta_one_is_red", "grad_ratio", "objective_ratio", "same_fixed_point",
            "restart_small_theta", "vs_nesterov_restart", "learned_grad_ratio", "learned_step_safe",
            "denoiser_gain"} <= names
    nums = numbers(a)
    assert nums["red_vs_red_300"] == pytest.approx(1.0)
    assert a.claim("grad_ratio").measured == pytest.approx(nums["risp_vs_red_300"])
    assert a.claim("theta_one_is_red").measured == 0.0
    # objective_ratio compares the times to one target, RED's end value (the band around F_min
    # censors RED and could never exceed 0.2; each run's own end rewarded a run that stalls)
    assert a.claim("objective_ratio").measured == pytest.approx(nums["risp_to_red_end_ratio"])
    assert a.claim("objective_ratio").control_measured == pytest.approx(nums["hb_to_red_end_ratio"])
    assert a.claim("objective_ratio").source == "pilot"  # the measure changed after runs
    assert set(a.charts()) == {"gradient", "objective", "psnr", "theta", "learned"}
    # the learned-prior claim is RISP's smallest gradient norm over RED's, from the same runs
    assert nums["learned_red_vs_red"] == pytest.approx(1.0)
    assert a.claim("learned_grad_ratio").measured == pytest.approx(nums["learned_risp_vs_red"])
    lc = a.tables["learned_curves"]
    risp_rows = lc[lc["method"] == "RISP"]
    assert nums["learned_risp_min_grad_rel"] == pytest.approx(risp_rows["grad_min_rel"].iloc[-1])
    assert set(lc["method"]) == {"RED", "RISP", "Heavy ball, no restart", "Nesterov + O'D–C restart"}
    # heavy ball without restart is the control of every paper claim about RISP, at RISP's budget
    paper = [c for c in a.claims if c.kind == "paper"]
    assert {"grad_ratio_fires", "restart_vs_hb", "restart_vs_hb_b2_low", "restart_vs_hb_b2_high"} <= {
        c.name for c in paper}
    for c in paper:
        assert ("heavy ball" in c.control or "heavy ball" in c.no_control) and c.regime, c.name
    assert a.claim("grad_ratio").control_measured == pytest.approx(nums["hb_vs_red_300"])
    # the restart claims: a paired test of log10(RISP / heavy ball) over their own noise draws,
    # disjoint from the pilot seeds 0-4, the median of the ratios is the glued number
    fire = a.tables["fire"]
    assert len(fire) == SIZES["smoke"].fire_seeds and fire["seed"].min() >= 1000
    for name, col in (("restart_vs_hb", "risp_x1"), ("restart_vs_hb_b2_low", "risp_x0.1"),
                      ("restart_vs_hb_b2_high", "risp_x10")):
        c = a.claim(name)
        assert c.per_seed == pytest.approx(tuple(np.log10(fire[col] / fire["hb"])))
        assert c.interval is not None and c.op == "<" and c.threshold == 0.0
    assert nums["fire_vs_hb"] == pytest.approx(float((fire["risp_x1"] / fire["hb"]).median()))
    assert a.claim("grad_ratio_fires").per_seed == pytest.approx(tuple(fire["risp_x1"] / fire["red"]))
    assert a.claim("grad_ratio_fires").control_per_seed == pytest.approx(tuple(fire["hb"] / fire["red"]))
    assert len(a.claim("restart_small_theta").per_seed) == len(fire)
    hb = a.tables["summary"].set_index("method").loc["Heavy ball, no restart"]
    assert hb["budget"] == SIZES["smoke"].risp_long
    assert lc["iteration"].max() == SIZES["smoke"].learned_iters
    # a fair race: every method starts from the same point (gradient norms normalised by RED's at k = 0)
    assert np.allclose(lc.loc[lc["iteration"] == 0, "grad_rel"], 1.0, rtol=1e-12)
    assert (a.tables["learned_summary"]["budget"] == SIZES["smoke"].learned_iters).all()
    assert a.claim("learned_step_safe").measured > 0
    for table in ("images", "learned_images"):
        assert len(image_figure(a, table).axes) >= 4
    with pytest.raises(ValueError, match="table"):
        image_figure(a, "curves")
    # RED reaches its own end value by its last iteration; the run that found F_min is at or below
    # RED's end, so it reaches RED's band no later than the band around F_min
    rows = a.tables["summary"].set_index("method")
    assert rows.loc["RED", "iters_to_red_end"] <= rows.loc["RED", "budget"]
    best = rows[rows["final_gap_rel"] == 0.0]
    assert len(best) >= 1
    assert (best["iters_to_red_end"] <= best["iters_to_objective"]).all()
    assert (rows["final_gap_rel"] >= 0).all()


def test_objective_ratio_fails_for_a_run_that_never_reaches_reds_end() -> None:
    """A censored count (a run stuck above RED's end value for its whole budget) must fail the
    claim's bar 0.4 whatever the budgets: 1001 over RED's 5000 would pass otherwise."""
    from iclr_lab.recovery.risp.experiments import _to_red_end

    assert _to_red_end(1001.0, 1000.0, 5000.0) == math.inf
    assert _to_red_end(1000.0, 1000.0, 5000.0) == pytest.approx(0.2)  # reached at the last step
    assert _to_red_end(300.0, 1000.0, 500.0) == pytest.approx(0.6)    # reached, and can fail


def test_explore_and_explorer() -> None:
    chart = explore(theta=0.05, iterations=5, size=16)
    spec = chart.to_dict()
    assert "hconcat" in spec
    w = explorer()
    before = w.result.to_dict()
    w.children[0].value = w.children[0].max
    after = w.result.to_dict()
    assert before != after
    with pytest.raises(ValueError, match="iterations"):
        explore(iterations=0)


@pytest.mark.parametrize("seed", [-1, 1.5, "0", None, 2**32])
def test_every_seed_is_checked_at_entry(seed: Any) -> None:
    """Issue 24, item 4: make_operator took -1, 1.5, "0" and None (for blur it never looked)."""
    for kind in ("blur", "inpaint", "downsample"):
        with pytest.raises((TypeError, ValueError), match=r"^seed must be an integer"):
            make_operator(kind, (8, 8), seed=seed)
    with pytest.raises((TypeError, ValueError), match=r"^seed must be an integer"):
        make_problem(8, seed=seed)


def test_unused_and_non_finite_arguments_are_refused(small: Problem) -> None:
    with pytest.raises(ValueError, match=r"^blur must be in \(0, 20\]"):
        make_operator("inpaint", (8, 8), blur=math.nan)  # an argument the kind does not use
    with pytest.raises(ValueError, match=r"^factor must be an integer in \[1, 8\]"):
        make_operator("blur", (8, 8), factor=0)
    with pytest.raises(ValueError, match=r"^x0 must be finite"):
        red(small, x0=np.full(small.op.shape, np.nan))
    with pytest.raises(ValueError, match=r"^x must be finite"):
        psnr(np.full((4, 4), np.nan), np.zeros((4, 4)))
    with pytest.raises(ValueError, match=r"^x must have the shape of truth"):
        psnr(np.zeros(16), np.zeros((4, 4)))


@pytest.mark.parametrize("shape", [(16, 20), (24, 24), (15, 9)])
def test_the_blur_gram_is_the_adjoint_of_the_forward_and_the_gradient_uses_it(shape):
    """The blur's one-pass A^T A (transfer function |H|^2) equals A^T(A x) to rounding, and
    Problem.grad, which uses it, equals lam A^T (A x - y) + grad g; value_and_grad gives the
    same gradient to the bit."""
    op = make_operator("blur", shape)
    assert op.gram is not None and make_operator("inpaint", shape).gram is None
    x = np.random.default_rng(1).standard_normal(shape)
    assert np.allclose(op.gram(x), op.adjoint(op.forward(x)), rtol=0, atol=1e-13)
    ax, atax = op.forward_gram(x)  # one forward transform for both: the same arrays
    assert np.array_equal(ax, op.forward(x)) and np.array_equal(atax, op.gram(x))
    p = make_problem(24, seed=3)
    z = np.random.default_rng(2).random(p.op.shape)
    plain = p.lam * p.op.adjoint(p.op.forward(z) - p.y) + p.prior.grad(z)
    assert np.allclose(p.grad(z), plain, rtol=1e-12, atol=1e-12)
    assert np.array_equal(p.value_and_grad(z)[1], p.grad(z))
