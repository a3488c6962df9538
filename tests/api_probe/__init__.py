"""The public-API probe, in the spirit of scikit-learn's ``check_estimator`` (imported as ``api_probe``).

:func:`public_callables` walks the ``__all__`` of every module of ``iclr_lab`` and keeps each
function and class defined in the package, under its shortest public path. :func:`probe` then calls
one of them with bad values, one parameter at a time, every other argument valid (the callable's
defaults, and for its required parameters the values in ``api_probe.examples``):

* each **number** (annotated ``int`` or ``float``, alone or with ``None``, ``str``, ``bool`` or a
  ``Literal``): a string, NaN, +inf, -inf, -1 and 0, and for an integer-only parameter 1.5 and
  -2**40 (this last one to read the allowed range from the error); for a seed, also ``None``
  (which numpy and torch take as "fresh entropy": silently not repeatable);
* each **array** (``np.ndarray``, ``torch.Tensor``, ``ArrayLike``) that has an example value: an
  empty one, one of the wrong shape, and one full of NaN.

A call passes when it raises ``ValueError`` or ``TypeError`` whose message names the parameter
(the name the caller passed, not an internal alias). A value inside the allowed range that the
first error states ("lr must be in [0, inf), got nan": so 0 and +inf are allowed, -1 is not) is a
*documented acceptance* and is not called; nor is a value the parameter's ``Literal`` admits. Any
other outcome fails: a silent acceptance (the call returns, or runs past :data:`TIMEOUT_S`), an error
from deep inside numpy, torch or LAPACK, or a message that does not name the parameter. The
exceptions, each with its reason, are in ``api_probe.allow``.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
import signal
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, is_dataclass
from typing import Any

import numpy as np

#: a call that neither raises nor returns within this many seconds is taken as accepting its value
TIMEOUT_S = 2.0

CLEAR, DOCUMENTED, ALLOWED = "clear error", "documented acceptance", "allow-listed"
SILENT, OBSCURE, UNNAMED, NO_EXAMPLE = ("accepted silently", "obscure error",
                                        "error that does not name the parameter",
                                        "no example for a required parameter")
FAILURES = (SILENT, OBSCURE, UNNAMED, NO_EXAMPLE)


@dataclass(frozen=True)
class Outcome:
    """One probe call: ``callable_(..., param=<label>)`` ended as ``kind`` (one of the constants)."""

    callable_: str
    param: str
    label: str
    kind: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.callable_}({self.param}={self.label}): {self.kind}" + (
            f": {self.detail}" if self.detail else "")


# ---------------------------------------------------------------------------------------------
# what is public


def _skip(obj: Any) -> bool:
    """Not something a user calls with numbers: exceptions, protocols, abstract classes, typed
    dicts."""
    if not inspect.isclass(obj):
        return not inspect.isfunction(obj)
    if inspect.isabstract(obj):  # its concrete subclasses are probed
        return True
    if issubclass(obj, BaseException) or getattr(obj, "_is_protocol", False):
        return True
    return issubclass(obj, dict) and hasattr(obj, "__total__")


def public_callables() -> dict[str, Callable[..., Any]]:
    """Every function and class that a module of ``iclr_lab`` lists in its ``__all__`` and that the
    package defines, keyed by its shortest public path (``iclr_lab.recovery.sparse_relu_iht.iht``)."""
    import iclr_lab

    found: dict[int, tuple[str, Callable[..., Any]]] = {}
    for info in pkgutil.walk_packages(iclr_lab.__path__, "iclr_lab."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType) or _skip(obj):
                continue
            if not str(getattr(obj, "__module__", "")).startswith("iclr_lab"):
                continue
            path = f"{info.name}.{name}"
            old = found.get(id(obj))
            if old is None or (path.count("."), path) < (old[0].count("."), old[0]):
                found[id(obj)] = (path, obj)
    return dict(sorted(found.values()))


# ---------------------------------------------------------------------------------------------
# what a parameter is


def _alternatives(annotation: Any) -> list[str]:
    """The top-level members of a union annotation, as strings (``"float | None"`` -> two)."""
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    text = re.sub(r"^(typing\.)?Optional\[(.*)\]$", r"\2 | None", text.strip())
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "[(" and 1 or 0
        depth -= ch in "])" and 1 or 0
        if ch == "|" and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


_NUMBERS = {"int", "float", "Real", "numbers.Real", "np.floating", "SupportsFloat"}
_ARRAYS = re.compile(r"^(np\.|numpy\.|npt\.)?(ndarray|NDArray|ArrayLike)(\[.*\])?$|^(torch\.)?Tensor$")
_NEUTRAL = re.compile(r"^(None|str|bool|(typing\.)?Literal\[.*\])$")


def kind_of(param: inspect.Parameter) -> str | None:
    """``"int"``, ``"float"``, ``"array"`` or ``None`` (a parameter the probe leaves alone)."""
    if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.annotation is param.empty:
        return None
    alts = _alternatives(param.annotation)
    core = [a for a in alts if not _NEUTRAL.match(a)]
    if core and all(a in _NUMBERS for a in core):
        return "int" if set(core) == {"int"} else "float"
    if core and all(_ARRAYS.match(a) for a in core):
        return "array"
    return None


def literal_values(param: inspect.Parameter) -> set[Any]:
    """The values a ``Literal[...]`` member of the parameter's annotation admits."""
    values: set[Any] = set()
    for alt in _alternatives(param.annotation):
        m = re.match(r"^(typing\.)?Literal\[(.*)\]$", alt)
        if m:
            try:
                values |= set(eval(f"({m.group(2)},)", {}))  # noqa: S307 - a literal's own text
            except Exception:
                pass
    return values


