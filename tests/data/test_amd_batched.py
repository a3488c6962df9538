"""The AMD chapter's batched runs equal the serial ones, to the bit.

``reproduce`` runs its four distillations as one batch of students (:func:`distill_many`) and
trains the models of its 13 evaluations together (:func:`evaluate_sets`); the experts and the
evaluation models take their SGD steps layer by layer, in place, and the outer optimiser is a
written-out Adam. Each test here checks one of these against the plain computation on a tiny
problem: the chapter's numbers must not depend on how many runs share a batch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr_lab.core.scales import seed_everything
from iclr_lab.data.amd import (
    contrastive_grad,
    contrastive_loss,
    distill,
    distill_many,
    evaluate_set,
    evaluate_sets,
    init_params,
    kmeans_prototypes,
    matching_loss,
    paired_digits,
    random_subset,
    rate_sweep,
    stratified_subset,
    train_experts,
    train_on_set,
    train_on_sets,
)
from iclr_lab.data.amd.method import _Adam, _sgd_step

KW = {"n_pairs": 8, "iterations": 6, "syn_steps": 3, "expert_epochs": 2, "sync_range": 2}
RUNS = [("mtt", "random", 1), ("mtt", "kmeans", 1), ("amd", "random", 2), ("amd", "kmeans", 0)]


@pytest.fixture(scope="module")
def data():
    seed_everything(0)
    return paired_digits(0)


@pytest.fixture(scope="module")
def experts(data):
    return train_experts(data, n_experts=2, epochs=6, seed=0)


def _same(a, b):
    assert torch.equal(a.images, b.images)
    assert torch.equal(a.texts, b.texts)
    assert (a.lr_v, a.lr_l, a.ranges) == (b.lr_v, b.lr_l, b.ranges)
    assert np.array_equal(a.init_rows, b.init_rows)
    assert np.array_equal(a.losses, b.losses)


def _reference_distill(data, experts, method, init, seed, n_pairs, iterations, syn_steps,
                       expert_epochs, sync_range):
    """The single-run loop as it was before batching: one student, gradients of the flat
    parameters, torch.optim.Adam."""
    from iclr_lab.data.amd import async_ranges

    m = expert_epochs
    if method == "mtt":
        r_v = r_l = sync_range
    else:
        rr = async_ranges(experts, m)
        r_v, r_l = int(rr["R_V"]), int(rr["R_L"])
    rows = (kmeans_prototypes(data, experts.v[0, -1], experts.l[0, -1], n_pairs, seed)
            if init == "kmeans" else random_subset(data, n_pairs, seed))
    gen = torch.Generator().manual_seed(seed)
    images = torch.from_numpy(data.images[rows]).clone().requires_grad_(True)
    texts = torch.from_numpy(data.texts[rows]).clone().requires_grad_(True)
    log_lr = torch.full((2,), math.log(0.1), requires_grad=True)
    opt = torch.optim.Adam([images, texts, log_lr], lr=1e-2)
    order = torch.randperm(experts.n_experts * ((iterations // experts.n_experts) + 1),
                           generator=gen) % experts.n_experts
    losses = np.empty(iterations)
    for it in range(iterations):
        e = int(order[it])
        t_v = int(torch.randint(0, r_v + 1, (1,), generator=gen))
        t_l = t_v if method == "mtt" else int(torch.randint(0, r_l + 1, (1,), generator=gen))
        start_v, start_l = experts.v[e, t_v], experts.l[e, t_l]
        th_v, th_l = start_v[None].clone(), start_l[None].clone()
        eta = log_lr.exp()
        for _ in range(syn_steps):
            if not th_v.requires_grad:
                th_v.requires_grad_(True)
                th_l.requires_grad_(True)
            gv, gl = torch.autograd.grad(contrastive_loss(th_v, th_l, images, texts),
                                         (th_v, th_l), create_graph=True)
            th_v, th_l = th_v - eta[0] * gv, th_l - eta[1] * gl
        loss = matching_loss(th_v[0], th_l[0], start_v, start_l, experts.v[e, t_v + m],
                             experts.l[e, t_l + m])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses[it] = float(loss.detach())
    return images.detach(), texts.detach(), log_lr.detach().exp(), losses


def test_a_single_distillation_equals_the_unbatched_loop_to_float_rounding(data, experts):
    for method, init, seed in RUNS[1:3]:
        res = distill(data, experts, method=method, init=init, seed=seed, **KW)
        images, texts, lrs, losses = _reference_distill(data, experts, method, init, seed, **KW)
        # to float rounding: bit for bit where the CPU's kernels for the two code paths round
        # alike, which an AVX-512 AMD EPYC's do not (it differs by ~1e-7 there)
        torch.testing.assert_close(res.images, images, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(res.texts, texts, rtol=1e-5, atol=1e-6)
        assert (res.lr_v, res.lr_l) == pytest.approx(tuple(float(v) for v in lrs), rel=1e-5)
        np.testing.assert_allclose(res.losses, losses, rtol=1e-5, atol=1e-7)


def test_batched_distillations_equal_the_single_runs(data, experts):
    batched = distill_many(data, experts, RUNS, **KW)
    assert len(batched) == len(RUNS)
    for (method, init, seed), res in zip(RUNS, batched, strict=True):
        _same(res, distill(data, experts, method=method, init=init, seed=seed, **KW))


def test_given_initial_rows_are_the_rows_the_init_would_pick(data, experts):
    rows = [random_subset(data, 8, 1), None]
    a = distill_many(data, experts, RUNS[:2], initial_rows=rows, **KW)
    b = distill_many(data, experts, RUNS[:2], **KW)
    for x, y in zip(a, b, strict=True):
        _same(x, y)
    with pytest.raises(ValueError, match="initial_rows"):
        distill_many(data, experts, RUNS[:2], initial_rows=rows[:1], **KW)
    with pytest.raises(ValueError, match="runs"):
        distill_many(data, experts, [], **KW)


def test_batched_evaluations_equal_the_single_ones(data, experts):
    sets = []
    for s, pick in enumerate((random_subset, stratified_subset, random_subset)):
        rows = pick(data, 12, s)
        sets.append((torch.from_numpy(data.images[rows]), torch.from_numpy(data.texts[rows])))
    rows = random_subset(data, 7, 5)  # another size: trained in its own group
    sets.append((torch.from_numpy(data.images[rows]), torch.from_numpy(data.texts[rows])))
    kw = {"lrs": (0.1, 1.0, 30.0), "n_inits": 2, "steps": 15, "seed": 3}  # 30 diverges
    batched = evaluate_sets(data, sets, **kw)
    for (x, t), res in zip(sets, batched, strict=True):
        assert res == evaluate_set(data, x, t, **kw)


def test_stacked_training_equals_training_each_set(data):
    sets = [(torch.rand(6, 64, generator=torch.Generator().manual_seed(s)),
             torch.randn(6, 32, generator=torch.Generator().manual_seed(s + 9))) for s in range(3)]
    v, lt = train_on_sets(sets, (0.1, 0.5), 12, torch.Generator().manual_seed(4), n_inits=2)
    assert v.shape[0] == lt.shape[0] == 12
    for k, (x, t) in enumerate(sets):
        v1, l1 = train_on_set(x, t, (0.1, 0.5), 12, torch.Generator().manual_seed(4), n_inits=2)
        assert torch.equal(v[4 * k:4 * k + 4], v1)
        assert torch.equal(lt[4 * k:4 * k + 4], l1)


def test_layerwise_gradient_and_step_equal_the_flat_ones(data):
    gen = torch.Generator().manual_seed(0)
    theta_v, theta_l = init_params(5, gen)
    x, t = (z[:10] for z in data.tensors("train"))
    theta_v.requires_grad_(True)
    theta_l.requires_grad_(True)
    flat = torch.autograd.grad(contrastive_loss(theta_v, theta_l, x, t), (theta_v, theta_l))
    mine = contrastive_grad(theta_v, theta_l, x, t)
    assert all(torch.equal(a, b) for a, b in zip(flat, mine, strict=True))
    lr = torch.tensor([0.1, 0.3, 1.0, 3.0, 0.01])[:, None]
    want = ((theta_v - lr * flat[0]).detach(), (theta_l - 0.2 * flat[1]).detach())
    v, lt = theta_v.detach().clone(), theta_l.detach().clone()
    _sgd_step(v, lt, x, t, lr, 0.2)
    assert torch.equal(v, want[0])
    assert torch.equal(lt, want[1])


def test_written_out_adam_equals_torch_adam():
    gen = torch.Generator().manual_seed(0)
    shapes = ((20, 64), (20, 32), (2,), (7,))
    a = [torch.randn(s, generator=gen).requires_grad_(True) for s in shapes]
    b = [p.detach().clone().requires_grad_(True) for p in a]
    ours, theirs = _Adam(a, lr=1e-2), torch.optim.Adam(b, lr=1e-2)
    for _ in range(25):
        grads = [torch.randn(s, generator=gen) * 10 ** float(torch.randint(-6, 2, (1,),
                                                                            generator=gen))
                 for s in shapes]
        for opt, params in ((ours, a), (theirs, b)):
            opt.zero_grad()
            for p, g in zip(params, grads, strict=True):
                p.grad = g.clone()
            opt.step()
        assert all(torch.equal(p, q) for p, q in zip(a, b, strict=True))


def test_the_rate_sweep_equals_one_evaluation_per_rate(data):
    rows = random_subset(data, 10, 2)
    x, t = torch.from_numpy(data.images[rows]), torch.from_numpy(data.texts[rows])
    kw = {"n_inits": 2, "steps": 12, "seed": 1}
    lrs = (0.03, 0.3, 30.0)  # 30 diverges: NaN recalls, as a one-rate evaluation gives
    sweep = rate_sweep(data, x, t, lrs=lrs, **kw)
    for lr, res in zip(lrs, sweep, strict=True):
        one = evaluate_set(data, x, t, lrs=(lr,), **kw)
        assert res.keys() == one.keys()
        assert all(res[k] == one[k] or (math.isnan(res[k]) and math.isnan(one[k])) for k in one)


def test_distillation_checks_a_diverged_student_at_every_inner_step(data, experts):
    # the checks moved out of the inner loop where their answer cannot change; a student that
    # diverges inside it is still refused there, with contrastive_grad's message
    with pytest.raises(ValueError, match="theta_v must be finite"):
        distill(data, experts, n_pairs=5, iterations=3, syn_steps=3, lr_student=1e30)


def test_runs_with_their_own_ranges_batch_with_the_others(data, experts):
    kw = {k: v for k, v in KW.items() if k != "sync_range"}
    both = distill_many(data, experts, [("amd", "random", 1), ("mtt", "random", 2),
                                        ("amd", "kmeans", 3, (1, 3))],
                        sync_range=2, ranges=(3, 1), **kw)
    first = distill_many(data, experts, [("amd", "random", 1), ("mtt", "random", 2)],
                         sync_range=2, ranges=(3, 1), **kw)
    alone = distill_many(data, experts, [("amd", "kmeans", 3)], ranges=(1, 3), **kw)
    for a, b in zip(both, first + alone, strict=True):
        _same(a, b)
    assert both[2].ranges == (1, 3)
    with pytest.raises(ValueError, match="only an 'amd' run"):
        distill_many(data, experts, [("mtt", "random", 0, (1, 1))], **kw)
    with pytest.raises(ValueError, match=r"takes its own ranges as \(R_V, R_L\)"):
        distill_many(data, experts, [("amd", "random", 0, 1)], **kw)


def test_a_sync_run_with_its_own_range_batches_with_the_others(data, experts):
    # the premise experiment runs sync over 0..R_V and sync over 0..R_L in one batch
    kw = {k: v for k, v in KW.items() if k != "sync_range"}
    both = distill_many(data, experts, [("mtt", "random", 2), ("mtt", "random", 2, 1)],
                        sync_range=3, **kw)
    long = distill_many(data, experts, [("mtt", "random", 2)], sync_range=3, **kw)
    short = distill_many(data, experts, [("mtt", "random", 2)], sync_range=1, **kw)
    for a, b in zip(both, long + short, strict=True):
        _same(a, b)
    assert both[0].ranges == (3, 3) and both[1].ranges == (1, 1)
    with pytest.raises(ValueError, match="sync range must be an integer in"):
        distill_many(data, experts, [("mtt", "random", 0, 99)], **kw)
