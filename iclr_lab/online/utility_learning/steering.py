"""Steering (Algorithm 3): the correlated equilibrium with payments (CEP), this book's dominance
payments and the steering loop of the utility-learning chapter."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed

from .agents import Agent, LearnerBank, _check_normalised
from .games import NormalFormGame
from .method import CAP, _Arena, _as_agents, _contexts, _learn

__all__ = ["STEER_RULES", "CorrelatedEquilibrium", "SteerResult", "dominance_payments",
           "optimal_cep", "steer"]


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

    ``utilities`` is a game or a finite array of shape ``(n, m_1, ..., m_n)``; ``objective`` a finite
    array of shape ``(m_1, ..., m_n)``.
    """
    from scipy.optimize import linprog

    U = utilities.utilities if isinstance(utilities, NormalFormGame) else np.asarray(
        check_array("utilities", utilities), dtype=float)
    NormalFormGame(np.clip(U, -1, 1))  # validates the shape
    n, shape = U.shape[0], U.shape[1:]
    U0 = np.asarray(check_array("objective", objective, finite=False), dtype=float)
    if U0.shape != shape:
        raise ValueError(f"objective must have the profile shape {shape}; got {U0.shape}")
    check_array("objective", U0)  # finite, once the shape is known to fit
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

    ``estimate`` is finite, ``recommended`` holds one action index per agent and ``slack`` is in
    ``[0, inf)``.

    Returns:
        ``P[i][a]``, shape ``(n, m_1, ..., m_n)``.
    """
    U = np.asarray(check_array("estimate", estimate, finite=False), dtype=float)
    n = U.shape[0] if U.ndim else 0
    if U.ndim != n + 1 or n < 1:
        raise ValueError(f"estimate must have shape (n, m_1, ..., m_n); got {U.shape}")
    check_array("estimate", U)
    check_range("slack", slack, 0.0)
    if isinstance(recommended, str | bytes) or not isinstance(recommended, Sequence | np.ndarray):
        raise TypeError(f"recommended must be a sequence of action indices, one per agent; got "
                        f"{type(recommended).__name__}")
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
        error: the actual error of the learned utilities
            (:func:`~iclr_lab.online.utility_learning.games.equivalence_error`; 0 without
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
        target: the principal's utility ``U_0`` over profiles, finite; default the welfare (sum of
            the agents' utilities), which the principal is assumed to know as its own objective.
        T: total rounds, learning included, at least ``4 phases + 1``.
        seed: seeds the draws of recommended profiles, an integer in ``[0, 2**32 - 1]``.
        rule: ``"dominance"`` (this book's choice, ``utility_learning-eq-dominance``), ``"cep"``
            (the CEP's own payment for obeying), ``"oracle"`` / ``"oracle_cep"`` (the same two rules
            computed from the true utilities, no learning, slack ``margin``) or ``"none"`` (no
            principal).
        margin: the strictness margin every paying rule adds, in ``[0, inf)``.
        record: keep the agents' strategy paths.

    Returns:
        A :class:`SteerResult` for this game (scalars as 0-d arrays).
    """
    if not isinstance(game, NormalFormGame):
        raise TypeError(f"game must be a NormalFormGame; got {type(game).__name__}")
    _check_normalised("game", game)
    check_choice("rule", rule, STEER_RULES)
    check_range("margin", margin, 0.0)
    check_seed(seed)
    T = check_int("T", T, 4 * game.phases + 1)
    U0 = game.welfare() if target is None else np.asarray(
        check_array("target", target, finite=False), dtype=float)
    if U0.shape != game.shape:
        raise ValueError(f"target must have the profile shape {game.shape}; got {U0.shape}")
    check_array("target", U0)
    res = _steer([game], _as_agents(agents, game.n), U0[None], T, [rule], seed, margin=margin,
                 record=record)
    return SteerResult(F=res.F[0], F_steer=res.F_steer[0], F_star=res.F_star[0],
                       learn_rounds=res.learn_rounds[0], eps_hat=res.eps_hat[0],
                       error=res.error[0], obey=res.obey[0], paths=res.paths[:, 1:])
