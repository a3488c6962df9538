"""Sparse ReLU network recovery by iterative hard thresholding: what a user imports.

A two-layer scalar-output ReLU network ``y = sum_j (X u_j)_+ v_j`` becomes a *linear* sensing
problem once each neuron's activation pattern is fixed by a generator ``h_j``
(``sparse_relu_iht-eq-gated``): with fused weights ``w_j = u_j v_j``,

    y = A w,   A = [D_1 X, ..., D_p X],   D_j = diag(1[X h_j > 0])      (sparse_relu_iht-eq-sensing)

and a sparse network is a sparse ``w``. :class:`SensingOperator` applies ``A`` and ``A^T`` one
``n x d`` block at a time and never stores it; :func:`iht` runs the accelerated IHT of the authors'
code (a normalised gradient step, a streaming top-s, a few backtracking steps on the support, and,
by default, the *sequential* pattern update ``h_j <- w_j``). The baselines are least squares and
orthogonal matching pursuit on the stored ``A`` (:func:`least_squares`, :func:`omp`) and iterative
magnitude pruning with rewinding on a dense network (:func:`imp`, torch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr_lab.core.validation import check_array, check_int, check_range, check_seed

if TYPE_CHECKING:
    import torch

__all__ = ["IHTResult", "IMPResult", "PlantedMLP", "SensingOperator", "hard_threshold", "iht",
           "imp", "imp_rounds", "imp_sweep", "least_squares", "omp", "planted_mlp", "psnr", "relu_net"]

#: PSNR floors the mean squared error here, so that an exact fit reads as a large finite number
#: (about 320 dB for max|y| = 1) instead of infinity.
MSE_FLOOR = 1e-32
#: IMP's training takes ``X^T g`` on the surviving input rows only when there are at least this
#: many (MKL rounds a product of one or two rows differently from the same rows of a larger one)
_MIN_ROWS = 8


# ----------------------------------------------------------------------------------------------
# The planted network and the metric
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlantedMLP:
    """A planted sparse two-layer network and its data.

    Attributes:
        X: inputs, ``n x d``, i.i.d. ``N(0, 1)``.
        W: first-layer weights, ``d x m`` with ``s`` nonzeros; the output weights are all 1, so
            ``W`` is also the fused weight ``w_j = u_j v_j`` of ``sparse_relu_iht-eq-sensing``.
        y: labels ``sum_j (X W[:, j])_+`` (``sparse_relu_iht-eq-net``).
    """

    X: np.ndarray
    W: np.ndarray
    y: np.ndarray

    @property
    def s(self) -> int:
        """Number of nonzero weights."""
        return int(np.count_nonzero(self.W))

    @property
    def fused(self) -> np.ndarray:
        """The fused weights in the block order of :class:`SensingOperator`: ``(m, d)``."""
        return self.W.T.copy()


def relu_net(X: np.ndarray, W: np.ndarray, v: np.ndarray | None = None) -> np.ndarray:
    """``sum_j (X W[:, j])_+ v_j`` (``sparse_relu_iht-eq-net``); ``v`` defaults to all ones.

    ``X`` is ``n x d``, ``W`` is ``d x m`` and ``v`` has ``m`` entries, all finite."""
    X = check_array("X", X, ndim=2)
    W = check_array("W", W, shape=(X.shape[1], None))
    if v is not None:
        v = check_array("v", v, shape=(W.shape[1],))
    h = np.maximum(X @ W, 0.0)
    return h.sum(axis=1) if v is None else h @ v


def planted_mlp(n: int, d: int, m: int, s: int, rng: np.random.Generator, *,
                per_neuron: int | None = None) -> PlantedMLP:
    """Draw a planted sparse network and ``n`` Gaussian inputs.

    Two designs:

    * ``per_neuron=None`` (the authors' ``planted_nn_model.get_weights``): ``s`` of the ``d m``
      first-layer weights, at uniformly random positions, with ``N(0, 1)`` values;
    * ``per_neuron=k``: every neuron has exactly ``k`` nonzeros, on coordinates that no other
      neuron uses (``s = k m``, so ``k m <= d``); the theory's setting with well separated patterns.

    The output weights are all 1 (as in the authors' code), so the fused weights are ``W`` itself.
    Draws are repeated (at most 100 times) until some label is nonzero, as the authors' code skips
    all-zero label vectors.
    """
    n = check_int("n", n, 1)
    d = check_int("d", d, 1)
    m = check_int("m", m, 1)
    s = check_int("s", s, 1, d * m)
    if per_neuron is not None:
        k = check_int("per_neuron", per_neuron, 1, d)
        if k * m > d:
            raise ValueError(f"per_neuron * m must be <= d for disjoint supports, got {k} * {m} > {d}")
        if s != k * m:
            raise ValueError(f"s must equal per_neuron * m = {k * m} when per_neuron is set, got {s}")
    for _ in range(100):
        W = np.zeros((d, m))
        if per_neuron is None:
            pos = rng.choice(d * m, size=s, replace=False)
            W.flat[pos] = rng.standard_normal(s)
        else:
            coords = rng.permutation(d)[: s].reshape(m, per_neuron)
            for j in range(m):
                W[coords[j], j] = rng.standard_normal(per_neuron)
        X = rng.standard_normal((n, d))
        y = relu_net(X, W)
        if np.max(np.abs(y)) > 0:
            return PlantedMLP(X, W, y)
    raise RuntimeError("every draw gave all-zero labels; increase n")


def psnr(y: np.ndarray, y_hat: np.ndarray) -> float:
    """``20 log10(max|y|) - 10 log10(MSE)`` in dB, the authors' metric (``sparse_relu_iht-eq-psnr``).

    The MSE is floored at ``MSE_FLOOR`` (``1e-32``), so that an exact fit gives a finite number.
    ``y`` (1-D) must be finite; a NaN in ``y_hat`` (a fit that diverged) propagates: the PSNR is
    NaN, which the learning-rate tuning reads as a diverged run.
    """
    y = check_array("y", y, ndim=1).astype(float)
    y_hat = check_array("y_hat", y_hat, shape=y.shape, finite=False)
    mse = float(np.mean((y - np.asarray(y_hat, dtype=float)) ** 2))
    peak = float(np.max(np.abs(y)))
    if peak == 0:
        raise ValueError("y must not be all zero: PSNR is undefined")
    return 20 * math.log10(peak) - 10 * math.log10(max(mse, MSE_FLOOR))


# ----------------------------------------------------------------------------------------------
# The sensing operator, one block at a time
# ----------------------------------------------------------------------------------------------


class SensingOperator:
    """``A = [D_1 X, ..., D_p X]`` of ``sparse_relu_iht-eq-sensing``, applied block by block.

    ``A`` is never stored: block ``j`` is rebuilt from ``X`` and the generator ``h_j`` when needed.
    Generators come from one of three sources:

    * ``generators`` (a ``p x d`` array): fixed, e.g. the planted neurons (oracle patterns);
    * ``seed`` alone: ``h_j ~ N(0, I)`` regenerated from ``(seed, j)`` on demand, as the authors'
      ``NNFlyMatrix`` does, so nothing of size ``p d`` is kept;
    * :meth:`set_sparse_generators`: ``h_j = w_j`` from a sparse iterate (the sequential update).

    Column ``j d + i`` is input coordinate ``i`` gated by neuron ``j``.
    """

    def __init__(self, X: np.ndarray, p: int, *, generators: np.ndarray | None = None,
                 seed: int = 0) -> None:
        X = check_array("X", X, ndim=2).astype(float)
        self.X = X
        self.n, self.d = X.shape
        self.p = check_int("p", p, 1)
        self.seed = check_seed(seed)
        self._dense: np.ndarray | None = None
        self._sparse: tuple[np.ndarray, np.ndarray] | None = None
        # the patterns 1[X h_j > 0] of the blocks that columns() built since the generators last
        # changed (n booleans each, read-only; at most those of the supports of one outer step):
        # IHT asks for them several times per outer step
        self._patterns: dict[int, np.ndarray] = {}
        if generators is not None:
            g = check_array("generators", generators, ndim=2).astype(float)
            if g.shape != (self.p, self.d):
                raise ValueError(f"generators must have shape (p, d) = {(self.p, self.d)}, "
                                 f"got {g.shape}")
            self._dense = g

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, d p)``."""
        return self.n, self.d * self.p

    def generator(self, j: int) -> np.ndarray:
        """``h_j``, a length-``d`` vector."""
        if self._dense is not None:
            return self._dense[j]
        if self._sparse is not None:
            idx, vals = self._sparse
            h = np.zeros(self.d)
            sel = (idx // self.d) == j
            h[idx[sel] % self.d] = vals[sel]
            return h
        h = np.random.default_rng([self.seed, j]).standard_normal((self.d,))
        return np.asarray(h, dtype=float)

    def set_sparse_generators(self, idx: np.ndarray, vals: np.ndarray) -> None:
        """The sequential update ``h_j <- w_j`` (``sparse_relu_iht-eq-scp``): generators from a
        sparse iterate; a neuron whose weights are all zero gets the all-zero pattern."""
        self._dense = None
        self._sparse = (np.asarray(idx, dtype=np.int64).copy(), np.asarray(vals, dtype=float).copy())
        self._patterns = {}

    def pattern(self, j: int) -> np.ndarray:
        """The activation pattern ``diag(D_j) = 1[X h_j > 0]`` (strict, as in the authors' code)."""
        pat = self._patterns.get(j)
        return self.X @ self.generator(j) > 0 if pat is None else pat.copy()

    def _kept_pattern(self, j: int) -> np.ndarray:
        """:meth:`pattern`, kept (read-only) until the generators change."""
        pat = self._patterns.get(j)
        if pat is None:
            pat = self.X @ self.generator(j) > 0
            pat.setflags(write=False)
            self._patterns[j] = pat
        return pat

    def block(self, j: int) -> np.ndarray:
        """``D_j X``, ``n x d``."""
        return self.pattern(j)[:, None] * self.X

    def columns(self, idx: np.ndarray) -> np.ndarray:
        """The columns ``A[:, idx]`` (``n x len(idx)``): the patterns of the blocks that ``idx``
        touches (one each, at most ``len(idx)``), times the input columns."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size == 0:
            return np.zeros((self.n, 0))
        blocks, which = np.unique(idx // self.d, return_inverse=True)
        patterns = np.stack([self._kept_pattern(int(j)) for j in blocks], axis=1)
        # into a row-major array: the products A_S w and A_S^T r then round as they always have
        # (column-wise fancy indexing alone would give a column-major one)
        out = np.empty((self.n, idx.size))
        return np.multiply(patterns[:, which], self.X[:, idx % self.d], out=out)

    def matvec(self, idx: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """``A w`` for the sparse ``w`` with entries ``vals`` at ``idx``."""
        return self.columns(idx) @ np.asarray(vals, dtype=float)

    def rmatvec_block(self, j: int, r: np.ndarray) -> np.ndarray:
        """``(D_j X)^T r``: block ``j`` of the gradient ``A^T r``."""
        pat = self._patterns.get(j)
        return self.X.T @ ((self.X @ self.generator(j) > 0 if pat is None else pat) * r)

    def dense(self) -> np.ndarray:
        """The whole ``n x d p`` matrix, for the baselines that need it (and for tests)."""
        return np.hstack([self.block(j) for j in range(self.p)])


def hard_threshold(v: np.ndarray, s: int) -> np.ndarray:
    """Indices of the ``s`` largest entries of ``|v|`` (``H_s`` of ``sparse_relu_iht-eq-iht``),
    sorted; ties are broken by position so that the result is deterministic. ``v`` is a finite,
    non-empty 1-D array."""
    v = check_array("v", v, ndim=1)
    return _hard_threshold(v, check_int("s", s, 0, v.size))


def _hard_threshold(v: np.ndarray, s: int) -> np.ndarray:
    """:func:`hard_threshold` without the checks, for the streaming projection's inner loop."""
    if s == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(v.size), -np.abs(v)))
    return np.sort(order[:s]).astype(np.int64)


# ----------------------------------------------------------------------------------------------
# IHT
# ----------------------------------------------------------------------------------------------


@dataclass
class IHTResult:
    """What :func:`iht` returns.

    Attributes:
        idx: positions of the nonzero fused weights (column ``j d + i`` is input ``i`` of
            neuron ``j``).
        vals: their values.
        shape: ``(p, d)``, the block layout of the fused weights.
        history: one row per gradient evaluation (full or on the support):
            ``{"step", "evals", "kind", "residual", "error"}``; ``residual`` is
            ``||A w - y|| / ||y||`` and ``error`` ``||w - w*|| / ||w*||`` (NaN without ``w_true``).
        working_floats: peak number of floats the run held besides the data ``X, y`` (its ledger:
            residual, one block, the top-s buffer, the support's columns, the iterate).
        generators: the final generators, for predictions of a gated network (``None`` when the
            network is the plain ReLU network of its own weights).
    """

    idx: np.ndarray
    vals: np.ndarray
    shape: tuple[int, int]
    history: list[dict[str, Any]] = field(default_factory=list)
    working_floats: int = 0
    generators: SensingOperator | None = None

    @property
    def nonzeros(self) -> int:
        """Number of stored nonzero weights."""
        return int(np.count_nonzero(self.vals))

    def weights(self) -> np.ndarray:
        """Dense fused weights ``(p, d)`` (for inspection; the algorithm never forms them)."""
        w = np.zeros(self.shape[0] * self.shape[1])
        w[self.idx] = self.vals
        return w.reshape(self.shape)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The network's output on ``X``: the plain ReLU network ``sum_j (X w_j)_+`` after the
        sequential pattern update, the gated network ``sum_j D_j X w_j`` with fixed generators."""
        W = self.weights()
        X = np.asarray(X, dtype=float)
        if self.generators is None:
            return relu_net(X, W.T)
        op = SensingOperator(X, self.shape[0], generators=np.stack(
            [self.generators.generator(j) for j in range(self.shape[0])]))
        return op.matvec(self.idx, self.vals)


def _streaming_top_s(op: SensingOperator, r: np.ndarray, idx: np.ndarray, vals: np.ndarray,
                     mu: float, s: int) -> tuple[np.ndarray, np.ndarray]:
    """``H_s(w - mu A^T r)`` computed block by block, keeping at most ``s`` candidates: only one
    block of the gradient exists at a time (``sparse_relu_iht-eq-iht``)."""
    d = op.d
    keep_i = np.zeros(0, dtype=np.int64)
    keep_v = np.zeros(0)
    blocks = idx // d
    for j in range(op.p):
        cand = -mu * op.rmatvec_block(j, r)
        sel = blocks == j
        cand[idx[sel] % d] += vals[sel]
        ci = np.concatenate([keep_i, j * d + np.arange(d)])
        cv = np.concatenate([keep_v, cand])
        top = _hard_threshold(cv, min(s, cv.size))
        keep_i, keep_v = ci[top], cv[top]
    order = np.argsort(keep_i)
    return keep_i[order], keep_v[order]


def _normalised_step(g: np.ndarray, Ag: np.ndarray) -> float:
    """``||g||^2 / ||A g||^2`` (``sparse_relu_iht-eq-step``), 0 when ``A g = 0``.

    The authors' code adds ``1e-8`` to the denominator, harmless in float32; in float64 it shrinks
    the step to nothing once ``||A g||^2`` falls below ``1e-8`` and stops IHT at a relative error
    near ``1e-9``. Only a zero denominator is guarded here."""
    den = float(Ag @ Ag)
    return float(g @ g) / den if den > 0 else 0.0


def iht(X: np.ndarray, y: np.ndarray, s: int, *, width: int | None = None,
        generators: np.ndarray | None = None, steps: int = 15, refine: int = 10,
        update_patterns: bool = True, seed: int = 0, w_true: np.ndarray | None = None,
        tol: float = 0.0) -> IHTResult:
    """Recover ``s`` fused weights of a two-layer ReLU network from ``(X, y)`` by accelerated IHT.

    One outer step (``sparse_relu_iht-eq-iht``, following the authors' ``AIHT_step``):

    1. residual ``r = A w - y`` and the normalised step ``mu = ||g_S||^2 / ||A_S g_S||^2`` on the
       current support ``S`` (on an empty support, on the top-s of the gradient, as in normalised
       IHT: see the chapter's implementation choices);
    2. ``w <- H_s(w - mu A^T r)``, streamed over the ``p`` blocks of ``A``;
    3. ``refine`` gradient steps on the new support with Armijo backtracking (``mu`` halves up to
       ten times; a step that still fails ends the refinement);
    4. if ``update_patterns`` (and after the first step, as in the authors' code), the sequential
       update ``h_j <- w_j`` (``sparse_relu_iht-eq-scp``).

    Args:
        X, y: data ``n x d`` and labels ``n``.
        s: number of nonzero fused weights, ``1 <= s <= d p``.
        width: number of neurons ``p`` (blocks); required unless ``generators`` is given.
        generators: fixed generators ``p x d`` (e.g. the planted neurons); else ``h_j ~ N(0, I)``
            regenerated from ``(seed, j)``.
        steps: outer steps. refine: gradient steps on the support per outer step.
        update_patterns: the sequential pattern update (the authors' default); ``False`` keeps the
            generators fixed (a gated ReLU network, the setting of the theory).
        w_true: the planted fused weights ``(p, d)``, to record the recovery error.
        tol: stop once the relative residual is at most ``tol`` (0: run every step).
    """
    X = check_array("X", X, ndim=2).astype(float)
    y = check_array("y", y, shape=(X.shape[0],)).astype(float)
    if generators is not None:
        generators = check_array("generators", generators, ndim=2)
        p = int(generators.shape[0])
    elif width is None:
        raise ValueError("width must be given when generators is None")
    else:
        p = check_int("width", width, 1)
    n, d = X.shape
    s = check_int("s", s, 1, d * p)
    steps = check_int("steps", steps, 1)
    refine = check_int("refine", refine, 0)
    check_range("tol", tol, 0.0)
    op = SensingOperator(X, p, generators=generators, seed=seed)
    wt = None if w_true is None else check_array("w_true", w_true, shape=(p, d)).astype(
        float).reshape(-1)
    ny = float(np.linalg.norm(y)) or 1.0
    nw = float(np.linalg.norm(wt)) if wt is not None else 1.0

    def error(i: np.ndarray, v: np.ndarray) -> float:
        if wt is None:
            return math.nan
        diff = wt.copy()
        diff[i] -= v
        return float(np.linalg.norm(diff)) / (nw or 1.0)

    idx = np.zeros(0, dtype=np.int64)
    vals = np.zeros(0)
    hist: list[dict[str, Any]] = []
    evals = 0
    # ledger of floats held besides X and y: residual (n), one block (n d), the top-s buffer and
    # the candidates of one block (2 (s + d)), the support's columns (n s), iterate and indices (2 s)
    working = n + n * d + 2 * (s + d) + n * s + 2 * s
    hist.append({"step": 0, "evals": 0, "kind": "start", "residual": 1.0, "error": error(idx, vals)})
    # the support's columns A_S and the residual res = A_S vals - y carry over from one outer
    # step to the next (they are what A w - y needs); only the sequential pattern update changes A
    A_S = op.columns(idx)
    res = A_S @ vals - y
    for k in range(steps):
        if update_patterns and k > 1:  # the patterns changed at the end of the last step
            A_S = op.columns(idx)
            res = A_S @ vals - y
        r = res
        if idx.size:
            g_S = A_S.T @ r
            mu = _normalised_step(g_S, A_S @ g_S)
            idx, vals = _streaming_top_s(op, r, idx, vals, mu, s)
        else:
            # empty support: a unit step selects the support; mu is then set on that support
            idx0, g0 = _streaming_top_s(op, r, idx, vals, 1.0, s)
            A_S = op.columns(idx0)
            mu = _normalised_step(g0, A_S @ g0)
            idx, vals = idx0, mu * g0
        evals += 1
        A_S = op.columns(idx)
        res = A_S @ vals - y
        f = float(res @ res)
        hist.append({"step": k + 1, "evals": evals, "kind": "full", "residual": math.sqrt(f) / ny,
                     "error": error(idx, vals)})
        for _ in range(refine):
            g = A_S.T @ res
            gg = float(g @ g)
            evals += 1
            accepted = False
            for _try in range(11):
                trial = vals - mu * g
                res_t = A_S @ trial - y
                f_t = float(res_t @ res_t)
                if f_t <= f - 0.9 * mu * gg:
                    vals, res, f, accepted = trial, res_t, f_t, True
                    break
                mu /= 2
            hist.append({"step": k + 1, "evals": evals, "kind": "support",
                         "residual": math.sqrt(f) / ny, "error": error(idx, vals)})
            if not accepted or gg == 0.0:
                break
        if update_patterns and k > 0:
            op.set_sparse_generators(idx, vals)
        if math.sqrt(f) / ny <= tol:
            break
    keep = vals != 0
    return IHTResult(idx[keep], vals[keep], (p, d), hist, working,
                     None if update_patterns else op)


# ----------------------------------------------------------------------------------------------
# Baselines on the stored matrix
# ----------------------------------------------------------------------------------------------


def least_squares(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The minimum-norm least-squares solution of ``A w = y`` (``numpy.linalg.lstsq``): the
    baseline that ignores sparsity."""
    A = check_array("A", A, ndim=2).astype(float)
    y = check_array("y", y, shape=(A.shape[0],)).astype(float)
    return np.linalg.lstsq(A, y, rcond=None)[0]


def omp(A: np.ndarray, y: np.ndarray, s: int) -> np.ndarray:
    """Orthogonal matching pursuit: ``s`` greedy picks of the column most correlated with the
    residual (columns normalised), each followed by least squares on the picked columns."""
    A = check_array("A", A, ndim=2).astype(float)
    y = check_array("y", y, shape=(A.shape[0],)).astype(float)
    s = check_int("s", s, 1, A.shape[1])
    norms = np.linalg.norm(A, axis=0)
    norms[norms == 0] = np.inf  # an all-zero column (a silent input) is never picked
    support: list[int] = []
    coef = np.zeros(0)
    r = y.copy()
    for _ in range(s):
        score = np.abs(A.T @ r) / norms
        score[support] = -1.0
        support.append(int(np.argmax(score)))
        coef = np.linalg.lstsq(A[:, support], y, rcond=None)[0]
        r = y - A[:, support] @ coef
    w = np.zeros(A.shape[1])
    w[support] = coef
    return w


# ----------------------------------------------------------------------------------------------
# Iterative magnitude pruning (torch)
# ----------------------------------------------------------------------------------------------


@dataclass
class IMPResult:
    """What :func:`imp` returns.

    Attributes:
        W: first-layer weights ``d x m`` with at most ``s`` nonzeros.
        v: output weights ``m`` (dense, not pruned).
        rounds: pruning rounds.
        steps: Adam steps in all (the gradient budget used).
        dense_params: parameters of the dense network ``d m + m`` that training holds.
        working_floats: floats held while training besides the data: weights, gradients, two Adam
            moments and the mask, ``5 (d m + m) + d m``, and what the backward pass keeps, the
            pre-activations and activations of the ``n`` samples and the output, ``2 n m + n``.
        losses: training loss after each phase (one per round, plus the final ticket).
    """

    W: np.ndarray
    v: np.ndarray
    rounds: int
    steps: int
    dense_params: int
    working_floats: int
    losses: list[float] = field(default_factory=list)

    @property
    def nonzeros(self) -> int:
        """The number of nonzeros stored at the end (pruned first layer and dense output layer)."""
        return int(np.count_nonzero(self.W) + np.count_nonzero(self.v))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """``sum_j (X W[:, j])_+ v_j``."""
        return relu_net(np.asarray(X, dtype=float), self.W, self.v)


def imp_rounds(total: int, s: int, prune_fraction: float | None) -> list[int]:
    """The first-layer weight counts after each pruning round: ``10 %`` of the survivors per round
    (the authors' ``prune_iters = 0.1``) until ``s`` is reached, the last round clipped to ``s``;
    ``prune_fraction=None`` prunes to ``s`` in one round (one-shot)."""
    total = check_int("total", total, 1)
    s = check_int("s", s, 1, total)
    if prune_fraction is None:
        return [s] if s < total else []
    check_range("prune_fraction", prune_fraction, 0.0, 1.0, low_open=True, high_open=True)
    counts, c = [], total
    while c > s:
        c = max(s, int(math.floor(c * (1.0 - prune_fraction))))
        counts.append(c)
    return counts


def _mse_grads(Xt: torch.Tensor, yt: torch.Tensor, u: torch.Tensor, v: torch.Tensor,
               mask: torch.Tensor, XT: torch.Tensor | None = None,
               rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradients in ``u`` and ``v`` (torch tensors) of IMP's loss
    ``mean((relu(X (u * mask)) v - y)^2)``, written out as autograd computes them, operation for
    operation (mean, square, matrix-vector product, ReLU, matrix product, mask), so that they equal
    ``loss.backward()``'s bit for bit (a test checks it). ``XT``, when given, is ``Xt.T`` stored
    contiguously (a training loop makes it once): the product ``X^T g`` then reads rows, a fifth
    faster, with the same numbers (a test checks it). ``rows``, when given, keeps those rows of
    ``X^T g`` before the mask (``X`` and ``u`` being those columns and rows of the whole ones, ``XT``
    the whole ``X^T``)."""
    import torch

    h = torch.relu(Xt @ (u * mask))
    ge = (1.0 / yt.numel()) * (2.0 * (h @ v - yt))          # d loss / d (h v - y)
    gz = torch.ops.aten.threshold_backward(torch.outer(ge, v), h, 0)  # ReLU's backward
    gX = (Xt.T if XT is None else XT) @ gz
    return (gX if rows is None else gX[rows]) * mask, h.T @ ge


def _adam_flat(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor,
               exp_avg_sq: torch.Tensor, step: int, lr: float,
               betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
    """:func:`iclr_lab.core.nn.adam_update` without its per-call argument checks (the caller
    checked ``lr`` once), for IMP's ``u`` and ``v`` held in one flat tensor: its operations, in its
    order, are elementwise, so one call on the two tensors laid end to end gives the numbers of one
    call on each, bit for bit (a test checks it), with half the calls in the thousands of tiny steps
    of IMP's training."""
    beta1, beta2 = betas
    bias_correction1 = 1 - beta1 ** float(step)
    bias_correction2_sqrt = (1 - beta2 ** float(step)) ** 0.5
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-(lr / bias_correction1))


def _imp_checked(X: np.ndarray, y: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``X`` (n x d) and ``y`` (n) as float arrays, and the width, checked for :func:`imp`."""
    X = check_array("X", X, ndim=2, finite=True).astype(float)
    y = check_array("y", y, shape=(X.shape[0],), finite=True).astype(float)
    return X, y, check_int("width", width, 1)


def _imp_tree(X: np.ndarray, y: np.ndarray, m: int, schedules: dict[int, list[int]],
              per_phase: int, lr: float, seed: int) -> dict[int, IMPResult]:
    """IMP for several target sparsities at once: ``schedules`` maps each ``s`` to its counts
    (:func:`imp_rounds`). A training phase depends only on the mask it starts from, and the
    schedules of different ``s`` agree until the round that clips to ``s``, so the phases they share
    are trained once and the run branches where the counts part. Each ``s`` gets exactly the
    numbers a run for that ``s`` alone computes (same operations, same order)."""
    import torch

    n, d = X.shape
    gen = torch.Generator().manual_seed(seed)
    # torch.nn.Linear's default initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn from gen
    u0 = (torch.rand(d, m, generator=gen, dtype=torch.float64) * 2 - 1) / math.sqrt(d)
    v0 = (torch.rand(m, generator=gen, dtype=torch.float64) * 2 - 1) / math.sqrt(m)
    Xt = torch.as_tensor(X)
    yt = torch.as_tensor(y)
    XT = Xt.T.contiguous()
    dense = d * m + m
    out: dict[int, IMPResult] = {}

    def train(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        u = u0 * mask   # rewind the survivors to their init, and reset Adam
        v = v0.clone()
        # Only the inputs that some surviving weight reads enter the products: a pruned weight is
        # zero, its gradient is masked to zero and Adam leaves it as it is, so the rows of u that
        # the mask empties never change, and dropping their zero terms from X (u * mask) leaves
        # every sum as it was (same order, same numbers; a test checks it). X^T g is taken on the
        # surviving rows only when there are at least _MIN_ROWS of them (the products of one or
        # two rows round differently; then it is taken on all rows and the surviving ones kept).
        rows = torch.nonzero(mask.sum(dim=1) > 0).flatten()
        full = rows.numel() == d
        uR = u if full else u[rows]
        maskR = mask if full else mask[rows]
        # X's surviving columns as the transpose of X^T's rows: a gather of whole rows, and the
        # product through the transposed view gives the contiguous copy's numbers (a test checks it)
        XTrows = XT if full else torch.index_select(XT, 0, rows)
        XR = Xt if full else XTrows.T
        XTR = XTrows if full or rows.numel() >= _MIN_ROWS else None
        # u's surviving rows and v end to end in one tensor, for one Adam call per step
        k = uR.numel()
        flat = torch.cat([uR.flatten(), v])
        uR, v = flat[:k].view(uR.shape), flat[k:]
        exp_avg, exp_avg_sq = torch.zeros_like(flat), torch.zeros_like(flat)
        for t in range(1, per_phase + 1):
            # torch.optim.Adam on autograd's gradient, written out (_mse_grads, _adam_flat): the
            # same numbers bit for bit at a third of the cost, these runs being thousands of tiny steps
            gu, gv = (_mse_grads(XR, yt, uR, v, maskR, XT, rows) if XTR is None
                      else _mse_grads(XR, yt, uR, v, maskR, XTR))
            _adam_flat(flat, torch.cat([gu.flatten(), gv]), exp_avg, exp_avg_sq, t, lr)
        if full:
            u = uR
        else:
            u[rows] = uR
        with torch.no_grad():
            loss = float(torch.mean((torch.relu(Xt @ (u * mask)) @ v - yt) ** 2))
        return u, v, loss

    def prune(u: torch.Tensor, mask: torch.Tensor, count: int) -> torch.Tensor:
        # the smallest surviving magnitudes go (global, first layer)
        with torch.no_grad():
            mag = torch.where(mask > 0, (u * mask).abs(), torch.full_like(u, -1.0)).flatten()
            keep = torch.argsort(mag, descending=True, stable=True)[:count]
            new = torch.zeros(d * m, dtype=torch.float64)
            new[keep] = 1.0
            return new.reshape(d, m)

    # depth-first over the tree of schedules: (mask, phase index, targets, losses so far)
    stack: list[tuple[torch.Tensor, int, list[int], list[float]]] = [
        (torch.ones(d, m, dtype=torch.float64), 0, sorted(schedules), [])]
    while stack:
        mask, k, targets, losses = stack.pop()
        u, v, loss = train(mask)
        losses = [*losses, loss]
        branches: dict[int, list[int]] = {}
        for s in targets:
            counts = schedules[s]
            if k == len(counts):  # this phase trained the final ticket of s
                with torch.no_grad():
                    W = (u * mask).detach().numpy().copy()
                    vv = v.detach().numpy().copy()
                out[s] = IMPResult(W, vv, len(counts), per_phase * (len(counts) + 1), dense,
                                   5 * dense + d * m + 2 * n * m + n, losses)
            else:
                branches.setdefault(counts[k], []).append(s)
        for count, group in branches.items():
            stack.append((prune(u, mask, count), k + 1, group, losses))
    return out


def imp(X: np.ndarray, y: np.ndarray, width: int, s: int, *, budget: int, lr: float = 1e-3,
        prune_fraction: float | None = 0.1, seed: int = 0) -> IMPResult:
    """Iterative magnitude pruning with rewinding (lottery-ticket style), the paper's baseline.

    A dense network ``sum_j (X u_j)_+ v_j`` without biases is trained by full-batch Adam on the
    mean squared error. Each round trains, removes the smallest-magnitude first-layer weights
    (:func:`imp_rounds`), rewinds the survivors to their initial values and resets Adam; the final
    ticket is trained once more. The ``budget`` of Adam steps is split equally over the training
    phases (rounds + 1): ``budget = epochs * (rounds + 1)`` trains ``epochs`` steps in every phase,
    as the authors' runner does (:func:`imp_sweep`). The output layer is not pruned (see the
    chapter).

    Args:
        width: hidden neurons ``m``. s: first-layer nonzeros to keep, ``1 <= s <= d m``.
        budget: Adam steps in all, at least one per phase. lr: Adam's learning rate.
        prune_fraction: share of the surviving weights removed per round; ``None``: one shot.
        seed: initialisation seed.
    """
    X, y, m = _imp_checked(X, y, width)
    d = X.shape[1]
    s = check_int("s", s, 1, d * m)
    lr = check_range("lr", lr, 0.0, low_open=True)
    counts = imp_rounds(d * m, s, prune_fraction)
    phases = len(counts) + 1
    budget = check_int("budget", budget, phases)
    return _imp_tree(X, y, m, {s: counts}, budget // phases, lr, check_seed(seed))[s]


def imp_sweep(X: np.ndarray, y: np.ndarray, width: int, ss: Sequence[int], *, epochs: int,
              lr: float = 1e-3, prune_fraction: float | None = 0.1,
              seed: int = 0) -> list[IMPResult]:
    """IMP as the authors' runner trains it, for each sparsity in ``ss``: ``epochs`` full-batch
    Adam steps in every training phase, every round and the final ticket alike.

    One run of the pruning schedule serves every ``s``: the schedules agree until the round that
    clips to ``s``, so the shared rounds are trained once, and each result equals
    ``imp(X, y, width, s, budget=epochs * (rounds + 1), ...)`` exactly (a test checks it).

    Args:
        width: hidden neurons ``m``. ss: first-layer nonzeros to keep, each ``1 <= s <= d m``.
        epochs: Adam steps per training phase (``>= 1``). lr: Adam's learning rate.
        prune_fraction: share of the surviving weights removed per round; ``None``: one shot.
        seed: initialisation seed.
    """
    X, y, m = _imp_checked(X, y, width)
    d = X.shape[1]
    if isinstance(ss, (str, bytes)) or not isinstance(ss, Sequence) or not len(ss):
        raise TypeError(f"ss must be a non-empty sequence of integers, got {ss!r}")
    targets = [check_int("ss", s, 1, d * m) for s in ss]
    epochs = check_int("epochs", epochs, 1)
    lr = check_range("lr", lr, 0.0, low_open=True)
    schedules = {s: imp_rounds(d * m, s, prune_fraction) for s in targets}
    runs = _imp_tree(X, y, m, schedules, epochs, lr, check_seed(seed))
    return [runs[s] for s in targets]
