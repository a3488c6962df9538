"""Learning a game by paying its no-regret agents, and steering them with what was learned.

What a user imports: games, no-regret agents, the paying principal (Algorithm 1), the multi-agent
learner with signals and compliance payments (Algorithm 2), the correlated equilibrium with payments
and the steering loop (Algorithm 3 with this book's dominance payments), and the naive probing
baseline. Equations are cited by their label in ``book/online/utility_learning.md``.

Everything is vectorised over a batch of independent *rows* (seeds, variants, horizons), so that
one Python loop over rounds serves a whole experiment.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from iclr_lab.core.validation import check_choice, check_int, check_range

__all__ = [
    "PROBE_DESIGNS",
    "SIGNALS",
    "STEER_RULES",
    "CorrelatedEquilibrium",
    "Hedge",
    "LearnResult",
    "LearnerBank",
    "NormalFormGame",
    "PaymentRun",
    "RegretMatching",
    "SteerResult",
    "BestResponse",
    "dominance_payments",
    "equivalence_error",
    "learn_utilities",
    "naive_probing",
    "optimal_cep",
    "pay_against",
    "payment_set_diameter",
    "prisoners_dilemma",
    "project_payments",
    "random_game",
    "random_prisoners_dilemma",
    "single_agent",
    "steer",
    "strategic_center",
]

#: The signal designs of Algorithm 2, namely one ``⊥`` per agent (the paper's S_i = A_i ∪ {⊥}), a
#: fresh ``⊥`` for every phase, or no signals at all.
SIGNALS = ("shared", "per_phase", "none")
#: The cap of the payment set P (``utility_learning-eq-payment-set``).
CAP = 2.0
#: Compliance payment of Algorithm 2: larger than any utility gap (2 for utilities in [-1, 1]).
COMPLIANCE = 2.1

# ----------------------------------------------------------------------------------------------
# Games
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NormalFormGame:
    """A normal-form game with ``n`` agents: ``utilities[i][a_1, ..., a_n]`` is agent i's utility.

    Attributes:
        utilities: array of shape ``(n, m_1, ..., m_n)`` with entries in ``[-1, 1]``; agent ``i``
            has ``m_i >= 2`` actions. A single agent (``n = 1``) is a utility vector of shape
            ``(1, m)``.
        actions: optional labels of each agent's actions (for charts).
    """

    utilities: np.ndarray
    actions: tuple[tuple[str, ...], ...] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        u = np.asarray(self.utilities, dtype=float)
        if u.ndim < 2 or u.shape[0] != u.ndim - 1:
            raise ValueError("utilities must have shape (n, m_1, ..., m_n): one utility table per "
                             f"agent over the n agents' action profiles; got shape {u.shape}")
        if any(m < 2 for m in u.shape[1:]):
            raise ValueError(f"utilities: every agent needs at least 2 actions; got shape {u.shape}")
        if not np.all(np.isfinite(u)) or np.abs(u).max() > 1.0 + 1e-12:
            raise ValueError("utilities must be finite and in [-1, 1] (the paper's normalisation); "
                             f"got range [{np.nanmin(u):.3g}, {np.nanmax(u):.3g}]")
        if self.actions is not None and tuple(len(a) for a in self.actions) != u.shape[1:]:
            raise ValueError(f"actions must label the {u.shape[1:]} actions of each agent")
        object.__setattr__(self, "utilities", u)

    @property
    def n(self) -> int:
        """Number of agents."""
        return int(self.utilities.shape[0])

    @property
    def shape(self) -> tuple[int, ...]:
        """Numbers of actions ``(m_1, ..., m_n)``."""
        return tuple(int(m) for m in self.utilities.shape[1:])

    @property
    def phases(self) -> int:
        """The number of phases of Algorithm 2, ``sum_i |A_{-i}|``, one per agent and opposing
        profile."""
        M = math.prod(self.shape)
        return sum(M // m for m in self.shape)

    @property
    def normalised(self) -> bool:
        """True when every agent's utilities, centred over its own actions, lie in ``[-1, 1]``.

        This is the paper's normalisation, under which ``1 - u`` is a point of the payment set.
        """
        return bool(np.abs(strategic_center(self.utilities)).max() <= 1.0 + 1e-12)

    def welfare(self) -> np.ndarray:
        """The sum of the agents' utilities at every profile (the principal's objective in the
        chapter's steering experiment)."""
        return self.utilities.sum(axis=0)


def single_agent(u: Sequence[float] | np.ndarray) -> NormalFormGame:
    """One agent with utility vector ``u`` (entries in [-1, 1]): the setting of Algorithm 1."""
    u = np.asarray(u, dtype=float)
    if u.ndim != 1:
        raise ValueError(f"u must be a vector of utilities, one per action; got shape {u.shape}")
    return NormalFormGame(u[None, :])


def prisoners_dilemma(reward: float = 0.6, temptation: float = 1.0, punishment: float = -0.4,
                      sucker: float = -1.0) -> NormalFormGame:
    """The symmetric Prisoner's Dilemma with actions (C, D).

    Defection is dominant when ``temptation > reward`` and ``punishment > sucker``; mutual
    cooperation has the larger welfare when ``2 reward > temptation + sucker``.
    """
    for name, v in (("reward", reward), ("temptation", temptation), ("punishment", punishment),
                    ("sucker", sucker)):
        check_range(name, v, -1.0, 1.0)
    if not (temptation > reward > punishment > sucker):
        raise ValueError("a Prisoner's Dilemma needs temptation > reward > punishment > sucker; got "
                         f"{temptation}, {reward}, {punishment}, {sucker}")
    row = np.array([[reward, sucker], [temptation, punishment]])
    return NormalFormGame(np.stack([row, row.T]), actions=(("C", "D"), ("C", "D")))


def random_game(shape: Sequence[int], rng: np.random.Generator) -> NormalFormGame:
    """A random game of ``shape`` in the paper's normalisation.

    Utilities are drawn uniformly from [-1, 1], centred over each agent's own actions, and each
    agent's table is shrunk (if needed) so that its largest entry in absolute value is 1. The game
    is then its own centred representative, and :attr:`NormalFormGame.normalised` holds.
    """
    shape = tuple(check_int("shape", m, 2) for m in shape)
    if not shape:
        raise ValueError("shape must list at least one agent's number of actions")
    u = strategic_center(rng.uniform(-1.0, 1.0, size=(len(shape), *shape)))
    scale = np.maximum(1.0, np.abs(u).reshape(len(shape), -1).max(axis=1))
    return NormalFormGame(u / scale.reshape(-1, *[1] * len(shape)))


def random_prisoners_dilemma(rng: np.random.Generator, *, min_gain: float = 0.3) -> NormalFormGame:
    """A random Prisoner's Dilemma in which steering pays: making (C, C) dominant costs each agent
    ``temptation - reward``, and the principal's welfare objective still gains at least
    ``min_gain`` over the (D, D) equilibrium: ``4 reward - 2 temptation >= 2 punishment + min_gain``.
    """
    check_range("min_gain", min_gain, 0.0, 1.0)
    while True:
        reward, punishment = rng.uniform(0.3, 0.8), rng.uniform(-0.7, -0.2)
        temptation = rng.uniform(reward + 0.1, 1.0)
        sucker = rng.uniform(-1.0, punishment - 0.1)
        if 4 * reward - 2 * temptation >= 2 * punishment + min_gain:
            return prisoners_dilemma(reward, temptation, punishment, sucker)


def strategic_center(utilities: np.ndarray, *, batched: bool = False) -> np.ndarray:
    """Each agent's utility minus its mean over the agent's *own* actions.

    Two utility tables that differ by ``W_i(a_{-i})`` (``utility_learning-eq-equivalence``) have
    the same centred table, so comparing centred tables compares games up to strategic
    equivalence. ``utilities`` has shape ``(n, m_1, ..., m_n)``, or ``(B, n, m_1, ..., m_n)`` with
    ``batched=True``.
    """
    u = np.asarray(utilities, dtype=float)
    lead = 1 if batched else 0
    n = u.ndim - 1 - lead
    if n < 1 or u.shape[lead] != n:
        raise ValueError("utilities must have shape (n, m_1, ..., m_n)"
                         f"{' after the batch axis' if batched else ''}; got {u.shape}")
    out = u.copy()
    for i in range(n):
        idx = (slice(None),) * lead + (i,)
        out[idx] = u[idx] - u[idx].mean(axis=lead + i, keepdims=True)
    return out


