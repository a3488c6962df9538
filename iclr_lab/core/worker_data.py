"""Data for simulated workers: digits shards and seeded toy objectives.

The distributed chapters (DES-LOC, MT-DAO, FedMuon, Ringleader ASGD) give each worker its own data.
This module is that data, in one place:

* **digits shards** (:func:`digit_shards`): scikit-learn's digits split across ``n`` workers
  IID (:func:`shard_iid`), by label (:func:`shard_sorted`: each worker holds a few neighbouring
  classes, the most heterogeneous split), or with Dirichlet label skew (:func:`shard_dirichlet`: class ``c``
  is divided among the workers in proportions drawn from ``Dir(alpha)``; small ``alpha`` is skewed,
  large ``alpha`` close to IID);
* **toy objectives** with exact losses and gradients, and stochastic gradients with Gaussian noise:
  a heterogeneous quadratic (:class:`QuadraticToy`) and the Rosenbrock function
  (:class:`RosenbrockToy`).

The toys work on NumPy arrays and on torch tensors alike (a point of either kind gives values of
the same kind), so an event-driven NumPy simulator and a torch optimizer can share them. This module
does not import torch.

Every random choice is fixed by a seed. Per-worker randomness comes from :func:`worker_seed`, so
that worker ``r`` draws the same numbers whether it is a thread of the simulator or a process of a
real run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from iclr_lab.core.datasets import Split, digits
from iclr_lab.core.validation import check_choice, check_int, check_range, check_seed

__all__ = [
    "SPLITS",
    "QuadraticToy",
    "RosenbrockToy",
    "WorkerShards",
    "digit_shards",
    "shard_dirichlet",
    "shard_iid",
    "shard_sorted",
    "worker_seed",
]

SplitKind = Literal["iid", "sorted", "dirichlet"]
#: How :func:`digit_shards` divides the training set among workers.
SPLITS: tuple[SplitKind, ...] = ("iid", "sorted", "dirichlet")


def worker_seed(seed: int, rank: int) -> int:
    """A 63-bit seed for worker ``rank`` of a run seeded ``seed`` (independent streams per worker).

    Use it for ``torch.Generator().manual_seed(worker_seed(seed, rank))`` or
    ``numpy.random.default_rng(worker_seed(seed, rank))``.
    """
    seed = check_seed(seed)
    rank = check_int("rank", rank, 0)
    return int(np.random.SeedSequence([seed, rank]).generate_state(1, np.uint64)[0] >> np.uint64(1))


# ---------------------------------------------------------------------------------------------
# shards
# ---------------------------------------------------------------------------------------------

def _labels(labels: Any) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be a non-empty 1-D array of integers, got shape {y.shape} "
                         f"and dtype {y.dtype}")
    return y


def _check_workers(n_workers: int, n: int) -> int:
    return check_int("n_workers", n_workers, 1, n)


def shard_iid(labels: Any, n_workers: int, seed: int = 0) -> list[np.ndarray]:
    """Indices of ``labels`` shuffled (by ``seed``) and cut into ``n_workers`` near-equal shards.

    Shard sizes differ by at most one; each shard is sorted.
    """
    y = _labels(labels)
    n_workers = _check_workers(n_workers, y.size)
    perm = np.random.default_rng(check_seed(seed)).permutation(y.size)
    return [np.sort(part) for part in np.array_split(perm, n_workers)]


def shard_sorted(labels: Any, n_workers: int) -> list[np.ndarray]:
    """Indices sorted by label (stable) and cut into ``n_workers`` contiguous near-equal shards.

    The most heterogeneous split: with 10 classes of equal size and 8 workers, each worker holds
    1.25 classes' worth of consecutive labels, so two or three distinct classes. It has no
    randomness.
    """
    y = _labels(labels)
    n_workers = _check_workers(n_workers, y.size)
    order = np.argsort(y, kind="stable")
    return [np.sort(part) for part in np.array_split(order, n_workers)]


def shard_dirichlet(labels: Any, n_workers: int, alpha: float, seed: int = 0, *,
                    min_size: int = 1, max_tries: int = 1000) -> list[np.ndarray]:
    """Dirichlet label skew: each class is divided among the workers in proportions ``Dir(alpha)``.

    For every class ``c`` the proportions ``p ~ Dir(alpha, ..., alpha)`` (one entry per worker) cut
    the (shuffled) examples of ``c`` into consecutive pieces, as in Hsu, Qi and Brown (2019). Small
    ``alpha`` gives each worker a few dominant classes; large ``alpha`` approaches the IID split.
    Draws are repeated (from the same seeded stream) until every worker holds at least
    ``min_size`` examples.

    Args:
        labels: integer class labels of the training set.
        n_workers: number of workers (at least 1, at most the number of examples).
        alpha: concentration, > 0.
        seed: fixes the split.
        min_size: smallest shard allowed (>= 0).
        max_tries: draws before giving up with a ``ValueError``.
    """
    y = _labels(labels)
    n_workers = _check_workers(n_workers, y.size)
    alpha = check_range("alpha", alpha, 0, np.inf, low_open=True, high_open=True)
    min_size = check_int("min_size", min_size, 0, y.size // n_workers)
    max_tries = check_int("max_tries", max_tries, 1)
    rng = np.random.default_rng(check_seed(seed))
    classes = np.unique(y)
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_workers)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(y == c))
            p = rng.dirichlet(np.full(n_workers, alpha))
            cuts = (np.cumsum(p)[:-1] * idx.size).astype(int)
            for w, piece in enumerate(np.split(idx, cuts)):
                parts[w].append(piece)
        shards = [np.sort(np.concatenate(p)) for p in parts]
        if min(s.size for s in shards) >= min_size:
            return shards
    raise ValueError(f"no Dirichlet split with alpha={alpha} gave every one of {n_workers} workers "
                     f"min_size={min_size} examples in max_tries={max_tries} draws; raise alpha or "
                     "lower min_size")


@dataclass(frozen=True)
class WorkerShards:
    """A train/test split and, for each worker, the indices of its training examples.

    Attributes:
        split: the full data set (the test set is shared by all workers).
        shards: one sorted index array per worker, into ``split.x_train``; the shards partition the
            training set.
        kind: how the shards were made (one of :data:`SPLITS`).
        alpha: the Dirichlet concentration (``None`` unless ``kind == "dirichlet"``).
        standardized: whether the pixels were standardised (:func:`digit_shards`).
    """

    split: Split
    shards: tuple[np.ndarray, ...]
    kind: str
    alpha: float | None = None
    standardized: bool = False

    @property
    def n_workers(self) -> int:
        return len(self.shards)

    def worker(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` of worker ``rank``'s training shard."""
        rank = check_int("rank", rank, 0, self.n_workers - 1)
        idx = self.shards[rank]
        return self.split.x_train[idx], self.split.y_train[idx]

    def label_counts(self) -> np.ndarray:
        """Examples of each class on each worker: an ``(n_workers, n_classes)`` integer array."""
        k = self.split.n_classes
        return np.stack([np.bincount(self.split.y_train[s], minlength=k) for s in self.shards])


