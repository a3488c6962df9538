import numpy as np
import pytest
import torch

from iclr_lab.core.worker_data import (
    QuadraticToy,
    RosenbrockToy,
    digit_shards,
    shard_dirichlet,
    shard_iid,
    shard_sorted,
    worker_seed,
)

LABELS = np.repeat(np.arange(10), 30)  # 300 examples, 30 per class


def _is_partition(shards, n):
    flat = np.concatenate(shards)
    return flat.size == n and np.array_equal(np.sort(flat), np.arange(n))


def test_iid_shards_partition_the_data_with_near_equal_sizes_and_mixed_labels():
    shards = shard_iid(LABELS, 8, seed=3)
    assert _is_partition(shards, LABELS.size)
    assert {s.size for s in shards} <= {37, 38}
    assert all(len(np.unique(LABELS[s])) >= 6 for s in shards)
    assert all(np.array_equal(a, b) for a, b in zip(shards, shard_iid(LABELS, 8, seed=3), strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(shards, shard_iid(LABELS, 8, seed=4), strict=True))


def test_sorted_shards_hold_a_few_neighbouring_classes_each():
    shards = shard_sorted(LABELS, 8)
    assert _is_partition(shards, LABELS.size)
    # 37 or 38 consecutive examples of classes of 30 touch at most three classes
    assert all(1 <= len(np.unique(LABELS[s])) <= 3 for s in shards)
    assert _mean_classes(shards) <= 2.5
    assert [int(LABELS[s].min()) for s in shards] == sorted(int(LABELS[s].min()) for s in shards)


def _mean_classes(shards):
    return np.mean([len(np.unique(LABELS[s])) for s in shards])


def test_dirichlet_skew_grows_as_alpha_shrinks():
    skewed = shard_dirichlet(LABELS, 8, 0.05, seed=0)
    mixed = shard_dirichlet(LABELS, 8, 100.0, seed=0)
    for shards in (skewed, mixed):
        assert _is_partition(shards, LABELS.size)
        assert min(s.size for s in shards) >= 1
    assert _mean_classes(skewed) < 4 < 9 <= _mean_classes(mixed)


def test_dirichlet_min_size_is_honoured_or_a_clear_error():
    shards = shard_dirichlet(LABELS, 8, 0.1, seed=1, min_size=10)
    assert min(s.size for s in shards) >= 10
    with pytest.raises(ValueError, match="max_tries"):
        shard_dirichlet(LABELS, 8, 0.001, seed=1, min_size=37, max_tries=3)


def test_digit_shards_and_worker_views():
    ws = digit_shards(8, "sorted")
    assert ws.n_workers == 8 and ws.kind == "sorted" and ws.alpha is None
    x, y = ws.worker(3)
    assert x.shape == (ws.shards[3].size, 64) and x.dtype == np.float32
    counts = ws.label_counts()
    assert counts.shape == (8, 10) and counts.sum() == ws.split.y_train.size
    assert ((counts > 0).sum(axis=1) <= 3).all()
    std = digit_shards(8, "sorted", standardize=True)
    assert std.standardized and np.array_equal(std.shards[3], ws.shards[3])
    np.testing.assert_allclose(std.split.x_train.mean(axis=0), 0.0, atol=1e-5)
    spread = std.split.x_train.std(axis=0)
    assert np.all((np.abs(spread - 1) < 1e-4) | (spread == 0))
    # raw pixels: some pixel is zero on every image of a label-sorted shard but not everywhere
    zero_raw = [(ws.worker(r)[0] == 0).all(axis=0) & (ws.split.x_train != 0).any(axis=0) for r in range(8)]
    zero_std = [(std.worker(r)[0] == 0).all(axis=0) & (std.split.x_train != 0).any(axis=0) for r in range(8)]
    assert any(z.any() for z in zero_raw) and not any(z.any() for z in zero_std)
    dirichlet = digit_shards(4, "dirichlet", alpha=0.5, seed=2)
    assert dirichlet.alpha == 0.5 and _is_partition(dirichlet.shards, ws.split.y_train.size)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: shard_iid(LABELS, 0), "n_workers"),
    (lambda: shard_iid(LABELS, 301), "n_workers"),
    (lambda: shard_iid(np.zeros((3, 2), dtype=int), 2), "labels"),
    (lambda: shard_sorted(np.array([0.5, 1.5]), 2), "labels"),
    (lambda: shard_dirichlet(LABELS, 4, 0.0), "alpha"),
    (lambda: shard_dirichlet(LABELS, 4, -1.0), "alpha"),
    (lambda: shard_dirichlet(LABELS, 4, float("nan")), "alpha"),
    (lambda: shard_dirichlet(LABELS, 4, float("inf")), "alpha"),
    (lambda: shard_dirichlet(LABELS, 4, 1.0, min_size=-1), "min_size"),
    (lambda: digit_shards(4, "dirichlet"), "alpha"),
    (lambda: digit_shards(4, "iid", alpha=1.0), "alpha"),
    (lambda: digit_shards(4, "shuffled"), "split"),
    (lambda: digit_shards(4, "iid", standardize=1), "standardize"),
    (lambda: digit_shards(4, "iid").worker(4), "rank"),
    (lambda: worker_seed(-1, 0), "seed"),
    (lambda: QuadraticToy(0, 2), "dim"),
    (lambda: QuadraticToy(3, 2, mu=0.0), "mu"),
    (lambda: QuadraticToy(3, 2, mu=1.0, L=0.5), "L"),
    (lambda: QuadraticToy(3, 2, noise=-1.0), "noise"),
    (lambda: QuadraticToy(3, 2, spread=float("nan")), "spread"),
    (lambda: RosenbrockToy(noise=-0.1), "noise"),
    (lambda: RosenbrockToy(b=0.0), "b"),
    (lambda: RosenbrockToy(x0=(1.0,)), "x0"),
])
def test_bad_arguments_name_the_parameter(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_worker_seeds_are_distinct_and_reproducible():
    seeds = {worker_seed(s, r) for s in range(5) for r in range(16)}
    assert len(seeds) == 80 and all(0 <= s < 2**63 for s in seeds)
    assert worker_seed(3, 2) == worker_seed(3, 2)


def test_quadratic_gradients_are_exact_and_the_optimum_is_x_star():
    toy = QuadraticToy(5, 4, mu=0.1, L=10.0, spread=2.0, seed=1)
    assert toy.eigenvalues[0] == pytest.approx(0.1) and toy.eigenvalues[-1] == pytest.approx(10.0)
    # the worker gradients average to the global one, which vanishes at x_star
    x = np.random.default_rng(0).standard_normal(5)
    avg = np.mean([toy.grad(x, m) for m in range(4)], axis=0)
    np.testing.assert_allclose(avg, toy.grad(x), atol=1e-12)
    np.testing.assert_allclose(toy.grad(toy.x_star), 0.0, atol=1e-12)
    assert toy.loss(toy.x_star) == pytest.approx(0.0)
    # finite differences of the worker loss
    for m in range(4):
        fd = [(toy.worker_loss(x + 1e-6 * e, m) - toy.worker_loss(x - 1e-6 * e, m)) / 2e-6
              for e in np.eye(5)]
        np.testing.assert_allclose(fd, toy.grad(x, m), rtol=1e-5, atol=1e-6)
    g = np.array([toy.grad(toy.x_star, m) for m in range(4)])
    assert toy.heterogeneity == pytest.approx(float((g**2).sum(axis=1).mean()))
    assert QuadraticToy(5, 4, spread=0.0).heterogeneity == 0.0


def test_toys_give_torch_for_torch_and_numpy_for_numpy():
    toy = QuadraticToy(3, 2, noise=0.5, seed=0)
    xt = torch.tensor(toy.x0, dtype=torch.float64)
    gt = toy.stochastic_grad(xt, 1, torch.Generator().manual_seed(0))
    gn = toy.stochastic_grad(toy.x0, 1, np.random.default_rng(0))
    assert isinstance(gt, torch.Tensor) and gt.dtype == torch.float64 and isinstance(gn, np.ndarray)
    np.testing.assert_allclose(toy.grad(xt, 1).numpy(), toy.grad(toy.x0, 1))
    with pytest.raises(TypeError, match="gen"):
        toy.stochastic_grad(xt, 1, np.random.default_rng(0))
    rb = RosenbrockToy(noise=0.0)
    x = torch.tensor([-1.5, 2.0], dtype=torch.float64, requires_grad=True)
    rb.loss(x).backward()
    torch.testing.assert_close(x.grad, rb.grad(x.detach()))
    np.testing.assert_allclose(rb.grad(np.array([-1.5, 2.0])), x.grad.numpy())


def test_rosenbrock_minimum_and_noise_statistics():
    rb = RosenbrockToy(noise=1.5)
    assert rb.loss(rb.optimum) == 0.0 and np.allclose(rb.grad(rb.optimum), 0.0)
    grid = np.stack(np.meshgrid(np.linspace(-2, 2, 5), np.linspace(-1, 3, 5)), axis=-1)
    assert rb.loss(grid).shape == (5, 5) and rb.loss(grid).min() >= 0
    gen = np.random.default_rng(0)
    noise = np.array([rb.stochastic_grad(rb.optimum, 0, gen) for _ in range(20000)])
    assert noise.std(axis=0) == pytest.approx([1.5, 1.5], rel=0.03)
    assert np.abs(noise.mean(axis=0)).max() < 0.05
