"""Small statistics used across chapters: log-log slopes, summaries over seeds, paired differences."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SUMMARY_COLUMNS", "Paired", "loglog_slope", "paired", "summarize_seeds"]

SUMMARY_COLUMNS = ("mean", "std", "lo", "hi", "seeds")


def loglog_slope(x: ArrayLike, y: ArrayLike) -> tuple[float, float]:
    """Least-squares fit of ``log y = slope * log x + intercept``; returns ``(slope, intercept)``.

    Natural logarithms; all values must be positive.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise ValueError(f"x and y must be 1-D of equal length >= 2, got {x.shape} and {y.shape}")
    for name, v in (("x", x), ("y", y)):
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ValueError(f"{name} must be positive and finite for a log-log fit, got {v}")
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope), float(intercept)


def summarize_seeds(df: pd.DataFrame, by: list[str], value: str, seed: str = "seed") -> pd.DataFrame:
    """Mean, standard deviation, min and max of ``value`` over ``seed`` for each group in ``by``.

    The result has columns ``by + ["mean", "std", "lo", "hi", "seeds"]``; ``std`` is 0 for one
    seed. Grouping columns may not use those names.
    """
    clash = [c for c in by if c in SUMMARY_COLUMNS]
    if clash:
        raise ValueError(f"by must not use the summary column names {SUMMARY_COLUMNS}; got {clash}")
    missing = [c for c in [*by, value, seed] if c not in df.columns]
    if missing:
        raise ValueError(f"df is missing columns {missing}; it has {list(df.columns)}")
    g = df.groupby(by, sort=True)[value]
    out = g.agg(mean="mean", std="std", lo="min", hi="max", seeds="count").reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out


@dataclass(frozen=True)
class Paired:
    """The paired per-seed differences ``a - b`` of two methods run on the same seeds.

    ``median`` is the median difference; ``(lo, hi)`` is a two-sided Student-t interval for the mean
    difference at ``level`` (a single pair, or pairs that do not vary, give ``lo == hi``). "``a``
    beats ``b`` by more than ``m``" (lower is better) means ``hi < -m``: the whole interval lies on
    the right side of the margin, not only the median.
    """

    differences: tuple[float, ...]
    median: float
    lo: float
    hi: float
    level: float


def paired(a: ArrayLike, b: ArrayLike, *, level: float = 0.95) -> Paired:
    """The paired differences ``a[i] - b[i]`` (one pair per seed), their median and a t interval.

    Args:
        a: the first method's value at each seed.
        b: the second method's value at the same seeds, in the same order.
        level: the interval's coverage, in (0, 1).

    A NaN or infinite value (a diverged run) is kept, not refused: its difference is non-finite,
    and so are the mean and the interval, so a claim judged on them fails rather than passing on
    the other seeds.
    """
    # the t quantile straight from scipy.special (scipy.stats.t.ppf calls it): importing
    # scipy.stats costs about a second of CPU, more than the rest of a claim's statistics
    from scipy.special import stdtrit

    from iclr_lab.core.validation import check_range

    check_range("level", level, 0.0, 1.0, low_open=True, high_open=True)
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 1:
        raise ValueError(f"a and b must be 1-D of equal length >= 1 (one value per seed), got "
                         f"{x.shape} and {y.shape}")
    d = x - y
    mean = float(d.mean())
    if d.size < 2 or not np.all(np.isfinite(d)):
        half = 0.0 if np.all(np.isfinite(d)) else math.nan
    else:
        half = float(stdtrit(d.size - 1, 0.5 + level / 2) * d.std(ddof=1) / math.sqrt(d.size))
    return Paired(tuple(float(v) for v in d), float(np.median(d)), mean - half, mean + half, level)