def digit_shards(n_workers: int, split: str = "iid", *, alpha: float | None = None,
                 seed: int = 0, test_size: float = 0.2, standardize: bool = False) -> WorkerShards:
    """scikit-learn's digits (:func:`iclr_lab.core.datasets.digits`) divided among ``n_workers``.

    With ``standardize=True`` every pixel is shifted and scaled by the training set's mean and
    standard deviation (a pixel that is constant in the training set is only shifted). Raw pixels
    in [0, 1] are exactly zero on the border of most images; with label-sorted shards some pixels
    are then zero on *every* image a worker holds, so that worker's gradient, and Adam's second
    moment, is exactly zero there. Standardised pixels are zero only where they are constant
    in the whole training set.

    Args:
        n_workers: number of workers (>= 1).
        split: ``"iid"`` (:func:`shard_iid`), ``"sorted"`` (:func:`shard_sorted`) or
            ``"dirichlet"`` (:func:`shard_dirichlet`, which needs ``alpha``).
        alpha: Dirichlet concentration (> 0); only for ``split="dirichlet"``.
        seed: fixes the shuffles and draws of the shards. The train/test split itself is fixed
            (seed 0), so that every seed trains on the same examples.
        test_size: fraction of the examples held out, shared by every worker.
        standardize: standardise the pixels with the training set's statistics.
    """
    check_choice("split", split, SPLITS)
    if not isinstance(standardize, bool):
        raise TypeError(f"standardize must be True or False, got {standardize!r}")
    data = digits(test_size=test_size, seed=0)
    if standardize:
        mean, std = data.x_train.mean(axis=0), data.x_train.std(axis=0)
        std[std == 0] = 1.0
        data = Split(((data.x_train - mean) / std).astype(np.float32), data.y_train,
                     ((data.x_test - mean) / std).astype(np.float32), data.y_test)
    if split == "dirichlet":
        if alpha is None:
            raise ValueError("alpha must be given (> 0) when split='dirichlet'")
        shards = shard_dirichlet(data.y_train, n_workers, alpha, seed)
    elif alpha is not None:
        raise ValueError(f"alpha is only used with split='dirichlet', got split={split!r}")
    elif split == "iid":
        shards = shard_iid(data.y_train, n_workers, seed)
    else:
        shards = shard_sorted(data.y_train, n_workers)
    return WorkerShards(data, tuple(shards), split, None if alpha is None else float(alpha),
                        standardize)


