"""Diffusion alignment: one module per chapter (see the registry in iclr_lab.core).

Each module is imported when it is first used (``iclr_lab.generative.rlr``), not by
``import iclr_lab.generative``.
"""

from iclr_lab.core.lazy import exports

#: public name -> the module it is (imported on first use)
_LAZY: dict[str, str] = {
    "rlr": "iclr_lab.generative.rlr",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = exports(__name__, _LAZY, globals())
