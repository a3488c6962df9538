"""Equal tuning: every method gets the same log grid around its own default, on its own seeds.

A comparison is only as fair as its tuning. :func:`tune` gives each method (the paper's and every
baseline) the same number of points on a log grid centred on the method's own default value, scores
them with the same objective, and picks the best. It then checks its own choice:

* **at a grid edge**: the best value is the smallest or the largest of the grid, so a better one may
  lie outside it;
* **next to a divergence**: a neighbour of the best value diverged (its score is NaN or infinite),
  so the best value may sit on a cliff edge and a point in between may be much better.

Either flag extends the grid **once** (a point beyond the edge; the geometric midpoint towards the
diverged neighbour), rescores, and rechecks. A flag that remains is reported in the scorecard
(:attr:`Tuned.flags`): it means the tuning did not settle, and a claim built on it deserves less
trust.

Tuning runs on seeds disjoint from the seeds that judge the claims (:func:`tuning_seeds`), so a method
is not chosen for the very noise it is then judged on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from iclr_lab.core.validation import check_int, check_range

__all__ = ["TUNING_SEED_OFFSET", "Tuned", "log_grid", "tune", "tuning_seeds"]

#: Tuning seeds start here, far above every judging seed and every stability block
#: (``iclr-lab stability`` uses base seeds ``0 .. 8 * seeds - 1``).
TUNING_SEED_OFFSET = 10_000


def tuning_seeds(seed: int, count: int) -> list[int]:
    """``count`` seeds for tuning, disjoint from the judging seeds ``seed, seed + 1, ...``.

    They are ``seed + 10_000, seed + 10_001, ...`` (:data:`TUNING_SEED_OFFSET`), so each base seed
    (and each stability block) tunes on its own seeds too.
    """
    check_int("seed", seed, 0)
    check_int("count", count, 1)
    return [seed + TUNING_SEED_OFFSET + k for k in range(count)]


def log_grid(default: float, points: int = 5, ratio: float = 3.0) -> list[float]:
    """``points`` values spaced by the factor ``ratio``, centred on ``default`` (ascending).

    With an even number of points the grid has one more point above ``default`` than below.
    """
    check_range("default", default, 0.0, low_open=True)
    check_int("points", points, 1)
    check_range("ratio", ratio, 1.0, low_open=True)
    below = (points - 1) // 2
    return [default * ratio ** (k - below) for k in range(points)]


@dataclass(frozen=True)
class Tuned:
    """What :func:`tune` chose for one method, and how sure it is.

    Attributes:
        method: the method's name, as the tables write it.
        parameter: the tuned hyperparameter (``"lr"``).
        default: the method's own default, the grid's centre.
        grid: every value scored, ascending (the extension included).
        scores: the objective at each value (lower is better; NaN or inf: diverged).
        choice: the value with the lowest finite score (NaN when every point diverged).
        extended: whether the grid was extended once because of a flag.
        flags: the flags that remain after the extension (empty when the choice settled).
    """

    method: str
    parameter: str
    default: float
    grid: tuple[float, ...]
    scores: tuple[float, ...]
    choice: float
    extended: bool
    flags: tuple[str, ...]

    @property
    def text(self) -> str:
        """The choice in one line, e.g. ``VRAdam: lr = 0.01 (5 points, 0.001-0.1; extended once)``."""
        span = f"{self.grid[0]:.3g}\u2013{self.grid[-1]:.3g}"
        out = (f"{self.method}: {self.parameter} = {self.choice:.3g} ({len(self.grid)} points, "
               f"{span}{'; extended once' if self.extended else ''})")
        return out + (f"; flagged: {', '.join(self.flags)}" if self.flags else "")

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "parameter": self.parameter, "default": self.default,
                "grid": list(self.grid), "scores": list(self.scores), "choice": self.choice,
                "extended": self.extended, "flags": list(self.flags)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Tuned:
        return cls(d["method"], d["parameter"], d["default"], tuple(d["grid"]), tuple(d["scores"]),
                   d["choice"], d["extended"], tuple(d["flags"]))


def _diverged(score: float) -> bool:
    return not math.isfinite(score)


def _choose(grid: Sequence[float], scores: Sequence[float]) -> tuple[int, list[str]]:
    """Index of the best finite score (-1 if none) and the flags that choice raises."""
    finite = [k for k, s in enumerate(scores) if not _diverged(s)]
    if not finite:
        return -1, ["every point diverged"]
    best = min(finite, key=lambda k: (scores[k], k))
    flags = []
    if best == 0:
        flags.append("at the grid's low edge")
    if best == len(grid) - 1:
        flags.append("at the grid's high edge")
    if any(0 <= j < len(grid) and _diverged(scores[j]) for j in (best - 1, best + 1)):
        flags.append("next to a diverged point")
    return best, flags


def tune(method: str, score_many: Callable[[Sequence[float]], Sequence[float]], default: float, *,
         parameter: str = "lr", points: int = 5, ratio: float = 3.0,
         grid: Sequence[float] | None = None) -> Tuned:
    """Tune one hyperparameter of ``method`` on a log grid around ``default``; see the module doc.

    Args:
        method: the method's name (for the report).
        score_many: the objective for a list of values, returning one score per value (lower is
            better; NaN or inf for a run that diverged). It gets the whole grid at once, so a
            chapter can train the runs stacked. Score on :func:`tuning_seeds`, never on the seeds
            that judge the claims.
        default: the method's own default value: the grid's centre.
        parameter: the hyperparameter's name (for the report).
        points: grid points before any extension; give every compared method the same number.
        ratio: the factor between neighbouring points.
        grid: the grid itself, ascending and positive, instead of ``points`` and ``ratio`` (a
            chapter's existing sweep, such as ``1e-3, 3e-3, 1e-2, 3e-2, 1e-1``); an extension
            steps beyond an edge by the factor between the edge and its neighbour.
    """
    if grid is None:
        values = log_grid(default, points, ratio)
        low_step = high_step = ratio
    else:
        values = [check_range("grid", v, 0.0, low_open=True) for v in grid]
        if len(values) < 2 or any(b <= a for a, b in zip(values, values[1:], strict=False)):
            raise ValueError(f"grid must hold two or more ascending values, got {list(grid)}")
        low_step, high_step = values[1] / values[0], values[-1] / values[-2]
    grid = values
    scores = [float(s) for s in score_many(grid)]
    if len(scores) != len(grid):
        raise ValueError(f"score_many returned {len(scores)} scores for {len(grid)} values")
    best, flags = _choose(grid, scores)
    extended = bool(flags)
    if flags:
        new: list[float] = []
        if best == -1 or best == 0:
            new.append(grid[0] / low_step)
        if best == len(grid) - 1:
            new.append(grid[-1] * high_step)
        for j in (best - 1, best + 1):
            if best >= 0 and 0 <= j < len(grid) and _diverged(scores[j]):
                new.append(math.sqrt(grid[best] * grid[j]))
        new_scores = [float(s) for s in score_many(new)]
        pairs = sorted(zip(grid + new, scores + new_scores, strict=True))
        grid, scores = [p[0] for p in pairs], [p[1] for p in pairs]
        best, flags = _choose(grid, scores)
    return Tuned(method, parameter, float(default), tuple(grid), tuple(scores),
                 grid[best] if best >= 0 else math.nan, extended, tuple(flags))
