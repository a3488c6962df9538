"""The t-product algebra of third-order tensors (Kilmer and Martin), computed in the Fourier domain.

A real tensor ``A`` of shape ``(n1, n2, k)`` is read as an ``n1 x n2`` matrix whose entries are
*tubes* of length ``k`` (``A[i, j, :]``). Tubes multiply by circular convolution, so the t-product
``A * B`` is a matrix product in which every scalar product is a circular convolution
(``tubal_fgd-eq-tprod``). Equivalently it is the block-circulant matrix of ``A`` times the stacked
frontal slices of ``B`` (``tubal_fgd-eq-bcirc``), and, since the discrete Fourier transform along the
tubes diagonalises every circulant block, one ordinary matrix product per Fourier slice
(``tubal_fgd-eq-fourier``). Every function here works in that last form:

* :func:`t_product`, :func:`t_transpose`, :func:`t_identity`;
* :func:`t_svd` and :func:`tubal_rank`;
* :func:`t_spectral_norm`, the operator norm of ``bcirc(A)``;
* :func:`block_circulant`, :func:`unfold` and :func:`fold`, the definitions the FFT route is tested
  against.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iclr_lab.core.validation import check_array, check_int, check_range

__all__ = ["block_circulant", "fold", "t_identity", "t_product", "t_spectral_norm", "t_svd",
           "t_transpose", "tubal_rank", "unfold"]


def _tensor(name: str, value: Any) -> np.ndarray:
    """``value`` as a real float64 array of shape ``(n1, n2, k)``, non-empty and finite; a clear
    error naming ``name`` otherwise."""
    a = np.asarray(value)
    if a.ndim != 3:
        raise ValueError(f"{name} must be a third-order tensor of shape (n1, n2, k), got shape {a.shape}")
    if np.iscomplexobj(a):
        raise TypeError(f"{name} must be real, got dtype {a.dtype}")
    if 0 in a.shape:
        raise ValueError(f"{name} must not be empty (every side at least 1), got shape {a.shape}")
    if not np.all(np.isfinite(check_array(name, a, finite=False))):  # numeric, then finite
        raise ValueError(f"{name} must be finite (no NaN or infinity)")
    return a.astype(np.float64, copy=False)


def _slices(a: np.ndarray) -> np.ndarray:
    """The Fourier slices of ``a``: ``fft`` along the tubes, moved to the front, shape ``(k, n1, n2)``."""
    return np.moveaxis(np.fft.fft(a, axis=2), 2, 0)


def _from_slices(ah: np.ndarray) -> np.ndarray:
    """The real tensor whose Fourier slices are ``ah`` (shape ``(k, n1, n2)``); inverse of :func:`_slices`.

    The slices of a real tensor are conjugate-symmetric (``ah[k - i] = conj(ah[i])``), so the inverse
    FFT is real up to rounding, which the real part discards."""
    return np.fft.ifft(np.moveaxis(ah, 0, 2), axis=2).real


def t_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The t-product ``A * B`` of ``A`` (``n1 x n2 x k``) and ``B`` (``n2 x n3 x k``), an
    ``n1 x n3 x k`` tensor (``tubal_fgd-eq-tprod``).

    Computed slice by slice in the Fourier domain (``tubal_fgd-eq-fourier``): ``O(n1 n2 n3 k)`` for
    the products plus ``O((n1 n2 + n2 n3) k log k)`` for the transforms, against ``O(n1 n2 n3 k^2)``
    for the circular convolutions written out.
    """
    a, b = _tensor("a", a), _tensor("b", b)
    if a.shape[1] != b.shape[0] or a.shape[2] != b.shape[2]:
        raise ValueError(f"a (n1 x n2 x k) and b (n2 x n3 x k) must agree in n2 and k; got shapes "
                         f"{a.shape} and {b.shape}")
    return _from_slices(_slices(a) @ _slices(b))


def t_transpose(a: np.ndarray) -> np.ndarray:
    """The t-transpose ``A^T`` (``n2 x n1 x k``): transpose every frontal slice and reverse the order
    of slices ``1 .. k-1`` (``tubal_fgd-eq-transpose``). In the Fourier domain each slice becomes its
    conjugate transpose, so ``(A * B)^T = B^T * A^T``."""
    a = _tensor("a", a)
    at = np.transpose(a, (1, 0, 2))
    return np.concatenate([at[:, :, :1], at[:, :, :0:-1]], axis=2)


def t_identity(n: int, k: int) -> np.ndarray:
    """The identity tensor ``n x n x k``: the identity matrix in the first frontal slice, zeros in the
    others; ``I * A = A`` for every ``A`` with ``n`` rows."""
    n, k = check_int("n", n, 1), check_int("k", k, 1)
    out = np.zeros((n, n, k))
    out[:, :, 0] = np.eye(n)
    return out


