"""Lazy exports for the part packages (``iclr_lab.optimizers``, ``iclr_lab.online``, ...).

A part names what it exports in ``__all__`` and imports nothing until a name is first used, so
``import iclr_lab.optimizers`` does not import torch. Each part's ``__init__`` holds a table
``_LAZY: public name -> module``, sets ``__all__ = sorted(_LAZY)`` and ``__getattr__, __dir__ =
exports(__name__, _LAZY, globals())``: a name whose module is ``package.name`` itself exports that
submodule (``iclr_lab.online.l2fob``), any other name is the attribute of that name in its module
(``iclr_lab.optimizers.VRAdam`` from ``iclr_lab.optimizers.vradam``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["exports"]


def exports(package: str, table: Mapping[str, str],
            namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the package ``package`` (its ``__name__``) whose globals are
    ``namespace``: the first access to a name of ``table`` imports its module and caches the value
    in the package. The package sets ``__all__ = sorted(table)`` itself (a literal that linters
    and type checkers read)."""
    table = dict(table)

    def getattr_(name: str) -> Any:
        try:
            module = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        imported = importlib.import_module(module)
        value = imported if module == f"{package}.{name}" else getattr(imported, name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(table))

    return getattr_, dir_
