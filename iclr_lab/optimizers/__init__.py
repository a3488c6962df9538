"""Optimizer chapters: VRAdam, DOIT and DNT.

The optimizers are exported lazily, so ``import iclr_lab.optimizers`` does not import torch; the
first access to a name (``from iclr_lab.optimizers import VRAdam``) imports its chapter module.

Every :class:`torch.optim.Optimizer` subclass named in ``__all__`` (here, or in another part's
``__all__``) runs through ``tests/optimizers/test_conformance.py``: complex parameters, copies,
state dicts, foreach, LR schedulers, hooks, param groups and argument checks, as for ``torch.optim``.
"""

from iclr_lab.core.lazy import exports

#: public name -> chapter module that defines it. New chapters add their optimizers here.
_LAZY: dict[str, str] = {
    "DOIT": "iclr_lab.optimizers.doit",
    "VRAdam": "iclr_lab.optimizers.vradam",
    "VRMomentum": "iclr_lab.optimizers.vradam",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = exports(__name__, _LAZY, globals())
