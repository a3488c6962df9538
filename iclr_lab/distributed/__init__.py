"""Communication-efficient and asynchronous training: one module per chapter (see the registry in
iclr_lab.core).

The chapters' distributed algorithms are written once against the collective interface of
:mod:`iclr_lab.core.collective` and run on simulated workers or on ``torch.distributed``.

The optimizers are exported lazily, so ``import iclr_lab.distributed`` does not import torch; the
first access to a name (``from iclr_lab.distributed import DESLOC``) imports its chapter module.
Every :class:`torch.optim.Optimizer` named in ``__all__`` runs through
``tests/optimizers/test_conformance.py``.
"""

from iclr_lab.core.lazy import exports

#: public name -> chapter module that defines it. New chapters add their optimizers here.
_LAZY: dict[str, str] = {
    "DESLOC": "iclr_lab.distributed.desloc",
    "MTDAO": "iclr_lab.distributed.mtdao",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = exports(__name__, _LAZY, globals())