# ---------------------------------------------------------------------------------------------
# the allowed range an error states


_INTERVAL = re.compile(r"in ([\[(])\s*(-?inf|[-+0-9.eE]+),\s*(-?inf|[-+0-9.eE]+)\s*([\])])")
_WORDS = {
    "non-negative": (0.0, math.inf, False, True), "nonnegative": (0.0, math.inf, False, True),
    "positive": (0.0, math.inf, True, True), "finite": (-math.inf, math.inf, True, True),
}


def stated_range(message: str) -> tuple[float, float, bool, bool] | None:
    """``(low, high, low_open, high_open)`` from an error message that states it, else ``None``:
    ``"lr must be in [0, inf), got nan"`` -> ``(0, inf, False, True)``; also "positive",
    "non-negative" and "finite"."""
    m = _INTERVAL.search(message)
    if m:
        return float(m.group(2)), float(m.group(3)), m.group(1) == "(", m.group(4) == ")"
    for word, rng in _WORDS.items():
        if re.search(rf"\b{word}\b", message):
            return rng
    return None


def inside(value: float, rng: tuple[float, float, bool, bool]) -> bool:
    low, high, low_open, high_open = rng
    if math.isnan(value):
        return False
    above = value > low if low_open else value >= low
    below = value < high if high_open else value <= high
    return above and below


# ---------------------------------------------------------------------------------------------
# calling


class _Timeout(BaseException):
    """Raised by the alarm inside a probe call that ran too long (a ``BaseException``, so that the
    callable's own ``except Exception`` cannot swallow it)."""


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def ring(signum: int, frame: Any) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _names(message: str, param: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(param)}(?![A-Za-z0-9_])", message) is not None


def call(fn: Callable[..., Any], kwargs: dict[str, Any], param: str) -> tuple[str, str]:
    """Call ``fn(**kwargs)`` and classify the outcome for ``param``: ``(kind, message)``."""
    try:
        with _deadline(TIMEOUT_S):
            fn(**kwargs)
    except _Timeout:
        return SILENT, f"still running after {TIMEOUT_S:g} s"
    except (ValueError, TypeError) as exc:
        message = str(exc)
        return (CLEAR if _names(message, param) else UNNAMED), f"{type(exc).__name__}: {message}"
    except Exception as exc:  # the point of the probe: any other error is an obscure one
        return OBSCURE, f"{type(exc).__name__}: {str(exc)[:200]}"
    return SILENT, "returned"


# ---------------------------------------------------------------------------------------------
# bad values


