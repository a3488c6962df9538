"""Factorized gradient descent (FGD) for low-tubal-rank tensor sensing, from a small or a spectral start.

The problem (``tubal_fgd-eq-model``): recover a symmetric positive semi-definite tensor
``X* = X * X^T`` (``n x n x k``, tubal rank ``r``) from ``m`` noisy Gaussian measurements
``y_i = <A_i, X*> + s_i``. FGD over-parameterises ``X = U * U^T`` with ``U`` of size ``n x R x k``,
``R >= r``, and descends the loss ``tubal_fgd-eq-loss``:

* :class:`Measurements` and :func:`gaussian_measurements`: the sensing operator ``M`` and its adjoint;
* :func:`planted_tensor`: a random ground truth of tubal rank ``r``;
* :func:`small_init` (the paper's method, ``tubal_fgd-eq-small``) and :func:`spectral_init`
  (the baseline of Liu et al. 2024, ``tubal_fgd-eq-spectral``);
* :func:`fgd`: the descent with validation-based early stopping (``tubal_fgd-eq-fgd``,
  ``tubal_fgd-eq-es``), returning an :class:`FGDResult`;
* :func:`descend`: the same iteration for many runs at once, all in the Fourier domain (what
  :func:`fgd` calls with one run);
* :func:`stage_metrics`: the signal strength, the redundant energy and the alignment that split a
  run into the paper's four stages (``tubal_fgd-eq-stages``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed
from iclr_lab.recovery.tubal_fgd.algebra import _tensor, t_product, t_transpose

__all__ = ["FGDResult", "Measurements", "Trajectory", "default_step", "descend", "fgd",
           "gaussian_measurements", "planted_tensor", "small_init", "spectral_init", "stage_metrics"]

Init = Literal["small", "spectral"]
#: the dimensionless step: eta = STEP / ||sym(M*(y))/m|| (``tubal_fgd-eq-fgd``)
STEP = 0.2


# ----------------------------------------------------------------------------------------------
# The real DFT along the tubes, as small matrix products
# ----------------------------------------------------------------------------------------------


class _Tubes:
    """The DFT along tubes of length ``k`` for tensors stored slice-first, ``(..., k, n1, n2)``.

    A real tensor needs only its Fourier slices ``0 .. k // 2`` (the others are their conjugates).
    The tubes here are a few entries long, so the transform is a ``(k // 2 + 1) x k`` matrix product,
    which is faster than an FFT call along a strided axis and exactly as accurate.
    """

    def __init__(self, k: int) -> None:
        self.k, self.kf = k, k // 2 + 1
        angle = 2 * np.pi * np.outer(np.arange(self.kf), np.arange(k)) / k  # (kf, k)
        self.forward = np.exp(-1j * angle)
        weight = np.full(self.kf, 2.0)  # slices 1 .. ceil(k/2)-1 stand for themselves and a conjugate
        weight[0] = 1.0
        if k % 2 == 0:
            weight[-1] = 1.0
        self.back_re = np.ascontiguousarray((weight[:, None] * np.cos(angle)).T / k)  # (k, kf)
        self.back_im = np.ascontiguousarray(-(weight[:, None] * np.sin(angle)).T / k)

    def to_fourier(self, x: np.ndarray) -> np.ndarray:
        """``(..., k, n1, n2)`` real -> ``(..., k//2 + 1, n1, n2)`` complex."""
        lead, (n1, n2) = x.shape[:-3], x.shape[-2:]
        flat = x.reshape(*lead, self.k, n1 * n2)
        return (self.forward @ flat).reshape(*lead, self.kf, n1, n2)

    def from_fourier(self, xh: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`to_fourier`: the real tensor, ``(..., k, n1, n2)``."""
        lead, (n1, n2) = xh.shape[:-3], xh.shape[-2:]
        flat = xh.reshape(*lead, self.kf, n1 * n2)
        return (self.back_re @ flat.real + self.back_im @ flat.imag).reshape(*lead, self.k, n1, n2)


def _herm(a: np.ndarray) -> np.ndarray:
    """Conjugate transpose of the last two axes: the t-transpose, slice by slice in Fourier."""
    return np.conj(np.swapaxes(a, -1, -2))


def _slice_first(x: np.ndarray) -> np.ndarray:
    """``(..., n1, n2, k)`` -> ``(..., k, n1, n2)``, the layout :func:`descend` works in."""
    return np.moveaxis(x, -1, -3)


def _slice_last(x: np.ndarray) -> np.ndarray:
    """The inverse of :func:`_slice_first`."""
    return np.moveaxis(x, -3, -1)


# ----------------------------------------------------------------------------------------------
# Problem: measurements and ground truth
# ----------------------------------------------------------------------------------------------


def _generator(rng: np.random.Generator | int, name: str = "rng") -> np.random.Generator:
    """``rng`` itself if it is a numpy ``Generator``, else ``default_rng(seed)`` for an integer seed
    in ``[0, 2**32 - 1]``. ``None`` (numpy's fresh entropy) is refused: every run of the package is
    seeded, so that it can be repeated."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(check_seed(rng, name))


def _real(name: str, value: Any, ndim: int) -> np.ndarray:
    """``value`` as a real float64 array with ``ndim`` dimensions, each at least 1, all entries
    finite; an error naming ``name`` otherwise."""
    a = np.asarray(check_array(name, value, nonempty=False, finite=False))
    if np.iscomplexobj(a):
        raise TypeError(f"{name} must be real, got dtype {a.dtype}")
    if a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {a.shape}")
    if 0 in a.shape:
        raise ValueError(f"{name} must not be empty (every side at least 1), got shape {a.shape}")
    return np.asarray(check_array(name, a.astype(np.float64, copy=False)))


@dataclass(frozen=True)
class Measurements:
    """Linear measurements ``y_i = <A_i, X> + s_i``, ``i = 1..m``, of an ``n1 x n2 x k`` tensor
    (``tubal_fgd-eq-model``).

    Attributes:
        A: the sensing tensors, shape ``(m, n1, n2, k)``, every side at least 1, finite.
        y: the measurements, shape ``(m,)``, finite.
    """

    A: np.ndarray
    y: np.ndarray

    def __post_init__(self) -> None:
        a = _real("A", self.A, 4)
        y = np.asarray(check_array("y", self.y, nonempty=False, finite=False))
        if y.shape != (a.shape[0],):
            raise ValueError(f"y must hold one measurement per sensing tensor: shape ({a.shape[0]},), "
                             f"got {y.shape}")
        y = _real("y", y, 1)
        object.__setattr__(self, "A", a)
        object.__setattr__(self, "y", y)

    @property
    def m(self) -> int:
        """The number of measurements."""
        return int(self.A.shape[0])

    @property
    def shape(self) -> tuple[int, int, int]:
        """The shape ``(n1, n2, k)`` of the tensors measured."""
        n1, n2, k = self.A.shape[1:]
        return int(n1), int(n2), int(k)

    def _check(self, z: np.ndarray) -> np.ndarray:
        z = _tensor("z", z)
        if z.shape != self.shape:
            raise ValueError(f"z must have the shape the operator measures, {self.shape}; got {z.shape}")
        return z

    def apply(self, z: np.ndarray) -> np.ndarray:
        """``M(Z) = (<A_i, Z>)_i``, a vector of length ``m``."""
        return self.A.reshape(self.m, -1) @ self._check(z).ravel()

    def adjoint(self, v: np.ndarray) -> np.ndarray:
        """``M*(v) = sum_i v_i A_i``, a tensor of shape :attr:`shape`."""
        v = np.asarray(v, dtype=np.float64)
        if v.shape != (self.m,):
            raise ValueError(f"v must have shape ({self.m},), got {v.shape}")
        return (v @ self.A.reshape(self.m, -1)).reshape(self.shape)

    def subset(self, index: Sequence[int] | np.ndarray) -> Measurements:
        """The measurements at ``index``."""
        idx = np.asarray(index, dtype=np.int64)
        return Measurements(self.A[idx], self.y[idx])

    def split(self, val_fraction: float, rng: np.random.Generator | int = 0
              ) -> tuple[Measurements, Measurements]:
        """A random split into ``(train, validation)``, the validation part holding
        ``round(val_fraction * m)`` measurements (at least one, and at least one left to train on).
        ``val_fraction`` is in ``(0, 1)``; ``rng`` is a numpy ``Generator`` or a seed in
        ``[0, 2**32 - 1]``."""
        check_range("val_fraction", val_fraction, 0.0, 1.0, low_open=True, high_open=True)
        gen = _generator(rng)
        n_val = min(max(1, round(val_fraction * self.m)), self.m - 1)
        if n_val < 1:
            raise ValueError(f"splitting needs at least 2 measurements, got m = {self.m}")
        perm = gen.permutation(self.m)
        return self.subset(np.sort(perm[n_val:])), self.subset(np.sort(perm[:n_val]))


def planted_tensor(n: int, r: int, k: int, rng: np.random.Generator | int = 0) -> np.ndarray:
    """A random ``n x n x k`` symmetric PSD tensor ``X* = X * X^T`` of tubal rank ``r``: ``X`` has
    i.i.d. N(0, 1) entries, and ``X*`` is scaled to ``||X*||_F^2 = r k`` (``tubal_fgd-eq-model``).
    ``n, k >= 1``, ``1 <= r <= n``; ``rng`` a numpy ``Generator`` or a seed in ``[0, 2**32 - 1]``."""
    n, k = check_int("n", n, 1), check_int("k", k, 1)
    r = check_int("r", r, 1, n)
    x = _generator(rng).standard_normal((n, r, k))
    x_star = t_product(x, t_transpose(x))
    x_star = 0.5 * (x_star + t_transpose(x_star))  # symmetric to the last bit
    return x_star * np.sqrt(r * k) / np.linalg.norm(x_star)


def gaussian_measurements(x_star: np.ndarray, m: int, sigma: float,
                          rng: np.random.Generator | int = 0) -> Measurements:
    """``m`` measurements of ``x_star`` with i.i.d. N(0, 1) sensing tensors and N(0, sigma^2) noise
    (``tubal_fgd-eq-model``). ``m >= 1``, ``sigma`` in ``[0, inf)``; ``rng`` a numpy ``Generator``
    or a seed in ``[0, 2**32 - 1]``."""
    x_star = _tensor("x_star", x_star)
    m = check_int("m", m, 1)
    sigma = check_range("sigma", sigma, 0.0)
    gen = _generator(rng)
    a = gen.standard_normal((m, *x_star.shape))
    noise = sigma * gen.standard_normal(m)
    return Measurements(a, a.reshape(m, -1) @ x_star.ravel() + noise)


# ----------------------------------------------------------------------------------------------
# Starting points
# ----------------------------------------------------------------------------------------------


def small_init(n: int, R: int, k: int, alpha: float, rng: np.random.Generator | int = 0) -> np.ndarray:
    """The paper's start (``tubal_fgd-eq-small``): ``U_0`` of shape ``n x R x k`` with i.i.d.
    ``N(0, alpha^2 / R)`` entries. ``n, R, k >= 1``, ``alpha`` in ``(0, inf)``; ``rng`` a numpy
    ``Generator`` or a seed in ``[0, 2**32 - 1]``."""
    n, k = check_int("n", n, 1), check_int("k", k, 1)
    R = check_int("R", R, 1)
    alpha = check_range("alpha", alpha, 0.0, low_open=True)
    return alpha / np.sqrt(R) * _generator(rng).standard_normal((n, R, k))


def _check_meas(name: str, meas: Any) -> Measurements:
    if not isinstance(meas, Measurements):
        raise TypeError(f"{name} must be Measurements (see gaussian_measurements), got "
                        f"{type(meas).__name__}")
    return meas


def _backprojection(meas: Measurements) -> np.ndarray:
    """``sym(M*(y)) / m``: close to ``X*`` when ``(1/m) M* M`` is close to the identity."""
    g = meas.adjoint(meas.y) / meas.m
    return 0.5 * (g + t_transpose(g))


def spectral_init(meas: Measurements, R: int) -> np.ndarray:
    """The spectral start of Liu et al. (``tubal_fgd-eq-spectral``): in every Fourier slice of
    ``sym(M*(y)) / m``, the top ``R`` eigenpairs ``(lambda_j, q_j)``, and ``U_0 = [q_j sqrt(max(lambda_j,
    0))]_j``; so ``U_0 * U_0^T`` is the best PSD approximation of tubal rank ``R``."""
    _check_meas("meas", meas)
    n1, n2, k = meas.shape
    if n1 != n2:
        raise ValueError(f"spectral_init needs square slices (n x n x k), got {meas.shape}")
    R = check_int("R", R, 1, n1)
    tubes = _Tubes(k)
    gh = tubes.to_fourier(_slice_first(_backprojection(meas)))
    lam, q = np.linalg.eigh(0.5 * (gh + _herm(gh)))  # ascending
    lam, q = lam[:, ::-1][:, :R], q[:, :, ::-1][:, :, :R]
    uh = q * np.sqrt(np.maximum(lam, 0.0))[:, None, :]
    return _slice_last(tubes.from_fourier(uh))


def default_step(meas: Measurements, step: float = STEP) -> float:
    """The step size ``eta = step / ||sym(M*(y)) / m||`` (``tubal_fgd-eq-fgd``): the data's estimate
    of ``||X*||`` (spectral norm) replaces ``||X*||`` itself, which FGD does not know. ``step``
    is in ``(0, inf)``."""
    _check_meas("meas", meas)
    step = check_range("step", step, 0.0, low_open=True)
    n1, n2, k = meas.shape
    gh = _Tubes(k).to_fourier(_slice_first(_backprojection(meas)))
    scale = float(np.linalg.norm(gh, ord=2, axis=(1, 2)).max())
    if scale == 0.0:
        raise ValueError("the measurements are all zero: there is nothing to recover")
    return step / scale


# ----------------------------------------------------------------------------------------------
# The descent
# ----------------------------------------------------------------------------------------------


def _symmetric_pairs(n: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries of an ``n x n x k`` tensor in the slice-first layout ``(k, n, n)``, flattened,
    paired by the t-transpose ``(l, a, b) <-> (-l mod k, b, a)``.

    Returns ``(pair, reps, weight)``: the partner of every entry, one representative of each pair
    (the smaller index), and ``1/2`` for a representative with a distinct partner, ``1`` for an
    entry that is its own partner. For a t-symmetric ``Z``, ``<A, Z> = <A', Z[reps]>`` with
    ``A' = A[reps] + A[pair[reps]]`` (once for self-paired entries), and ``sym(A)[reps] =
    weight * A'``.
    """
    ell, a, b = np.meshgrid(np.arange(k), np.arange(n), np.arange(n), indexing="ij")
    pair = (((-ell) % k) * n * n + b * n + a).ravel()
    reps = np.flatnonzero(np.arange(pair.size) <= pair)
    weight = np.where(pair[reps] == reps, 1.0, 0.5)
    return pair, reps, weight


def _fold_pairs(a: np.ndarray, pair: np.ndarray, reps: np.ndarray) -> np.ndarray:
    """Sensing rows ``(..., d)`` folded onto the representatives of :func:`_symmetric_pairs`."""
    own = pair[reps] == reps
    return np.ascontiguousarray(a[..., reps] + np.where(own, 0.0, a[..., pair[reps]]))


@dataclass
class Trajectory:
    """What :func:`descend` records, for ``S`` problems x ``B`` runs each.

    Attributes:
        train_loss: ``(steps + 1, S, B)``, the loss ``tubal_fgd-eq-loss`` on the training data at
            iterates ``0 .. steps``.
        val_loss: ``(steps + 1, S, B)``, the validation loss ``tubal_fgd-eq-es`` (NaN without
            validation data).
        rse: ``(steps + 1, S, B)``, ``||U U^T - X*||_F^2 / ||X*||_F^2`` (NaN without ``x_star``).
        u_last: Fourier slices ``(S, B, k//2 + 1, n, R)`` of the last iterate.
        u_best: Fourier slices of the iterate with the smallest validation loss (the last one
            without validation data).
        t_best: ``(S, B)``, the iteration of ``u_best``.
        monitor: ``{iteration: (S, B, 3) array}`` of :func:`stage_metrics` (signal, redundant,
            alignment) at the iterations asked for.
        diverged: ``(S, B)``, runs whose loss overflowed; they were frozen from then on.
        u_min: Fourier slices of the iterate with the smallest relative error (the oracle's
            "FGD-best", which needs ``x_star``; the last iterate without it).
        t_min: ``(S, B)``, the iteration of ``u_min``.
    """

    train_loss: np.ndarray
    val_loss: np.ndarray
    rse: np.ndarray
    u_last: np.ndarray
    u_best: np.ndarray
    t_best: np.ndarray
    monitor: dict[int, np.ndarray] = field(default_factory=dict)
    diverged: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    u_min: np.ndarray = field(default_factory=lambda: np.zeros(0))
    t_min: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))


def descend(u0: np.ndarray, a_train: np.ndarray, y_train: np.ndarray, eta: np.ndarray | float,
            steps: int, *, a_val: np.ndarray | None = None, y_val: np.ndarray | None = None,
            x_star: np.ndarray | None = None, r: int | None = None,
            monitor_at: Sequence[int] = ()) -> Trajectory:
    """FGD (``tubal_fgd-eq-fgd``) for ``B`` runs on each of ``S`` problems at once, in the Fourier
    domain; :func:`fgd` is this with ``S = B = 1``.

    Args:
        u0: starting factors, ``(S, B, n, R, k)`` (runs with a smaller ``R`` are padded with zero
            columns, which FGD keeps at zero).
        a_train: sensing tensors, ``(S, m, n, n, k)``.
        y_train: measurements, ``(S, B, m)`` (the runs of a problem may see different noise).
        eta: step sizes, a number or ``(S, B)``.
        steps: number of updates.
        a_val: validation sensing tensors, ``(S, m_val, n, n, k)``.
        y_val: validation measurements, ``(S, B, m_val)``.
        x_star: the truth ``(S, n, n, k)``, only to record the error (the descent never uses it).
        r: the true tubal rank, ``1 <= r <= min(n, R)``, needed by ``monitor_at``.
        monitor_at: iterations in ``[0, steps]`` at which to record :func:`stage_metrics` (they
            need ``x_star`` and ``r``).

    Every array is real, non-empty and finite; ``eta`` is positive; ``steps >= 0``.
    """
    u0 = _real("u0", u0, 5)
    S, B, n, R, k = u0.shape
    a_train = _real("a_train", a_train, 5)
    if a_train.shape[0] != S or a_train.shape[2:] != (n, n, k):
        raise ValueError(f"a_train must have shape (S, m, n, n, k) = ({S}, m, {n}, {n}, {k}) to match "
                         f"u0, got {a_train.shape}")
    y_train = _real("y_train", y_train, 3)
    if y_train.shape != (S, B, a_train.shape[1]):
        raise ValueError(f"y_train must have shape (S, B, m) = {(S, B, a_train.shape[1])}, got "
                         f"{y_train.shape}")
    if isinstance(eta, np.ndarray) and eta.ndim == 0:
        eta = eta.item()
    if np.ndim(eta) == 0:
        eta_arr = np.full((S, B), check_range("eta", eta, 0.0, low_open=True))
    else:
        eta_arr = _real("eta", eta, 2)
        if eta_arr.shape != (S, B):
            raise ValueError(f"eta must be a number or of shape (S, B) = {(S, B)}, got {eta_arr.shape}")
        if np.any(eta_arr <= 0):
            raise ValueError(f"eta must be positive, got minimum {eta_arr.min():g}")
    steps = check_int("steps", steps, 0)
    if (a_val is None) != (y_val is None):
        raise ValueError("a_val and y_val must be given together")
    if a_val is not None and y_val is not None:
        a_val = _real("a_val", a_val, 5)
        if a_val.shape[0] != S or a_val.shape[2:] != (n, n, k):
            raise ValueError(f"a_val must have shape (S, m_val, n, n, k) = ({S}, m_val, {n}, {n}, "
                             f"{k}), got {a_val.shape}")
        y_val = _real("y_val", y_val, 3)
        if y_val.shape != (S, B, a_val.shape[1]):
            raise ValueError(f"y_val must have shape (S, B, m_val) = {(S, B, a_val.shape[1])}, got "
                             f"{y_val.shape}")
    if x_star is not None:
        x_star = _real("x_star", x_star, 4)
        if x_star.shape != (S, n, n, k):
            raise ValueError(f"x_star must have shape (S, n, n, k) = {(S, n, n, k)}, got {x_star.shape}")
    if r is not None:
        r = check_int("r", r, 1, min(n, R))
    monitor_at = [check_int("monitor_at", t, 0, steps) for t in monitor_at]
    if monitor_at and (x_star is None or r is None):
        raise ValueError("monitor_at needs x_star and r (the stages are measured against the truth)")
    tubes = _Tubes(k)
    d, m = n * n * k, a_train.shape[1]
    # the sensing tensors as rows over the slice-first layout in which Z is computed
    # Z_t = U_t * U_t^T is t-symmetric (Z[l, a, b] = Z[-l mod k, b, a]), so each measurement needs
    # only one entry of every such pair, against the sum of the two sensing entries: half the work.
    pair, reps, weight = _symmetric_pairs(n, k)
    a_tr = _fold_pairs(_slice_first(a_train).reshape(S, m, d), pair, reps)  # (S, m, d')
    a_tr_t = np.ascontiguousarray(np.swapaxes(a_tr, 1, 2))
    has_val = a_val is not None and y_val is not None
    a_va_t = (np.ascontiguousarray(np.swapaxes(
        _fold_pairs(_slice_first(a_val).reshape(S, -1, d), pair, reps), 1, 2))
              if a_val is not None and y_val is not None else None)
    xk = _slice_first(x_star) if x_star is not None else None
    x_norm2 = np.sum(xk**2, axis=(1, 2, 3))[:, None] if xk is not None else None
    v_star = _column_space(x_star, r, tubes) if monitor_at and x_star is not None and r else None
    eta_ = eta_arr[..., None, None, None]

    uh = tubes.to_fourier(_slice_first(u0))  # (S, B, kf, n, R)
    out = Trajectory(train_loss=np.full((steps + 1, S, B), np.nan),
                     val_loss=np.full((steps + 1, S, B), np.nan),
                     rse=np.full((steps + 1, S, B), np.nan), u_last=uh, u_best=uh.copy(),
                     t_best=np.zeros((S, B), dtype=np.int64),
                     diverged=np.zeros((S, B), dtype=bool), u_min=uh.copy(),
                     t_min=np.zeros((S, B), dtype=np.int64))
    best = np.full((S, B), np.inf)
    lowest = np.full((S, B), np.inf)
    wanted = set(monitor_at)
    for t in range(steps + 1):
        z = tubes.from_fourier(uh @ _herm(uh))  # Z_t = U_t * U_t^T, (S, B, k, n, n)
        zf = z.reshape(S, B, d)[..., reps]
        resid = zf @ a_tr_t - y_train  # M(Z_t) - y on the training measurements
        with np.errstate(over="ignore", invalid="ignore"):
            loss = np.sum(resid**2, axis=2) / (4 * m)
        bad = ~np.isfinite(loss) & ~out.diverged
        if bad.any():  # freeze a run that blew up, keep the others going
            out.diverged |= bad
            uh[bad] = 0.0
        out.train_loss[t] = np.where(out.diverged, np.nan, loss)
        if has_val:
            rv = zf @ a_va_t - y_val
            val = np.where(out.diverged, np.nan, np.sum(rv**2, axis=2) / 4)
            out.val_loss[t] = val
            better = val < best
            best = np.where(better, val, best)
            out.u_best[better] = uh[better]
            out.t_best[better] = t
        if xk is not None:
            err = np.sum((z - xk[:, None]) ** 2, axis=(2, 3, 4)) / x_norm2
            out.rse[t] = np.where(out.diverged, np.nan, err)
            lower = out.rse[t] < lowest
            lowest = np.where(lower, out.rse[t], lowest)
            out.u_min[lower] = uh[lower]
            out.t_min[lower] = t
        if t in wanted and v_star is not None and r is not None:
            out.monitor[t] = _stage_metrics_fourier(uh, v_star, r)
        if t == steps:
            break
        # sym(M*(M(Z_t) - y)) / m: the exact gradient of the loss is this times U_t
        g_pairs = (resid @ a_tr) * (weight / m)
        g_full = np.empty((S, B, d))
        g_full[..., reps] = g_pairs
        g_full[..., pair[reps]] = g_pairs
        g = tubes.to_fourier(g_full.reshape(S, B, k, n, n))
        g = 0.5 * (g + _herm(g))  # symmetric already; this removes the rounding
        uh = uh - eta_ * (g @ uh)
    out.u_last = uh
    if not has_val:
        out.u_best, out.t_best = uh.copy(), np.full((S, B), steps, dtype=np.int64)
    if xk is None:
        out.u_min, out.t_min = uh.copy(), np.full((S, B), steps, dtype=np.int64)
    return out


@dataclass(frozen=True)
class FGDResult:
    """One run of :func:`fgd`.

    Attributes:
        U: the last iterate, ``n x R x k``.
        U_es: the iterate with the smallest validation loss (``tubal_fgd-eq-es``), or the last one
            when no validation data were given.
        t_es: its iteration.
        eta: the step size used.
        train_loss: the training loss at iterations ``0 .. steps``.
        val_loss: the validation loss at the same iterations (NaN without validation data).
        rse: the relative error at the same iterations (NaN without ``x_star``).
        diverged: whether the loss overflowed (the run was then stopped).
    """

    U: np.ndarray
    U_es: np.ndarray
    t_es: int
    eta: float
    train_loss: np.ndarray
    val_loss: np.ndarray
    rse: np.ndarray
    diverged: bool

    @property
    def X(self) -> np.ndarray:
        """The last estimate ``U * U^T``."""
        return t_product(self.U, t_transpose(self.U))

    @property
    def X_es(self) -> np.ndarray:
        """The early-stopped estimate ``U_es * U_es^T``."""
        return t_product(self.U_es, t_transpose(self.U_es))


def fgd(train: Measurements, R: int, *, init: Init = "small", alpha: float = 1e-8,
        eta: float | None = None, steps: int = 1000, val: Measurements | None = None,
        x_star: np.ndarray | None = None, rng: np.random.Generator | int = 0,
        u0: np.ndarray | None = None) -> FGDResult:
    """Factorized gradient descent on ``f(U) = ||y - M(U * U^T)||^2 / (4m)`` (``tubal_fgd-eq-loss``,
    ``tubal_fgd-eq-fgd``) with an ``n x R x k`` factor.

    Args:
        train: the measurements FGD descends on.
        R: the tubal rank of the factor, ``1 <= R <= n`` (over-parameterised when above the truth's).
        init: ``"small"`` (i.i.d. ``N(0, alpha^2/R)`` entries, ``tubal_fgd-eq-small``) or
            ``"spectral"`` (``tubal_fgd-eq-spectral``); ignored when ``u0`` is given.
        alpha: the scale of the small start.
        eta: the step size; by default :func:`default_step` of ``train``.
        steps: the number of updates.
        val: held-out measurements; the result then also holds the iterate with the smallest
            validation loss ``||y_val - M_val(U U^T)||^2 / 4`` (``tubal_fgd-eq-es``).
        x_star: the truth, only to record the relative error along the run.
        rng: the random source of the small start: a numpy ``Generator`` or a seed in
            ``[0, 2**32 - 1]``.
        u0: a starting factor of your own, ``n x R x k``.

    ``alpha`` and ``eta`` are in ``(0, inf)``, ``steps >= 1``.
    """
    _check_meas("train", train)
    if val is not None:
        _check_meas("val", val)
    n1, n2, k = train.shape
    if n1 != n2:
        raise ValueError(f"fgd recovers square-sliced tensors (n x n x k), got {train.shape}")
    R = check_int("R", R, 1, n1)
    check_choice("init", init, ("small", "spectral"))
    alpha = check_range("alpha", alpha, 0.0, low_open=True)
    steps = check_int("steps", steps, 1)
    gen = _generator(rng)
    if eta is not None:
        eta = check_range("eta", eta, 0.0, low_open=True)
    if val is not None and val.shape != train.shape:
        raise ValueError(f"val must measure tensors of the training shape {train.shape}, got {val.shape}")
    if x_star is not None:
        x_star = _tensor("x_star", x_star)
        if x_star.shape != train.shape:
            raise ValueError(f"x_star must have shape {train.shape}, got {x_star.shape}")
    if u0 is not None:
        u0 = _tensor("u0", u0)
        if u0.shape != (n1, R, k):
            raise ValueError(f"u0 must have shape {(n1, R, k)}, got {u0.shape}")
    elif init == "small":
        u0 = small_init(n1, R, k, alpha, gen)
    else:
        u0 = spectral_init(train, R)
    if eta is None:  # after every check: it costs a pass over the data
        eta = default_step(train)
    traj = descend(u0[None, None], train.A[None], train.y[None, None], eta, steps,
                   a_val=None if val is None else val.A[None],
                   y_val=None if val is None else val.y[None, None],
                   x_star=None if x_star is None else x_star[None])
    tubes = _Tubes(k)

    def real(uh: np.ndarray) -> np.ndarray:
        return _slice_last(tubes.from_fourier(uh[0, 0]))

    return FGDResult(U=real(traj.u_last), U_es=real(traj.u_best), t_es=int(traj.t_best[0, 0]),
                     eta=float(eta), train_loss=traj.train_loss[:, 0, 0],
                     val_loss=traj.val_loss[:, 0, 0], rse=traj.rse[:, 0, 0],
                     diverged=bool(traj.diverged[0, 0]))


# ----------------------------------------------------------------------------------------------
# The four stages
# ----------------------------------------------------------------------------------------------


def _column_space(x_star: np.ndarray, r: int, tubes: _Tubes) -> np.ndarray:
    """Fourier slices ``(..., kf, n, r)`` of ``V_X``: the top-``r`` eigenvectors of each slice of
    ``X*``."""
    xh = tubes.to_fourier(_slice_first(x_star))
    _, q = np.linalg.eigh(0.5 * (xh + _herm(xh)))
    return q[..., ::-1][..., :r]


def _stage_metrics_fourier(uh: np.ndarray, v: np.ndarray, r: int) -> np.ndarray:
    """:func:`stage_metrics` for Fourier slices ``uh`` (``(S, B, kf, n, R)``) against ``v``
    (``(S, kf, n, r)``); returns ``(S, B, 3)``."""
    v = v[:, None]  # (S, 1, kf, n, r)
    # W: the right singular vectors of V^H U for its r largest singular values; W_perp the others
    _, _, qh = np.linalg.svd(_herm(v) @ uh, full_matrices=True)  # qh: (S, B, kf, R, R)
    q = _herm(qh)
    uw, uw_perp = uh @ q[..., :r], uh @ q[..., r:]
    s_uw = np.linalg.svd(uw, compute_uv=False)  # (S, B, kf, r)
    signal = s_uw[..., -1].min(axis=-1)
    redundant = (np.linalg.svd(uw_perp, compute_uv=False).max(axis=(-1, -2))
                 if uw_perp.shape[-1] else np.zeros(signal.shape))
    # alignment: the sine of the largest principal angle between span(U W) and span(V_X)
    basis, _, _ = np.linalg.svd(uw, full_matrices=False)
    off = basis - v @ (_herm(v) @ basis)
    align = np.linalg.svd(off, compute_uv=False).max(axis=(-1, -2))
    return np.stack([signal, redundant, align], axis=-1)


def stage_metrics(u: np.ndarray, x_star: np.ndarray, r: int) -> dict[str, float]:
    """The three quantities of the four-stage analysis (``tubal_fgd-eq-stages``) for a factor ``u``
    (``n x R x k``) and the truth ``x_star`` of tubal rank ``r``.

    With ``V_X`` the column space of ``X*`` and, in every Fourier slice, ``W`` the top-``r`` right
    singular vectors of ``V_X^H U`` (``W_perp`` the rest):

    * ``signal``: ``sigma_min(U * W) = min_i sigma_r(U_i W_i)``;
    * ``redundant``: ``||U * W_perp|| = max_i ||U_i W_perp,i||``, the over-parameterised energy;
    * ``alignment``: ``||V_X_perp^T * V_{U*W}||``, the largest sine of the angles between the
      signal part's column space and ``V_X``.
    """
    u, x_star = _tensor("u", u), _tensor("x_star", x_star)
    n, R, k = u.shape
    if x_star.shape != (n, n, k):
        raise ValueError(f"x_star must have shape {(n, n, k)} to match u, got {x_star.shape}")
    r = check_int("r", r, 1, min(n, R))
    tubes = _Tubes(k)
    uh = tubes.to_fourier(_slice_first(u))[None, None]
    vals = _stage_metrics_fourier(uh, _column_space(x_star, r, tubes)[None], r)[0, 0]
    return {"signal": float(vals[0]), "redundant": float(vals[1]), "alignment": float(vals[2])}