def unfold(a: np.ndarray) -> np.ndarray:
    """The frontal slices of ``A`` (``n1 x n2 x k``) stacked vertically: an ``(n1 k) x n2`` matrix."""
    a = _tensor("a", a)
    return np.concatenate([a[:, :, i] for i in range(a.shape[2])], axis=0)


def fold(m: np.ndarray, k: int) -> np.ndarray:
    """The inverse of :func:`unfold`: an ``(n1 k) x n2`` matrix back to an ``n1 x n2 x k`` tensor.

    ``m`` is a non-empty finite real matrix whose row count is a multiple of ``k >= 1``."""
    k = check_int("k", k, 1)
    m = np.asarray(check_array("m", m))  # numeric, non-empty and finite
    if np.iscomplexobj(m):
        raise TypeError(f"m must be real, got dtype {m.dtype}")
    m = m.astype(np.float64, copy=False)
    if m.ndim != 2 or m.shape[0] % k:
        raise ValueError(f"m must be a matrix whose row count is a multiple of k = {k}, got shape {m.shape}")
    return np.stack(np.split(m, k, axis=0), axis=2)


def block_circulant(a: np.ndarray) -> np.ndarray:
    """``bcirc(A)``: the ``(n1 k) x (n2 k)`` block-circulant matrix whose block ``(i, j)`` is the
    frontal slice ``A[:, :, (i - j) mod k]`` (``tubal_fgd-eq-bcirc``). ``A * B = fold(bcirc(A)
    unfold(B))`` is the definition of the t-product; the FFT diagonalises ``bcirc(A)`` into the
    Fourier slices of ``A``."""
    a = _tensor("a", a)
    n1, n2, k = a.shape
    out = np.empty((n1 * k, n2 * k))
    for i in range(k):
        for j in range(k):
            out[i * n1:(i + 1) * n1, j * n2:(j + 1) * n2] = a[:, :, (i - j) % k]
    return out


def t_svd(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (economy) t-SVD ``A = U * S * V^T`` (``tubal_fgd-eq-tsvd``).

    With ``p = min(n1, n2)``: ``U`` is ``n1 x p x k`` and ``V`` is ``n2 x p x k``, both with
    orthonormal columns (``U^T * U = I``), and ``S`` is ``p x p x k`` and f-diagonal (every frontal
    slice diagonal); its diagonal tubes are the *singular tubes*, sorted by their Fourier values.
    One SVD per Fourier slice; the slices ``i > k/2`` are taken as conjugates of ``k - i``, which
    makes the three factors real.
    """
    a = _tensor("a", a)
    ah = _slices(a)
    k = ah.shape[0]
    u, s, vh = np.linalg.svd(ah, full_matrices=False)
    # Slice 0 (and slice k/2 when k is even) of a real tensor is real: take its SVD in real
    # arithmetic, or the singular vectors carry arbitrary complex phases and U, V come out complex.
    for i in {0, k // 2} if k % 2 == 0 else {0}:
        u[i], s[i], vh[i] = np.linalg.svd(ah[i].real, full_matrices=False)
    for i in range(k // 2 + 1, k):  # slices above k/2 are the conjugates of those below
        u[i], s[i], vh[i] = u[k - i].conj(), s[k - i], vh[k - i].conj()
    sh = np.zeros(s.shape + (s.shape[-1],), dtype=complex)
    idx = np.arange(s.shape[-1])
    sh[:, idx, idx] = s
    return _from_slices(u), _from_slices(sh), _from_slices(np.conj(np.swapaxes(vh, 1, 2)))


def tubal_rank(a: np.ndarray, tol: float | None = None) -> int:
    """The tubal rank of ``A``: the number of nonzero singular tubes, i.e. the largest rank of its
    Fourier slices (``tubal_fgd-eq-tsvd``).

    A Fourier singular value counts as nonzero when it exceeds ``tol``; by default
    ``max(n1, n2) * eps * largest singular value``, as ``numpy.linalg.matrix_rank`` does.
    """
    a = _tensor("a", a)
    s = np.linalg.svd(_slices(a), compute_uv=False)
    if tol is None:
        tol = max(a.shape[:2]) * np.finfo(np.float64).eps * float(s.max(initial=0.0))
    else:
        tol = check_range("tol", tol, 0.0)
    return int((s > tol).sum(axis=1).max(initial=0))


def t_spectral_norm(a: np.ndarray) -> float:
    """The spectral norm ``||A|| = max_i ||Â_i||_2`` over the Fourier slices, which equals the
    operator norm of ``bcirc(A)`` (the Frobenius norm is the plain ``numpy.linalg.norm`` of the
    entries)."""
    a = _tensor("a", a)
    return float(np.linalg.norm(_slices(a), ord=2, axis=(1, 2)).max())
