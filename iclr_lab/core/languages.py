"""Seeded synthetic languages with a known loss floor, for the chapters that train language models.

Real text needs a download; these languages are generated from a seed, in NumPy, in milliseconds,
and their best achievable next-token loss is known in closed form, so a chapter can report how far
a model is from perfect rather than only which model is lower.

:class:`ZipfLanguage` is a first-order Markov chain over ``vocab`` tokens whose unigram part follows
Zipf's law, the heavy-tailed class imbalance of natural text (token ``k`` has probability
proportional to ``1 / (k + 1) ** exponent``). Each next token is, with probability ``copy_prob``,
a fixed successor ``successor[prev]`` of the previous token (a random permutation that a model must
learn) and otherwise a fresh Zipf draw that ignores the context:

.. math::

    P(b \\mid a) = c\\,[b = \\pi(a)] + (1 - c)\\, z_b, \\qquad z_b \\propto (b + 1)^{-s}.

The first token of every sequence is drawn from the chain's stationary distribution, so every
position has the same marginal and the next-token loss floor is the conditional entropy
:meth:`ZipfLanguage.entropy_floor` at every position.

Nothing here imports torch: ``ZipfLanguage.sample`` returns NumPy integer arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from iclr_lab.core.validation import check_int, check_range

__all__ = ["ZipfLanguage", "zipf_weights"]


def zipf_weights(vocab: int, exponent: float) -> np.ndarray:
    """Zipf probabilities over ``vocab`` ranks: ``p_k`` proportional to ``1 / (k + 1) ** exponent``.

    Args:
        vocab: number of tokens, at least 2.
        exponent: Zipf exponent ``s >= 0`` (0 gives the uniform distribution; natural text is near 1).

    Returns:
        A float64 array of length ``vocab`` that sums to 1, decreasing in ``k``.
    """
    vocab = check_int("vocab", vocab, 2)
    exponent = check_range("exponent", exponent, 0.0, 10.0)
    w = np.arange(1, vocab + 1, dtype=np.float64) ** -exponent
    return w / w.sum()


def _entropy_terms(p: np.ndarray) -> np.ndarray:
    """``-p log p`` elementwise, with ``0 log 0 = 0``."""
    out = np.zeros_like(p)
    pos = p > 0
    out[pos] = -p[pos] * np.log(p[pos])
    return out


@dataclass(frozen=True)
class ZipfLanguage:
    """A seeded Markov language: a learnable successor rule mixed with Zipf-distributed noise.

    Args:
        vocab: number of tokens (at least 2). Token ``0`` is the most frequent Zipf draw.
        exponent: Zipf exponent ``s`` of the noise part, in ``[0, 10]``.
        copy_prob: probability ``c`` in ``[0, 1)`` that the next token is the successor of the
            previous one; ``c = 0`` is i.i.d. Zipf text.
        seed: fixes the successor permutation (sampling takes its own generator).

    Example:
        >>> lang = ZipfLanguage(vocab=64, seed=0)
        >>> tokens = lang.sample(8, 16, np.random.default_rng(1))
        >>> tokens.shape, tokens.dtype
        ((8, 16), dtype('int64'))
        >>> 0 < lang.entropy_floor() < lang.unigram_entropy() < math.log(64)
        True
    """

    vocab: int = 512
    exponent: float = 1.1
    copy_prob: float = 0.5
    seed: int = 0
    #: The Zipf probabilities ``z`` of the noise part (derived from the fields above).
    zipf: np.ndarray = field(init=False, repr=False, compare=False)
    #: The successor rule, derived from ``seed``; ``successor[a]`` follows ``a`` with probability
    #: ``copy_prob``.
    successor: np.ndarray = field(init=False, repr=False, compare=False)
    #: The stationary distribution of the chain, which is the marginal of every position (derived).
    stationary: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_int("vocab", self.vocab, 2)
        check_range("exponent", self.exponent, 0.0, 10.0)
        check_range("copy_prob", self.copy_prob, 0.0, 1.0, high_open=True)
        check_int("seed", self.seed, 0, 2**32 - 1)
        z = zipf_weights(self.vocab, self.exponent)
        succ = np.random.default_rng(self.seed).permutation(self.vocab)
        object.__setattr__(self, "zipf", z)
        object.__setattr__(self, "successor", succ)
        object.__setattr__(self, "stationary", self._stationary(z, succ))

    def _stationary(self, z: np.ndarray, succ: np.ndarray) -> np.ndarray:
        """``pi = c pi[successor^-1] + (1 - c) z``: a contraction with rate ``c``, iterated until
        ``c**n`` is below float64 rounding (the fixed point is unique)."""
        c = self.copy_prob
        if c == 0.0:
            return z.copy()
        n = math.ceil(math.log(1e-17) / math.log(c)) + 1
        pi = z.copy()
        for _ in range(n):
            nxt = (1.0 - c) * z
            nxt[succ] += c * pi  # mass c * pi[a] moves from a to successor[a] (a permutation)
            pi = nxt
        return pi / pi.sum()

    def transition(self, prev: int) -> np.ndarray:
        """``P(. | prev)``, the distribution of the token after ``prev`` (a float64 vector)."""
        prev = check_int("prev", prev, 0, self.vocab - 1)
        p = (1.0 - self.copy_prob) * self.zipf
        p[self.successor[prev]] += self.copy_prob
        return p

    def conditional_entropies(self) -> np.ndarray:
        """``H(next | prev = a)`` in nats for every token ``a`` (closed form, no sampling)."""
        c = self.copy_prob
        noise = (1.0 - c) * self.zipf
        base = float(_entropy_terms(noise).sum())
        j = self.successor
        # replace the successor's noise term by its term with the copy mass added
        return base - _entropy_terms(noise[j]) + _entropy_terms(noise[j] + c)

    def entropy_floor(self) -> float:
        """The best achievable mean next-token cross-entropy, in nats: ``sum_a pi_a H(next | a)``.

        Every position after the first has this expected loss under the true model, because the
        first token is drawn from the stationary distribution.
        """
        return float(self.stationary @ self.conditional_entropies())

    def unigram_entropy(self) -> float:
        """The loss, in nats, of the best model that ignores the context: the entropy of the
        stationary distribution."""
        return float(_entropy_terms(self.stationary).sum())

    def sample(self, n_sequences: int, length: int, rng: np.random.Generator) -> np.ndarray:
        """``n_sequences`` independent sequences of ``length`` tokens, as an int64 array.

        Args:
            n_sequences: how many sequences (rows), at least 1.
            length: tokens per sequence, at least 1.
            rng: the generator that draws them (pass one derived from the experiment's seed).
        """
        n = check_int("n_sequences", n_sequences, 1)
        length = check_int("length", length, 1)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        out = np.empty((n, length), dtype=np.int64)
        out[:, 0] = self._draw(np.cumsum(self.stationary), rng.random(n))
        cdf_z = np.cumsum(self.zipf)
        for t in range(1, length):
            copy = rng.random(n) < self.copy_prob
            fresh = self._draw(cdf_z, rng.random(n))
            out[:, t] = np.where(copy, self.successor[out[:, t - 1]], fresh)
        return out

    def _draw(self, cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Inverse-CDF draws for uniforms ``u`` (clipped against rounding at the top of ``cdf``)."""
        return np.minimum(np.searchsorted(cdf, u, side="right"), self.vocab - 1)