def _number_probes(kind: str) -> list[tuple[str, Any]]:
    probes: list[tuple[str, Any]] = [("'x'", "x")]
    if kind == "int":
        probes += [("1.5", 1.5), ("nan", math.nan), ("-2**40", -(2**40)), ("-1", -1), ("0", 0)]
    else:
        probes += [("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf), ("-1", -1.0),
                   ("0", 0.0)]
    return probes


def _array_probes(value: Any) -> list[tuple[str, Any]]:
    """Empty, wrong shape and all-NaN versions of an example array (numpy or torch)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - the test environment has torch
        torch = None  # type: ignore[assignment]
    if torch is not None and isinstance(value, torch.Tensor):
        v = value.detach()
        empty = v.new_empty((0, *v.shape[1:]))
        wrong = v.reshape(-1) if v.ndim >= 2 else torch.stack([v, v], -1) if v.ndim == 1 else \
            v.reshape(1, 1)
        nan = torch.full(v.shape, math.nan, dtype=v.dtype if v.is_floating_point() else
                         torch.float64)
    else:
        v = np.asarray(value)
        empty = np.empty((0, *v.shape[1:]), dtype=v.dtype)
        wrong = v.reshape(-1) if v.ndim >= 2 else np.stack([v, v], -1) if v.ndim == 1 else \
            v.reshape(1, 1)
        nan = np.full(v.shape, math.nan)
    return [("empty", empty), ("wrong shape", wrong), ("all-NaN", nan)]


def probe(name: str, fn: Callable[..., Any], examples: dict[str, Callable[[], dict[str, Any]]],
          allow: dict[tuple[str, str, str], str]) -> list[Outcome]:
    """Every probe call of one public callable (see the module's docstring)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    params = {n: p for n, p in sig.parameters.items() if kind_of(p) is not None}
    if not params:
        return []
    required = [n for n, p in sig.parameters.items() if p.default is p.empty and p.kind not in (
        p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    base = examples[name]() if name in examples else {}
    missing = [n for n in required if n not in base]
    if missing:
        return [Outcome(name, ", ".join(missing), "-", NO_EXAMPLE,
                        "add one to tests/api_probe/examples.py")]
    out: list[Outcome] = []

    def allowed(param: str, label: str) -> str | None:
        return (allow.get((name, param, label)) or allow.get((name, param, "*"))
                or allow.get((name, "*", label)) or allow.get((name, "*", "*")))

    for param, p in params.items():
        kind = kind_of(p)
        if kind == "array":
            if param not in base and (p.default is p.empty or p.default is None):
                continue  # an optional array with no example: nothing to corrupt
            example = base[param] if param in base else p.default
            probes = _array_probes(example)
        else:
            probes = _number_probes(kind or "float")
            if "seed" in param and "None" not in _alternatives(p.annotation):
                probes.append(("None", None))
        admitted = literal_values(p)
        rng: tuple[float, float, bool, bool] | None = None
        for label, value in probes:
            if not isinstance(value, str) and admitted and any(
                    type(value) is type(a) and value == a for a in admitted):
                out.append(Outcome(name, param, label, DOCUMENTED, "in the Literal"))
                continue
            if rng is not None and label in ("inf", "-inf", "-1", "0", "-2**40") and inside(
                    float(value), rng):
                out.append(Outcome(name, param, label, DOCUMENTED, "inside the stated range"))
                continue
            kind_, detail = call(fn, {**base, param: value}, param)
            if kind_ == CLEAR and rng is None and label not in ("'x'", "1.5"):
                rng = stated_range(detail)
            reason = allowed(param, label)
            if kind_ != CLEAR and reason is not None:
                kind_, detail = ALLOWED, reason
            out.append(Outcome(name, param, label, kind_, "" if kind_ == CLEAR else detail))
    return out


def is_record(obj: Any) -> bool:
    """A frozen dataclass (the package's result records: what a function returns, not input)."""
    return inspect.isclass(obj) and is_dataclass(obj) and bool(
        getattr(obj, "__dataclass_params__", None) and obj.__dataclass_params__.frozen)
