"""The three run sizes every chapter supports, and the one seeding call every chapter makes.

* ``smoke``: seconds; exercises the whole pipeline in unit tests.
* ``book``: at most 90 s of CPU time on one thread; what the chapter executes and CI asserts.
* ``paper``: closer to the paper's setup; minutes to hours.

A scale changes sizes (steps, seeds, grid points), never the algorithm.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from collections.abc import Iterator, Mapping
from typing import Literal, TypeVar

import numpy as np

from iclr_lab.core.validation import check_choice, check_int, check_seed

__all__ = ["SCALES", "Scale", "check_scale", "one_thread", "pick", "seed_everything"]

Scale = Literal["smoke", "book", "paper"]
#: The three run sizes, smallest first.
SCALES: tuple[Scale, ...] = ("smoke", "book", "paper")

T = TypeVar("T")


def check_scale(scale: str) -> Scale:
    """Return ``scale`` if it is one of :data:`SCALES`, else raise ``ValueError``."""
    return check_choice("scale", scale, SCALES)


def pick(table: Mapping[str, T], scale: str) -> T:
    """Return the entry of ``table`` for ``scale``: the one place a chapter's sizes depend on it.

    >>> pick({"smoke": 10, "book": 1000, "paper": 10**5}, "book")
    1000
    """
    check_scale(scale)
    missing = set(SCALES) - set(table)
    if missing:
        raise ValueError(f"table must define every scale; missing {sorted(missing)}")
    return table[scale]


def seed_everything(seed: int, *, threads: int | None = 1) -> np.random.Generator:
    """Seed Python, NumPy and (if imported) torch; pin torch to ``threads`` threads.

    torch is only touched when it has already been imported, so numpy-only chapters stay light.
    Pinning the thread count matters twice: small networks run faster on one thread, and float
    reductions are only reproducible for a fixed thread count.

    Returns:
        A fresh ``numpy.random.Generator`` seeded with ``seed``. Chapters pass it (or integers drawn
        from it) down instead of touching global state.
    """
    seed = check_seed(seed)
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - third-party code may still use the legacy global RNG
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
        if threads is not None:
            torch.set_num_threads(check_int("threads", threads, 1))
    return np.random.default_rng(seed)


def one_thread(threads: int = 1) -> contextlib.AbstractContextManager[None]:
    """Run the block with ``threads`` threads in the BLAS and OpenMP pools (through threadpoolctl)
    and in torch, as the book's build does; the previous settings come back afterwards.

    The chapters' matrices and networks are small: on several threads of a busy machine their
    loops run many times slower, and float reductions depend on the thread count, so a run on
    other settings would not repeat the shipped stability tables. torch is pinned if it is
    imported when the block starts or while it runs (a chapter that imports it lazily).
    """
    # checked here, when it is called, not when the block is entered
    return _one_thread(check_int("threads", threads, 1))


@contextlib.contextmanager
def _one_thread(threads: int) -> Iterator[None]:
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    env = os.environ.get("OMP_NUM_THREADS")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        limits: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    else:
        # read torch's setting first: threadpool_limits applies its limit when it is made
        limits = threadpool_limits(limits=threads)
    if torch is None:
        # torch reads this when it is first imported, inside the block
        os.environ["OMP_NUM_THREADS"] = str(threads)
    try:
        with limits:
            if torch is not None:
                torch.set_num_threads(threads)
            yield
    finally:
        if torch is None:
            if env is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = env
        elif before is not None:
            torch.set_num_threads(before)
