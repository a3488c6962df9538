"""Learning to answer from correct demonstrations: reward classes, the paper's Algorithm 1, and MLE.

What a user imports. A *reward class* is a boolean array ``S`` of shape ``(|R|, N, K)`` with
``S[j, x, y] = 1`` when hypothesis ``j`` accepts answer ``y`` to context ``x`` (the correct-answer
sets ``sigma_j(x)`` of ``imitation_reward_class-eq-sigma``). Rewards are binary throughout.

* :func:`make_instance`: the chapter's reward classes (the sigma0/sigma01 counterexample, the
  uniform-MLE decoys, the tight class, the paired decoys, a random class);
* :class:`RewardClassLearner`: Algorithm 1, the weighted vote with the update
  ``imitation_reward_class-eq-update`` (hard, ``gamma = 1``, and soft, ``gamma < 1``), and, with
  ``promote=False``, majority vote over the (soft) version space; its snapshots give the
  online-to-batch policy ``imitation_reward_class-eq-o2b``;
* :func:`mle_policy`: maximum likelihood over the policy class the reward class induces
  (``imitation_reward_class-eq-mle``), with its tie-breaks, and over the uniform policies;
* :func:`policy_value`: the value ``imitation_reward_class-eq-value`` of a policy matrix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed

__all__ = ["INSTANCE_KINDS", "Instance", "RewardClassLearner", "check_reward_class", "make_instance",
           "mle_policy", "policy_value", "run_online"]

#: The reward classes :func:`make_instance` builds.
INSTANCE_KINDS = ("sigma01", "decoy", "tight", "paired", "random")


def _boolean(name: str, arr: np.ndarray) -> np.ndarray:
    """``arr`` as booleans: a boolean array as it is, a numeric one whose entries are all 0 or 1
    converted (NaN, 0.5 or 2 raise ``ValueError`` naming ``name``, not silently ``True``)."""
    if arr.dtype == bool:
        return arr
    arr = check_array(name, arr, nonempty=False)
    if not ((arr == 0) | (arr == 1)).all():
        raise ValueError(f"{name} must be boolean (every entry 0 or 1)")
    return arr.astype(bool)


def _check_truth(truth: np.ndarray, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """``truth`` (``sigma*``) as a boolean ``(N, K)`` array, of ``shape`` when given."""
    arr = np.asarray(truth)
    if shape is not None and arr.shape != shape:
        raise ValueError(f"truth must have shape (N, K) = {shape}, got {arr.shape}")
    return _boolean("truth", check_array("truth", arr, ndim=2))


def _indices(name: str, values: np.ndarray) -> np.ndarray:
    """Demonstration indices as integers: finite, and whole numbers when given as floats."""
    arr = check_array(name, values, nonempty=False)
    if arr.dtype.kind == "f" and not (arr == np.round(arr)).all():
        raise ValueError(f"{name} must hold whole-number indices")
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold integer indices, got dtype {arr.dtype}")
    return arr.astype(int, copy=False)


def check_reward_class(S: np.ndarray) -> np.ndarray:
    """``S`` as a boolean array of shape ``(|R|, N, K)`` (boolean, or numeric with entries 0 and
    1); an empty class, a hypothesis with an empty answer set somewhere, or an entry other than 0
    or 1 (NaN included) raises ``ValueError`` naming ``S``."""
    arr = np.asarray(S)
    if arr.ndim != 3:
        raise ValueError(f"S must have shape (|R|, N, K) (3 dimensions), got shape {arr.shape}")
    if arr.shape[0] < 1:
        raise ValueError("S must hold at least one hypothesis (|R| >= 1); the reward class is empty")
    if arr.shape[1] < 1 or arr.shape[2] < 1:
        raise ValueError(f"S must have at least one context and one answer, got shape {arr.shape}")
    arr = _boolean("S", arr)
    if not arr.any(axis=2).all():
        raise ValueError("S must give every hypothesis at least one correct answer on every context")
    return arr


@dataclass(frozen=True)
class Instance:
    """A reward class with its true hypothesis and a demonstrator.

    Attributes:
        S: boolean ``(|R|, N, K)`` array, ``S[j, x, y] = [y in sigma_j(x)]``.
        truth: index of the true hypothesis ``sigma*`` in ``S``.
        demo: ``(N, K)`` probabilities of the demonstrator's answer on each context (rows sum to 1).
        name: what the instance is.
    """

    S: np.ndarray
    truth: int
    demo: np.ndarray
    name: str

    @property
    def n_hyp(self) -> int:
        """``|R|``."""
        return int(self.S.shape[0])

    @property
    def n_contexts(self) -> int:
        """``N``, the number of contexts (``D`` is uniform over them)."""
        return int(self.S.shape[1])

    @property
    def n_answers(self) -> int:
        """``K``, the number of answers."""
        return int(self.S.shape[2])

    def sample(self, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``m`` demonstrations ``(x_i, y_i)``: ``x_i`` uniform over the contexts, ``y_i`` from
        :attr:`demo`."""
        m = check_int("m", m, 0)
        xs = rng.integers(self.n_contexts, size=m)
        cum = np.cumsum(self.demo[xs], axis=1)
        ys = (rng.uniform(size=(m, 1)) > cum).sum(axis=1)
        return xs, np.minimum(ys, self.n_answers - 1)