# ---------------------------------------------------------------------------------------------
# toys
# ---------------------------------------------------------------------------------------------

def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _like(values: np.ndarray, x: Any) -> Any:
    """``values`` as the same kind of array as ``x`` (a torch tensor of its dtype and device)."""
    if _is_torch(x):
        import torch

        return torch.as_tensor(values, dtype=x.dtype, device=x.device)
    return values


def _gaussian(x: Any, gen: Any) -> Any:
    """Standard normal noise shaped like ``x``, from a ``torch.Generator`` or a NumPy generator."""
    if _is_torch(x):
        import torch

        if not isinstance(gen, torch.Generator):
            raise TypeError(f"gen must be a torch.Generator for a torch point, got {type(gen).__name__}")
        return torch.randn(x.shape, generator=gen, dtype=x.dtype, device=x.device)
    if not isinstance(gen, np.random.Generator):
        raise TypeError(f"gen must be a numpy.random.Generator for a NumPy point, "
                        f"got {type(gen).__name__}")
    return gen.standard_normal(np.shape(x))


class QuadraticToy:
    r"""A heterogeneous quadratic: worker ``m`` holds :math:`f_m(x) = \tfrac12 (x - c_m)^\top A (x - c_m)`.

    ``A`` is diagonal with eigenvalues log-spaced from ``mu`` to ``L``; the centres are
    ``c_m = x_star + spread * z_m`` with ``z_m`` standard normal and centred over the workers, so
    the global objective :math:`f = \tfrac1M\sum_m f_m` has its minimum at ``x_star`` (drawn with
    entries N(0, 1)) and the heterogeneity at the optimum is
    :math:`\tfrac1M\sum_m\|\nabla f_m(x_\star)\|^2 = \tfrac1M\sum_m \|A (x_\star - c_m)\|^2`
    (:attr:`heterogeneity`). A stochastic gradient adds ``noise * N(0, I)``.

    Args:
        dim: dimension (>= 1).
        n_workers: number of workers ``M`` (>= 1).
        mu: smallest eigenvalue (> 0).
        L: largest eigenvalue (>= mu).
        spread: scale of the centres' spread around the optimum (>= 0; 0 is the IID case).
        noise: standard deviation of the gradient noise per coordinate (>= 0).
        seed: fixes ``x_star``, the centres and the start point.
    """

    def __init__(self, dim: int, n_workers: int, *, mu: float = 0.1, L: float = 1.0,
                 spread: float = 1.0, noise: float = 0.0, seed: int = 0) -> None:
        self.dim = check_int("dim", dim, 1)
        self.n_workers = check_int("n_workers", n_workers, 1)
        self.mu = check_range("mu", mu, 0, np.inf, low_open=True, high_open=True)
        self.L = check_range("L", L, self.mu, np.inf, high_open=True)
        self.spread = check_range("spread", spread, 0, np.inf, high_open=True)
        self.noise = check_range("noise", noise, 0, np.inf, high_open=True)
        rng = np.random.default_rng(check_seed(seed))
        self.eigenvalues = np.geomspace(self.mu, self.L, self.dim)
        self.x_star = rng.standard_normal(self.dim)
        z = rng.standard_normal((self.n_workers, self.dim))
        if self.n_workers > 1:
            z -= z.mean(axis=0)
        else:
            z[:] = 0.0
        self.centers = self.x_star + self.spread * z
        self.x0 = self.x_star + rng.standard_normal(self.dim) * 3.0

    @property
    def heterogeneity(self) -> float:
        r""":math:`\tfrac1M\sum_m\|\nabla f_m(x_\star)\|^2`, the gradient dissimilarity at the optimum."""
        g = self.eigenvalues * (self.x_star - self.centers)
        return float((g**2).sum(axis=1).mean())

    def loss(self, x: Any) -> Any:
        """The global objective at ``x`` (the last axis is the coordinate; 0 at ``x_star``)."""
        d = x - _like(self.x_star, x)
        return 0.5 * (_like(self.eigenvalues, x) * d * d).sum(-1)

    def worker_loss(self, x: Any, rank: int) -> Any:
        """:math:`f_m(x)` of worker ``rank``."""
        d = x - _like(self.centers[check_int("rank", rank, 0, self.n_workers - 1)], x)
        return 0.5 * (_like(self.eigenvalues, x) * d * d).sum(-1)

    def grad(self, x: Any, rank: int | None = None) -> Any:
        """The exact gradient of worker ``rank``'s objective, or of the global one (``rank=None``)."""
        if rank is None:
            return _like(self.eigenvalues, x) * (x - _like(self.x_star, x))
        c = self.centers[check_int("rank", rank, 0, self.n_workers - 1)]
        return _like(self.eigenvalues, x) * (x - _like(c, x))

    def stochastic_grad(self, x: Any, rank: int, gen: Any) -> Any:
        """``grad(x, rank)`` plus ``noise * N(0, I)`` drawn from ``gen`` (a ``torch.Generator`` for
        a tensor, a ``numpy.random.Generator`` for an array)."""
        g = self.grad(x, rank)
        return g + self.noise * _gaussian(x, gen) if self.noise > 0 else g


