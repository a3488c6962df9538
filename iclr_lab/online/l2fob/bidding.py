"""Online bidding under a budget and an ROI target: the auctions, L2FOB, its baselines, and the LP.

Equation labels refer to the chapter ``book/online/l2fob.md``:

* ``l2fob-eq-problem``: the offline problem (budget hard, ROI soft);
* ``l2fob-eq-fluid``: the fluid LP whose value ``T nu*`` defines regret; ``l2fob-eq-regret``: regret
  and the anytime ROI violation ``V_ROI(t)``;
* ``l2fob-eq-estimates``: the optimistic reward and pessimistic cost estimates;
* ``l2fob-eq-queues``: the look-ahead virtual queues; ``l2fob-eq-score``: the drift-plus-penalty score;
* ``l2fob-eq-wang``: the budget-only dual descent of Wang et al. (2023); ``l2fob-eq-pd``: the two-dual
  primal-dual bidder.

The interface is the same for every bidder. ``policy.start(auction, T)`` resets it for a run of ``T``
rounds with budget ``B = rho T``; then, each round, ``b = policy.bid(v)`` and
``policy.update(auction.outcome(b, v, d))``. :func:`run` does this loop and returns a DataFrame.

Every bidder is a *bank*: its parameters (``rho``, ``gamma``, step sizes, the horizon) may be arrays
of one length ``K``, and ``bid`` then takes ``K`` contexts and returns ``K`` bids, one per copy. The
chapter runs whole grids of step sizes and seeds as one bank; a single bidder is a bank of one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr, ndtri

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "L2FOB",
    "Auction",
    "BiddingPolicy",
    "CompetingBidOracle",
    "Feedback",
    "FirstPriceAuction",
    "FluidOptimum",
    "PrimalDual",
    "SecondPriceAuction",
    "ValueMoments",
    "WangDualDescent",
    "fluid_optimum",
    "roi_violation",
    "run",
    "value_moments",
]

#: the rewards, feedbacks and oracle kinds the package knows (checked with ``check_choice``)
REWARDS = ("utility", "value")
FEEDBACKS = ("full", "partial")
ORACLE_KINDS = ("full", "right-censored", "current-status")
#: L2FOB's default confidence width (a twentieth of the DKW width) and confidence level
C_CONF = 0.05
ALPHA = 0.05

# ----------------------------------------------------------------------------------------------
# Auctions
# ----------------------------------------------------------------------------------------------


def _as_shape(x: ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` as a float array of ``shape``: itself when it has that shape already (every round of
    a simulation), else a read-only broadcast view (``np.broadcast_to`` costs more than the round's
    arithmetic on a small bank)."""
    a = np.asarray(x, dtype=float)
    return a if a.shape == shape else np.broadcast_to(a, shape)


@dataclass(frozen=True)
class Feedback:
    """What the bidders learn after one round; every field has one entry per copy of the bank.

    Attributes:
        bid: the bids that were submitted.
        win: whether each bid won (``bid > 0`` and ``bid >= d``, ties to the bidder).
        cost: the payment (0 when the bid lost).
        reward: the realised reward (0 when the bid lost).
        competing: the highest competing bid ``d`` where the feedback reveals it, NaN where it does
            not (``partial`` feedback reveals it only through a second-price payment).
    """

    bid: np.ndarray
    win: np.ndarray
    cost: np.ndarray
    reward: np.ndarray
    competing: np.ndarray


