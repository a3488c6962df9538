"""Behavioural tests of VRAdam / VRMomentum (book/optimizers/vradam.md)."""

from __future__ import annotations

import copy
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from iclr_lab.optimizers import VRAdam, VRMomentum
from iclr_lab.optimizers import vradam as vr

torch.set_num_threads(1)


def _mlp(dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 16),
                               torch.nn.Tanh(), torch.nn.Linear(16, 3)).to(dtype)


def _batches(n: int, dtype: torch.dtype = torch.float32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    return [(torch.randn(32, 8, generator=gen).to(dtype), torch.randint(0, 3, (32,), generator=gen))
            for _ in range(n)]


def _step(net: torch.nn.Module, opt: torch.optim.Optimizer, xy: tuple) -> None:
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(xy[0]), xy[1]).backward()
    opt.step()


def _max_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(float((p - q).detach().abs().max())
               for p, q in zip(a.parameters(), b.parameters(), strict=True))


# --- faithfulness: the gate is the only change w.r.t. AdamW ---------------------------------------

@pytest.mark.parametrize(("kwargs", "dtype", "tol"), [
    ({"beta3": 0.0}, torch.float32, 1e-6),
    ({"beta3": 5.0, "lr_cutoff": 0.0}, torch.float32, 1e-6),
    ({"beta3": 0.0}, torch.float64, 1e-12),
    ({"beta3": 5.0, "lr_cutoff": 0.0}, torch.float64, 1e-12),
])
def test_matches_adamw_when_gate_is_off(kwargs, dtype, tol):
    a, b = _mlp(dtype), _mlp(dtype)
    oa = torch.optim.AdamW(a.parameters(), lr=1e-2, betas=(0.8, 0.99), weight_decay=0.05)
    ob = VRAdam(b.parameters(), lr=1e-2, betas=(0.8, 0.99), weight_decay=0.05, **kwargs)
    for xy in _batches(200, dtype):
        _step(a, oa, xy)
        _step(b, ob, xy)
    assert _max_diff(a, b) <= tol
    assert ob.last_lr_ratio == 1.0


def test_gate_changes_the_trajectory():
    a, b = _mlp(), _mlp()
    oa = torch.optim.AdamW(a.parameters(), lr=1e-2)
    ob = VRAdam(b.parameters(), lr=1e-2, beta3=100.0)
    for xy in _batches(20):
        _step(a, oa, xy)
        _step(b, ob, xy)
    assert _max_diff(a, b) > 1e-4
    assert ob.last_lr_ratio < 0.99


def _reference_vradam(params, grads_seq, lr, betas, beta3, cutoff, eps, wd):
    """Algorithm 1 written from the spec with plain tensors (float64): the reference."""
    b1, b2 = betas
    params = [p.detach().clone() for p in params]
    v = [torch.zeros_like(p) for p in params]
    s = [torch.zeros_like(p) for p in params]
    etas = []
    for t, grads in enumerate(grads_seq(params), start=1):
        v = [b1 * vi + (1 - b1) * g for vi, g in zip(v, grads, strict=True)]
        s = [b2 * si + (1 - b2) * g * g for si, g in zip(s, grads, strict=True)]
        p_t = sum(float((vi * vi).sum()) for vi in v)
        eta = lr / (1 + min(beta3 * p_t, cutoff))
        etas.append(eta)
        for i, p in enumerate(params):
            vh, sh = v[i] / (1 - b1**t), s[i] / (1 - b2**t)
            p.mul_(1 - eta * wd).sub_(eta * vh / (sh.sqrt() + eps))
    return params, etas


def test_matches_independent_reimplementation_and_recorded_gate():
    net = _mlp(torch.float64)
    data = _batches(50, torch.float64)
    kw = {"lr": 3e-2, "betas": (0.9, 0.999), "beta3": 500.0, "lr_cutoff": 10.0, "eps": 1e-8,
          "weight_decay": 1e-2}
    ref_net = copy.deepcopy(net)

    def grads_seq(params):
        for x, y in data:
            with torch.no_grad():
                for p, q in zip(ref_net.parameters(), params, strict=True):
                    p.copy_(q)
            ref_net.zero_grad()
            torch.nn.functional.cross_entropy(ref_net(x), y).backward()
            yield [p.grad.detach().clone() for p in ref_net.parameters()]

    ref_params, ref_etas = _reference_vradam(list(net.parameters()), grads_seq,
                                             kw["lr"], kw["betas"], kw["beta3"], kw["lr_cutoff"],
                                             kw["eps"], kw["weight_decay"])
    opt = VRAdam(net.parameters(), **kw)
    etas = []
    for xy in data:
        _step(net, opt, xy)
        etas.append(opt.last_lr_ratio * kw["lr"])
    assert np.allclose(etas, ref_etas, rtol=1e-9, atol=0)
    assert min(etas) < 0.5 * kw["lr"]  # the gate actually fired
    for p, q in zip(net.parameters(), ref_params, strict=True):
        assert torch.allclose(p.detach(), q, rtol=0, atol=1e-10)


