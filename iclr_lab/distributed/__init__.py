"""Communication-efficient and asynchronous training: one module per chapter (see the registry in
iclr_lab.core).

The chapters' distributed algorithms are written once against the collective interface of
:mod:`iclr_lab.core.collective` and run on simulated workers or on ``torch.distributed``.

The optimizers are exported lazily, so ``import iclr_lab.distributed`` does not import torch; the
first access to a name (``from iclr_lab.distributed import DESLOC``) imports its chapter module.
Every :class:`torch.optim.Optimizer` named in ``__all__`` runs through
``tests/optimizers/test_conformance.py``.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> chapter module that defines it. New chapters add their optimizers here.
_LAZY: dict[str, str] = {
    "DESLOC": "iclr_lab.distributed.desloc",
    "MTDAO": "iclr_lab.distributed.mtdao",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
