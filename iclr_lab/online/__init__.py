"""Online learning, auctions and games: one module per chapter (see the registry in iclr_lab.core).

Each module is imported when it is first used (``iclr_lab.online.discounted_oco``), not by
``import iclr_lab.online``.
"""

from iclr_lab.core.lazy import exports

#: public name -> the module it is (imported on first use)
_LAZY: dict[str, str] = {
    "discounted_oco": "iclr_lab.online.discounted_oco",
    "l2fob": "iclr_lab.online.l2fob",
    "utility_learning": "iclr_lab.online.utility_learning",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = exports(__name__, _LAZY, globals())
