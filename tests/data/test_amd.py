"""Tests for iclr_lab.data.amd: the paired data, the retrieval metrics, the dual encoder, expert
trajectories, SPM prototypes, AMD's range rule, trajectory matching and the chapter's experiments."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr_lab.core.report import Report
from iclr_lab.data.amd import (
    LR_GRID,
    VOCAB,
    Trajectories,
    async_ranges,
    contrastive_grad,
    contrastive_loss,
    distill,
    encode,
    evaluate_set,
    evaluate_sets,
    explorer,
    init_params,
    kmeans_prototypes,
    matching_loss,
    paired_digits,
    random_subset,
    reproduce,
    retrieval_recall,
    stratified_subset,
    text_encoder,
    train_experts,
    train_on_set,
)


@pytest.fixture(scope="module")
def data():
    return paired_digits(0)


@pytest.fixture(scope="module")
def experts(data):
    return train_experts(data, n_experts=2, epochs=4, seed=0)


# ------------------------------------------------------------------ data


def test_captions_name_the_digit_and_use_49_words(data):
    assert len(VOCAB) == len(set(VOCAB)) == 49
    assert data.tokens.shape == (1797, 14)
    assert (data.tokens[:, 0] == data.labels).all()  # the first word is the digit
    # every attribute word comes from its own group of three
    for k in range(1, 14):
        lo = 10 + 3 * (k - 1)
        assert ((data.tokens[:, k] >= lo) & (data.tokens[:, k] < lo + 3)).all()
    assert data.caption(0).split()[0] == VOCAB[data.labels[0]]


def test_split_is_a_disjoint_partition_fixed_by_the_seed(data):
    parts = np.concatenate([data.train, data.val, data.test])
    assert np.array_equal(np.sort(parts), np.arange(1797))
    assert (len(data.train), len(data.val), len(data.test)) == (1097, 200, 500)
    assert np.array_equal(paired_digits(0).test, data.test)
    assert not np.array_equal(paired_digits(1).test, data.test)


def test_text_encoder_is_frozen_and_standardised(data):
    assert np.array_equal(paired_digits(3).texts, data.texts)  # same encoder at every seed
    np.testing.assert_allclose(data.texts.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(data.texts.std(0), 1, atol=1e-4)
    same = (data.tokens[:, None] == data.tokens[None, :50]).all(-1)  # identical captions ...
    i, j = np.argwhere(same & ~np.eye(1797, 50, dtype=bool))[0]
    assert np.array_equal(data.texts[i], data.texts[j])  # ... have identical embeddings


# ------------------------------------------------------------------ retrieval


def test_recall_of_a_perfect_and_of_a_reversed_pairing():
    e = torch.eye(12)
    r = retrieval_recall(e, e)
    assert all(v == 100.0 for k, v in r.items() if k != "RSUM") and r["RSUM"] == 600.0
    # captions shifted by one: image i's own caption (i) ranks second behind caption i+1
    v = torch.nn.functional.normalize(torch.eye(12) + 2.0 * torch.roll(torch.eye(12), 1, 1), dim=1)
    r = retrieval_recall(v, torch.eye(12))
    assert r["TR@1"] == 0.0 and r["TR@5"] == 100.0
    assert r["IR@1"] == 0.0 and r["IR@5"] == 100.0


def test_recall_directions_are_not_swapped():
    # image 0 matches every caption best: captions query images (IR) always find image 0 first,
    # so only caption 0 hits at K = 1; images query captions (TR) each find their own caption
    img = torch.tensor([[2.0, 2.0, 2.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    txt = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    r = retrieval_recall(img, txt, ks=(1,))
    assert r["IR@1"] == pytest.approx(100 / 3)
    assert r["TR@1"] == pytest.approx(100.0)


def test_a_tie_with_an_identical_caption_counts_as_a_hit():
    img = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    txt = torch.tensor([[1.0, 0.0], [1.0, 0.0]])  # two identical captions
    # each image ties its own caption with the other copy: both are hits (an argsort would
    # rank one copy second and count a miss)
    assert retrieval_recall(img, txt, ks=(1,))["TR@1"] == 100.0
    assert retrieval_recall(img, torch.tensor([[1.0, 0.0], [0.0, 1.0]]), ks=(1,))["TR@1"] == 100.0


def test_recall_rejects_bad_shapes_and_k():
    with pytest.raises(ValueError, match="same shape"):
        retrieval_recall(torch.zeros(3, 2), torch.zeros(4, 2))
    with pytest.raises(ValueError, match="k must be"):
        retrieval_recall(torch.eye(3), torch.eye(3), ks=(5,))
    with pytest.raises(ValueError, match="finite"):
        retrieval_recall(torch.full((3, 3), float("nan")), torch.eye(3))


# ------------------------------------------------------------------ the dual encoder


def test_batched_models_get_their_own_gradients(data):
    gen = torch.Generator().manual_seed(0)
    tv, tl = init_params(3, gen)
    tv.requires_grad_(True)
    tl.requires_grad_(True)
    x, t = data.tensors("train")
    gv, _ = torch.autograd.grad(contrastive_loss(tv, tl, x[:16], t[:16]), (tv, tl))
    one = tv[1:2].detach().clone().requires_grad_(True)
    g1, = torch.autograd.grad(contrastive_loss(one, tl[1:2].detach(), x[:16], t[:16]), (one,))
    torch.testing.assert_close(gv[1:2], g1)


def test_infonce_of_perfectly_aligned_embeddings_is_small_and_of_random_is_log_n():
    n = 8
    # a text branch that is the identity and images equal to the texts' first 32 coordinates
    # cannot be built through the MLP, so check the loss at initialisation instead: near log n
    gen = torch.Generator().manual_seed(1)
    tv, tl = init_params(1, gen)
    x, t = torch.rand(n, 64, generator=gen), torch.randn(n, 32, generator=gen)
    loss = float(contrastive_loss(tv * 0, tl, x, t))  # image embeddings all equal: uniform logits
    assert loss == pytest.approx(np.log(n), rel=1e-5)


def test_experts_learn_and_record_every_epoch(data, experts):
    assert experts.v.shape[:2] == experts.l.shape[:2] == (2, 5)
    x, t = data.tensors("test")
    with torch.no_grad():
        start = float(contrastive_loss(experts.v[:, 0], experts.l[:, 0], x, t))
        end = float(contrastive_loss(experts.v[:, -1], experts.l[:, -1], x, t))
    assert end < 0.7 * start


def test_training_on_a_set_fits_it():
    gen = torch.Generator().manual_seed(0)
    x, t = torch.rand(10, 64, generator=gen), torch.randn(10, 32, generator=gen)
    tv0, tl0 = init_params(1, torch.Generator().manual_seed(5))
    tv, tl = train_on_set(x, t, [1.0], 200, torch.Generator().manual_seed(5))
    assert float(contrastive_loss(tv, tl, x, t)) < 0.5 * float(contrastive_loss(tv0, tl0, x, t))


def test_evaluation_keeps_the_rate_with_the_best_validation_rsum(data):
    rows = random_subset(data, 10, 0)
    imgs, txts = torch.from_numpy(data.images[rows]), torch.from_numpy(data.texts[rows])
    out = evaluate_set(data, imgs, txts, lrs=(0.01, 1.0), n_inits=1, steps=30)
    assert out["lr"] in (0.01, 1.0)
    other = evaluate_set(data, imgs, txts, lrs=(0.01,) if out["lr"] == 1.0 else (1.0,),
                         n_inits=1, steps=30)
    assert out["val_RSUM"] >= other["val_RSUM"]
    assert 0 <= out["IR@1"] <= 100 and out["RSUM"] == pytest.approx(
        sum(out[k] for k in ("IR@1", "IR@5", "IR@10", "TR@1", "TR@5", "TR@10")))
    assert set(LR_GRID) >= {0.1, 1.0}


# ------------------------------------------------------------------ coresets and SPM


def test_coresets_are_distinct_training_pairs(data, experts):
    for rows in (random_subset(data, 20, 1), stratified_subset(data, 20, 1),
                 kmeans_prototypes(data, experts.v[0, -1], experts.l[0, -1], 20, 1)):
        assert len(rows) == len(set(rows)) == 20
        assert np.isin(rows, data.train).all()
    counts = np.bincount(data.labels[stratified_subset(data, 23, 2)], minlength=10)
    assert counts.min() >= 2 and counts.max() <= 3 and counts.sum() == 23


def test_spm_with_k_equal_n_returns_the_whole_training_set(data, experts):
    small = paired_digits(0)
    object.__setattr__(small, "train", small.train[:40])
    rows = kmeans_prototypes(small, experts.v[0, -1], experts.l[0, -1], 40, 0)
    assert np.array_equal(rows, np.sort(small.train))


def test_spm_covers_the_feature_space_better_than_random(data, experts):
    from iclr_lab.data.amd.method import encode

    x, t = data.tensors("train")
    with torch.no_grad():
        v, lt = encode(experts.v[0, -1:], experts.l[0, -1:], x, t)
    f = torch.cat([v[0], lt[0]], 1)
    pos = {int(r): i for i, r in enumerate(data.train)}

    def coverage(rows):
        return float(torch.cdist(f, f[[pos[int(r)] for r in rows]]).min(1).values.mean())

    km = kmeans_prototypes(data, experts.v[0, -1], experts.l[0, -1], 20, 0)
    rand = np.mean([coverage(random_subset(data, 20, s)) for s in range(5)])
    assert coverage(km) < rand


# ------------------------------------------------------------------ AMD's ranges


def _fake_trajectories(move_v, move_l):
    """Two identical experts moving along one coordinate by the given per-epoch steps."""
    def path(moves, dim):
        steps = np.concatenate([[0.0], np.cumsum(moves)])
        th = torch.zeros(2, len(steps), dim)
        th[:, :, 0] = torch.tensor(steps, dtype=torch.float32)
        return th
    return Trajectories(path(move_v, 4), path(move_l, 3))


def test_the_ratio_rule_as_written():
    # ratio r_t = t (image keeps moving while text slows): median 3.5 of 1..6 (wait: E=6, M=2)
    mv = np.ones(6)
    ml = 1.0 / np.arange(1, 7)
    rr = async_ranges(_fake_trajectories(mv, ml), expert_epochs=2)
    np.testing.assert_allclose(rr["ratio"], np.arange(1, 7), rtol=1e-5)
    # R_V = min{t : r_t > 3.5} = 4, R_L = max{t : r_t <= 3.5} = 3: the rule orders them
    assert (rr["R_V_rule"], rr["R_L_rule"], rr["rule"]) == (4, 3, "MMD rule")
    assert (rr["R_V"], rr["R_L"]) == (4, 3)


def test_the_fallback_when_the_rule_inverts_the_ranges():
    ml = np.array([1.0, 0.8, 0.6, 0.4, 0.3, 0.2])  # text halves at epoch 4
    mv = ml * np.array([3.0, 1.0, 1.0, 1.0, 1.0, 1.0])  # ratio falls: the rule gives R_V < R_L
    rr = async_ranges(_fake_trajectories(mv, ml), expert_epochs=2)
    assert rr["rule"] == "fallback" and rr["R_V_rule"] <= rr["R_L_rule"]
    assert (rr["R_V"], rr["R_L"]) == (4, 4)  # R_V = E - M = 4; R_L = first epoch below half = 4


# ------------------------------------------------------------------ trajectory matching


def test_matching_loss_is_two_when_the_student_does_not_move(data, experts):
    res = distill(data, experts, n_pairs=5, iterations=4, syn_steps=0, sync_range=2)
    np.testing.assert_allclose(res.losses, 2.0, rtol=1e-6)
    a, b = torch.randn(7), torch.randn(7)
    assert float(matching_loss(b, a, a, a, b, torch.zeros(7))) == pytest.approx(1.0)


def test_amd_with_both_ranges_at_zero_is_synchronous_matching(data, experts):
    kw = dict(n_pairs=6, iterations=5, syn_steps=3, seed=4)
    sync = distill(data, experts, method="mtt", sync_range=0, **kw)
    amd = distill(data, experts, method="amd", ranges=(0, 0), **kw)
    torch.testing.assert_close(sync.images, amd.images)
    np.testing.assert_array_equal(sync.losses, amd.losses)


def test_distillation_reduces_the_matching_loss(data, experts):
    res = distill(data, experts, n_pairs=10, iterations=40, syn_steps=4, sync_range=0, seed=1,
                  lr_data=3e-2)
    assert res.losses[-10:].mean() < res.losses[:10].mean()
    assert res.lr_v > 0 and res.lr_l > 0
    assert not torch.equal(res.images, torch.from_numpy(data.images[res.init_rows]))


def test_distill_starts_from_the_requested_initialisation(data, experts):
    res = distill(data, experts, n_pairs=8, iterations=1, syn_steps=0, init="kmeans", sync_range=1)
    km = kmeans_prototypes(data, experts.v[0, -1], experts.l[0, -1], 8, 0)
    np.testing.assert_array_equal(res.init_rows, km)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n_pairs": 0}, "n_pairs"),
    ({"method": "lors"}, "method"),
    ({"init": "herding"}, "init"),
    ({"iterations": 0}, "iterations"),
    ({"expert_epochs": 4}, "expert_epochs"),
    ({"lr_data": 0.0}, "lr_data"),
    ({"method": "amd", "ranges": (3, 0)}, "ranges"),
    ({"seed": -1}, "seed"),
])
def test_distill_rejects_bad_arguments(data, experts, kwargs, match):
    with pytest.raises(ValueError, match=match):
        distill(data, experts, **kwargs)


def test_other_bad_arguments_are_named(data):
    with pytest.raises(ValueError, match="n_pairs"):
        random_subset(data, 0)
    with pytest.raises(ValueError, match="n_pairs"):
        stratified_subset(data, 5000)
    with pytest.raises(ValueError, match="lr"):
        train_experts(data, lr=-1.0)
    with pytest.raises(ValueError, match="part"):
        data.tensors("holdout")
    with pytest.raises(ValueError, match="scale"):
        reproduce(scale="huge")
    with pytest.raises(TypeError, match="n_pairs"):
        random_subset(data, 2.5)


def test_seeds_are_integers_everywhere_never_none(data, experts):
    # None would be numpy's and torch's "fresh entropy": a run that cannot be repeated
    for call in (lambda s: random_subset(data, 4, s), lambda s: stratified_subset(data, 4, s),
                 lambda s: paired_digits(s), lambda s: train_experts(data, 1, 1, seed=s),
                 lambda s: kmeans_prototypes(data, experts.v[0, -1], experts.l[0, -1], 4, s),
                 lambda s: distill(data, experts, n_pairs=4, iterations=1, syn_steps=1, seed=s)):
        with pytest.raises(TypeError, match="seed"):
            call(None)
        with pytest.raises(TypeError, match="seed"):
            call("0")
        with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 4294967295\]"):
            call(-1)


def test_encoder_inputs_are_checked_before_use(data):
    tv, tl = init_params(2, torch.Generator().manual_seed(0))
    x, t = data.tensors("val")
    with pytest.raises(ValueError, match="theta_v must be finite"):
        encode(torch.full_like(tv, float("nan")), tl, x, t)
    with pytest.raises(ValueError, match="theta_l must have shape"):
        encode(tv, tl.reshape(-1), x, t)
    with pytest.raises(ValueError, match="theta_v and theta_l must hold the same number"):
        contrastive_loss(tv, tl[:1], x, t)
    with pytest.raises(ValueError, match="images must not be empty"):
        contrastive_loss(tv, tl, x[:0], t)
    with pytest.raises(ValueError, match="images and texts must hold as many rows"):
        contrastive_loss(tv, tl, x[:5], t[:6])
    with pytest.raises(ValueError, match="texts must be finite"):
        contrastive_loss(tv, tl, x, torch.full_like(t, float("nan")))
    with pytest.raises(ValueError, match="theta_v must require grad"):
        contrastive_grad(tv, tl, x, t)
    with pytest.raises(ValueError, match="tokens must be finite"):
        text_encoder(np.full((3, 14), np.nan))
    with pytest.raises(TypeError, match="tokens must be integer word ids"):
        text_encoder(data.tokens[:3].astype(float))
    with pytest.raises(ValueError, match="tokens must be word ids"):
        text_encoder(np.full((3, 14), 49))
    with pytest.raises(ValueError, match="tokens must hold at least 2 captions"):
        text_encoder(data.tokens[:1])


def test_training_arguments_are_named_as_the_caller_passes_them(data):
    x, t = data.tensors("val")
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="n_inits"):  # was init_params' "n_models"
        train_on_set(x, t, [0.1], 1, gen, n_inits=0)
    with pytest.raises(ValueError, match="steps"):
        train_on_set(x, t, [0.1], -1, gen)
    with pytest.raises(TypeError, match="steps"):
        train_on_set(x, t, [0.1], 1.5, gen)
    with pytest.raises(ValueError, match="lrs"):
        train_on_set(x, t, [float("inf")], 1, gen)
    with pytest.raises(ValueError, match="images must have shape"):
        evaluate_set(data, x.reshape(-1), t, lrs=(0.1,), n_inits=1, steps=1)
    with pytest.raises(ValueError, match=r"sets\[1\] texts must be finite"):
        evaluate_sets(data, [(x, t), (x, torch.full_like(t, float("nan")))], steps=1)
    with pytest.raises(ValueError, match="student_v, start_v, target_v must share one shape"):
        matching_loss(torch.zeros(3), torch.zeros(2), torch.zeros(4), torch.zeros(2),
                      torch.zeros(3), torch.ones(2))
    with pytest.raises(ValueError, match="target_l must be finite"):
        matching_loss(torch.zeros(3), torch.zeros(2), torch.ones(3), torch.ones(2),
                      torch.zeros(3), torch.full((2,), float("nan")))


def test_explorer_chart_refuses_values_off_its_sliders_before_training():
    from iclr_lab.data.amd.experiments import _slider_value, explorer_chart

    for bad in (float("inf"), float("nan"), 0.0, 81.0):
        with pytest.raises(ValueError, match="pairs must be in"):
            explorer_chart(pairs=bad)
    with pytest.raises(TypeError, match="lr_text"):
        explorer_chart(lr_text="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"lr_text must be in \[0.01, 3\]"):
        explorer_chart(lr_text=-1.0)
    # a log slider's end is 10 ** log10(end), which may miss the end by a rounding error
    assert _slider_value("pairs", 80 * (1 + 1e-12), 5, 80) == 80
    assert _slider_value("lr_text", 0.01 * (1 - 1e-12), 0.01, 3.0) == 0.01


# ------------------------------------------------------------------ experiments


def test_smoke_report_has_the_grid_and_claims(smoke_report):
    r = smoke_report("amd", 0)
    assert isinstance(r, Report)
    names = [c.name for c in r.claims]
    assert names == ["pipeline", "kmeans_coreset", "distill_vs_random", "init_helps",
                     "text_first_premise", "async_gain_premise", "async_gain"]
    for c in r.claims:
        if c.kind == "paper":
            assert (c.control or c.no_control) and c.regime
    s = r.tables["summary"].set_index("set")
    claim = r.claim("kmeans_coreset")
    assert claim.measured == pytest.approx(s.loc["k-means coreset (SPM)", "RSUM"]
                                           / s.loc["random coreset", "RSUM"])
    assert {c.kind for c in r.claims} == {"sanity", "derivation", "paper"}
    assert r.claim("async_gain").source == "paper" and not r.claim("async_gain").expected
    rng = r.tables["ranges"].iloc[0]
    assert 0 <= rng["R_L"] and rng["R_V"] <= 6 - 2
    for chart in r.charts().values():
        chart.to_dict()


def test_premise_experiment_is_paired_and_sync_spans_the_image_range(smoke_report):
    from iclr_lab.data.amd.experiments import (
        PREMISE_ASYNC,
        PREMISE_SWAP,
        PREMISE_SYNC,
        PREMISE_SYNC_SHORT,
    )

    r = smoke_report("amd", 0)
    prem = r.tables["premise"]
    fast = r.tables["ranges_fast"].iloc[0]
    seeds = sorted(prem[prem.set == PREMISE_ASYNC].distill_seed)
    assert len(seeds) >= 3
    for name in (PREMISE_SYNC, PREMISE_SWAP, PREMISE_SYNC_SHORT):
        assert sorted(prem[prem.set == name].distill_seed) == seeds
    a, s, w, q = (prem[prem.set == n].iloc[0]
                  for n in (PREMISE_ASYNC, PREMISE_SYNC, PREMISE_SWAP, PREMISE_SYNC_SHORT))
    assert (a.R_V, a.R_L) == (fast.R_V, fast.R_L)
    assert (s.R_V, s.R_L) == (fast.R_V, fast.R_V)  # sync over 0..R_V: the same image range
    assert (w.R_V, w.R_L) == (fast.R_L, fast.R_V)
    assert (q.R_V, q.R_L) == (fast.R_L, fast.R_L)  # the control: no asynchrony, short range
    claim = r.claim("async_gain_premise")

    def ir1(name):
        return prem[prem.set == name].sort_values("distill_seed")["IR@1"].to_numpy()

    sync = ir1(PREMISE_SYNC)
    np.testing.assert_allclose(claim.per_seed, ir1(PREMISE_ASYNC) / sync)
    np.testing.assert_allclose(claim.control_per_seed, ir1(PREMISE_SYNC_SHORT) / sync)
    assert "0..R_L" in claim.control


def test_text_first_index_reads_which_branch_settles_first():
    from iclr_lab.data.amd.experiments import text_first_index

    data = paired_digits(0)
    one = train_experts(data, n_experts=2, epochs=6, seed=0)
    fast = train_experts(data, n_experts=2, epochs=6, lr_text=1.0, seed=0)
    assert text_first_index(fast) < 1.0
    assert text_first_index(fast) < text_first_index(one)


def test_explorer_redraws_when_a_control_moves():
    w = explorer()
    before = w.result.to_dict()
    w.children[0].value = 40
    assert w.result.to_dict() != before


def test_the_precomputed_pairs_table_has_every_set_and_budget():
    from iclr_lab.data.amd.experiments import CURVE_SETS, PAIRS_GRID, pairs_table, recall_vs_pairs

    table = pairs_table()
    assert sorted(map(tuple, table[["set", "pairs"]].to_numpy().tolist())) == sorted(
        (s, b) for s in CURVE_SETS for b in PAIRS_GRID)
    rsum = table[["IR@1", "IR@5", "IR@10", "TR@1", "TR@5", "TR@10"]].sum(axis=1)
    np.testing.assert_allclose(rsum, table["RSUM"], atol=0.05)
    fresh = recall_vs_pairs(pairs=(4,), scale="smoke", sets=("random coreset", "MTT-VL-style sync"))
    assert list(fresh.columns) == list(table.columns) and len(fresh) == 2


def test_the_explorer_text_rate_knob_moves_the_premise_panel():
    from iclr_lab.data.amd.experiments import explorer_chart

    slow = explorer_chart(lr_text=0.1).to_dict()["hconcat"][2]["title"]["subtitle"][0]
    fast = explorer_chart(lr_text=1.0).to_dict()["hconcat"][2]["title"]["subtitle"][0]
    assert "premise fails" in slow and "premise holds" in fast


def test_the_precomputed_range_grid_covers_every_range_pair():
    from iclr_lab.data.amd.experiments import RANGE_GRID, range_grid, ranges_chart, ranges_table

    table = ranges_table()
    assert sorted(map(tuple, table[["R_V", "R_L"]].to_numpy().tolist())) == sorted(
        (a, b) for a in RANGE_GRID for b in RANGE_GRID)
    ranges_chart().to_dict()
    fresh = range_grid(grid=(1, 3), scale="smoke")
    assert list(fresh.columns) == list(table.columns) and len(fresh) == 4
