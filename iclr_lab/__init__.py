"""iclr_lab: methods, baselines and CPU-scale reproductions of 19 ICLR 2026 papers.

``import iclr_lab`` is deliberately light: it imports neither torch nor pandas. Chapter modules are
loaded on first use through the registry::

    >>> import iclr_lab
    >>> [c.slug for c in iclr_lab.chapters()][:3]
    ['vradam', 'doit', 'dnt']
    >>> report = iclr_lab.reproduce("discounted_oco", scale="smoke")   # doctest: +SKIP
"""

from __future__ import annotations

from iclr_lab.core.registry import chapter, chapters, load, reproduce

__version__ = "0.1.0"

__all__ = ["__version__", "chapter", "chapters", "load", "reproduce"]
