"""Normal-form games, the strategic center and the equivalence error of the utility-learning chapter."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from iclr_lab.core.validation import check_array, check_int, check_range

# ----------------------------------------------------------------------------------------------
# Games
# ----------------------------------------------------------------------------------------------


def _check_rng(rng: object, name: str = "rng") -> np.random.Generator:
    """``rng`` itself, if it is a numpy ``Generator`` (a seed or ``None`` is refused: the caller
    owns the stream, so that a run can be repeated)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


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
        u = np.asarray(check_array("utilities", self.utilities, finite=False), dtype=float)
        if u.ndim < 2 or u.shape[0] != u.ndim - 1:
            raise ValueError("utilities must have shape (n, m_1, ..., m_n): one utility table per "
                             f"agent over the n agents' action profiles; got shape {u.shape}")
        if any(m < 2 for m in u.shape[1:]):
            raise ValueError(f"utilities: every agent needs at least 2 actions; got shape {u.shape}")
        if not np.all(np.isfinite(u)):
            raise ValueError(f"utilities must be finite, got {int((~np.isfinite(u)).sum())} NaN or "
                             f"infinite entries of {u.size}")
        if np.abs(u).max() > 1.0 + 1e-12:
            raise ValueError("utilities must be finite and in [-1, 1] (the paper's normalisation); "
                             f"got range [{u.min():.3g}, {u.max():.3g}]")
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

    ``shape`` lists each agent's number of actions (integers ``>= 2``); ``rng`` is a
    ``numpy.random.Generator``.
    """
    _check_rng(rng)
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
    ``min_gain`` is in ``[0, 1]``; ``rng`` is a ``numpy.random.Generator``.
    """
    _check_rng(rng)
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
    equivalence. ``utilities`` is finite, of shape ``(n, m_1, ..., m_n)``, or
    ``(B, n, m_1, ..., m_n)`` with ``batched=True``.
    """
    u = np.asarray(check_array("utilities", utilities), dtype=float)
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
    Both are finite.
    """
    u = true.utilities if isinstance(true, NormalFormGame) else np.asarray(
        check_array("true", true), dtype=float)
    v = np.asarray(check_array("estimate", estimate), dtype=float)
    if u.shape != v.shape:
        raise ValueError(f"estimate must have the shape of the true utilities {u.shape}; got {v.shape}")
    diff = np.abs(strategic_center(u, batched=batched) - strategic_center(v, batched=batched))
    return diff.reshape(u.shape[0], -1).max(axis=1) if batched else np.asarray(diff.max())