class Auction:
    """A repeated auction for one slot against the highest competing bid ``d_t``.

    Each round the bidder sees its private value ``v_t`` (the context), bids ``b_t`` from the grid
    ``{0, 1/(n-1), ..., 1}`` and wins when ``b_t > 0`` and ``b_t >= d_t``. Values and competing bids
    are i.i.d. normal draws clipped to ``[0, 1]`` (the paper's first-price experiment uses
    ``v ~ N(0.6, 0.1)`` and ``d ~ N(0.4, 0.1)``).

    Args:
        reward: ``"utility"`` (quasi-linear: value minus payment when winning, as in Wang et al.
            2023) or ``"value"`` (the value when winning).
        feedback: ``"full"`` (``d_t`` is revealed after every auction) or ``"partial"`` (win-only:
            the bidder learns whether it won and what it paid).
        value_mean, value_sd, competing_mean, competing_sd: the two normal distributions.
        grid_size: number of bids on the grid, ``>= 2``.

    Subclasses fix the payment rule: :class:`FirstPriceAuction`, :class:`SecondPriceAuction`.
    """

    #: ``"first"`` or ``"second"``
    format: str = ""

    def __init__(self, *, reward: str = "utility", feedback: str = "full",
                 value_mean: float = 0.6, value_sd: float = 0.1, competing_mean: float = 0.4,
                 competing_sd: float = 0.1, grid_size: int = 101) -> None:
        self.reward: str = check_choice("reward", reward, REWARDS)
        self.feedback: str = check_choice("feedback", feedback, FEEDBACKS)
        self.value_mean = check_range("value_mean", value_mean, 0.0, 1.0)
        self.value_sd = check_range("value_sd", value_sd, 0.0, low_open=True)
        self.competing_mean = check_range("competing_mean", competing_mean, 0.0, 1.0)
        self.competing_sd = check_range("competing_sd", competing_sd, 0.0, low_open=True)
        self.grid = np.linspace(0.0, 1.0, check_int("grid_size", grid_size, 2))
        self.step = float(self.grid[1])
        # midpoints of the grid cells (b_{j-1}, b_j]: where a competing bid in cell j is taken to lie
        self._mid = np.concatenate([[0.0], self.grid[1:] - self.step / 2])

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(reward={self.reward!r}, feedback={self.feedback!r}, "
                f"value ~ N({self.value_mean:g}, {self.value_sd:g}), d ~ N({self.competing_mean:g}, "
                f"{self.competing_sd:g}), grid_size={self.grid.size})")

    @property
    def oracle_kind(self) -> str:
        """What its feedback reveals about ``d``: see :class:`CompetingBidOracle`."""
        if self.feedback == "full":
            return "full"
        return "right-censored" if self.format == "second" else "current-status"

    # -- the world ---------------------------------------------------------------------------

    def sample(self, T: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``T`` values and ``T`` highest competing bids, i.i.d. clipped normals.

        The draws come in pairs, round by round, so the first ``T'`` rounds of a stream of length
        ``T > T'`` are the stream of length ``T'`` drawn from the same generator state.
        """
        T = check_int("T", T, 1)
        z = rng.standard_normal((T, 2))  # row t: (value, competing bid) of round t
        v = np.clip(self.value_mean + self.value_sd * z[:, 0], 0.0, 1.0)
        d = np.clip(self.competing_mean + self.competing_sd * z[:, 1], 0.0, 1.0)
        return v, d

    def payment(self, bid: np.ndarray, competing: np.ndarray) -> np.ndarray:
        """What a winning bid pays."""
        raise NotImplementedError

    def outcome(self, bid: ArrayLike, value: ArrayLike, competing: ArrayLike) -> Feedback:
        """Hold the auctions: one per entry of ``bid`` (``value`` and ``competing`` broadcast)."""
        b = np.atleast_1d(np.asarray(bid, dtype=float))
        v = _as_shape(value, b.shape)
        d = _as_shape(competing, b.shape)
        win = (b > 0) & (b >= d)
        cost = np.where(win, self.payment(b, d), 0.0)
        gain = v - cost if self.reward == "utility" else v
        reward = np.where(win, gain, 0.0)
        if self.feedback == "full":
            seen = d.astype(float)
        else:  # win-only: a second-price payment reveals d, nothing else does
            seen = np.where(win & (self.format == "second"), d, np.nan)
        return Feedback(bid=b, win=win, cost=cost, reward=reward, competing=seen)

    def competing_cdf(self) -> np.ndarray:
        """The true win probability ``G(b) = P(d <= b)`` on the grid (``G(0) = 0``: a zero bid is
        no bid). Only the LP and the regret use it; the bidders never see it."""
        # the normal cdf and quantile from scipy.special, the functions scipy.stats.norm calls with
        # the same standardisation (importing scipy.stats costs about a second of CPU)
        G = ndtr((self.grid - self.competing_mean) / self.competing_sd)
        G[-1] = 1.0  # d is clipped to [0, 1]
        G[0] = 0.0
        return G

    def value_quantiles(self, n: int) -> np.ndarray:
        """``n`` equally likely values: the midpoint quantiles of the clipped value distribution."""
        q = (np.arange(n) + 0.5) / n
        return np.clip(ndtri(q) * self.value_sd + self.value_mean, 0.0, 1.0)

    # -- the model a bidder holds: the auction's rules with a win probability G -----------------

    def expected_cost(self, G: np.ndarray) -> np.ndarray:
        """Expected payment ``c(b)`` on the grid for win probabilities ``G`` (last axis: the grid)."""
        raise NotImplementedError

    def cost_width(self) -> np.ndarray:
        """``|c_G(b) - c_G'(b)| <= width(b) * sup|G - G'|`` on the grid."""
        raise NotImplementedError

    def expected(self, value: ArrayLike, G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(r(v, b), c(v, b))`` on the grid for values ``value`` (shape ``(K, 1)`` or scalar) and
        win probabilities ``G`` (shape ``(K, n)`` or ``(n,)``)."""
        v = np.asarray(value, dtype=float)
        c = self.expected_cost(G)
        r = v * G - c if self.reward == "utility" else v * G
        return r, _as_shape(c, np.broadcast_shapes(np.shape(r), np.shape(c)))

    def optimistic(self, value: ArrayLike, G: np.ndarray,
                   eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(r_hat, c_check)`` of ``l2fob-eq-estimates``: an upper confidence bound on the reward
        and a lower one on the cost, when ``|G_hat - G| <= eps`` on the grid."""
        v = np.asarray(value, dtype=float)
        c_low = np.maximum(0.0, self.expected_cost(G) - self.cost_width() * eps)
        c_low[..., 0] = 0.0
        g_up = np.minimum(1.0, G + eps)
        g_up[..., 0] = 0.0
        r_up = v * g_up - c_low if self.reward == "utility" else v * g_up
        return r_up, c_low

    def mean_optimistic(self, moments: ValueMoments, G: np.ndarray,
                        eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``E_v[r_hat(v, b)]`` and ``E_v[c_check(v, b)]`` over an empirical value distribution:
        the mean-field form of the constraint terms of ``l2fob-eq-queues``."""
        # the reward bound is linear in v for these rules, so its mean is its value at E[v]
        return self.optimistic(moments.mean, G, eps)


@dataclass(frozen=True)
class ValueMoments:
    """Moments of an empirical value distribution that the mean-field estimates need (per copy).

    Attributes:
        mean: ``E[v]``, shape ``(K, 1)``.
        above: ``E[(v - b)^+]`` on the grid, shape ``(K, n)``.
        below: ``E[(b - v)^+]`` on the grid, shape ``(K, n)``.
    """

    mean: np.ndarray
    above: np.ndarray
    below: np.ndarray


class FirstPriceAuction(Auction):
    """First price: the winner pays its bid, so ``c(b) = b G(b)`` whatever the value."""

    format = "first"

    def payment(self, bid: np.ndarray, competing: np.ndarray) -> np.ndarray:
        """A winning bid pays itself."""
        return bid

    def expected_cost(self, G: np.ndarray) -> np.ndarray:
        """``c(b) = b G(b)``."""
        return self.grid * G

    def cost_width(self) -> np.ndarray:
        """``|b G(b) - b G'(b)| <= b |G - G'|``."""
        return self.grid

    def optimistic(self, value: ArrayLike, G: np.ndarray,
                   eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """With utility ``(v - b) G(b)``, optimism takes the upper ``G`` where ``v >= b`` and the
        lower one where a win would lose money (``l2fob-eq-estimates``)."""
        if self.reward == "value":
            return super().optimistic(value, G, eps)
        v = np.asarray(value, dtype=float)
        g_up = G + eps
        np.minimum(g_up, 1.0, out=g_up)
        g_low = G - eps
        np.maximum(g_low, 0.0, out=g_low)
        g_up[..., 0] = g_low[..., 0] = 0.0
        margin = v - self.grid
        r_up = np.where(margin >= 0, g_up, g_low)
        r_up *= margin
        return r_up, self.grid * g_low

    def mean_optimistic(self, moments: ValueMoments, G: np.ndarray,
                        eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``E_v[(v - b)^+] G_up(b) - E_v[(b - v)^+] G_low(b)`` for the utility reward."""
        if self.reward == "value":
            return super().mean_optimistic(moments, G, eps)
        g_up, g_low = np.minimum(1.0, G + eps), np.maximum(0.0, G - eps)
        g_up[..., 0] = g_low[..., 0] = 0.0
        return moments.above * g_up - moments.below * g_low, self.grid * g_low


class SecondPriceAuction(Auction):
    """Second price: the winner pays the highest competing bid, ``c(b) = E[d 1{d <= b}]``, which
    bidding its value maximises the utility when no constraint binds."""

    format = "second"

    def payment(self, bid: np.ndarray, competing: np.ndarray) -> np.ndarray:
        """A winning bid pays the highest competing bid."""
        return competing

    def expected_cost(self, G: np.ndarray) -> np.ndarray:
        """``c(b) = sum over cells below b of (midpoint of the cell) x (mass of G in it)``."""
        mass = np.diff(G, axis=-1, prepend=0.0)
        return np.cumsum(mass * self._mid, axis=-1)

    def cost_width(self) -> np.ndarray:
        """``c(b) = b G(b) - int_0^b G``, so ``|c_G - c_G'| <= 2 b sup|G - G'|``."""
        return 2.0 * self.grid


def value_moments(hist: np.ndarray, grid: np.ndarray) -> ValueMoments:
    """:class:`ValueMoments` of value histograms ``hist`` (shape ``(K, n)``, counts of values rounded
    to the grid), computed with cumulative sums in ``O(n)`` per copy.

    ``hist`` is a non-empty finite array of counts ``>= 0``; ``grid`` the ``n`` finite grid points.
    """
    h = np.asarray(check_array("hist", hist, ndim=2), dtype=float)
    if not np.all(h >= 0):
        raise ValueError(f"hist must hold counts in [0, inf), got minimum {float(h.min())!r}")
    g = np.asarray(check_array("grid", grid, shape=(h.shape[1],)), dtype=float)
    return _value_moments(h, g)


def _value_moments(hist: np.ndarray, grid: np.ndarray) -> ValueMoments:
    """:func:`value_moments` without the checks: L2FOB's mean-field mode calls it every round on
    its own histogram."""
    total = np.maximum(hist.sum(axis=1, keepdims=True), 1.0)
    p = hist / total
    mean = (p * grid).sum(axis=1, keepdims=True)
    # E[(v - b_j)^+] = sum_{i > j} p_i (g_i - b_j); E[(b_j - v)^+] = sum_{i < j} p_i (b_j - g_i)
    cp = np.cumsum(p, axis=1)
    cpg = np.cumsum(p * grid, axis=1)
    below = grid * cp - cpg
    above = (mean - cpg) - grid * (1.0 - cp)
    return ValueMoments(mean=mean, above=np.maximum(above, 0.0), below=np.maximum(below, 0.0))


# ----------------------------------------------------------------------------------------------
# The oracle: what the bidder knows about the competing bid
# ----------------------------------------------------------------------------------------------


class CompetingBidOracle:
    """Estimated win probability ``G_hat(b) = P(d <= b)`` on the grid, for ``K`` bidders at once.

    What a round teaches depends on the feedback (``kind``):

    * ``"full"``: ``d`` is revealed; ``G_hat`` is the empirical CDF of the past ``d``.
    * ``"right-censored"`` (second price, win-only): a win reveals ``d`` through the payment, a loss
      only says ``d > b_t``: ``d`` is right-censored at the bid, and ``G_hat`` is the Kaplan-Meier
      estimate.
    * ``"current-status"`` (first price, win-only): a round only says whether ``d <= b_t``. Counting
      such a win as evidence at *other* bids would be biased (which rounds are seen would depend on
      ``d``), so each grid bid keeps the win rate of the rounds that bid exactly it.

    Updating costs ``O(n)`` per bidder and round. The confidence width at ``b_j`` is the DKW bound
    with a union over the horizon, ``eps_j = c_conf sqrt(ln(2T/alpha) / (2 n_j))`` (capped at 1), with
    ``n_j`` the rounds informative at ``b_j``. Under win-only feedback the band
    ``[G_hat - eps, G_hat + eps]`` is then tightened with the monotonicity of ``G`` (the upper bound
    at ``b_j`` is the least upper bound at any ``b_i >= b_j``, the lower one the largest lower bound
    at any ``b_i <= b_j``), and ``G_hat`` and ``eps`` are the centre and half-width of that band.
    """

    def __init__(self, grid_size: int, K: int, kind: str) -> None:
        self.n_grid = check_int("grid_size", grid_size, 2)
        self.K = check_int("K", K, 1)
        self.kind: str = check_choice("kind", kind, ORACLE_KINDS)
        self.yes = np.zeros((self.K, self.n_grid))  # full: d <= b_j; KM: events; current status: wins
        self.seen = np.zeros((self.K, self.n_grid))  # rounds informative at b_j (KM: at risk)
        self._cols = np.arange(self.n_grid)
        self._rows = np.arange(self.K)

    def _keep(self, keep: np.ndarray) -> None:
        """Keep only the bidders where ``keep`` is True (see :meth:`BiddingPolicy._keep`)."""
        self.yes, self.seen = self.yes[keep], self.seen[keep]
        self.K = int(keep.sum())
        self._rows = np.arange(self.K)

    def cell(self, x: np.ndarray, step: float) -> np.ndarray:
        """Index of the first grid bid ``>= x`` (so that ``x <= b_j`` iff ``j >= cell``)."""
        return np.ceil((x / step).round(9)).clip(0, self.n_grid - 1).astype(int)

    def update(self, fb: Feedback, step: float) -> None:
        """Add one round of feedback for every bidder."""
        cols = self._cols[None, :]
        if self.kind == "full":
            j = self.cell(fb.competing, step)
            self.yes += cols >= j[:, None]
            self.seen += 1.0
            return
        jb = self.cell(fb.bid, step)
        if self.kind == "current-status":
            active = fb.bid > 0  # a zero bid teaches nothing: it never wins
            np.add.at(self.yes, (self._rows[active], jb[active]), fb.win[active])
            np.add.at(self.seen, (self._rows[active], jb[active]), 1.0)
            return
        shown = ~np.isnan(fb.competing)
        j = np.where(shown, self.cell(np.where(shown, fb.competing, 0.0), step), jb)
        # at risk in every cell up to the event (d seen) or up to the bid (d > b_t: survived it)
        self.seen += cols <= j[:, None]
        np.add.at(self.yes, (self._rows[shown], j[shown]), 1.0)

    def estimate(self, c_conf: np.ndarray, horizon: np.ndarray,
                 alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """``(G_hat, eps)``, both of shape ``(K, n)`` (``eps`` may be a read-only broadcast view);
        ``G_hat(0) = 0`` (a zero bid never wins)."""
        G, eps = self._estimate(c_conf, _log_width(horizon, alpha))
        return G, _as_shape(eps, G.shape)

    def _estimate(self, c_conf: np.ndarray, log_width: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`estimate` with ``log_width = ln(2T/alpha)`` per bidder (shape ``(K, 1)``, see
        :func:`_log_width`), which a bidder computes once per run; under full feedback ``eps`` has
        shape ``(K, 1)`` (one width per bidder), which broadcasts over the grid."""
        if self.kind == "full":  # every round informs every bid: one count per bidder
            n1 = self.seen[:, :1]
            m1 = np.maximum(n1, 1.0)
            G1: np.ndarray = self.yes / m1
            G1[:, 0] = 0.0
            w = np.sqrt(log_width / (2.0 * m1))
            return G1, np.minimum(1.0, np.where(n1 > 0, c_conf[:, None] * w, 1.0))
        n = self.seen
        m = np.maximum(n, 1.0)
        G: np.ndarray
        if self.kind == "right-censored":
            hazard = np.where(n > 0, self.yes / m, 0.0)
            G = 1.0 - np.cumprod(1.0 - hazard, axis=1)
        else:
            G = np.where(n > 0, self.yes / m, 0.0)
        width = np.sqrt(log_width / (2.0 * m))
        eps = np.minimum(1.0, np.where(n > 0, c_conf[:, None] * width, 1.0))
        # win-only feedback: tighten the band with the monotonicity of G
        up = np.minimum.accumulate(np.minimum(G + eps, 1.0)[:, ::-1], axis=1)[:, ::-1]
        low = np.maximum.accumulate(np.maximum(G - eps, 0.0), axis=1)
        low = np.minimum(low, up)  # point estimates that are not monotone can cross
        G, eps = (up + low) / 2.0, (up - low) / 2.0
        G[:, 0] = 0.0
        return G, eps


# ----------------------------------------------------------------------------------------------
# Bidders
# ----------------------------------------------------------------------------------------------


def _log_width(horizon: np.ndarray, alpha: float) -> np.ndarray:
    """``ln(2T/alpha)`` per bidder, shape ``(K, 1)``: the horizon's part of the confidence width."""
    return np.log(2.0 * horizon / alpha)[:, None]


def _nearest(x: np.ndarray, step: float, n: int) -> np.ndarray:
    """Index of the grid point nearest to each ``x`` (the mean-field histogram of the contexts)."""
    return np.clip(np.rint(x / step), 0, n - 1).astype(int)


def _as_bank(name: str, value: ArrayLike, low: float, high: float = math.inf, *,
             low_open: bool = False) -> np.ndarray:
    """``value`` as a 1-D float array with every entry checked against ``[low, high]``."""
    raw = np.atleast_1d(np.asarray(value))
    if raw.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a real number or an array of them, got {value!r}")
    arr = raw.astype(float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a number or a non-empty 1-D array, got shape {arr.shape}")
    for x in arr:
        check_range(name, float(x), low, high, low_open=low_open)
    return arr


class BiddingPolicy:
    """What every bidder shares: the bank of ``K`` copies, the budget, the oracle and the hard stop.

    Args:
        rho: budget per round (the budget of a run of ``T`` rounds is ``B = rho T``); ``rho > 0``.
        gamma: the ROI target (reward at least ``gamma`` times the spend); ``gamma > 0``.

    Any argument may be an array of length ``K``: the policy is then a bank of ``K`` independent
    copies. Subclasses implement ``_scores`` (the score of every candidate bid) and ``_learn`` (the
    update after the outcome).
    """

    def __init__(self, *, rho: ArrayLike = 0.01, gamma: ArrayLike = 1.8, **params: ArrayLike) -> None:
        self.rho = _as_bank("rho", rho, 0.0, low_open=True)
        self.gamma = _as_bank("gamma", gamma, 0.0, low_open=True)
        self._params = params
        self.K = int(np.broadcast_shapes(self.rho.shape, self.gamma.shape,
                                         *[np.atleast_1d(np.asarray(p)).shape for p in params.values()])[0])
        self.rho = np.broadcast_to(self.rho, (self.K,)).copy()
        self.gamma = np.broadcast_to(self.gamma, (self.K,)).copy()
        self.auction: Auction | None = None

    #: the attributes that hold one entry per copy (each class lists its own; see :meth:`_keep`)
    _PER_COPY: tuple[str, ...] = ("rho", "gamma", "T", "budget", "spent", "_last")

    def _keep(self, keep: np.ndarray) -> None:
        """Keep only the copies where ``keep`` (shape ``(K,)``) is True, in their order, with their
        state: a simulation drops the copies whose runs have ended (they would bid nothing until
        the longest run ends), and every copy left goes on exactly as before, since each copy's
        arithmetic is its own."""
        for cls in type(self).__mro__:
            for name in vars(cls).get("_PER_COPY", ()):
                setattr(self, name, getattr(self, name)[keep])
        self.K = int(keep.sum())
        self.oracle._keep(keep)

    def _bank(self, x: np.ndarray) -> np.ndarray:
        return np.broadcast_to(x, (self.K,)).copy()

    def start(self, auction: Auction, T: ArrayLike) -> BiddingPolicy:
        """Reset for a run of ``T`` rounds (an array gives each copy its own horizon) in ``auction``.

        The bidder takes the auction's *rules* (payment, reward, feedback, bid grid) from it, never
        its distributions. Returns ``self``.
        """
        if not isinstance(auction, Auction):
            raise TypeError(f"auction must be an Auction, got {type(auction).__name__}")
        horizon = np.atleast_1d(np.asarray(T, dtype=float))
        if horizon.ndim != 1 or np.any(horizon < 1) or np.any(horizon != np.round(horizon)):
            raise ValueError(f"T must be an integer >= 1 (or a 1-D array of them), got {T!r}")
        self.auction = auction
        self.T = self._bank(horizon.astype(float))
        self.budget = self.rho * self.T
        self.spent = np.zeros(self.K)
        self.t = 0
        self.oracle = CompetingBidOracle(auction.grid.size, self.K, auction.oracle_kind)
        self._last = np.zeros(self.K, dtype=int)
        self._reset()
        return self

    def _reset(self) -> None:
        """Subclass state at the start of a run."""

    def _check_started(self) -> Auction:
        if self.auction is None:
            raise RuntimeError("call policy.start(auction, T) before bidding")
        return self.auction

    def bid(self, value: ArrayLike) -> np.ndarray:
        """The bids of this round for contexts ``value`` (one per copy, or one shared), shape ``(K,)``.

        Only bids at most the remaining budget are candidates (a payment never exceeds the bid), so
        the spend can never pass ``B``: the hard stop. Ties go to the lower bid; bid 0 never wins.
        """
        auction = self._check_started()
        v = _as_shape(value, (self.K,))
        if not (v.min() >= 0.0 and v.max() <= 1.0):  # NaN fails both comparisons
            raise ValueError(f"value must be in [0, 1], got {value!r}")
        score = self._scores(auction, v)
        grid = auction.grid
        left = self.budget - self.spent + 1e-12
        short = left < grid[-1]  # only these bidders cannot afford every bid
        if short.any():
            score = score.copy()
            # bid 0 (column 0) is always affordable, so every row keeps a finite candidate
            score[short] = np.where(grid[None, :] <= left[short, None], score[short], -np.inf)
        j = np.argmax(score, axis=1)
        j = np.where(self.t < self.T, j, 0)  # a copy whose run has ended bids nothing
        self._last = j
        return grid[j]

    def _scores(self, auction: Auction, v: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def update(self, feedback: Feedback) -> None:
        """Learn from the outcome of the bids of this round."""
        auction = self._check_started()
        if not isinstance(feedback, Feedback):
            raise TypeError(f"feedback must be a Feedback, got {type(feedback).__name__}")
        if feedback.bid.shape != (self.K,):
            raise ValueError(f"feedback must hold {self.K} outcomes, got shape {feedback.bid.shape}")
        self.spent = self.spent + feedback.cost
        self._learn(feedback)
        self.oracle.update(feedback, auction.step)
        self.t += 1

    def _learn(self, fb: Feedback) -> None:
        raise NotImplementedError

    def state(self) -> dict[str, np.ndarray]:
        """The bidder's internal state (queues or dual variables), one entry per copy."""
        return {}


class L2FOB(BiddingPolicy):
    """L2FOB: optimistic estimates, look-ahead virtual queues, drift-plus-penalty bids, hard stop.

    Each round, for every candidate bid ``b`` on the grid, it predicts the budget overspend and the
    ROI shortfall that ``b`` would cause (``l2fob-eq-queues``), charges the increase of the potential
    ``Phi(Q) = Q^2`` of the look-ahead queues, and bids the maximiser of ``l2fob-eq-score``.

    Args:
        rho: budget per round; ``gamma``: ROI target.
        eta_rho, eta_gamma: queue steps (the paper's experiments use 0.6); ``> 0``.
        c_conf: scale of the confidence width of ``l2fob-eq-estimates`` (1 is the DKW bound, 0 the
            point estimate); ``>= 0``.
        alpha: confidence level of the width (the bands hold with probability ``1 - alpha``), in
            ``(0, 1)``.
        mode: ``"point"`` (the constraint terms at the current context, as in the paper's
            experiments) or ``"meanfield"`` (averaged over the contexts seen so far, as in its
            theory).
        queue: ``"lookahead"`` (the queue keeps the look-ahead value of the submitted bid, so it
            never decreases) or ``"signed"`` (an ablation: a standard virtual queue that moves by
            the signed predicted violation and is clipped at 0); or one of them per copy.
    """

    def __init__(self, *, rho: ArrayLike = 0.01, gamma: ArrayLike = 1.8, eta_rho: ArrayLike = 0.6,
                 eta_gamma: ArrayLike = 0.6, c_conf: ArrayLike = C_CONF, alpha: float = ALPHA,
                 mode: str = "point", queue: str | Sequence[str] = "lookahead") -> None:
        super().__init__(rho=rho, gamma=gamma, eta_rho=eta_rho, eta_gamma=eta_gamma, c_conf=c_conf)
        self.eta_rho = self._bank(_as_bank("eta_rho", eta_rho, 0.0, low_open=True))
        self.eta_gamma = self._bank(_as_bank("eta_gamma", eta_gamma, 0.0, low_open=True))
        self.c_conf = self._bank(_as_bank("c_conf", c_conf, 0.0))
        self.alpha = check_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
        self.mode = check_choice("mode", mode, ("point", "meanfield"))
        rules = [queue] if isinstance(queue, str) else list(queue)
        for rule in rules:
            check_choice("queue", rule, ("lookahead", "signed"))
        if len(rules) not in (1, self.K):
            raise ValueError(f"queue must name one rule or one per copy ({self.K}), got {len(rules)}")
        self.signed = self._bank(np.array([rule == "signed" for rule in rules]))

    _PER_COPY = ("eta_rho", "eta_gamma", "c_conf", "signed", "q_rho", "q_gamma", "_hist",
                 "_next_rho", "_next_gamma", "_value", "_log_w")

    def _keep(self, keep: np.ndarray) -> None:
        super()._keep(keep)
        self._rows = np.arange(self.K)
        self._any_signed = bool(self.signed.any())

    def _reset(self) -> None:
        self.q_rho = np.zeros(self.K)
        self.q_gamma = np.zeros(self.K)
        self._hist = np.zeros((self.K, self._check_started().grid.size))
        self._next_rho = np.zeros(self.K)
        self._next_gamma = np.zeros(self.K)
        self._value = np.zeros(self.K)
        # constant over the run: the horizon's part of the width, the copies' row indices
        self._log_w = _log_width(self.T, self.alpha)
        self._rows = np.arange(self.K)
        self._any_signed = bool(self.signed.any())

    def lookahead(self, auction: Auction, v: np.ndarray) -> dict[str, np.ndarray]:
        """Every term of ``l2fob-eq-score`` for every candidate bid (arrays of shape ``(K, n)``):
        ``r_hat``, the predicted overspend ``d_rho`` and ROI shortfall ``d_gamma``, the look-ahead
        queues ``Q_rho`` and ``Q_gamma``, and the ``score``."""
        G, eps = self.oracle._estimate(self.c_conf, self._log_w)
        r_hat, c_check = auction.optimistic(v[:, None], G, eps)
        if self.mode == "meanfield":
            # the contexts seen so far and the current one (added to the state in update())
            hist = self._hist.copy()
            hist[np.arange(self.K), _nearest(v, auction.step, hist.shape[1])] += 1.0
            mr, mc = auction.mean_optimistic(_value_moments(hist, auction.grid), G, eps)
        else:
            mr, mc = r_hat, c_check
        over = mc - self.rho[:, None]         # predicted overspend (signed)
        short = self.gamma[:, None] * mc
        short -= mr                           # predicted ROI shortfall (signed)
        d_rho, d_gamma = np.maximum(over, 0.0), np.maximum(short, 0.0)
        step_rho = d_rho * self.eta_rho[:, None]         # eta_rho * delta_rho(b)
        step_gamma = d_gamma * self.eta_gamma[:, None]
        q_rho = step_rho + self.q_rho[:, None]           # look-ahead queues
        q_gamma = step_gamma + self.q_gamma[:, None]
        # Phi(Q) = Q^2, so Phi'(Q) = 2Q, evaluated at the look-ahead queue
        penalty = q_rho * step_rho
        penalty += q_gamma * step_gamma
        score = r_hat - 2.0 * penalty
        return {"r_hat": r_hat, "c_check": c_check, "over": over, "short": short,
                "d_rho": d_rho, "d_gamma": d_gamma, "Q_rho": q_rho, "Q_gamma": q_gamma,
                "score": score}

    def _scores(self, auction: Auction, v: np.ndarray) -> np.ndarray:
        la = self.lookahead(auction, v)
        self._la = la
        return la["score"]

    def bid(self, value: ArrayLike) -> np.ndarray:
        """The bids of this round (see :meth:`BiddingPolicy.bid`), and the queues they would leave."""
        bids = super().bid(value)
        if self.mode == "meanfield":  # the context joins the history in update()
            self._value = np.broadcast_to(np.asarray(value, dtype=float), (self.K,)).copy()
        k, j = self._rows, self._last
        la, signed = self._la, self.signed
        self._next_rho, self._next_gamma = la["Q_rho"][k, j], la["Q_gamma"][k, j]
        if self._any_signed:  # the ablation's copies move by the signed prediction instead
            self._next_rho = np.where(
                signed, np.maximum(0.0, self.q_rho + self.eta_rho * la["over"][k, j]),
                self._next_rho)
            self._next_gamma = np.where(
                signed, np.maximum(0.0, self.q_gamma + self.eta_gamma * la["short"][k, j]),
                self._next_gamma)
        return bids

    def _learn(self, fb: Feedback) -> None:
        # the queues move with the submitted bid's predicted violation, not the realised one
        self.q_rho, self.q_gamma = self._next_rho, self._next_gamma
        if self.mode == "meanfield":  # the context of this round joins the empirical distribution
            step = self._check_started().step
            self._hist[np.arange(self.K), _nearest(self._value, step, self._hist.shape[1])] += 1.0

    def state(self) -> dict[str, np.ndarray]:
        """The virtual queues ``Q_rho(t)`` and ``Q_gamma(t)``."""
        return {"queue_rho": self.q_rho.copy(), "queue_gamma": self.q_gamma.copy()}


class PrimalDual(BiddingPolicy):
    """The two-dual primal-dual bidder (``l2fob-eq-pd``): Lagrangian bids, projected dual descent.

    It bids ``argmax_b (1 + lam) r(v, b) - (mu + lam gamma) c(v, b)`` with the point estimates of the
    oracle, then moves the budget dual ``mu`` and the ROI dual ``lam`` against the realised slack:
    ``mu <- [mu - step (rho - c_t)]^+`` and ``lam <- [lam - step (r_t - gamma c_t)]^+``.

    Args:
        rho, gamma: budget per round and ROI target.
        step: the dual step (the chapter tunes it on ``{1, 3, 10, 30, 100} / sqrt(T)``); ``> 0``.
        roi: whether the ROI dual is used (or one flag per copy); without it this is budget-only
            dual descent.
    """

    def __init__(self, *, rho: ArrayLike = 0.01, gamma: ArrayLike = 1.8, step: ArrayLike = 0.01,
                 roi: bool | Sequence[bool] = True) -> None:
        flags = [roi] if isinstance(roi, bool | np.bool_) else list(roi)
        if not all(isinstance(f, bool | np.bool_) for f in flags):
            raise TypeError(f"roi must be a bool or a sequence of them, got {roi!r}")
        super().__init__(rho=rho, gamma=gamma, step=step, roi=np.array(flags, dtype=float))
        self.step = self._bank(_as_bank("step", step, 0.0, low_open=True))
        self.roi = self._bank(np.array(flags, dtype=bool))

    _PER_COPY = ("step", "roi", "mu", "lam", "_no_conf", "_log_w")

    def _reset(self) -> None:
        self.mu = np.zeros(self.K)
        self.lam = np.zeros(self.K)
        # the point estimate: no confidence width (its level is then immaterial)
        self._no_conf = np.zeros(self.K)
        self._log_w = _log_width(self.T, 0.5)

    def _scores(self, auction: Auction, v: np.ndarray) -> np.ndarray:
        G, _ = self.oracle._estimate(self._no_conf, self._log_w)
        r, c = auction.expected(v[:, None], G)
        lam = self.lam[:, None]
        return (1.0 + lam) * r - (self.mu[:, None] + lam * self.gamma[:, None]) * c

    def _learn(self, fb: Feedback) -> None:
        self.mu = np.maximum(0.0, self.mu - self.step * (self.rho - fb.cost))
        lam = np.maximum(0.0, self.lam - self.step * (fb.reward - self.gamma * fb.cost))
        self.lam = np.where(self.roi, lam, 0.0)

    def state(self) -> dict[str, np.ndarray]:
        """The dual variables ``mu`` (budget) and ``lam`` (ROI)."""
        return {"mu": self.mu.copy(), "lam": self.lam.copy()}


class WangDualDescent(PrimalDual):
    """Budget-only dual descent in the style of Wang et al. (2023) (``l2fob-eq-wang``).

    It bids ``argmax_b r(v, b) - mu c(v, b)`` (for the utility reward of a first-price auction,
    ``argmax_b (v - (1 + mu) b) G_hat(b)``) and updates ``mu <- [mu - step (rho - c_t)]^+``. It
    ignores the ROI target.
    """

    def __init__(self, *, rho: ArrayLike = 0.01, gamma: ArrayLike = 1.8,
                 step: ArrayLike = 0.01) -> None:
        super().__init__(rho=rho, gamma=gamma, step=step, roi=False)

    def state(self) -> dict[str, np.ndarray]:
        """The budget dual ``mu``."""
        return {"mu": self.mu.copy()}


# ----------------------------------------------------------------------------------------------
# Running a bidder
# ----------------------------------------------------------------------------------------------


def roi_violation(reward: np.ndarray, cost: np.ndarray, gamma: ArrayLike) -> np.ndarray:
    """The anytime ROI violation ``V_ROI(t) = sum_{s <= t} (gamma c_s - r_s)`` of ``l2fob-eq-regret``
    along axis 0 (signed; its maximum over ``t``, floored at 0, is the *peak* violation).

    Args:
        reward: the rewards ``r_t``, a non-empty finite array of shape ``(T,)`` or ``(T, K)``.
        cost: the costs ``c_t``, finite, of the same shape.
        gamma: the ROI target in ``(0, inf)``, or one per column (``K``).
    """
    r = check_array("reward", reward, ndim=(1, 2))
    c = check_array("cost", cost, ndim=(1, 2))
    if r.shape != c.shape:
        raise ValueError(f"reward and cost must have the same shape, got {r.shape} and {c.shape}")
    g = _as_bank("gamma", gamma, 0.0, low_open=True)
    cols = r.shape[1] if r.ndim == 2 else 1
    if g.size not in (1, cols) or (g.size > 1 and r.ndim == 1):
        raise ValueError(f"gamma must be one target or one per column of reward and cost ({cols}), "
                         f"got {g.size}")
    return np.cumsum((g[0] if np.ndim(gamma) == 0 else g) * c - r, axis=0)


def run(policy: BiddingPolicy, env: Auction, T: int, seed: int = 0) -> pd.DataFrame:
    """Run ``policy`` for ``T`` rounds of ``env`` on the stream of ``seed``; one row per copy and round.

    Every copy of the bank sees the same values and competing bids. Columns: ``copy``, ``t``
    (1-based), ``value``, ``competing``, ``bid``, ``win``, ``cost``, ``reward``, ``spent``,
    ``cum_reward``, ``roi`` (reward over spend so far), ``violation`` (``V_ROI(t)``), and the
    policy's :meth:`~BiddingPolicy.state` after the round. ``T >= 1``; ``seed`` in
    ``[0, 2**32 - 1]``.
    """
    import pandas as pd

    from iclr_lab.core.progress import progress

    if not isinstance(policy, BiddingPolicy):
        raise TypeError(f"policy must be a BiddingPolicy, got {type(policy).__name__}")
    if not isinstance(env, Auction):
        raise TypeError(f"env must be an Auction, got {type(env).__name__}")
    T = check_int("T", T, 1)
    seed = check_seed(seed)
    values, competing = env.sample(T, np.random.default_rng(seed))
    policy.start(env, T)
    K = policy.K
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("bid", "win", "cost", "reward")}
    states: dict[str, list[np.ndarray]] = {}
    for t in progress(range(T), desc="bidding", total=T):
        b = policy.bid(values[t])
        fb = env.outcome(b, values[t], competing[t])
        policy.update(fb)
        for k in cols:
            cols[k].append(getattr(fb, k))
        for k, val in policy.state().items():
            states.setdefault(k, []).append(val)
    arr = {k: np.stack(v) for k, v in cols.items()}  # (T, K)
    spent = np.cumsum(arr["cost"], axis=0)
    cum_r = np.cumsum(arr["reward"], axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        roi = np.where(spent > 0, cum_r / spent, np.nan)
    data = {
        "copy": np.tile(np.arange(K), T), "t": np.repeat(np.arange(1, T + 1), K),
        "value": np.repeat(values, K), "competing": np.repeat(competing, K),
        "bid": arr["bid"].ravel(), "win": arr["win"].ravel(), "cost": arr["cost"].ravel(),
        "reward": arr["reward"].ravel(), "spent": spent.ravel(), "cum_reward": cum_r.ravel(),
        "roi": roi.ravel(), "violation": roi_violation(arr["reward"], arr["cost"], policy.gamma).ravel(),
    }
    for k, v in states.items():
        data[k] = np.stack(v).ravel()
    return pd.DataFrame(data).sort_values(["copy", "t"], kind="stable").reset_index(drop=True)


# ----------------------------------------------------------------------------------------------
# The fluid benchmark
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FluidOptimum:
    """Solution of the fluid LP ``l2fob-eq-fluid``.

    Attributes:
        nu: optimal expected reward per round ``nu*`` (regret is ``T nu* - sum_t r_t``).
        spend: expected spend per round of the optimal policy.
        roi: its expected reward over expected spend.
        win_rate: the share of auctions it wins.
        dual_budget: the LP's shadow price of the budget; the budget binds where it is > 0.
        dual_roi: the shadow price of the ROI target; the target binds where it is > 0.
        policy: the optimal randomised policy, ``policy[i, j] = P(bid b_j | value v_i)``.
        values: the equally likely values ``v_i`` the LP uses.
    """

    nu: float
    spend: float
    roi: float
    win_rate: float
    dual_budget: float
    dual_roi: float
    policy: np.ndarray
    values: np.ndarray

    @property
    def budget_binds(self) -> bool:
        """Whether the budget constraint has a positive shadow price."""
        return self.dual_budget > 1e-9

    @property
    def roi_binds(self) -> bool:
        """Whether the ROI constraint has a positive shadow price."""
        return self.dual_roi > 1e-9


def fluid_optimum(env: Auction, rho: float, gamma: float, *, value_bins: int = 200) -> FluidOptimum:
    """The fluid (expectation-level) optimum ``l2fob-eq-fluid`` of ``env`` by linear programming.

    Over randomised policies ``x_ij = P(value bin i, bid b_j)`` on the bid grid: maximise expected
    reward subject to expected spend ``<= rho`` and expected reward ``>= gamma`` times expected
    spend, with the true distributions (``scipy.optimize.linprog``, HiGHS). ``value_bins`` equally
    likely values stand for the value distribution. ``rho`` and ``gamma`` are in ``(0, inf)``,
    ``value_bins >= 1``.

    Each LP is solved once per process (the chapter asks for the paper setting's twice; a solve
    takes most of a second) for the auction's class, reward, distributions and grid: the result is
    a copy of the stored solution.
    """
    if not isinstance(env, Auction):
        raise TypeError(f"env must be an Auction, got {type(env).__name__}")
    rho = check_range("rho", rho, 0.0, low_open=True)
    gamma = check_range("gamma", gamma, 0.0, low_open=True)
    m = check_int("value_bins", value_bins, 1)
    key = (type(env), env.reward, env.value_mean, env.value_sd, env.competing_mean,
           env.competing_sd, env.grid.size, rho, gamma, m)
    if key not in _FLUID:
        _FLUID[key] = _solve_fluid(env, rho, gamma, m)
    lp = _FLUID[key]
    return replace(lp, policy=lp.policy.copy(), values=lp.values.copy())


#: HiGHS's interior-point method, with its crossover to a vertex: on the chapter's LPs (200 value
#: bins x 101 bids) 4-8x faster than its simplex (0.1 s against 0.4-0.7 s), and the same vertex:
#: value, duals and policy bit for bit in all nine of the chapter's settings
#: (``tests/online/test_l2fob.py`` compares the two methods)
_LP_METHOD = "highs-ipm"

#: the fluid LPs solved so far, by auction model and (rho, gamma, value_bins)
_FLUID: dict[tuple[Any, ...], FluidOptimum] = {}


def _solve_fluid(env: Auction, rho: float, gamma: float, m: int) -> FluidOptimum:
    """:func:`fluid_optimum` without the store: one HiGHS solve."""
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix, kron

    v = env.value_quantiles(m)
    n = env.grid.size
    R, C = env.expected(v[:, None], env.competing_cdf()[None, :])
    R, C = np.asarray(R), np.asarray(C)
    a_ub = np.vstack([C.ravel(), (gamma * C - R).ravel()])
    a_eq = kron(csr_matrix(np.eye(m)), csr_matrix(np.ones((1, n))))
    res = linprog(-R.ravel(), A_ub=a_ub, b_ub=[rho, 0.0], A_eq=a_eq, b_eq=np.full(m, 1.0 / m),
                  bounds=(0, None), method=_LP_METHOD)
    if res.status != 0:  # pragma: no cover - bidding 0 always is feasible
        raise RuntimeError(f"the fluid LP failed: {res.message}")
    x = res.x.reshape(m, n)
    spend = float((x * C).sum())
    reward = float((x * R).sum())
    wins = float((x * env.competing_cdf()[None, :]).sum())
    return FluidOptimum(nu=reward, spend=spend, roi=reward / spend if spend > 0 else math.inf,
                        win_rate=wins,
                        dual_budget=float(-res.ineqlin.marginals[0]),
                        dual_roi=float(-res.ineqlin.marginals[1]), policy=x * m, values=v)