class RosenbrockToy:
    r"""The Rosenbrock function :math:`f(x) = (a - x_1)^2 + b (x_2 - x_1^2)^2`, with noisy gradients.

    Its minimum is 0 at :math:`(a, a^2)`, at the end of a curved, flat-bottomed valley; the
    classical start is ``(-1.5, 2)``. Every worker holds the same function (the IID case) and draws
    its own Gaussian gradient noise of standard deviation ``noise`` per coordinate.

    Args:
        noise: gradient noise standard deviation (>= 0).
        a: position of the minimum (any real).
        b: valley steepness (> 0).
        x0: the start point.
    """

    def __init__(self, noise: float = 1.5, *, a: float = 1.0, b: float = 100.0,
                 x0: Sequence[float] = (-1.5, 2.0)) -> None:
        self.noise = check_range("noise", noise, 0, np.inf, high_open=True)
        self.a = check_range("a", a, -np.inf, np.inf, low_open=True, high_open=True)
        self.b = check_range("b", b, 0, np.inf, low_open=True, high_open=True)
        start = np.asarray(x0, dtype=float)
        if start.shape != (2,) or not np.isfinite(start).all():
            raise ValueError(f"x0 must be two finite numbers, got {x0!r}")
        self.x0 = start
        self.optimum = np.array([self.a, self.a**2])

    def loss(self, x: Any) -> Any:
        """``f`` at ``x`` (the last axis holds the two coordinates)."""
        x1, x2 = x[..., 0], x[..., 1]
        return (self.a - x1) ** 2 + self.b * (x2 - x1**2) ** 2

    def grad(self, x: Any) -> Any:
        """The exact gradient at a point ``x`` of shape ``(2,)``."""
        x1, x2 = x[0], x[1]
        r = x2 - x1**2
        g = [-2.0 * (self.a - x1) - 4.0 * self.b * x1 * r, 2.0 * self.b * r]
        if _is_torch(x):
            import torch

            return torch.stack(g)
        return np.array(g, dtype=float)

    def stochastic_grad(self, x: Any, rank: int, gen: Any) -> Any:
        """``grad(x)`` plus ``noise * N(0, I)`` from ``gen``; ``rank`` is accepted for the common
        toy interface (every worker holds the same function)."""
        check_int("rank", rank, 0)
        g = self.grad(x)
        return g + self.noise * _gaussian(x, gen) if self.noise > 0 else g