def _uniform_on(mask: np.ndarray) -> np.ndarray:
    return mask / mask.sum(axis=-1, keepdims=True)


def make_instance(kind: str, *, size: int = 8, n_contexts: int = 200, n_answers: int = 64,
                  kappa: int = 32, decoy_sizes: Sequence[int] = (1, 3, 7, 15), density: float = 0.3,
                  seed: int = 0) -> Instance:
    """One of the chapter's reward classes (``D`` uniform over the contexts).

    * ``"sigma01"``: ``R = {sigma0, sigma01}`` with ``sigma0(x) = {0}``, ``sigma01(x) = {0, 1}``
      on ``n_contexts`` contexts; truth ``sigma0``; the demonstrator always answers 0 (the paper's
      Theorem 1 example).
    * ``"decoy"``: ``K = n_answers``; ``sigma*(x) = {d(x)} + C(x)`` with ``kappa`` answers, the
      demonstrator always plays ``d(x)``; one decoy ``{d(x)} + W_k(x)`` with ``k`` wrong answers per
      entry of ``decoy_sizes``; ``size - 1 - len(decoy_sizes)`` random fillers, each answer in each
      filler's set with probability ``density``. MLE over uniform policies picks the smallest decoy.
    * ``"tight"``: ``|R| = 2^size`` hypotheses ``sigma_b(x_i) = {b_i}`` on ``size`` contexts and two
      answers; truth ``b = 0``, the demonstrator plays it (the experiment picks the truth
      adversarially).
    * ``"paired"``: ``|R| = 2 size + 1`` on ``size`` contexts and two answers: truth ``{0}``; pair
      ``t`` (two identical hypotheses) accepts ``{1}`` on ``x_t`` and ``{0, 1}`` on every other
      context. Majority vote errs on every context in order; Algorithm 1 once.
    * ``"random"``: ``size`` hypotheses, each answer in each set with probability ``density``
      (never empty); truth 0, the demonstrator uniform on its sets.

    Args:
        size: the kind's size parameter (see above), in ``[1, 4096]`` (``[1, 16]`` for ``"tight"``).
        n_contexts: at least 1.
        n_answers: ``K``, at least 2.
        kappa: in ``[2, K - 1]`` for ``"decoy"`` (at least 2 for the other kinds, which ignore it).
        decoy_sizes: each in ``[1, K - kappa]`` for ``"decoy"`` (at least 1 otherwise).
        density: in ``(0, 1]``.
        seed: seed of the random parts (labels, fillers, random sets), in ``[0, 2**32 - 1]``.

    Every argument is checked, whether the kind uses it or not.
    """
    check_choice("kind", kind, INSTANCE_KINDS)
    size = check_int("size", size, 1, 4096 if kind != "tight" else 16)
    n_contexts = check_int("n_contexts", n_contexts, 1)
    n_answers = check_int("n_answers", n_answers, 2)
    decoy = kind == "decoy"
    kappa = check_int("kappa", kappa, 2, n_answers - 1 if decoy else None)
    sizes = [check_int("decoy_sizes", k, 1, n_answers - kappa if decoy else None) for k in decoy_sizes]
    check_range("density", density, 0.0, 1.0, low_open=True)
    rng = np.random.default_rng([check_seed(seed), 7])
    if kind == "sigma01":
        S = np.zeros((2, n_contexts, 2), dtype=bool)
        S[:, :, 0] = True
        S[1, :, 1] = True
        demo = np.zeros((n_contexts, 2))
        demo[:, 0] = 1.0
        return Instance(S, 0, demo, "sigma0 / sigma01")
    if kind == "tight":
        k = size
        bits = (np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1  # (2^k, k): b_i of hypothesis b
        S = np.zeros((2**k, k, 2), dtype=bool)
        S[np.arange(2**k)[:, None], np.arange(k)[None, :], bits] = True
        demo = np.zeros((k, 2))
        demo[:, 0] = 1.0
        return Instance(S, 0, demo, f"tight class, |R| = 2^{k}")
    if kind == "paired":
        M = size  # noqa: N806
        S = np.zeros((2 * M + 1, M, 2), dtype=bool)
        S[0, :, 0] = True  # the truth: {0} everywhere
        for t in range(M):
            for j in (1 + 2 * t, 2 + 2 * t):
                S[j] = True  # {0, 1}: neutral in every vote ...
                S[j, t, 0] = False  # ... except on its own context, where it accepts only {1}
        demo = np.zeros((M, 2))
        demo[:, 0] = 1.0
        return Instance(S, 0, demo, f"paired decoys, |R| = {2 * M + 1}")
    K = n_answers  # noqa: N806
    if kind == "random":
        S = rng.uniform(size=(size, n_contexts, K)) < density
        empty = ~S.any(axis=2)
        S[empty, rng.integers(K, size=int(empty.sum()))] = True
        return Instance(S, 0, _uniform_on(S[0].astype(float)), f"random class, |R| = {size}")
    # decoy
    if not sizes:
        raise ValueError("decoy_sizes must hold at least one decoy size")
    n_fill = check_int("size", size - 1 - len(sizes), 0) if size > len(sizes) else -1
    if n_fill < 0:
        raise ValueError(f"size must be at least {len(sizes) + 1} (truth + decoys), got {size}")
    perm = np.argsort(rng.uniform(size=(n_contexts, K)), axis=1)  # a random order of answers per x
    d = perm[:, 0]
    rows = np.arange(n_contexts)[:, None]
    truth = np.zeros((n_contexts, K), dtype=bool)
    truth[rows, perm[:, :kappa]] = True
    hyps = [truth]
    for k in sizes:
        dec = np.zeros((n_contexts, K), dtype=bool)
        dec[rows, perm[:, kappa:kappa + k]] = True  # k wrong answers
        dec[np.arange(n_contexts), d] = True
        hyps.append(dec)
    fill = rng.uniform(size=(n_fill, n_contexts, K)) < density
    empty = ~fill.any(axis=2)
    fill[empty, rng.integers(K, size=int(empty.sum()))] = True
    S = np.concatenate([np.stack(hyps), fill])
    demo = np.zeros((n_contexts, K))
    demo[np.arange(n_contexts), d] = 1.0
    return Instance(S, 0, demo, f"decoys of sizes {sizes}, |R| = {S.shape[0]}")


class RewardClassLearner:
    """Algorithm 1 of the paper: a weighted vote over the reward class, updated without ever seeing a
    reward (``imitation_reward_class-eq-vote`` and ``imitation_reward_class-eq-update``).

    Every hypothesis starts with weight 1. In each round the learner answers the vote's argmax, then
    sees the demonstration ``y_t`` (never whether its own answer was right) and multiplies each
    weight by ``(1 + gamma)^(r(x,*) - r(x, yhat)) (1 - gamma)^(r(x,*) - r(x, y_t))``. With
    ``gamma = 1`` (the hard version) a hypothesis that rejects the demonstration is removed, and one
    that accepts it but rejected the learner's answer doubles. ``promote=False`` drops the
    ``(1 + gamma)`` factor: with ``gamma = 1`` that is majority vote over the version space, with
    ``gamma < 1`` a soft majority vote; the chapter's baseline.

    Weights are kept as logarithms (removed hypotheses at ``-inf``), so long soft runs neither
    overflow nor underflow.

    Args:
        S: the reward class, boolean ``(|R|, N, K)`` (see :func:`check_reward_class`).
        gamma: the update's parameter, in ``(0, 1]``.
        promote: whether hypotheses that rejected the learner's answer are promoted (Algorithm 1)
            or not (majority vote).
        tie: ``"first"`` answers the smallest index among tied answers, ``"last"`` the largest.
        track: keep every round's predictions on all contexts (for :meth:`o2b_policy`).
    """

    def __init__(self, S: np.ndarray, gamma: float = 1.0, *, promote: bool = True, tie: str = "first",
                 track: bool = False) -> None:
        self.S = check_reward_class(S)
        self.gamma = check_range("gamma", gamma, 0.0, 1.0, low_open=True)
        self.promote = bool(promote)
        self.tie = check_choice("tie", tie, ("first", "last"))
        self.track = bool(track)
        self.logw = np.zeros(self.S.shape[0])
        self.star = np.asarray(self.S.any(axis=2))  # r(x, *) for every (hypothesis, context)
        self.snapshots: list[np.ndarray] = []
        self._flat = self.S.reshape(self.S.shape[0], -1).astype(float)
        self._cache: np.ndarray | None = None

    @property
    def weights(self) -> np.ndarray:
        """The weights, normalised so that the largest is 1 (``exp`` of the log-weights)."""
        top = self.logw.max()
        if not np.isfinite(top):
            return np.zeros_like(self.logw)
        return np.exp(self.logw - top)

    def _argmax(self, scores: np.ndarray) -> np.ndarray:
        """Argmax along the last axis with the recorded tie-break (ties within 1e-12 relative)."""
        best = scores.max(axis=-1, keepdims=True)
        tied = scores >= best - 1e-12 * np.maximum(np.abs(best), 1.0)
        if self.tie == "first":
            return np.argmax(tied, axis=-1)
        return scores.shape[-1] - 1 - np.argmax(tied[..., ::-1], axis=-1)

    def vote(self, x: int) -> np.ndarray:
        """The weighted vote ``sum_r w(r) r(x, y)`` for every answer ``y`` of context ``x``."""
        return self.weights @ self.S[:, x, :]

    def predict(self, x: int) -> int:
        """The answer of the weighted vote on context ``x`` (the recorded tie-break)."""
        x = check_int("x", x, 0, self.S.shape[1] - 1)
        return int(self._argmax(self.vote(x)))

    def predict_all(self) -> np.ndarray:
        """The vote's answer on every context, ``(N,)`` (cached until the weights change)."""
        if self._cache is None:
            w = self.weights
            alive = w > 0  # only surviving hypotheses vote
            votes = (w[alive] @ self._flat[alive]).reshape(self.S.shape[1], self.S.shape[2])
            self._cache = self._argmax(votes)
        return self._cache

    def update(self, x: int, y: int) -> int:
        """One round: answer context ``x``, then learn from the demonstration ``y``.

        Returns the learner's answer ``yhat`` (chosen *before* ``y`` is seen). The update is
        ``imitation_reward_class-eq-update``; ``0^0 = 1``: a demonstration that a hypothesis accepts
        never removes it, even at ``gamma = 1``.
        """
        x = check_int("x", x, 0, self.S.shape[1] - 1)
        y = check_int("y", y, 0, self.S.shape[2] - 1)
        if self.track:
            self.snapshots.append(self.predict_all().copy())
        yhat = int(self._argmax(self.vote(x)))
        star: np.ndarray = self.star[:, x]
        a = star & ~self.S[:, x, yhat]  # r(x,*) - r(x, yhat) in {0, 1}: rejected the learner's answer
        b = star & ~self.S[:, x, y]  # r(x,*) - r(x, y): rejected the demonstration
        alive = np.isfinite(self.logw)
        a, b = a & alive, b & alive  # removed hypotheses stay removed; no need to recompute the vote
        if (a.any() and self.promote) or b.any():
            if self.promote:
                self.logw = self.logw + a * math.log1p(self.gamma)
            down = -math.inf if self.gamma == 1.0 else math.log1p(-self.gamma)
            self.logw = np.where(b, self.logw + down, self.logw)  # np.where: no 0 * inf
            self._cache = None
        return yhat

    def o2b_policy(self) -> np.ndarray:
        """The online-to-batch policy ``imitation_reward_class-eq-o2b``: on every context, the
        uniform mixture of the answers of the votes before rounds ``1..m``; ``(N, K)``."""
        if not self.snapshots:
            raise ValueError("o2b_policy needs track=True and at least one update")
        preds = np.stack(self.snapshots)  # (m, N)
        N, K = self.S.shape[1], self.S.shape[2]  # noqa: N806
        probs = np.zeros((N, K))
        np.add.at(probs, (np.broadcast_to(np.arange(N), preds.shape), preds), 1.0)
        return probs / preds.shape[0]


def _check_demonstrations(xs: np.ndarray, ys: np.ndarray, n_contexts: int, n_answers: int) -> None:
    """Demonstrations must pair up and index existing contexts and answers (``ValueError`` naming
    ``xs`` or ``ys`` otherwise)."""
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError(f"xs and ys must be 1-d arrays of the same length, got shapes {xs.shape} and "
                         f"{ys.shape}")
    if xs.size and (xs.min() < 0 or xs.max() >= n_contexts):
        raise ValueError(f"xs must be context indices in [0, {n_contexts - 1}]")
    if ys.size and (ys.min() < 0 or ys.max() >= n_answers):
        raise ValueError(f"ys must be answer indices in [0, {n_answers - 1}]")


def run_online(learner: RewardClassLearner, xs: np.ndarray, ys: np.ndarray,
               truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Feed the demonstrations ``(xs, ys)`` to ``learner`` in order.

    ``truth`` is ``sigma*`` as an ``(N, K)`` boolean array; only this evaluation reads it, never the
    learner. Returns ``(mistakes, demo_errors)``: booleans per round, ``yhat_t not in sigma*(x_t)``
    and ``y_t not in sigma*(x_t)``. ``xs`` and ``ys`` are 1-d integer arrays of one length
    (possibly 0), context and answer indices.
    """
    if not isinstance(learner, RewardClassLearner):
        raise TypeError(f"learner must be a RewardClassLearner, got {type(learner).__name__}")
    xs, ys = _indices("xs", xs), _indices("ys", ys)
    truth = _check_truth(truth, learner.S.shape[1:])
    _check_demonstrations(xs, ys, *truth.shape)
    yhat = np.array([learner.update(int(x), int(y)) for x, y in zip(xs, ys, strict=True)], dtype=int)
    if not xs.size:
        return np.zeros(0, bool), np.zeros(0, bool)
    return ~truth[xs, yhat], ~truth[xs, ys]


def policy_value(probs: np.ndarray, truth: np.ndarray) -> float:
    """``V(pi) = E_x sum_y pi(y|x) r*(x, y)`` (``imitation_reward_class-eq-value``) with ``x`` uniform
    over the contexts; ``probs`` (a policy: entries in ``[0, 1]``, each row summing to 1) and
    ``truth`` (boolean) are ``(N, K)``."""
    truth = _check_truth(truth)
    probs = np.asarray(probs)
    if probs.shape != truth.shape:
        raise ValueError(f"probs must have the shape of truth {truth.shape}, got {probs.shape}")
    probs = check_array("probs", probs).astype(float, copy=False)
    if probs.min() < 0 or probs.max() > 1 or not np.allclose(probs.sum(axis=1), 1.0, atol=1e-6):
        raise ValueError("probs must be a policy: entries in [0, 1], each row summing to 1")
    return float((probs * truth).sum(axis=1).mean())


def mle_policy(S: np.ndarray, xs: np.ndarray, ys: np.ndarray, *, policy_class: str = "induced",
               tie: str = "adversarial", truth: np.ndarray | None = None) -> np.ndarray:
    """Maximum likelihood ``imitation_reward_class-eq-mle`` over a policy class built from the reward
    class ``S``; returns the policy as an ``(N, K)`` matrix.

    * ``policy_class="uniform"``: the policies ``Unif(sigma(x))``, one per hypothesis. Among the
      hypotheses consistent with every demonstration, the one with the largest likelihood
      ``prod_i 1/|sigma(x_i)|`` (smallest index on ties).
    * ``policy_class="induced"``: every policy supported on ``sigma(x)`` for some ``sigma`` in the
      class. On a seen context the maximiser plays the empirical distribution of the
      demonstrations; on an unseen one *any* distribution over ``sigma(x)`` of a consistent
      ``sigma`` is a maximiser, and ``tie`` picks one: ``"adversarial"`` the maximiser of least value
      (it needs ``truth``, used for nothing else), ``"maxent"`` the uniform distribution over the
      consistent hypothesis with the largest answer sets on the unseen contexts, which is what
      tabular log-loss training from zero logits converges to when that set is all answers.
    """
    S = check_reward_class(S)
    check_choice("policy_class", policy_class, ("induced", "uniform"))
    check_choice("tie", tie, ("adversarial", "maxent"))
    xs, ys = _indices("xs", xs), _indices("ys", ys)
    R, N, K = S.shape  # noqa: N806
    _check_demonstrations(xs, ys, N, K)
    if truth is not None:
        truth = _check_truth(truth, (N, K))
    consistent = S[:, xs, ys].all(axis=1) if xs.size else np.ones(R, dtype=bool)
    if not consistent.any():
        raise ValueError("no hypothesis of S accepts every demonstration (the class is misspecified)")
    sizes = S.sum(axis=2)  # |sigma_j(x)|
    if policy_class == "uniform":
        loglik = np.where(consistent, -np.log(sizes[:, xs]).sum(axis=1), -np.inf)
        return _uniform_on(S[int(np.argmax(loglik))].astype(float))
    counts = np.zeros((N, K))
    np.add.at(counts, (xs, ys), 1.0)
    seen = counts.sum(axis=1) > 0
    idx = np.flatnonzero(consistent)
    if tie == "adversarial":
        if truth is None:
            raise ValueError("tie='adversarial' needs truth (the evaluation's sigma*)")
        # worst answer of each consistent sigma on each unseen context: wrong if sigma has one
        has_wrong = (S[idx] & ~truth[None]).any(axis=2)  # (|cons|, N)
        j = idx[int(np.argmax((has_wrong & ~seen[None]).sum(axis=1)))]
        wrong = S[j] & ~truth
        pick = np.where(wrong.any(axis=1), np.argmax(wrong, axis=1), np.argmax(S[j], axis=1))
        fill = np.zeros((N, K))
        fill[np.arange(N), pick] = 1.0
    else:
        j = idx[int(np.argmax(np.log(sizes[idx][:, ~seen]).sum(axis=1)))] if (~seen).any() else idx[0]
        fill = _uniform_on(S[j].astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        emp = counts / counts.sum(axis=1, keepdims=True)
    return np.where(seen[:, None], emp, fill)
