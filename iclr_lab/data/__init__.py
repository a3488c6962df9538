"""Data curation and distillation: one module per chapter (see the registry in iclr_lab.core).

Each module is imported when it is first used (``iclr_lab.data.amd``), not by
``import iclr_lab.data``.
"""

from iclr_lab.core.lazy import exports

#: public name -> the module it is (imported on first use)
_LAZY: dict[str, str] = {
    "amd": "iclr_lab.data.amd",
    "data_curation": "iclr_lab.data.data_curation",
    "imitation_reward_class": "iclr_lab.data.imitation_reward_class",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = exports(__name__, _LAZY, globals())
