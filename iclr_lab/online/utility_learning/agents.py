"""Contextual no-regret agents of the utility-learning chapter: one learner per signal, batched over
rows (seeds, variants, horizons)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from iclr_lab.core.validation import check_int, check_range

from .games import NormalFormGame, strategic_center

# ----------------------------------------------------------------------------------------------
# Agents: contextual no-regret learners, one learner per signal
# ----------------------------------------------------------------------------------------------


def _check_sizes(rows: int, contexts: int, m: int) -> tuple[int, int, int]:
    """The sizes of a :class:`LearnerBank`, checked (each bank checks them before it allocates)."""
    return check_int("rows", rows, 1), check_int("contexts", contexts, 1), check_int("m", m, 1)


class LearnerBank:
    """The learners of one agent for ``rows`` independent runs and ``contexts`` signals each.

    An agent class (:class:`Hedge`, :class:`RegretMatching`, :class:`BestResponse`) builds one
    with its ``bank`` method; subclass it, with its ``strategy`` and ``update``, to add a learner.
    State arrays have shape ``(rows, contexts, ...)``; the hot loop reads and writes them through
    flat views indexed by ``row * contexts + signal`` (one fancy index instead of two).

    Args:
        rows: independent runs, an integer ``>= 1``.
        contexts: signals per run, an integer ``>= 1``.
        m: the agent's actions, an integer ``>= 1``.
    """

    def __init__(self, rows: int, contexts: int, m: int) -> None:
        rows, contexts, m = _check_sizes(rows, contexts, m)
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
        rows, contexts, m = _check_sizes(rows, contexts, m)
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
        rows, contexts, m = _check_sizes(rows, contexts, m)
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
        rows, contexts, m = _check_sizes(rows, contexts, m)
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
