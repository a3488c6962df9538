"""Progress bars for long loops: tqdm on a terminal or in a live notebook, silent elsewhere.

A bar is shown when stderr is a terminal or when running inside a Jupyter kernel. Set the
environment variable ``ICLR_LAB_PROGRESS=0`` to silence bars everywhere (the book build and the
tests do this, so executed notebooks carry no stale bars) or ``=1`` to force them.

Only the outermost loop draws a bar: a ``reproduce()`` that trains ninety models shows one bar over
the ninety runs, not ninety bars. The bar is tqdm's plain text bar, which updates one line in place
and erases itself when done, also in a notebook (a widget bar would leave a dead widget in the
saved notebook).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from iclr_lab.core.validation import check_int

__all__ = ["progress", "progress_enabled"]

T = TypeVar("T")


def _in_kernel() -> bool:
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None else None
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def progress_enabled() -> bool:
    """Whether :func:`progress` draws a bar here."""
    env = os.environ.get("ICLR_LAB_PROGRESS", "").strip()
    if env in {"0", "1"}:
        return env == "1"
    return sys.stderr.isatty() or _in_kernel()


_active = 0  # bars being drawn now; nested loops stay silent while one is


def progress(iterable: Iterable[T], *, desc: str | None = None, total: int | None = None,
             leave: bool = False) -> Iterator[T]:
    """Wrap ``iterable`` in a tqdm bar when :func:`progress_enabled` and no outer loop already
    draws one; else return it unchanged. ``total`` (>= 0, or ``None``) is the bar's length when
    ``iterable`` has none."""
    if total is not None:
        check_int("total", total, 0)
    if _active or not progress_enabled():
        return iter(iterable)
    return _bar(iterable, desc, total, leave)


def _bar(iterable: Iterable[T], desc: str | None, total: int | None, leave: bool) -> Iterator[T]:
    global _active
    from tqdm import tqdm

    _active += 1
    try:
        with tqdm(iterable, desc=desc, total=total, leave=leave, file=sys.stderr, ncols=88,
                  mininterval=0.5) as bar:
            yield from bar
    finally:
        _active -= 1
