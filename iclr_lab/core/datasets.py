"""Offline data: nothing here touches the network.

* :func:`digits`: scikit-learn's bundled 8x8 handwritten digits, split and scaled.
* :func:`image`: scikit-image's bundled test images (only those shipped inside the wheel).
* Seeded generators: :func:`gaussian_mixture`, :func:`sparse_regression`, :func:`low_rank`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iclr_lab.core.validation import check_choice, check_int, check_range, check_seed

__all__ = [
    "BUNDLED_IMAGES",
    "Split",
    "digits",
    "gaussian_mixture",
    "image",
    "low_rank",
    "sparse_regression",
]

#: scikit-image images that ship inside the wheel (others are fetched with pooch, which we forbid).
BUNDLED_IMAGES: tuple[str, ...] = (
    "astronaut", "brick", "camera", "cat", "checkerboard", "chelsea", "clock", "coffee", "coins",
    "grass", "gravel", "horse", "moon", "page", "rocket", "text",
)


@dataclass(frozen=True)
class Split:
    """A train/test split of a classification data set (float32 features, int64 labels)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def n_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_test.max()) + 1)

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])


def digits(test_size: float = 0.2, seed: int = 0) -> Split:
    """The 1797 8x8 digits of ``sklearn.datasets.load_digits``, pixels scaled to [0, 1].

    The split is stratified by class and fixed by ``seed``.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    check_range("test_size", test_size, 0, 1, low_open=True, high_open=True)
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(x, y.astype(np.int64), test_size=test_size,
                                          stratify=y, random_state=check_seed(seed))
    return Split(xtr, ytr, xte, yte)


def image(name: str = "camera", size: int | None = None, gray: bool = True) -> np.ndarray:
    """A scikit-image test image as floats in [0, 1], optionally grey and resized to ``size x size``."""
    import skimage.data
    from skimage.color import rgb2gray
    from skimage.transform import resize

    check_choice("name", name, BUNDLED_IMAGES)
    img = getattr(skimage.data, name)().astype(np.float64)
    img /= 255.0 if img.max() > 1 else 1.0
    if gray and img.ndim == 3:
        img = rgb2gray(img[..., :3])
    if size is not None:
        check_int("size", size, 2)
        img = resize(img, (size, size) + img.shape[2:], anti_aliasing=True)
    return img


def gaussian_mixture(n: int, dim: int, classes: int, separation: float = 2.0,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points from ``classes`` isotropic unit Gaussians whose means lie ``separation`` apart
    on average. Returns ``(x, y)`` with ``x`` float32 of shape ``(n, dim)``."""
    check_int("n", n, 1)
    check_int("dim", dim, 1)
    check_int("classes", classes, 2)
    check_range("separation", separation, 0)
    rng = np.random.default_rng(check_seed(seed))
    means = rng.standard_normal((classes, dim)) * separation / np.sqrt(2.0)
    y = rng.integers(0, classes, size=n)
    x = means[y] + rng.standard_normal((n, dim))
    return x.astype(np.float32), y.astype(np.int64)


def sparse_regression(n: int, dim: int, sparsity: int, noise: float = 0.0,
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian design ``A`` (n x dim, entries N(0, 1/n)), an s-sparse ``x`` with N(0,1) non-zeros,
    and ``b = A x + noise * N(0, 1)``. Returns ``(A, x, b)``."""
    check_int("n", n, 1)
    check_int("dim", dim, 1)
    check_int("sparsity", sparsity, 0, dim)
    check_range("noise", noise, 0)
    rng = np.random.default_rng(check_seed(seed))
    a = rng.standard_normal((n, dim)) / np.sqrt(n)
    x = np.zeros(dim)
    support = rng.choice(dim, size=sparsity, replace=False)
    x[support] = rng.standard_normal(sparsity)
    b = a @ x + noise * rng.standard_normal(n)
    return a, x, b


def low_rank(shape: tuple[int, ...], rank: int, seed: int = 0) -> np.ndarray:
    """A random matrix of the given ``rank`` (product of Gaussian factors, unit Frobenius norm).

    For a 3-way ``shape`` ``(m, n, k)`` each frontal slice has that rank.
    """
    if len(shape) not in (2, 3):
        raise ValueError(f"shape must have 2 or 3 entries, got {shape}")
    m, n = shape[0], shape[1]
    check_int("rank", rank, 1, min(m, n))
    rng = np.random.default_rng(check_seed(seed))
    extra = shape[2:]
    u = rng.standard_normal((*extra, m, rank))
    v = rng.standard_normal((*extra, rank, n))
    x = u @ v
    x = np.moveaxis(x, 0, -1) if extra else x
    return x / np.linalg.norm(x)
