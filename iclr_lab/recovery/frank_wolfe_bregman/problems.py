"""The chapter's test problems, each with its objective, gradient and the constants its kernel needs.

* :class:`PhaseRetrieval`: ``f(x) = 1/4 sum_i (<a_i, x>^2 - b_i)^2`` (``frank_wolfe_bregman-eq-phase``),
  weakly convex, smooth relative to the :class:`~iclr_lab.recovery.frank_wolfe_bregman.Quartic` kernel;
* :class:`LpLoss`: ``f(x) = 1/p sum_i |<a_i, x> - b_i|^p`` with ``1 < p < 2``
  (``frank_wolfe_bregman-eq-lp``), convex with a gradient that is only ``(p-1)``-Hölder;
* :class:`PoissonKL`: ``f(x) = sum_i b_i log(b_i / <a_i, x>) - b_i + <a_i, x>``
  (``frank_wolfe_bregman-eq-kl``), convex, smooth relative to the
  :class:`~iclr_lab.recovery.frank_wolfe_bregman.Burg` kernel with ``L = ||b||_1``.

Each is a small frozen object with ``f(x)`` and ``grad(x)``, to pass to
:func:`~iclr_lab.recovery.frank_wolfe_bregman.frank_wolfe`. ``A`` (``m x n``) and ``b`` (length
``m``) must be non-empty and finite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import rel_entr

from iclr_lab.core.validation import check_array, check_range

__all__ = ["LpLoss", "PhaseRetrieval", "PoissonKL"]

Array = np.ndarray


def _data(A: ArrayLike, b: ArrayLike) -> tuple[Array, Array]:
    """``A`` (``m x n``) and ``b`` (length ``m``) as float arrays: non-empty and finite."""
    A_ = np.asarray(check_array("A", A, nonempty=False, finite=False), dtype=float)
    b_ = np.asarray(check_array("b", b, nonempty=False, finite=False), dtype=float)
    if A_.ndim != 2 or b_.shape != (A_.shape[0],):
        raise ValueError(f"A must be (m, n) and b of length m; got A {A_.shape} and b {b_.shape}")
    return np.asarray(check_array("A", A_), dtype=float), np.asarray(check_array("b", b_), dtype=float)


@dataclass(frozen=True, eq=False)
class PhaseRetrieval:
    """``f(x) = 1/4 sum_i (<a_i, x>^2 - b_i)^2`` (``frank_wolfe_bregman-eq-phase``).

    Not convex and its gradient is not globally Lipschitz, but it is smooth relative to the quartic
    kernel ``||x||^4/4 + ||x||^2/2`` with constant :attr:`L_smad` (Bolte, Sabach, Teboulle and
    Vaisbourd 2018), and weakly convex on every bounded set.
    """

    A: np.ndarray
    b: np.ndarray

    def __post_init__(self) -> None:
        A, b = _data(self.A, self.b)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "b", b)

    def f(self, x: Array) -> float:
        """The objective."""
        r = (self.A @ x) ** 2 - self.b
        return 0.25 * float(r @ r)

    def grad(self, x: Array) -> Array:
        """``sum_i (<a_i, x>^2 - b_i) <a_i, x> a_i``."""
        ax = self.A @ x
        return self.A.T @ ((ax * ax - self.b) * ax)

    @property
    def L_smad(self) -> float:
        """``sum_i 3 ||a_i||^4 + ||a_i||^2 |b_i|``: a global relative-smoothness constant for the
        quartic kernel."""
        row2 = np.einsum("ij,ij->i", self.A, self.A)
        return float((3.0 * row2**2 + row2 * np.abs(self.b)).sum())


@dataclass(frozen=True, eq=False)
class LpLoss:
    """``f(x) = 1/p sum_i |<a_i, x> - b_i|^p`` for ``1 < p < 2`` (``frank_wolfe_bregman-eq-lp``).

    Convex and ``C^1``; its gradient is ``(p-1)``-Hölder continuous and not Lipschitz on any set
    where a residual crosses zero. ``p`` is accepted in ``(1, 2]`` (``p = 2`` is least squares).
    """

    A: np.ndarray
    b: np.ndarray
    p: float = 1.1

    def __post_init__(self) -> None:
        check_range("p", self.p, 1.0, 2.0, low_open=True)
        A, b = _data(self.A, self.b)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "b", b)

    def f(self, x: Array) -> float:
        """The objective."""
        return float((np.abs(self.A @ x - self.b) ** self.p).sum() / self.p)

    def grad(self, x: Array) -> Array:
        """``A^T (|r|^(p-1) sign r)`` with ``r = A x - b``."""
        r = self.A @ x - self.b
        return self.A.T @ (np.abs(r) ** (self.p - 1.0) * np.sign(r))


@dataclass(frozen=True, eq=False)
class PoissonKL:
    """The Poisson log-likelihood as a Kullback–Leibler divergence (``frank_wolfe_bregman-eq-kl``):
    ``f(x) = sum_i b_i log(b_i / <a_i, x>) - b_i + <a_i, x>`` for ``A >= 0``, ``b >= 0``, ``A x > 0``.

    Convex; smooth relative to Burg's entropy with ``L = ||b||_1`` (Bauschke, Bolte and Teboulle
    2017). ``f >= 0``, with equality when ``A x = b``.
    """

    A: np.ndarray
    b: np.ndarray

    def __post_init__(self) -> None:
        A, b = _data(self.A, self.b)
        if np.any(A < 0) or np.any(b < 0):
            raise ValueError("A and b must be non-negative for the Poisson/KL objective")
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "b", b)

    def f(self, x: Array) -> float:
        """The objective (``inf`` where some ``<a_i, x> <= 0``)."""
        ax = self.A @ x
        if np.any(ax <= 0):
            return float("inf")
        return float((rel_entr(self.b, ax) - self.b + ax).sum())

    def grad(self, x: Array) -> Array:
        """``A^T (1 - b / (A x))``."""
        return self.A.T @ (1.0 - self.b / (self.A @ x))

    @property
    def L_burg(self) -> float:
        """``||b||_1``, the relative-smoothness constant for Burg's entropy."""
        return float(self.b.sum())