def equivalence_error(true: np.ndarray | NormalFormGame, estimate: np.ndarray, *,
                      batched: bool = False) -> np.ndarray:
    """``max_{i,a} |(U_i - mean_i U_i)(a) - (Ũ_i - mean_i Ũ_i)(a)|``: the error of ``estimate`` up
    to strategic equivalence (``utility_learning-eq-error``).

    ``mean_i`` averages over agent i's own action. The error is zero exactly when the two games are
    strategically equivalent, and it is at most twice ``max |U_i + W_i - Ũ_i|`` for any ``W``.
    With ``batched=True`` both arrays carry a leading batch axis and one error per game is returned.
    """
    u = true.utilities if isinstance(true, NormalFormGame) else np.asarray(true, dtype=float)
    v = np.asarray(estimate, dtype=float)
    if u.shape != v.shape:
        raise ValueError(f"estimate must have the shape of the true utilities {u.shape}; got {v.shape}")
    diff = np.abs(strategic_center(u, batched=batched) - strategic_center(v, batched=batched))
    return diff.reshape(u.shape[0], -1).max(axis=1) if batched else np.asarray(diff.max())


# ----------------------------------------------------------------------------------------------
# Agents: contextual no-regret learners, one learner per signal
# ----------------------------------------------------------------------------------------------


class LearnerBank:
    """The learners of one agent for ``rows`` independent runs and ``contexts`` signals each.

    An agent class (:class:`Hedge`, :class:`RegretMatching`, :class:`BestResponse`) builds one
    with its ``bank`` method; subclass it, with its ``strategy`` and ``update``, to add a learner.
    State arrays have shape ``(rows, contexts, ...)``; the hot loop reads and writes them through
    flat views indexed by ``row * contexts + signal`` (one fancy index instead of two).
    """

    def __init__(self, rows: int, contexts: int, m: int) -> None:
        self.rows, self.contexts, self.m = rows, contexts, m
        self.seen = np.zeros((rows, contexts))  # rounds played under each signal
        self._refresh()

    def _refresh(self) -> None:
        """Rebuild the flat views (after the state arrays were replaced)."""
        self._base = np.arange(self.rows) * self.contexts
        self._seen = self.seen.reshape(-1)

    def strategy(self, ctx: np.ndarray, announced: np.ndarray | None = None) -> np.ndarray:
        """The strategies ``(rows, m)`` of the learners of signals ``ctx`` (shape ``(rows,)``);
        ``announced`` is this round's utility vector, used only by forgetful agents."""
        raise NotImplementedError

    def update(self, ctx: np.ndarray, v: np.ndarray, x: np.ndarray,
               active: np.ndarray | None = None) -> None:
        """Feed round utilities ``v`` (shape ``(rows, m)``) to the learners of signals ``ctx``
        that played ``x``; rows where ``active`` is False are left untouched."""
        raise NotImplementedError

    def warm_up(self, v0: np.ndarray, rounds: int | np.ndarray) -> None:
        """Play ``rounds`` rounds of the fixed utility vectors ``v0`` (shape ``(rows, m)``) in every
        context: the agent's history before the principal arrives (a head start). ``rounds`` is
        one number or one per row; a row with fewer rounds sits out the rest (no update)."""
        per_row = np.broadcast_to(np.asarray(rounds, dtype=int), (self.rows,))
        for c in range(self.contexts):
            ctx = np.full(self.rows, c)
            for k in range(int(per_row.max(initial=0))):
                active = per_row > k
                self.update(ctx, v0, self.strategy(ctx, v0), None if active.all() else active)


class _HedgeBank(LearnerBank):
    def __init__(self, spec: Hedge, rows: int, contexts: int, m: int) -> None:
        self.spec = spec
        self.cum = np.zeros((rows, contexts, m))   # cumulative utility of each action
        self.c0 = math.sqrt(8.0 * math.log(m)) / spec.scale
        super().__init__(rows, contexts, m)

    def _refresh(self) -> None:
        super()._refresh()
        self._cum = self.cum.reshape(-1, self.m)

    def strategy(self, ctx: np.ndarray, announced: np.ndarray | None = None) -> np.ndarray:
        idx = self._base + ctx
        if self.spec.lr is not None:
            z = self._cum[idx] * self.spec.lr
        else:
            z = self._cum[idx] * (self.c0 / np.sqrt(np.maximum(self._seen[idx], 1.0)))[:, None]
        # np.maximum.reduce / np.add.reduce are what .max() / .sum() call, minus a Python layer
        e = np.exp(z - np.maximum.reduce(z, axis=1, keepdims=True))
        return e / np.add.reduce(e, axis=1, keepdims=True)

    def update(self, ctx: np.ndarray, v: np.ndarray, x: np.ndarray,
               active: np.ndarray | None = None) -> None:
        idx = self._base + ctx
        if active is None:
            self._cum[idx] += v
            self._seen[idx] += 1.0
        else:
            self._cum[idx] += v * active[:, None]
            self._seen[idx] += active


class _RegretMatchingBank(LearnerBank):
    def __init__(self, rows: int, contexts: int, m: int) -> None:
        self.regret = np.zeros((rows, contexts, m))   # cumulative regret of each action
        super().__init__(rows, contexts, m)

    def _refresh(self) -> None:
        super()._refresh()
        self._regret = self.regret.reshape(-1, self.m)

    def strategy(self, ctx: np.ndarray, announced: np.ndarray | None = None) -> np.ndarray:
        pos = np.maximum(self._regret[self._base + ctx], 0.0)
        s = pos.sum(axis=1, keepdims=True)
        return np.where(s > 0, pos / np.where(s > 0, s, 1.0), 1.0 / self.m)

    def update(self, ctx: np.ndarray, v: np.ndarray, x: np.ndarray,
               active: np.ndarray | None = None) -> None:
        idx = self._base + ctx
        step = v - np.einsum("ij,ij->i", v, x)[:, None]
        if active is None:
            self._regret[idx] += step
            self._seen[idx] += 1.0
        else:
            self._regret[idx] += step * active[:, None]
            self._seen[idx] += active


class _BestResponseBank(LearnerBank):
    def __init__(self, rows: int, contexts: int, m: int) -> None:
        self.last = np.zeros((rows, contexts, m))   # the last utility vector seen
        super().__init__(rows, contexts, m)

    def _refresh(self) -> None:
        super()._refresh()
        self._last = self.last.reshape(-1, self.m)

    def strategy(self, ctx: np.ndarray, announced: np.ndarray | None = None) -> np.ndarray:
        v = self._last[self._base + ctx] if announced is None else announced
        best = (v >= v.max(axis=1, keepdims=True) - 1e-12).astype(float)
        return best / best.sum(axis=1, keepdims=True)

    def update(self, ctx: np.ndarray, v: np.ndarray, x: np.ndarray,
               active: np.ndarray | None = None) -> None:
        idx = self._base + ctx
        if active is not None:
            idx, v = idx[active], v[active]
        self._last[idx] = v
        self._seen[idx] += 1.0


