"""Small statistics used across chapters: log-log slopes and summaries over seeds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SUMMARY_COLUMNS", "loglog_slope", "summarize_seeds"]

SUMMARY_COLUMNS = ("mean", "std", "lo", "hi", "seeds")


def loglog_slope(x: ArrayLike, y: ArrayLike) -> tuple[float, float]:
    """Least-squares fit of ``log y = slope * log x + intercept``; returns ``(slope, intercept)``.

    Natural logarithms; all values must be positive.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise ValueError(f"x and y must be 1-D of equal length >= 2, got {x.shape} and {y.shape}")
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("x and y must be positive for a log-log fit")
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
