"""What every locally-stepping, periodically-averaging optimizer of Part II shares.

DES-LOC (:class:`~iclr_lab.distributed.desloc.DESLOC`) and MT-DAO
(:class:`~iclr_lab.distributed.mtdao.MTDAO`) take local steps and average parts of their state
every ``K`` steps through a :class:`~iclr_lab.core.collective.Collective`. This module holds what
they share, written once:

* :func:`check_period` and :func:`due`: a sync period is an integer ``>= 1`` or ``math.inf``
  (never), and a state is averaged after local step ``t`` when ``t`` is a multiple of its period;
* :func:`check_comm`: the collective argument;
* :class:`LocalSync`: a mixin for :class:`torch.optim.Optimizer` subclasses that owns ``comm`` and
  the local step count, keeps the count in state dicts, copies and pickles (never the collective:
  threads and process groups cannot be copied), and averages tensors of one kind.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from iclr_lab.core.collective import Collective
from iclr_lab.core.validation import check_int

if TYPE_CHECKING:
    import torch

__all__ = ["LocalSync", "check_comm", "check_period", "due"]


def check_period(name: str, value: Any) -> float:
    """A sync period: an integer >= 1, or ``math.inf`` (never); otherwise an error naming ``name``
    and the accepted range, ``[1, inf]`` (the integers and ``math.inf``)."""
    if isinstance(value, float) and value == math.inf:
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer in [1, inf] (math.inf: never), "
                        f"got {type(value).__name__} {value!r}")
    return check_int(name, value, 1)


def due(step: int, period: float) -> bool:
    """Whether a state with sync period ``period`` is averaged after local step ``step``.

    Args:
        step: a local step count, an integer >= 0 (step 0: before any step, when every finite
            period is due).
        period: an integer >= 1, or ``math.inf`` (never due).

    Raises:
        TypeError: ``step`` is not an integer, or ``period`` neither an integer nor ``math.inf``.
        ValueError: ``step`` < 0 or ``period`` < 1.
    """
    step = check_int("step", step, 0)
    return _due(step, check_period("period", period))


def _due(step: int, period: float) -> bool:
    """:func:`due` without the checks, for the optimizers' own step loop: their periods are
    checked when a param group is added, and their step count is theirs."""
    return period != math.inf and step % int(period) == 0


def check_comm(comm: Any) -> Collective | None:
    """``comm`` if it is a :class:`~iclr_lab.core.collective.Collective` or ``None``; else TypeError."""
    if comm is not None and not isinstance(comm, Collective):
        raise TypeError(f"comm must be an iclr_lab.core.collective.Collective or None, "
                        f"got {type(comm).__name__}")
    return comm


class LocalSync:
    """Mixin (listed before the :class:`torch.optim.Optimizer` base) for ``comm`` and ``local_steps``.

    The subclass calls ``_init_local_sync(comm)`` at the end of its ``__init__``, counts each step in
    :attr:`local_steps`, and sends averages through ``_average(tensors, kind)``.

    Attributes:
        local_steps: calls of ``step`` so far; the sync schedule reads it. It is saved in the state
            dict and kept by copies.
        comm: the collective the averages go through (``None``: a world of one). Copies and
            unpickled optimizers have none: attach one with ``opt.comm = comm``.
    """

    local_steps: int
    comm: Collective | None

    def _init_local_sync(self, comm: Collective | None) -> None:
        self.comm = check_comm(comm)
        self.local_steps = 0

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = super().__getstate__()  # type: ignore[assignment]
        return {**state, "local_steps": self.__dict__.get("local_steps", 0)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)  # type: ignore[misc]
        self.__dict__.setdefault("local_steps", 0)
        self.__dict__.setdefault("comm", None)

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state dict plus ``local_steps`` (so a restored run keeps its schedule)."""
        return {**super().state_dict(), "local_steps": self.local_steps}  # type: ignore[misc]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict; ``local_steps`` is read if present (0 otherwise)."""
        state_dict = dict(state_dict)
        steps = state_dict.pop("local_steps", 0)
        super().load_state_dict(state_dict)  # type: ignore[misc]
        self.local_steps = check_int("local_steps", steps, 0)

    def _average(self, tensors: list[torch.Tensor], kind: str) -> None:
        if self.comm is not None and tensors:
            self.comm.all_reduce_mean(tensors, kind=kind)  # type: ignore[arg-type]