def test_recorded_gate_recomputed_from_state():
    net = _mlp()
    opt = VRAdam(net.parameters(), lr=1e-2, beta3=3.0, lr_cutoff=4.0)
    for xy in _batches(10):
        _step(net, opt, xy)
        # after the step, exp_avg IS the velocity v_t used by the gate (Eq. (4))
        p_t = sum(float(opt.state[p]["exp_avg"].double().pow(2).sum()) for p in net.parameters())
        assert opt.last_sq_norm == pytest.approx(p_t, rel=1e-5)
        assert opt.last_lr_ratio == pytest.approx(1 / (1 + min(3.0 * p_t, 4.0)), rel=1e-5)
        assert opt.param_groups[0]["lr"] == 1e-2  # alpha0 restored after the step


def test_gate_is_global_over_param_groups():
    net = _mlp()
    layers = list(net.parameters())
    opt = VRAdam([{"params": layers[:2]}, {"params": layers[2:], "weight_decay": 0.1}],
                 lr=1e-2, beta3=2.0)
    for xy in _batches(3):
        _step(net, opt, xy)
    p_t = sum(float(opt.state[p]["exp_avg"].double().pow(2).sum()) for p in layers)
    assert opt.last_sq_norm == pytest.approx(p_t, rel=1e-5)
    assert opt.last_lr_ratios[0] == pytest.approx(opt.last_lr_ratios[1])


def test_normgrad_uses_raw_gradient():
    net = _mlp()
    opt = VRAdam(net.parameters(), lr=1e-2, normgrad=True)
    for xy in _batches(3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(xy[0]), xy[1]).backward()
        g2 = sum(float(p.grad.double().pow(2).sum()) for p in net.parameters())
        opt.step()
        assert opt.last_sq_norm == pytest.approx(g2, rel=1e-5)


def test_state_dict_round_trip_continues_identically():
    data = _batches(60)
    a = _mlp()
    oa = VRAdam(a.parameters(), lr=2e-2, beta3=10.0, lr_cutoff=7.0, weight_decay=1e-3)
    for xy in data[:30]:
        _step(a, oa, xy)
    b = copy.deepcopy(a)
    ob = VRAdam(b.parameters())  # defaults differ: everything must come from the state dict
    ob.load_state_dict(copy.deepcopy(oa.state_dict()))
    assert ob.param_groups[0]["beta3"] == 10.0 and ob.param_groups[0]["lr_cutoff"] == 7.0
    for xy in data[30:]:
        _step(a, oa, xy)
        _step(b, ob, xy)
        assert ob.last_lr_ratio == oa.last_lr_ratio
    assert _max_diff(a, b) == 0.0


