"""Learning a game by paying its no-regret agents, and steering them with what was learned.

What a user imports from here: the paying principal (Algorithm 1), the multi-agent learner with
signals and compliance payments (Algorithm 2) and the naive probing baseline; the games
(:mod:`.games`) and the no-regret agents (:mod:`.agents`) are re-exported. The correlated
equilibrium with payments and the steering loop (Algorithm 3 with this book's dominance payments)
are in :mod:`.steering`. Equations are cited by their label in ``book/online/utility_learning.md``.

Everything is vectorised over a batch of independent *rows* (seeds, variants, horizons), so that
one Python loop over rounds serves a whole experiment.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed

from .agents import (  # noqa: F401  (re-exported: the module's public API, and private helpers)
    _AGENTS,
    Agent,
    BestResponse,
    Hedge,
    LearnerBank,
    RegretMatching,
    _BestResponseBank,
    _check_agent,
    _check_normalised,
    _HedgeBank,
    _RegretMatchingBank,
    _row_agents,
    _single_bank,
    _StackedBank,
)
from .games import (  # noqa: F401
    NormalFormGame,
    equivalence_error,
    prisoners_dilemma,
    random_game,
    random_prisoners_dilemma,
    single_agent,
    strategic_center,
)

__all__ = [
    "PROBE_DESIGNS",
    "SIGNALS",
    "Hedge",
    "LearnResult",
    "LearnerBank",
    "NormalFormGame",
    "PaymentRun",
    "RegretMatching",
    "BestResponse",
    "equivalence_error",
    "learn_utilities",
    "naive_probing",
    "pay_against",
    "payment_set_diameter",
    "prisoners_dilemma",
    "project_payments",
    "random_game",
    "random_prisoners_dilemma",
    "single_agent",
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
# The payment set and Algorithm 1
# ----------------------------------------------------------------------------------------------


def project_payments(y: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row of ``y`` (shape ``(..., m)``) onto the payment set
    ``P = {p in [0, 2]^m : sum(p) = m}`` (``utility_learning-eq-payment-set``).

    The projection is ``clip(y - tau, 0, 2)`` with the ``tau`` that makes the sum ``m``. The sum is
    piecewise linear and non-increasing in ``tau`` with kinks at ``y_a`` and ``y_a - 2``, so ``tau``
    is found exactly: evaluate the sum at the kinks, find the bracketing pair, interpolate.

    ``y`` is a non-empty finite array of at least one dimension.
    """
    arr = check_array("y", y)
    if arr.ndim == 0:
        raise ValueError("y must have an action axis (at least 1 dimension), got a 0-d array")
    return _project(np.asarray(arr, dtype=float))


def _project(y: np.ndarray) -> np.ndarray:
    """:func:`project_payments` without the checks: Algorithm 1's step, every round."""
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


def _utilities(name: str, u: Any) -> np.ndarray:
    """One agent's utilities ``u`` as a finite float array of shape ``(rows, m)``, ``m >= 2``."""
    util = np.atleast_2d(np.asarray(check_array(name, u, ndim=(1, 2)), dtype=float))
    if util.shape[1] < 2:
        raise ValueError(f"{name} must have shape (m,) or (rows, m) with m >= 2; got {util.shape}")
    return util


def _per_row(name: str, value: Any, rows: int, low: int) -> np.ndarray:
    """An integer ``>= low``, or a sequence of ``rows`` of them, as an int array of ``rows``."""
    arr = np.asarray(value)
    if arr.ndim > 1 or (arr.ndim == 1 and arr.size not in (1, rows)):
        raise ValueError(f"{name} must be one integer or one per row ({rows}); got shape {arr.shape}")
    for v in np.atleast_1d(arr):
        check_int(name, v.item() if isinstance(v, np.generic) else v, low)
    return np.broadcast_to(arr.astype(int), (rows,)).copy()


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
        self.p = _project(self.p - self.lr[:, None] * grad)

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

    ``T`` and the checkpoints are integers ``>= 1``, ``seed`` is in ``[0, 2**32 - 1]``.
    """
    check_choice("observe", observe, ("mixed", "sampled"))
    seed = check_seed(seed)
    util = _utilities("u", u)
    agents = _row_agents("agent", agent, util.shape[0])
    for row in util:
        _check_normalised("u", NormalFormGame(row[None, :]))
    rows, m = util.shape
    horizon = _per_row("T", T, rows, 1)
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

    ``probes`` are integers ``>= 1``; each ``T`` is at least the number of actions probed times
    ``probes``.

    Returns:
        The estimates (centred), shape ``(rows, m)``.
    """
    util = _utilities("u", u)
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
    K = _per_row("probes", probes, rows, 1)
    first = pair.astype(int)                             # the first action probed, per row
    n_probed = m - first
    horizon = _per_row("T", T, rows, 1)
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
            dynamics are deterministic: agents play mixed strategies against expected utilities);
            an integer in ``[0, 2**32 - 1]``.
        signals: ``"shared"`` (one ``⊥`` per agent, the paper's signal set), ``"per_phase"`` (a
            fresh ``⊥`` per phase) or ``"none"`` (no signals: every learner sees one context).
        compliance: the payment for following a recommendation, in ``[0, inf)``; it must exceed
            the largest utility gap, 2, for compliance to be strictly dominant.
        observe: ``"mixed"`` (the principal sees each strategy ``x^t``, as in the paper) or
            ``"sampled"`` (it sees one action drawn from it).
    """
    if not isinstance(game, NormalFormGame):
        raise TypeError(f"game must be a NormalFormGame; got {type(game).__name__}")
    _check_normalised("game", game)
    check_seed(seed)
    T = check_int("T", T, 2 * game.phases)
    check_choice("signals", signals, SIGNALS)
    check_range("compliance", compliance, 0.0)
    check_choice("observe", observe, ("mixed", "sampled"))
    arena = _Arena(game.utilities[None], _as_agents(agents, game.n), _contexts(game.shape))
    res = _learn(arena, T // game.phases, [signals], compliance=compliance, observe=observe,
                 rng=np.random.default_rng(seed))
    return LearnResult(estimate=res.estimate[0], error=res.error[0], spread=res.spread[0],
                       rounds=res.rounds, rounds_per_phase=res.rounds_per_phase, value=res.value[0])
