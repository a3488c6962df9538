"""Argument checks whose errors name the parameter and the allowed range.

Every public function of the package validates its arguments with these helpers, so a user who types
``VRAdam(params, lr=-1)`` reads ``lr must be in [0, inf), got -1`` rather than a NaN 300 steps later.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np

__all__ = ["SEED_MAX", "check_array", "check_choice", "check_int", "check_range", "check_real",
           "check_seed"]


def _fmt(x: float) -> str:
    return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:g}"


def _fmt_int(x: float) -> str:
    # integer bounds in full: "[0, 4294967295]", not "[0, 4.29497e+09]"
    return _fmt(x) if math.isinf(x) else str(int(x))


def check_real(name: str, value: Any) -> float:
    """Return ``value`` as a float, or raise ``TypeError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    return float(value)


def _bound(which: str, value: Any) -> float:
    """A bound of an interval: any real number or +-inf (the helpers' own arguments are checked
    too, so that a bad bound is not mistaken for a bad value)."""
    b = check_real(which, value)
    if math.isnan(b):
        raise ValueError(f"{which} must be in [-inf, inf], got nan")
    return b


def check_range(
    name: str,
    value: Any,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool | None = None,
    high_open: bool | None = None,
) -> float:
    """Check that ``low <= value <= high`` (strict on an open side) and return it as a float.

    A side is closed by default, except an infinite one: ``check_range("lr", x, 0)`` means
    ``[0, inf)`` and rejects ``inf``. Pass ``high_open=False`` to admit it (``[0, inf]``, as for a
    cap that may be switched off).

    Raises:
        TypeError: ``value`` is not a real number.
        ValueError: ``value`` is outside the interval, or NaN. The message shows the interval in
            the usual bracket notation, e.g. ``beta1 must be in [0, 1), got 1.0``.
    """
    low, high = _bound("low", low), _bound("high", high)
    if low > high:
        raise ValueError(f"low must be <= high, got low={low!r} and high={high!r}")
    x = check_real(name, value)
    lo_open = low == -math.inf if low_open is None else low_open
    hi_open = high == math.inf if high_open is None else high_open
    too_low = x <= low if lo_open else x < low
    too_high = x >= high if hi_open else x > high
    if math.isnan(x) or too_low or too_high:
        lb = "(" if lo_open else "["
        hb = ")" if hi_open else "]"
        raise ValueError(f"{name} must be in {lb}{_fmt(low)}, {_fmt(high)}{hb}, got {value!r}")
    return x


def _int_bound(which: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{which} must be an integer or None, got {type(value).__name__} {value!r}")
    return int(value)


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None) -> int:
    """Check that ``value`` is an integer in ``[low, high]`` and return it."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    lo = -math.inf if low is None else _int_bound("low", low)
    hi = math.inf if high is None else _int_bound("high", high)
    if lo > hi:
        raise ValueError(f"low must be <= high, got low={low!r} and high={high!r}")
    n = int(value)
    if not lo <= n <= hi:
        raise ValueError(f"{name} must be an integer in [{_fmt_int(lo)}, {_fmt_int(hi)}], got "
                         f"{value!r}")
    return n


#: The largest seed (numpy's and torch's generators both take any integer in [0, 2**32 - 1]).
SEED_MAX = 2**32 - 1


def check_seed(seed: Any, name: str = "seed") -> int:
    """Check that ``seed`` is an integer in ``[0, 2**32 - 1]`` and return it. ``None`` (which numpy
    would take as "fresh entropy", silently non-deterministic), floats, strings and negative
    numbers are refused with an error naming ``name``."""
    if seed is None:
        raise TypeError(f"{name} must be an integer in [0, {SEED_MAX}], got None: every run of this "
                        "package is seeded, so that it can be repeated")
    return check_int(name, seed, 0, SEED_MAX)


def check_choice(name: str, value: Any, choices: Collection[Any]) -> Any:
    """Check that ``value`` is one of ``choices`` and return it."""
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}")
    return value


def check_array(
    name: str,
    value: Any,
    *,
    ndim: int | Sequence[int] | None = None,
    shape: Sequence[int | None] | None = None,
    nonempty: bool = True,
    finite: bool = True,
) -> Any:
    """Check an array argument and return it: a ``torch.Tensor`` as it is, anything else as a numpy
    array (``np.asarray``).

    Args:
        name: the parameter's name, as the caller passes it.
        value: the argument.
        ndim: the number of dimensions, or the numbers allowed.
        shape: the shape, with ``None`` for a free dimension (``(None, 3)``: n rows of 3).
        nonempty: refuse an array with no entries.
        finite: refuse NaN and infinite entries.

    Raises:
        TypeError: ``value`` is not numeric (strings, objects).
        ValueError: wrong dimensions or shape, empty, or not finite; the message names ``name`` and
            shows the shape it got, e.g. ``X must be 2-dimensional, got shape (5,)``.
    """
    tensor = hasattr(value, "detach") and hasattr(value, "isfinite")
    if tensor:
        arr = value
        numeric = True
    else:
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be a numeric array, got {type(value).__name__}") from exc
        numeric = arr.dtype.kind in "biufc"
    if not numeric:
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    got = tuple(int(n) for n in arr.shape)
    if ndim is not None:
        allowed = (int(ndim),) if isinstance(ndim, Integral) else tuple(
            int(k) for k in ndim)  # type: ignore[union-attr]
        if len(got) not in allowed:
            want = " or ".join(str(k) for k in allowed)
            raise ValueError(f"{name} must be {want}-dimensional, got shape {got}")
    if shape is not None:
        want_shape = tuple(shape)
        if len(got) != len(want_shape) or any(w is not None and w != g
                                               for w, g in zip(want_shape, got, strict=True)):
            shown = "(" + ", ".join("n" if w is None else str(w) for w in want_shape) + (
                ",)" if len(want_shape) == 1 else ")")
            raise ValueError(f"{name} must have shape {shown}, got {got}")
    size = int(arr.numel()) if tensor else int(arr.size)
    if nonempty and size == 0:
        raise ValueError(f"{name} must not be empty, got shape {got}")
    if finite and size and not (tensor and _all_finite(arr)):
        bad = int((~arr.isfinite()).sum()) if tensor else int(np.count_nonzero(~np.isfinite(arr)))
        if bad:
            raise ValueError(f"{name} must be finite, got {bad} NaN or infinite entries of {size}")
    return arr


def _all_finite(x: Any) -> bool:
    """Whether every entry of the tensor ``x`` is finite, cheaply: ``x * 0`` is zero where ``x`` is
    finite and NaN where it is infinite or NaN, so its sum is NaN exactly when an entry is not
    finite (a sum of zeros cannot overflow). A tenth of an ``isfinite`` pass and its count on a
    tensor; a tensor that fails takes that pass, for the message's count."""
    return not bool((x.detach() * 0).sum().isnan())
