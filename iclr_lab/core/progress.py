"""Progress bars for long loops: tqdm on a terminal or in a live notebook, silent elsewhere.

A bar is shown when stderr is a terminal or when running inside a Jupyter kernel. Set the
environment variable ``ICLR_LAB_PROGRESS=0`` to silence bars everywhere (the book build does this, so
executed pages carry no stale bars) or ``=1`` to force them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

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


def progress(iterable: Iterable[T], *, desc: str | None = None, total: int | None = None,
             leave: bool = False) -> Iterator[T]:
    """Wrap ``iterable`` in a tqdm bar when :func:`progress_enabled`, else return it unchanged."""
    if not progress_enabled():
        return iter(iterable)
    from tqdm.auto import tqdm

    return iter(tqdm(iterable, desc=desc, total=total, leave=leave, dynamic_ncols=True))