def test_lr_scheduler_scales_alpha0_and_gate_acts_on_top():
    net = _mlp()
    opt = VRAdam(net.parameters(), lr=1e-2, beta3=5.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    seen = []
    for xy in _batches(6):
        _step(net, opt, xy)
        seen.append(opt.param_groups[0]["lr"])
        sched.step()
    assert seen == pytest.approx([1e-2, 1e-2, 5e-3, 5e-3, 2.5e-3, 2.5e-3])
    assert sched.get_last_lr()[0] == pytest.approx(1.25e-3)


def test_lr_scheduler_equivalence_with_adamw_when_gate_off():
    a, b = _mlp(), _mlp()
    oa = torch.optim.AdamW(a.parameters(), lr=1e-2, weight_decay=1e-2)
    ob = VRAdam(b.parameters(), lr=1e-2, beta3=0.0, weight_decay=1e-2)
    sa = torch.optim.lr_scheduler.CosineAnnealingLR(oa, T_max=20)
    sb = torch.optim.lr_scheduler.CosineAnnealingLR(ob, T_max=20)
    for xy in _batches(20):
        _step(a, oa, xy)
        _step(b, ob, xy)
        sa.step()
        sb.step()
    assert _max_diff(a, b) <= 1e-7


def test_step_hooks_fire_once_and_closure_works():
    torch.optim.AdamW(_mlp().parameters())  # make sure AdamW.step has been hook-wrapped
    net = _mlp()
    opt = VRAdam(net.parameters(), lr=1e-2)
    calls = []
    opt.register_step_post_hook(lambda *_: calls.append(1))
    x, y = _batches(1)[0]

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert torch.isfinite(loss)
    assert len(calls) == 1


@pytest.mark.parametrize(("name", "value", "match"), [
    ("lr", -1e-3, "lr"),
    ("betas", (1.0, 0.999), r"betas\[0\]"),
    ("betas", (0.9, -0.1), r"betas\[1\]"),
    ("beta3", -1.0, "beta3"),
    ("lr_cutoff", -1.0, "lr_cutoff"),
    ("eps", -1e-8, "eps"),
    ("weight_decay", -0.1, "weight_decay"),
])
def test_bad_arguments_raise(name, value, match):
    with pytest.raises(ValueError, match=match):
        VRAdam(_mlp().parameters(), **{name: value})


def test_bad_argument_messages_name_the_range():
    with pytest.raises(ValueError, match=r"beta3 must be in \[0, inf\)"):
        VRAdam(_mlp().parameters(), beta3=-2.0)
    with pytest.raises(ValueError, match=r"beta must be in \[0, 1\)"):
        VRMomentum(_mlp().parameters(), beta=1.0)
    with pytest.raises(TypeError, match="lr"):
        VRMomentum(_mlp().parameters(), lr="fast")


# --- VRMomentum ---------------------------------------------------------------------------------

def test_vrmomentum_step_bound_and_formula():
    net = _mlp(torch.float64)
    lr, beta3 = 5.0, 0.5
    opt = VRMomentum(net.parameters(), lr=lr, beta=0.9, beta3=beta3, lr_cutoff=math.inf)
    bound = lr / (2 * math.sqrt(beta3))
    gaps = []
    for x, y in _batches(40, torch.float64):
        before = [p.detach().clone() for p in net.parameters()]
        opt.zero_grad()
        (100 * torch.nn.functional.cross_entropy(net(x), y)).backward()  # large gradients
        opt.step()
        step = math.sqrt(sum(float((p.detach() - q).pow(2).sum())
                             for p, q in zip(net.parameters(), before, strict=True)))
        v2 = sum(float(opt.state[p]["velocity"].pow(2).sum()) for p in net.parameters())
        assert opt.last_lr_ratio == pytest.approx(1 / (1 + beta3 * v2), rel=1e-9)
        assert step == pytest.approx(lr * opt.last_lr_ratio * math.sqrt(v2), rel=1e-9)
        assert step <= bound * (1 + 1e-12)
        gaps.append(bound - step)
    assert min(gaps) < 0.5 * bound  # the bound is nearly attained, so the test can fail


def test_vrmomentum_without_gate_is_ema_momentum():
    net = _mlp(torch.float64)
    p0 = [p.detach().clone() for p in net.parameters()]
    opt = VRMomentum(net.parameters(), lr=0.1, beta=0.8, beta3=0.0)
    v = [torch.zeros_like(p) for p in p0]
    for x, y in _batches(5, torch.float64):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        v = [0.8 * vi + 0.2 * p.grad for vi, p in zip(v, net.parameters(), strict=True)]
        p0 = [q - 0.1 * vi for q, vi in zip(p0, v, strict=True)]
        opt.step()
    for p, q in zip(net.parameters(), p0, strict=True):
        assert torch.allclose(p.detach(), q, atol=1e-12)


# --- Experiment A: the edge of stability ------------------------------------------------------

def test_edge_of_stability_predictions():
    r = [0.5, 1.1, 2.0, 19.0, 21.0]
    plain = vr.vr_momentum_quadratic(r, beta3=0.0, steps=3000)
    assert plain["diverged"].tolist() == [False, True, True, True, True]
    for beta3 in (1.0, 10.0):
        run = vr.vr_momentum_quadratic(r, beta3=beta3, steps=3000)
        assert run["diverged"].tolist() == [False, False, False, False, True]
        tail = run["v"][-1000:, 1:3]
        vrms = np.sqrt(np.mean(tail**2, axis=0))
        assert np.allclose(vrms, vr.edge_velocity([1.1, 2.0], beta3), rtol=0.1)
        assert np.allclose(np.mean(run["ratio"][-1000:, 1:3], axis=0), 1.0, atol=0.02)


def test_two_step_orbit_is_exact():
    """vradam-eq-edge: on the symmetric orbit (1 < r <= 2) eta_t h = B and v_t^2 = (r-1)/beta3 at
    every step; on the asymmetric one (2 < r < ~2.25) the mean of v^2 is still exact and the mean
    gate is r/2. Both attract: started next to them the run stays on them."""
    for beta3 in (1.0, 10.0):
        r = np.array([1.1, 1.5, 1.9, 2.1, 2.2])
        x1, v1 = vr.two_cycle(r, beta3=beta3)
        run = vr.vr_momentum_quadratic(r, beta3=beta3, x0=x1 * (1 + 1e-6), v0=v1, steps=3000)
        v, gate = run["v"][-200:], run["ratio"][-200:]
        assert np.allclose(np.mean(v**2, axis=0), (r - 1) / beta3, rtol=1e-9)
        assert np.allclose(np.mean(gate, axis=0), np.where(r <= 2, 1.0, r / 2), rtol=1e-9)
        symmetric = r <= 2
        assert np.allclose(np.abs(v[:, symmetric]), vr.edge_velocity(r[symmetric], beta3), rtol=1e-9)
    # past r ~ 2.25 the orbit period-doubles: started next to it, the run leaves it
    x1, v1 = vr.two_cycle([2.5])
    run = vr.vr_momentum_quadratic([2.5], x0=x1 * (1 + 1e-6), v0=v1, steps=3000)
    assert np.sqrt(np.mean(run["v"][-500:] ** 2)) > 1.5 * vr.edge_velocity(2.5, 1.0)


def test_two_cycle_rejects_r_below_edge():
    with pytest.raises(ValueError, match="r must be > 1"):
        vr.two_cycle(0.9)


def test_stability_limit_matches_eigenvalues():
    beta = 0.9
    big_b = vr.stability_limit(beta)
    assert big_b == pytest.approx(38.0)
    for e, stable in ((0.99 * big_b, True), (1.01 * big_b, False)):
        a = np.array([[1 - e * (1 - beta), -e * beta], [1 - beta, beta]])
        assert (np.abs(np.linalg.eigvals(a)).max() < 1) == stable


def test_momentum_matrix_determinant_trace_and_non_normality():
    beta = 0.9
    for e in (1.0, 10.0, 30.0):
        a = vr.momentum_matrix(e, beta)
        assert np.linalg.det(a) == pytest.approx(beta)
        assert np.trace(a) == pytest.approx(1 + beta - e * (1 - beta))
        assert np.abs(np.linalg.eigvals(a)).max() < 1          # stable ...
    assert np.linalg.norm(vr.momentum_matrix(30.0, beta), 2) > 1  # ... but not a contraction
    # one step of VR-momentum with the gate switched off is A(e) on (x, v / h)
    h, eta = 2.0, 5.0
    run = vr.vr_momentum_quadratic([eta * h / vr.stability_limit(beta)], beta3=0.0, h=h, steps=1,
                                   x0=0.7, v0=0.3 * h)
    z = vr.momentum_matrix(eta * h, beta) @ np.array([0.7, 0.3])
    assert run["x"][0, 0] == pytest.approx(z[0]) and run["v"][0, 0] / h == pytest.approx(z[1])


def test_switching_radius():
    assert vr.switching_radius(0.3) == pytest.approx(math.sqrt(0.9), rel=1e-6)
    assert vr.switching_radius(0.9) > 1.0
    with pytest.raises(ValueError, match="c"):
        vr.switching_radius(-1.0)


# --- package plumbing ---------------------------------------------------------------------------

def test_lazy_import_does_not_import_torch():
    code = ("import sys, iclr_lab.optimizers as o; assert 'torch' not in sys.modules; "
            "assert 'VRAdam' in dir(o); from iclr_lab.optimizers import VRAdam; "
            "assert 'torch' in sys.modules; print(VRAdam.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "VRAdam"
    with pytest.raises(AttributeError, match="NoSuchOptimizer"):
        import iclr_lab.optimizers as o

        o.NoSuchOptimizer  # noqa: B018


def test_explorer_recomputes():
    w = vr.explorer()
    first = w.result.to_dict()
    w.children[0].value = 21.0
    second = w.result.to_dict()
    assert first != second
    assert "vconcat" in second


def test_calibration_pilot_and_initial_gate():
    """The pilot's mean P_t, recomputed independently from torch AdamW's own buffer, and what the
    calibrated gate then does: it starts well above 1/(1+kappa) (the raw buffer is small at first),
    passes below it within a few dozen steps, and never goes below the floor 1/(1+alpha1)."""
    from iclr_lab.core.datasets import digits
    from iclr_lab.core.nn import mlp, train_classifier
    from iclr_lab.optimizers.vradam.experiments import LR_CUTOFF, WEIGHT_DECAY

    data = digits(seed=0)
    kappa = 10.0
    beta3, mean_p = vr.calibrate_beta3(data, seed=0, kappa=kappa)
    torch.manual_seed(0)
    model = mlp([data.n_features, 128, 128, data.n_classes])
    adamw = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=WEIGHT_DECAY)
    norms = []

    def record(_: int) -> dict:
        norms.append(sum(float(adamw.state[p]["exp_avg"].double().pow(2).sum())
                         for p in model.parameters()))
        return {}

    train_classifier(model, adamw, data, steps=20, eval_every=20, seed=0, on_step=record)
    assert mean_p == pytest.approx(float(np.mean(norms)), rel=1e-5)
    assert beta3 == pytest.approx(kappa / mean_p)

    _, gates = vr.train_digits("VRAdam (calibrated)", 1e-3, 0, steps=60, beta3=beta3, data=data)
    assert gates[0] > 0.5                       # not 1/(1+kappa): the buffer holds (1-beta1) g
    assert gates.min() < 1 / (1 + kappa)        # P_t outgrows the pilot's mean
    assert gates.min() >= 1 / (1 + LR_CUTOFF) - 1e-12


def test_rate_loss_grad_matches_autograd():
    from iclr_lab.optimizers.vradam.experiments import RATE_PENALTY, _loss_grad

    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 6, generator=gen), torch.randint(0, 4, (40,), generator=gen)
    w = torch.randn(4, 6, generator=gen, requires_grad=True)
    b = torch.randn(4, generator=gen, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(x @ w.T + b, y) + RATE_PENALTY * sum(
        (u * u / (1 + u * u)).sum() for u in (w, b))
    loss.backward()
    gw, gb = _loss_grad(w.detach(), b.detach(), x, torch.nn.functional.one_hot(y, 4).float())
    assert torch.allclose(gw, w.grad, atol=1e-6) and torch.allclose(gb, b.grad, atol=1e-6)


@pytest.fixture(scope="module")
def smoke_report():
    return vr.reproduce("smoke")


def test_chapter_glues_only_known_numbers(smoke_report):
    """Every {glue:text} key in the chapter is a claim, a number from ``numbers()`` or a glued chart,
    so the prose cannot quote a value the report does not produce."""
    import re
    from pathlib import Path

    report = smoke_report
    nums = vr.numbers(report)
    text = (Path(__file__).parents[2] / "book/optimizers/vradam.md").read_text()
    keys = set(re.findall(r"\{glue:text\}`([A-Za-z0-9_]+)", text))
    from iclr_lab.core.book import claim_keys

    known = set().union(*(claim_keys(c) for c in report.claims)) | set(nums)
    assert keys, "the chapter glues no number"
    assert keys <= known, sorted(keys - known)
    assert set(re.findall(r"\{glue:\} ([A-Za-z0-9_]+)", text)) <= {"scorecard", "training_slider"}
    assert all(np.isfinite(v) for k, v in nums.items() if k in keys and not k.startswith("rest_"))


def test_rate_run_schedule_and_gate():
    from iclr_lab.core.datasets import digits

    data = digits(seed=0)
    plain = vr.rate_run("VRAdam", 0, steps=40, beta3=0.0, every=20, data=data)
    adamw = vr.rate_run("AdamW", 0, steps=40, every=20, data=data)
    gated = vr.rate_run("VRAdam", 0, steps=40, beta3=1e4, every=20, data=data)
    # beta3 = 0 is AdamW, schedule included (up to the rounding of AdamW's two CPU code paths)
    assert np.allclose(plain["grad_sq"], adamw["grad_sq"], rtol=1e-5, atol=0)
    assert not np.allclose(gated["grad_sq"], adamw["grad_sq"], rtol=1e-3, atol=0)
    assert plain["step"].tolist() == [0, 20]
    assert plain["grad_sq"][1] < plain["grad_sq"][0]


def test_charts_colour_each_method_the_same_way(smoke_report):
    """One colour per method in every chart: wherever a series of ``COLORS`` appears in a colour
    scale, it has its own colour."""
    import json

    seen: dict[str, set[str]] = {}

    def walk(node):
        if isinstance(node, dict):
            scale = node.get("scale")
            if isinstance(scale, dict) and "domain" in scale and "range" in scale \
                    and isinstance(scale["range"], list):
                for name, colour in zip(scale["domain"], scale["range"], strict=False):
                    if name in vr.COLORS:
                        seen.setdefault(name, set()).add(colour)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for chart in smoke_report.charts().values():
        walk(json.loads(chart.to_json()))
    assert {"VRAdam (calibrated)", "AdamW", "AdamW (matched rate)"} <= set(seen)
    assert all(colours == {vr.COLORS[name]} for name, colours in seen.items()), seen