class _StackedBank(LearnerBank):
    """Consecutive blocks of rows, each played by its own bank (a different learner per block), as
    one bank: one Python loop over rounds then serves runs against several agents. Every learner
    works row by row, so each block's rows evolve exactly as in a bank of their own."""

    def __init__(self, parts: Sequence[LearnerBank]) -> None:
        self.parts = list(parts)
        cuts = np.cumsum([0] + [b.rows for b in self.parts])
        self._blocks = [slice(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
        super().__init__(int(cuts[-1]), self.parts[0].contexts, self.parts[0].m)

    def strategy(self, ctx: np.ndarray, announced: np.ndarray | None = None) -> np.ndarray:
        return np.concatenate([b.strategy(ctx[s], None if announced is None else announced[s])
                               for b, s in zip(self.parts, self._blocks, strict=True)])

    def update(self, ctx: np.ndarray, v: np.ndarray, x: np.ndarray,
               active: np.ndarray | None = None) -> None:
        for b, s in zip(self.parts, self._blocks, strict=True):
            b.update(ctx[s], v[s], x[s], None if active is None else active[s])


@dataclass(frozen=True)
class Hedge:
    """Hedge (multiplicative weights): ``x ∝ exp(lr * cumulative utility)``, one learner per signal.

    Attributes:
        lr: a fixed learning rate, or ``None`` for the anytime schedule
            ``sqrt(8 ln m / t) / scale`` with ``t`` the rounds seen under that signal.
        scale: the range of payoffs the agent expects (utility in [-1, 1] plus payments up to
            about 2), which scales the learning rate.
        head_start: rounds the agent has already played before the principal arrives, under every
            signal, against the game without payments (others mixing uniformly). A head start makes
            the agent *non-forgetful*: it has a lead to unlearn.
    """

    lr: float | None = None
    scale: float = 4.0
    head_start: int = 0

    def __post_init__(self) -> None:
        if self.lr is not None:
            check_range("lr", self.lr, 0.0, low_open=True)
        check_range("scale", self.scale, 0.0, low_open=True)
        check_int("head_start", self.head_start, 0)

    name = "Hedge"

    def bank(self, rows: int, contexts: int, m: int) -> LearnerBank:
        """The learners of one agent for ``rows`` runs and ``contexts`` signals."""
        return _HedgeBank(self, rows, contexts, m)


@dataclass(frozen=True)
class RegretMatching:
    """Regret matching: play each action in proportion to its positive cumulative regret
    (uniform when none is positive), one learner per signal.

    Attributes:
        head_start: as for :class:`Hedge`.
    """

    head_start: int = 0

    def __post_init__(self) -> None:
        check_int("head_start", self.head_start, 0)

    name = "regret matching"

    def bank(self, rows: int, contexts: int, m: int) -> LearnerBank:
        """The learners of one agent for ``rows`` runs and ``contexts`` signals."""
        return _RegretMatchingBank(rows, contexts, m)


@dataclass(frozen=True)
class BestResponse:
    """A *forgetful* agent: best-responds to the utility announced for this round (its own utility
    plus the payments on offer), or, when nothing is announced, to the last round's.

    Not a learning algorithm; it has no regret against announced payoffs. It is the agent for which
    naive probing works, shown for contrast with the non-forgetful learners.
    """

    head_start: int = 0

    def __post_init__(self) -> None:
        check_int("head_start", self.head_start, 0)

    name = "best response"

    def bank(self, rows: int, contexts: int, m: int) -> LearnerBank:
        """The learners of one agent for ``rows`` runs and ``contexts`` signals."""
        return _BestResponseBank(rows, contexts, m)


Agent = Hedge | RegretMatching | BestResponse
_AGENTS = (Hedge, RegretMatching, BestResponse)


def _check_normalised(name: str, game: NormalFormGame) -> None:
    if not game.normalised:
        worst = float(np.abs(strategic_center(game.utilities)).max())
        raise ValueError(f"{name}: every agent's utilities, centred over its own actions, must lie "
                         f"in [-1, 1] (the paper's normalisation; otherwise 1 - u is not a payment "
                         f"of P); the largest is {worst:.3g}: divide the utilities by it")


def _check_agent(name: str, agent: Any) -> Agent:
    if not isinstance(agent, _AGENTS):
        raise TypeError(f"{name} must be a Hedge, RegretMatching or BestResponse agent; "
                        f"got {type(agent).__name__}")
    return agent


def _row_agents(name: str, agent: Agent | Sequence[Agent], rows: int) -> list[Agent]:
    """``agent`` as one agent per row (one agent for all rows, or a sequence with one per row)."""
    if isinstance(agent, _AGENTS):
        return [agent] * rows
    if isinstance(agent, str | bytes) or not isinstance(agent, Sequence):
        _check_agent(name, agent)  # raises the TypeError that names the parameter
    agents = [_check_agent(name, a) for a in agent]
    if len(agents) != rows:
        raise ValueError(f"{name} must be one agent or one per row ({rows}); got {len(agents)}")
    return agents


def _single_bank(agents: Sequence[Agent], util: np.ndarray) -> LearnerBank:
    """The one-context bank of ``agents[r]`` for each row ``r`` of ``util`` (shape ``(rows, m)``),
    each row warmed up by its agent's head start: one bank for each block of consecutive rows
    whose agents differ at most in their head starts, and a :class:`_StackedBank` of the blocks
    when there are several."""
    m = util.shape[1]
    parts: list[LearnerBank] = []
    start = 0
    for learner, block in itertools.groupby(agents, key=lambda a: replace(a, head_start=0)):
        heads = np.array([a.head_start for a in block])
        bank = learner.bank(heads.size, 1, m)
        if heads.any():
            bank.warm_up(util[start:start + heads.size], heads)
        parts.append(bank)
        start += heads.size
    return parts[0] if len(parts) == 1 else _StackedBank(parts)


# ----------------------------------------------------------------------------------------------
# The payment set and Algorithm 1
# ----------------------------------------------------------------------------------------------


def project_payments(y: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row of ``y`` (shape ``(..., m)``) onto the payment set
    ``P = {p in [0, 2]^m : sum(p) = m}`` (``utility_learning-eq-payment-set``).

    The projection is ``clip(y - tau, 0, 2)`` with the ``tau`` that makes the sum ``m``. The sum is
    piecewise linear and non-increasing in ``tau`` with kinks at ``y_a`` and ``y_a - 2``, so ``tau``
    is found exactly: evaluate the sum at the kinks, find the bracketing pair, interpolate.
    """
    y = np.asarray(y, dtype=float)
    m = y.shape[-1]
    Y = y.reshape(-1, m)
    r = np.arange(Y.shape[0])
    kinks = np.sort(np.concatenate([Y, Y - CAP], axis=1), axis=1)             # (R, 2m)
    sums = np.minimum(np.maximum(Y[:, None, :] - kinks[:, :, None], 0.0), CAP).sum(axis=2)
    # the last kink whose sum is still >= m (the sum at the first kink is 2m)
    k = np.minimum((sums >= m).sum(axis=1) - 1, 2 * m - 2)
    lo, hi, s_lo, s_hi = kinks[r, k], kinks[r, k + 1], sums[r, k], sums[r, k + 1]
    drop = s_lo - s_hi
    tau = lo + np.where(drop > 0, (s_lo - m) / np.where(drop > 0, drop, 1.0), 0.0) * (hi - lo)
    return np.minimum(np.maximum(Y - tau[:, None], 0.0), CAP).reshape(y.shape)


def payment_set_diameter(m: int) -> float:
    """Euclidean diameter of ``P`` for ``m`` actions: ``2 sqrt(2 floor(m/2))``, attained between
    a point with ``floor(m/2)`` coordinates at 2 and the same number at 0, and its mirror image."""
    m = check_int("m", m, 2)
    return 2.0 * math.sqrt(2 * (m // 2))


class _Principal:
    """Algorithm 1 for ``rows`` independent runs: projected gradient descent on the payments
    (``utility_learning-eq-ogd``), with the step ``diam(P)/sqrt(T)`` of each row's horizon."""

    def __init__(self, rows: int, m: int, horizon: np.ndarray) -> None:
        self.m = m
        self.horizon = horizon.astype(int)
        self.lr = payment_set_diameter(m) / np.sqrt(horizon.astype(float))
        self.p = np.ones((rows, m))
        self.total = np.zeros((rows, m))
        self.half = np.zeros((rows, m))  # sum of the payments over the first half of the horizon
        self.t = 0

    def observe(self, grad: np.ndarray) -> None:
        """Close round ``t``: the gradient of ``<u + p, x>`` in ``p`` is the observed ``x``."""
        self.total += self.p
        self.t += 1
        at_half = self.horizon // 2 == self.t
        if at_half.any():
            self.half[at_half] = self.total[at_half]
        self.p = project_payments(self.p - self.lr[:, None] * grad)

    def estimate(self) -> np.ndarray:
        """``1 - mean payment``: the utility estimate (``utility_learning-eq-estimate``)."""
        return 1.0 - self.total / max(self.t, 1)

    def spread(self) -> np.ndarray:
        """Largest gap between the estimates from the first and the second half of the rounds:
        a data-driven gauge of the estimate's error, available to the principal."""
        h = np.maximum(self.horizon // 2, 1)
        first = self.half / h[:, None]
        second = (self.total - self.half) / np.maximum(self.t - h, 1)[:, None]
        return np.abs(first - second).max(axis=1)


@dataclass
class PaymentRun:
    """What :func:`pay_against` returns, one row per run.

    Attributes:
        estimate: ``1 - mean payment`` at each row's horizon, shape ``(rows, m)``.
        error: ``max_a |estimate - centred u|`` (``utility_learning-eq-error``), shape ``(rows,)``.
        principal_regret: ``sum_t <u + p^t, x^t> - T``: the principal's regret against the
            payment ``1 - u`` (``utility_learning-eq-bound``).
        agent_regret: ``max_a sum_t (u + p^t)_a - sum_t <u + p^t, x^t>``.
        horizon: each row's number of rounds.
        trace: running estimates ``1 - mean payment`` at ``checkpoints``, shape ``(rows, K, m)``.
        strategies: the agent's strategy at ``checkpoints``, shape ``(rows, K, m)``.
        checkpoints: the rounds at which ``trace`` was recorded.
    """

    estimate: np.ndarray
    error: np.ndarray
    principal_regret: np.ndarray
    agent_regret: np.ndarray
    horizon: np.ndarray
    trace: np.ndarray
    strategies: np.ndarray
    checkpoints: np.ndarray


def pay_against(u: Sequence[float] | np.ndarray, agent: Agent | Sequence[Agent],
                T: int | Sequence[int] | np.ndarray,
                *, seed: int = 0, observe: str = "mixed",
                checkpoints: Sequence[int] | np.ndarray | None = None) -> PaymentRun:
    """Algorithm 1: learn one agent's utility vector by paying against it.

    Each round the principal offers the payment vector ``p^t in P``, the agent (which never reveals
    ``u``) plays ``x^t``, and the principal takes a projected gradient step ``p^{t+1} =
    Proj_P(p^t - eta x^t)`` with ``eta = diam(P)/sqrt(T)`` (``utility_learning-eq-ogd``). The
    gradient of the agent's payoff ``<u + p, x>`` in ``p`` is ``x``: it does not involve ``u``.
    The estimate is ``1 - mean_t p^t`` (``utility_learning-eq-estimate``).

    Args:
        u: the agent's utilities, shape ``(m,)`` or ``(rows, m)`` for a batch of independent runs
            (entries in [-1, 1]; they are centred, since only differences are identifiable).
        agent: the agent's learning algorithm, one for all rows or one per row (rows against
            different agents are independent runs that share the loop over rounds).
        T: the horizon, one for all rows or one per row. Rows run in lockstep; a row's estimate is
            taken at its own horizon, and its step size uses that horizon.
        seed: seeds the sampled actions when ``observe == "sampled"``.
        observe: ``"mixed"`` (the principal sees ``x^t``, as in the paper) or ``"sampled"`` (it sees
            one action drawn from ``x^t`` and uses its indicator as an unbiased gradient).
        checkpoints: rounds at which to record the running estimate (default: none).
    """
    check_choice("observe", observe, ("mixed", "sampled"))
    util = np.atleast_2d(np.asarray(u, dtype=float))
    if util.ndim != 2 or util.shape[1] < 2:
        raise ValueError(f"u must have shape (m,) or (rows, m) with m >= 2; got {util.shape}")
    agents = _row_agents("agent", agent, util.shape[0])
    for row in util:
        _check_normalised("u", NormalFormGame(row[None, :]))
    rows, m = util.shape
    horizon = np.broadcast_to(np.asarray(T), (rows,)).astype(int).copy()
    for h in horizon:
        check_int("T", int(h), 1)
    util = util - util.mean(axis=1, keepdims=True)
    wanted = () if checkpoints is None else checkpoints
    marks = np.array(sorted({check_int("checkpoints", int(c), 1) for c in wanted}), dtype=int)
    rng = np.random.default_rng(seed)
    bank = _single_bank(agents, util)
    ctx = np.zeros(rows, dtype=int)
    principal = _Principal(rows, m, horizon)
    gain = np.zeros(rows)           # sum_t <u + p^t, x^t>
    cum = np.zeros((rows, m))       # sum_t (u + p^t)
    at_horizon = np.zeros((rows, 4))
    est = np.zeros((rows, m))
    trace = np.zeros((rows, marks.size, m))
    strat = np.zeros((rows, marks.size, m))
    k = 0
    for t in range(1, int(horizon.max()) + 1):
        v = util + principal.p
        x = bank.strategy(ctx, v)
        bank.update(ctx, v, x)
        gain += np.einsum("ij,ij->i", v, x)
        cum += v
        principal.observe(x if observe == "mixed" else _sample(x, rng))
        if k < marks.size and marks[k] == t:
            trace[:, k] = principal.estimate()
            strat[:, k] = x
            k += 1
        done = horizon == t
        if done.any():
            est[done] = principal.estimate()[done]
            at_horizon[done, 0] = gain[done] - t
            at_horizon[done, 1] = cum[done].max(axis=1) - gain[done]
    return PaymentRun(estimate=est, error=np.abs(est - util).max(axis=1),
                      principal_regret=at_horizon[:, 0], agent_regret=at_horizon[:, 1],
                      horizon=horizon, trace=trace, strategies=strat, checkpoints=marks)


# ----------------------------------------------------------------------------------------------
# The naive probing baseline
# ----------------------------------------------------------------------------------------------


#: The two probing designs of :func:`naive_probing`.
PROBE_DESIGNS = ("pairwise", "flip")


def naive_probing(u: Sequence[float] | np.ndarray, agent: Agent | Sequence[Agent],
                  T: int | Sequence[int] | np.ndarray, *, probes: int | Sequence[int] = 8,
                  design: str | Sequence[str] = "flip") -> np.ndarray:
    """The baseline: learn the utilities by bisection on a payment, one action at a time.

    The ``T`` rounds are split into ``probes`` bisection steps per action, each lasting
    ``T // (k probes)`` rounds (``k`` actions probed); the principal reads the agent's strategy at
    the end of each probe.

    * ``"flip"``: for each action ``a``, offer ``s`` on ``a`` alone and look for the smallest
      ``s in [0, 2]`` that makes ``a`` the agent's most played action: ``s = max_b u_b - u_a``.
    * ``"pairwise"``: for each action ``a != 0``, offer 2 on action 0 and ``2 + s`` on ``a``
      (``s in [-2, 2]``, payments up to 4), so that only those two compete, and look for the
      ``s`` at which the agent switches from 0 to ``a``: ``s = u_0 - u_a``.

    Against a forgetful agent each probe reads the current preference, and the error halves with
    every step. A no-regret learner instead answers with its *cumulative* payoffs, which carry
    the payments of every earlier probe.

    Args:
        u: utilities, shape ``(m,)`` or ``(rows, m)``.
        agent: the agent's algorithm, one for all rows or one per row.
        T: rounds available, one value or one per row (rows run in lockstep).
        probes: bisection steps per action, one value or one per row.
        design: ``"flip"`` or ``"pairwise"``, one value or one per row.

    Returns:
        The estimates (centred), shape ``(rows, m)``.
    """
    util = np.atleast_2d(np.asarray(u, dtype=float))
    rows, m = util.shape
    agents = _row_agents("agent", agent, rows)
    designs = [design] * rows if isinstance(design, str) else list(design)
    if len(designs) != rows:
        raise ValueError(f"design must be one value or one per row ({rows}); got {len(designs)}")
    for d in designs:
        check_choice("design", d, PROBE_DESIGNS)
    pair = np.array([d == "pairwise" for d in designs])
    for row in util:
        _check_normalised("u", NormalFormGame(row[None, :]))
    K = np.broadcast_to(np.asarray(probes), (rows,)).astype(int).copy()
    for k in K:
        check_int("probes", int(k), 1)
    first = pair.astype(int)                             # the first action probed, per row
    n_probed = m - first
    horizon = np.broadcast_to(np.asarray(T), (rows,)).astype(int).copy()
    for h, k, q in zip(horizon, K, n_probed, strict=True):
        check_int("T", int(h), int(q * k))
    util = util - util.mean(axis=1, keepdims=True)
    length = horizon // (n_probed * K)                   # rounds per probe, per row
    bank = _single_bank(agents, util)
    ctx = np.zeros(rows, dtype=int)
    lo = np.where(pair, -2.0, 0.0)[:, None] * np.ones((rows, m))
    hi = np.full((rows, m), 2.0)
    r = np.arange(rows)
    for t in range(int(horizon.max())):
        probe = t // length                              # index of the current probe, per row
        active = probe < n_probed * K
        a = np.minimum(probe // K + first, m - 1)        # the action being probed
        s = 0.5 * (lo[r, a] + hi[r, a])
        p = np.zeros((rows, m))
        p[r, 0] = np.where(active & pair, CAP, 0.0)       # pairwise: 2 on action 0 ...
        p[r, a] = np.where(active, np.where(pair, CAP + s, s), 0.0)  # ... and 2 + s on a
        v = util + p
        x = bank.strategy(ctx, v)
        bank.update(ctx, v, x)
        last = active & ((t + 1) % length == 0)
        # pairwise: switched from 0 to a, so u_0 - u_a < s; flip: a is now played most, gap < s
        yes = np.where(pair, x[r, a] > x[r, 0], x[r, a] >= x.max(axis=1))
        hi[r, a] = np.where(last & yes, s, hi[r, a])
        lo[r, a] = np.where(last & ~yes, s, lo[r, a])
    gap = 0.5 * (lo + hi)                                # u_0 - u_a, or max_b u_b - u_a
    gap[pair, 0] = 0.0
    est = -gap
    return est - est.mean(axis=1, keepdims=True)


# ----------------------------------------------------------------------------------------------
# Many agents: the arena and Algorithm 2
# ----------------------------------------------------------------------------------------------


def _contract(tensor: np.ndarray, xs: Sequence[np.ndarray], keep: int | None) -> np.ndarray:
    """``E_{a ~ x}[tensor(a)]`` over every agent except ``keep`` (all agents if ``None``).

    ``tensor`` has shape ``(rows, m_1, ..., m_n)``; ``xs[j]`` has shape ``(rows, m_j)``.
    """
    n = len(xs)
    if n == 1:
        return tensor if keep == 0 else np.einsum("ia,ia->i", tensor, xs[0])
    if n == 2:  # the common case, spelled out (einsum with ellipses is slower)
        if keep == 0:
            return np.einsum("iab,ib->ia", tensor, xs[1])
        if keep == 1:
            return np.einsum("iab,ia->ib", tensor, xs[0])
        return np.einsum("iab,ia,ib->i", tensor, xs[0], xs[1])
    out = tensor
    # contract the last agents first: the axes of the agents before j keep their positions
    for j in reversed(range(n)):
        if j == keep:
            continue
        out = np.einsum("i...k,ik->i...", np.moveaxis(out, j + 1, -1), xs[j])
    return out


class _Arena:
    """``rows`` independent copies of a game played by learner banks, with the principal's books."""

    def __init__(self, utils: np.ndarray, agents: Sequence[Agent], contexts: Sequence[int]) -> None:
        self.U = utils                                  # (rows, n, m_1, ..., m_n)
        self.rows, self.n = utils.shape[0], utils.shape[1]
        self.shape = utils.shape[2:]
        self.banks = [a.bank(self.rows, c, m) for a, c, m in zip(agents, contexts, self.shape,
                                                                  strict=True)]
        for i, a in enumerate(agents):
            if a.head_start:
                uniform = [np.full((self.rows, m), 1.0 / m) for m in self.shape]
                self.banks[i].warm_up(_contract(self.U[:, i], uniform, i), a.head_start)

    def play(self, ctx: Sequence[np.ndarray], pay: Sequence[np.ndarray],
             objective: np.ndarray | None = None, active: np.ndarray | None = None
             ) -> tuple[list[np.ndarray], np.ndarray]:
        """One round. ``pay[i]`` is agent i's payment, a vector over its own actions
        ``(rows, m_i)`` or a table over profiles ``(rows, m_1, ..., m_n)``. Rows where ``active``
        is False play but learn nothing (their round does not happen).

        Returns the strategies and, if ``objective`` is given, the principal's expected utility
        ``E[U_0(a) - sum_i P_i(a)]`` of the round (else zeros).
        """
        xs = [b.strategy(c) for b, c in zip(self.banks, ctx, strict=True)]
        value = np.zeros(self.rows)
        if objective is not None:
            value = _contract(objective, xs, None)
        for i, (b, c) in enumerate(zip(self.banks, ctx, strict=True)):
            v = _contract(self.U[:, i], xs, i)
            if pay[i].ndim == 2:
                v = v + pay[i]
                if objective is not None:
                    value -= np.einsum("ij,ij->i", pay[i], xs[i])
            else:
                v = v + _contract(pay[i], xs, i)
                if objective is not None:
                    value -= _contract(pay[i], xs, None)
            b.update(c, v, xs[i], active)
        return xs, value


    def play_tables(self, ctx: Sequence[np.ndarray], totals: np.ndarray, net: np.ndarray,
                    active: np.ndarray | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        """One round whose payments are tables over profiles, pre-added: ``totals[:, i]`` is agent
        i's utility plus payment, ``net`` the principal's utility minus all payments (the
        steering loop's fast path; see :meth:`play`)."""
        xs = [b.strategy(c) for b, c in zip(self.banks, ctx, strict=True)]
        for i, (b, c) in enumerate(zip(self.banks, ctx, strict=True)):
            b.update(c, _contract(totals[:, i], xs, i), xs[i], active)
        return xs, _contract(net, xs, None)


def _contexts(shape: Sequence[int]) -> list[int]:
    """Signals per agent: its own actions (recommendations), a shared ⊥, one ⊥ per phase."""
    M = math.prod(shape)
    return [m + 1 + M // m for m in shape]


def _phases(shape: Sequence[int]) -> list[tuple[int, tuple[int, ...]]]:
    """Algorithm 2's phases in order: (agent i, profile of the others)."""
    out = []
    for i, _ in enumerate(shape):
        others = [range(m) for j, m in enumerate(shape) if j != i]
        out += [(i, prof) for prof in itertools.product(*others)]
    return out


@dataclass
class LearnResult:
    """What :func:`learn_utilities` returns.

    Attributes:
        estimate: the learned utilities ``Ũ``, shape ``(n, m_1, ..., m_n)`` (one game) or with a
            leading batch axis.
        error: :func:`equivalence_error` of ``estimate``.
        spread: the largest split-half gap of any phase (see ``_Principal.spread``): the
            principal's own gauge of its error.
        rounds: rounds used, ``L * phases``.
        rounds_per_phase: ``L``.
        value: the principal's summed utility ``sum_t [U_0 - payments]`` over the learning rounds
            when an objective was given (else zeros).
        snapshots: ``(round, estimate so far)`` pairs, if requested.
        strategies: ``(round, strategies)`` pairs at the requested rounds.
    """

    estimate: np.ndarray
    error: np.ndarray
    spread: np.ndarray
    rounds: int
    rounds_per_phase: int
    value: np.ndarray
    snapshots: list[tuple[int, np.ndarray]] = field(default_factory=list, repr=False)
    strategies: list[tuple[int, list[np.ndarray]]] = field(default_factory=list, repr=False)


def _sample(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action drawn from each row of ``x``, as an indicator vector (an unbiased estimate of x)."""
    a = (rng.uniform(size=(x.shape[0], 1)) > np.cumsum(x, axis=1)).sum(axis=1)
    return np.eye(x.shape[1])[np.minimum(a, x.shape[1] - 1)]


def _learn(arena: _Arena, L: int, signals: Sequence[str], *, compliance: float = COMPLIANCE,
           objective: np.ndarray | None = None, snapshot_every: int = 0, observe: str = "mixed",
           rng: np.random.Generator | None = None, record_at: set[int] | None = None
           ) -> LearnResult:
    """Algorithm 2 on every row of ``arena`` (``signals[r]`` is row r's signal design)."""
    rng = rng if rng is not None else np.random.default_rng(0)
    rows, n, shape = arena.rows, arena.n, arena.shape
    code = np.array([SIGNALS.index(s) for s in signals])
    estimate = np.zeros((rows, n, *shape))
    spread = np.zeros(rows)
    value = np.zeros(rows)
    snaps: list[tuple[int, np.ndarray]] = []
    strategies: list[tuple[int, list[np.ndarray]]] = []
    t = 0
    phase_no = [0] * n
    for i, prof in _phases(shape):
        others = [j for j in range(n) if j != i]
        m_i = shape[i]
        bottom = np.where(code == 0, m_i, m_i + 1 + phase_no[i])   # shared or per-phase ⊥
        phase_no[i] += 1
        ctx = [np.where(code == 2, 0, bottom) if j == i else
               np.where(code == 2, 0, prof[others.index(j)]) for j in range(n)]
        comply = []
        for j in range(n):
            if j == i:
                comply.append(np.zeros((rows, m_i)))
                continue
            e = np.zeros((rows, shape[j]))
            e[:, prof[others.index(j)]] = compliance
            comply.append(e)
        principal = _Principal(rows, m_i, np.full(rows, L))
        for _ in range(L):
            pay = [principal.p if j == i else comply[j] for j in range(n)]
            xs, val = arena.play(ctx, pay, objective)
            value += val
            principal.observe(xs[i] if observe == "mixed" else _sample(xs[i], rng))
            t += 1
            if record_at is not None and t in record_at:
                strategies.append((t, [x.copy() for x in xs]))
            if snapshot_every and t % snapshot_every == 0:
                snaps.append((t, _fill(estimate, principal, i, prof)))
        estimate = _fill(estimate, principal, i, prof)
        spread = np.maximum(spread, principal.spread())
    U = arena.U
    return LearnResult(estimate=estimate, error=equivalence_error(U, estimate, batched=True),
                       spread=spread,
                       rounds=t, rounds_per_phase=L, value=value, snapshots=snaps,
                       strategies=strategies)


def _fill(estimate: np.ndarray, principal: _Principal, i: int, prof: tuple[int, ...]) -> np.ndarray:
    """A copy of ``estimate`` with ``Ũ_i(., prof)`` set to the principal's current estimate."""
    out = estimate.copy()
    idx: list[Any] = [slice(None), i]
    k = 0
    for j in range(estimate.ndim - 2):
        if j == i:
            idx.append(slice(None))
        else:
            idx.append(prof[k])
            k += 1
    out[tuple(idx)] = principal.estimate()
    return out


def _as_agents(agents: Agent | Sequence[Agent], n: int) -> list[Agent]:
    if isinstance(agents, _AGENTS):
        return [agents] * n
    agents = list(agents)
    if len(agents) != n:
        raise ValueError(f"agents must be one agent or one per player ({n}); got {len(agents)}")
    return [_check_agent(f"agents[{i}]", a) for i, a in enumerate(agents)]


def learn_utilities(game: NormalFormGame, agents: Agent | Sequence[Agent], T: int, seed: int = 0,
                    *, signals: str = "shared", compliance: float = COMPLIANCE,
                    observe: str = "mixed") -> LearnResult:
    """Algorithm 2: learn every agent's utilities, up to strategic equivalence, in ``T`` rounds.

    The rounds are split into ``phases = sum_i |A_{-i}|`` phases of ``L = T // phases`` rounds.
    In the phase of agent ``i`` and opposing profile ``ā_{-i}``, agent ``i`` receives the signal
    ``⊥`` and the payments of a fresh run of Algorithm 1; every other agent ``j`` receives the
    signal ``ā_j`` and the compliance payment ``compliance * 1{a_j = ā_j}``
    (``utility_learning-eq-compliance``). At the end of the phase, ``Ũ_i(., ā_{-i}) = 1 - mean
    payment`` (``utility_learning-eq-estimate``). With one agent this is Algorithm 1.

    Args:
        game: the game; the principal never reads ``game.utilities``, only the strategies played.
        agents: one agent for every player, or a sequence with one per player.
        T: the round budget; at least 2 rounds per phase.
        seed: seeds the sampled actions when ``observe == "sampled"`` (with ``"mixed"`` the
            dynamics are deterministic: agents play mixed strategies against expected utilities).
        signals: ``"shared"`` (one ``⊥`` per agent, the paper's signal set), ``"per_phase"`` (a
            fresh ``⊥`` per phase) or ``"none"`` (no signals: every learner sees one context).
        compliance: the payment for following a recommendation; it must exceed the largest utility
            gap, 2, for compliance to be strictly dominant.
        observe: ``"mixed"`` (the principal sees each strategy ``x^t``, as in the paper) or
            ``"sampled"`` (it sees one action drawn from it).
    """
    if not isinstance(game, NormalFormGame):
        raise TypeError(f"game must be a NormalFormGame; got {type(game).__name__}")
    _check_normalised("game", game)
    check_int("seed", seed, 0)
    T = check_int("T", T, 2 * game.phases)
    check_choice("signals", signals, SIGNALS)
    check_range("compliance", compliance, 0.0)
    check_choice("observe", observe, ("mixed", "sampled"))
    arena = _Arena(game.utilities[None], _as_agents(agents, game.n), _contexts(game.shape))
    res = _learn(arena, T // game.phases, [signals], compliance=compliance, observe=observe,
                 rng=np.random.default_rng(seed))
    return LearnResult(estimate=res.estimate[0], error=res.error[0], spread=res.spread[0],
                       rounds=res.rounds, rounds_per_phase=res.rounds_per_phase, value=res.value[0])


# ----------------------------------------------------------------------------------------------
# Steering: correlated equilibrium with payments, dominance payments, Algorithm 3
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorrelatedEquilibrium:
    """A correlated equilibrium with payments (CEP) of a game (``utility_learning-eq-cep``).

    Attributes:
        mu: the distribution of recommended profiles, shape ``(m_1, ..., m_n)``.
        payments: ``payments[i][d]``: what agent i is paid for obeying when ``d`` is recommended,
            shape ``(n, m_1, ..., m_n)`` (zero where ``mu`` is).
        value: the principal's value ``E_mu[U_0(d) - sum_i payments_i(d)]``.
    """

    mu: np.ndarray
    payments: np.ndarray
    value: float


def optimal_cep(utilities: np.ndarray | NormalFormGame, objective: np.ndarray) -> CorrelatedEquilibrium:
    """The principal's optimal CEP: a linear programme in ``mu`` and the paid mass
    ``pi_i(d) = mu(d) P_i(d)`` (``utility_learning-eq-cep``), solved with HiGHS.

    maximise ``sum_d mu(d) U_0(d) - sum_{i,d} pi_i(d)`` subject to, for every agent ``i`` and pair
    of actions ``d_i != b``: ``sum_{d_{-i}} mu(d) [U_i(b, d_{-i}) - U_i(d)] - pi_i(d) <= 0``, with
    ``mu`` a distribution and ``0 <= pi_i(d) <= 2 mu(d)`` (a payment is made only when its profile
    is recommended; 2, the largest utility gap, is all an agent can need).
    """
    from scipy.optimize import linprog

    U = utilities.utilities if isinstance(utilities, NormalFormGame) else np.asarray(utilities, float)
    NormalFormGame(np.clip(U, -1, 1))  # validates the shape
    n, shape = U.shape[0], U.shape[1:]
    U0 = np.asarray(objective, dtype=float)
    if U0.shape != shape:
        raise ValueError(f"objective must have the profile shape {shape}; got {U0.shape}")
    M = math.prod(shape)
    profiles = list(itertools.product(*[range(m) for m in shape]))
    flat = {d: k for k, d in enumerate(profiles)}
    c = np.concatenate([-U0.ravel(), np.ones(n * M)])        # linprog minimises
    rows = []
    for i in range(n):
        for di in range(shape[i]):
            for b in range(shape[i]):
                if b == di:
                    continue
                row = np.zeros(M + n * M)
                for d in profiles:
                    if d[i] != di:
                        continue
                    dev = d[:i] + (b,) + d[i + 1:]
                    row[flat[d]] = U[(i, *dev)] - U[(i, *d)]
                    row[M + i * M + flat[d]] = -1.0
                rows.append(row)
    # a payment is paid only when its profile is recommended: pi_i(d) <= CAP mu(d). Without this
    # tie, mass paid at profiles that are never recommended would relax the constraints for free.
    # CAP = 2, the largest utility gap, costs nothing: no agent needs more to obey.
    for i in range(n):
        for k in range(M):
            row = np.zeros(M + n * M)
            row[k], row[M + i * M + k] = -CAP, 1.0
            rows.append(row)
    A_eq = np.concatenate([np.ones(M), np.zeros(n * M)])[None, :]
    res = linprog(c, A_ub=np.array(rows), b_ub=np.zeros(len(rows)), A_eq=A_eq, b_eq=[1.0],
                  bounds=[(0, None)] * (M + n * M), method="highs")
    if not res.success:  # pragma: no cover - the LP is always feasible and bounded
        raise RuntimeError(f"CEP linear programme failed: {res.message}")
    mu = np.clip(res.x[:M], 0.0, None)
    mu = mu / mu.sum()
    pi = res.x[M:].reshape(n, M)
    pay = np.where(mu > 1e-12, pi / np.where(mu > 1e-12, mu, 1.0), 0.0)
    return CorrelatedEquilibrium(mu=mu.reshape(shape), payments=pay.reshape(n, *shape),
                                 value=float(-res.fun))


def dominance_payments(estimate: np.ndarray, recommended: Sequence[int], slack: float) -> np.ndarray:
    """This book's payment rule for steering (``utility_learning-eq-dominance``).

    Agent ``i``, told to play ``d_i``, is paid when it obeys, whatever the others do:
    ``max_b Ũ_i(b, a_{-i}) - Ũ_i(d_i, a_{-i}) + slack``, at the others' *realised* actions
    ``a_{-i}``. Obeying then beats every deviation by ``slack`` minus twice the error of ``Ũ``,
    at every profile of the others: it is strictly dominant when ``slack > 2 eps``.

    Returns:
        ``P[i][a]``, shape ``(n, m_1, ..., m_n)``.
    """
    U = np.asarray(estimate, dtype=float)
    n = U.shape[0]
    if U.ndim != n + 1:
        raise ValueError(f"estimate must have shape (n, m_1, ..., m_n); got {U.shape}")
    check_range("slack", slack, 0.0)
    if len(recommended) != n:
        raise ValueError(f"recommended must name one action per agent ({n}); got {recommended}")
    P = np.zeros_like(U)
    for i in range(n):
        d_i = check_int(f"recommended[{i}]", recommended[i], 0, U.shape[1 + i] - 1)
        best = U[i].max(axis=i, keepdims=True)
        own = np.take(U[i], [d_i], axis=i)
        idx = [slice(None)] * n
        idx[i] = slice(d_i, d_i + 1)
        P[i][tuple(idx)] = (best - own) + slack
    return P


def _cep_only_payments(cep: CorrelatedEquilibrium, recommended: tuple[int, ...],
                       slack: float) -> np.ndarray:
    """The CEP's own payment: a fixed amount for obeying, whatever the others do."""
    n = cep.payments.shape[0]
    P = np.zeros_like(cep.payments)
    for i in range(n):
        idx: list[Any] = [slice(None)] * n
        idx[i] = slice(recommended[i], recommended[i] + 1)
        P[i][tuple(idx)] = cep.payments[(i, *recommended)] + slack
    return P


#: The steering variants, namely Algorithm 3 with dominance payments, with the CEP's own payments
#: only, the same two rules with the true utilities and no learning phase (the oracles), and no
#: principal.
STEER_RULES = ("dominance", "cep", "oracle", "oracle_cep", "none")


@dataclass
class SteerResult:
    """What :func:`steer` returns (arrays have a leading batch axis in the batched form).

    Attributes:
        F: the principal's average utility over **all** ``T`` rounds, learning included
            (``utility_learning-eq-objective``).
        F_steer: the average over the steering rounds only.
        F_star: the value of the optimal CEP of the *true* game, ``F*``.
        learn_rounds: rounds spent learning (0 for the oracle and no principal).
        eps_hat: the principal's error gauge (largest split-half gap); its slack is
            ``margin + 2 eps_hat``.
        error: the actual error of the learned utilities (:func:`equivalence_error`; 0 without
            learning), which the principal does not know.
        obey: probability that every agent plays its recommendation, averaged over the last 10%
            of the rounds.
        paths: ``(round, x_1, ..., x_n)`` rows: each agent's probability of its first action at
            about 200 rounds on a log scale, learning rounds included.
    """

    F: np.ndarray
    F_steer: np.ndarray
    F_star: np.ndarray
    learn_rounds: np.ndarray
    eps_hat: np.ndarray
    error: np.ndarray
    obey: np.ndarray
    paths: np.ndarray = field(repr=False)


def _steer(games: Sequence[NormalFormGame], agents: Sequence[Agent], objectives: np.ndarray,
           T: int | Sequence[int] | np.ndarray, rules: Sequence[str], seed: int, *, margin: float,
           record: bool = False) -> SteerResult:
    """Steering for a batch of games with the same shape; ``rules[r]`` is row r's variant.

    ``T`` is one horizon or one per row. Rows with different horizons are independent runs that
    share the loop over rounds: each horizon's rows learn with their own ``L`` and draw their
    recommendations from their own generator seeded by ``seed``, exactly as in a call of their
    own. ``record`` keeps the paths of the rows of the longest horizon.
    """
    from iclr_lab.core.progress import progress

    rows = len(games)
    shape = games[0].shape
    n = len(shape)
    phases = games[0].phases
    U = np.stack([g.utilities for g in games])
    arena = _Arena(U, agents, _contexts(shape))
    horizon = np.broadcast_to(np.asarray(T, dtype=int), (rows,)).copy()
    T_max = int(horizon.max())
    groups = [horizon == h for h in np.unique(horizon)]      # the rows of each horizon
    L = np.array([max(2, math.ceil(math.sqrt(h) / phases)) for h in horizon])
    learns = np.array([r in ("dominance", "cep") for r in rules])
    value = np.zeros(rows)
    estimate = U.copy()
    eps = np.zeros(rows)
    err = np.zeros(rows)
    learn_rounds = np.where(learns, L * phases, 0)
    marks = set(np.unique(np.geomspace(1, T_max, 200).astype(int)).tolist()) if record else set()
    recorded = np.flatnonzero(horizon == T_max) if record else np.zeros(0, dtype=int)
    paths: list[list[float]] = []
    for group in groups:
        sel = learns & group
        if not sel.any():
            continue
        sub = _Arena.__new__(_Arena)                       # the learning rows only, same learners
        sub.U, sub.rows, sub.n, sub.shape = U[sel], int(sel.sum()), n, shape
        sub.banks = [_sub_bank(b, sel) for b in arena.banks]
        h = int(horizon[sel][0])
        res = _learn(sub, int(L[sel][0]), ["shared"] * sub.rows, objective=objectives[sel],
                     record_at=marks if h == T_max else set())
        for b, s in zip(arena.banks, sub.banks, strict=True):
            _merge_bank(b, s, sel)
        where = np.flatnonzero(sel)
        for t, xs in res.strategies:
            paths += [[int(r), t, *[float(x[j, 0]) for x in xs]] for j, r in enumerate(where)]
        value[sel] = res.value
        estimate[sel] = res.estimate
        eps[sel] = res.spread
        err[sel] = res.error
    slack = margin + 2.0 * eps
    # one linear programme per distinct (game, objective): rows that share a game share its CEP
    # (the true game's for every horizon; the learned one for both learning rules)
    solved: dict[bytes, CorrelatedEquilibrium] = {}

    def cep(u: np.ndarray, objective: np.ndarray) -> CorrelatedEquilibrium:
        key = u.tobytes() + objective.tobytes()
        if key not in solved:
            solved[key] = optimal_cep(u, objective)
        return solved[key]

    ceps = [cep(estimate[r], objectives[r]) for r in range(rows)]
    F_star = np.array([cep(U[r], objectives[r]).value for r in range(rows)])
    profiles = list(itertools.product(*[range(m) for m in shape]))
    # payment tables for every row and every recommendable profile
    tables = np.zeros((rows, len(profiles), n, *shape))
    for r in range(rows):
        for k, d in enumerate(profiles):
            if rules[r] in ("dominance", "oracle"):
                tables[r, k] = dominance_payments(estimate[r], d, float(slack[r]))
            elif rules[r] in ("cep", "oracle_cep"):
                tables[r, k] = _cep_only_payments(ceps[r], d, float(slack[r]))
    totals = U[:, None] + tables                             # (rows, profiles, n, *shape)
    nets = objectives[:, None] - tables.sum(axis=2)          # (rows, profiles, *shape)
    mus = np.stack([c.mu.ravel() for c in ceps])
    cdf = np.cumsum(mus, axis=1)
    # the horizons whose every recommendation is pure draw nothing; the others draw every round
    mixed = [(g, int(horizon[g][0]), np.random.default_rng(seed)) for g in groups
             if not np.all(mus[g].max(axis=1) > 1 - 1e-9)]
    prof_arr = np.array(profiles)
    steps = horizon - learn_rounds                         # steering rounds of each row
    steer_value = np.zeros(rows)
    silent = np.array([r == "none" for r in rules])
    obey = np.zeros(rows)
    tail = horizon // 10                                   # obedience is measured over these
    r_idx = np.arange(rows)
    k = np.argmax(mus, axis=1)
    # the loop rounds t at which a recorded row is at a marked round t + learn_rounds of its run
    mark_steps = {m - int(lr) for m in marks for lr in set(learn_rounds[recorded].tolist())}

    def draw(k: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray, np.ndarray]:
        rec = prof_arr[k]                                    # (rows, n)
        ctx = [np.where(silent, 0, rec[:, i]) for i in range(n)]
        return rec, ctx, totals[r_idx, k], nets[r_idx, k]

    rec, ctx, total_k, net_k = draw(k)                       # fixed when every mu is pure
    # The learning rows already played their first learn_rounds rounds; they play the steering
    # rounds t = 1..T - learn_rounds of this loop and sit out its last learn_rounds rounds (and
    # every row sits out the rounds past its horizon).
    for t in progress(range(1, T_max + 1), desc="steering", total=T_max):
        active = t <= steps
        if mixed:
            for g, h, rng in mixed:
                if t <= h:
                    k[g] = np.minimum((rng.uniform(size=(int(g.sum()), 1)) > cdf[g]).sum(axis=1),
                                      len(profiles) - 1)
            rec, ctx, total_k, net_k = draw(k)
        xs, val = arena.play_tables(ctx, total_k, net_k, None if active.all() else active)
        val = np.where(active, val, 0.0)
        value += val
        steer_value += val
        last = active & (t > steps - tail)                  # each row's last T // 10 rounds
        both = xs[0][r_idx, rec[:, 0]]                      # P(every agent obeys), in the
        for i in range(1, n):                                # order np.prod multiplies
            both = both * xs[i][r_idx, rec[:, i]]
        obey += np.where(last, both, 0)
        if t in mark_steps:
            rounds = t + learn_rounds                        # the round of the whole run
            paths += [[int(r), int(rounds[r]), *[float(x[r, 0]) for x in xs]]
                      for r in recorded if active[r] and int(rounds[r]) in marks]
    return SteerResult(F=value / horizon, F_steer=steer_value / np.maximum(steps, 1),
                       F_star=F_star, learn_rounds=learn_rounds, eps_hat=eps, error=err,
                       obey=obey / np.maximum(tail, 1), paths=np.array(paths).reshape(-1, 2 + n))


def _sub_bank(bank: LearnerBank, keep: np.ndarray) -> LearnerBank:
    """A bank over the rows ``keep`` that shares nothing with ``bank`` (merged back afterwards)."""
    sub = bank.__class__.__new__(bank.__class__)
    sub.__dict__.update(bank.__dict__)
    sub.rows = int(keep.sum())
    for name, val in bank.__dict__.items():
        if not name.startswith("_") and isinstance(val, np.ndarray) and val.shape[0] == bank.rows:
            setattr(sub, name, val[keep].copy())
    sub._refresh()
    return sub


def _merge_bank(bank: LearnerBank, sub: LearnerBank, keep: np.ndarray) -> None:
    for name, val in sub.__dict__.items():
        if not name.startswith("_") and isinstance(val, np.ndarray) and val.shape[0] == sub.rows:
            getattr(bank, name)[keep] = val


def steer(game: NormalFormGame, agents: Agent | Sequence[Agent], target: np.ndarray | None = None,
          T: int = 16_000, seed: int = 0, *, rule: str = "dominance", margin: float = 0.05,
          record: bool = False) -> SteerResult:
    """Algorithm 3: learn the game, then steer its agents to the principal's optimal CEP.

    1. Learn ``Ũ`` with Algorithm 2 in about ``sqrt(T)`` rounds (``L = ceil(sqrt(T)/phases)`` per
       phase), paying as it does.
    2. Solve the optimal CEP of ``Ũ`` for the objective ``target`` (:func:`optimal_cep`).
    3. Every remaining round, draw ``d ~ mu``, send each agent ``i`` the signal ``d_i`` and pay by
       ``rule`` with slack ``margin + 2 eps_hat`` (``eps_hat``: the principal's split-half gauge of
       its error).

    Args:
        game: the game (the principal only sees strategies, except for the oracle rule).
        agents: one agent for every player, or one per player.
        target: the principal's utility ``U_0`` over profiles; default the welfare (sum of the
            agents' utilities), which the principal is assumed to know as its own objective.
        T: total rounds, learning included.
        seed: seeds the draws of recommended profiles.
        rule: ``"dominance"`` (this book's choice, ``utility_learning-eq-dominance``), ``"cep"``
            (the CEP's own payment for obeying), ``"oracle"`` / ``"oracle_cep"`` (the same two rules
            computed from the true utilities, no learning, slack ``margin``) or ``"none"`` (no
            principal).
        margin: the strictness margin every paying rule adds.
        record: keep the agents' strategy paths.

    Returns:
        A :class:`SteerResult` for this game (scalars as 0-d arrays).
    """
    if not isinstance(game, NormalFormGame):
        raise TypeError(f"game must be a NormalFormGame; got {type(game).__name__}")
    _check_normalised("game", game)
    check_choice("rule", rule, STEER_RULES)
    check_range("margin", margin, 0.0)
    check_int("seed", seed, 0)
    T = check_int("T", T, 4 * game.phases + 1)
    U0 = game.welfare() if target is None else np.asarray(target, dtype=float)
    if U0.shape != game.shape:
        raise ValueError(f"target must have the profile shape {game.shape}; got {U0.shape}")
    res = _steer([game], _as_agents(agents, game.n), U0[None], T, [rule], seed, margin=margin,
                 record=record)
    return SteerResult(F=res.F[0], F_steer=res.F_steer[0], F_star=res.F_star[0],
                       learn_rounds=res.learn_rounds[0], eps_hat=res.eps_hat[0],
                       error=res.error[0], obey=res.obey[0], paths=res.paths[:, 1:])
