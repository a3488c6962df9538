"""Structured recovery and first-order methods: one module per chapter (see the registry in
iclr_lab.core).

Each module is imported when it is first used (``iclr_lab.recovery.frank_wolfe_bregman``), not by
``import iclr_lab.recovery``.
"""

from iclr_lab.core.lazy import exports

#: public name -> the module it is (imported on first use)
_LAZY: dict[str, str] = {
    "frank_wolfe_bregman": "iclr_lab.recovery.frank_wolfe_bregman",
    "risp": "iclr_lab.recovery.risp",
    "sparse_relu_iht": "iclr_lab.recovery.sparse_relu_iht",
    "tubal_fgd": "iclr_lab.recovery.tubal_fgd",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = exports(__name__, _LAZY, globals())
