"""Shared machinery used by two or more chapters, and nothing else.

Light modules are re-exported here; the heavier helpers are imported from their own modules so that
``import iclr_lab.core`` never pulls in torch or Altair:

* :mod:`iclr_lab.core.report`: :class:`~iclr_lab.core.report.Claim`,
  :class:`~iclr_lab.core.report.Report`.
* :mod:`iclr_lab.core.registry`: the chapter table and lazy loading.
* :mod:`iclr_lab.core.scales`: ``smoke``/``book``/``paper`` and
  :func:`~iclr_lab.core.scales.seed_everything`.
* :mod:`iclr_lab.core.validation`: argument checks with helpful messages.
* :mod:`iclr_lab.core.progress`: tqdm bars that stay silent off a terminal.
* :mod:`iclr_lab.core.stats`: log-log slopes, seed summaries and paired differences with a t interval.
* :mod:`iclr_lab.core.tuning`: equal tuning of every compared method on a log grid, on seeds of its own.
* :mod:`iclr_lab.core.stability`: the shipped seed-block tables (``iclr-lab stability``).
* :mod:`iclr_lab.core.datasets`: offline data (digits, scikit-image images, seeded generators).
* :mod:`iclr_lab.core.charts`: Altair chart helpers (imports Altair).
* :mod:`iclr_lab.core.widgets`: ipywidgets explorers (imports ipywidgets).
* :mod:`iclr_lab.core.nn`: tiny torch model blocks and a training loop (imports torch).
* :mod:`iclr_lab.core.collective`: the all-reduce interface of the distributed chapters, simulated
  with threads or run on real ``torch.distributed`` processes, counting bytes and rounds per tensor
  kind (imports torch).
* :mod:`iclr_lab.core.worker_data`: per-worker data for the distributed chapters (digits split IID,
  label-sorted or by Dirichlet; seeded quadratic and Rosenbrock toys).
* :mod:`iclr_lab.core.languages`: a seeded synthetic Zipf-like language for tiny language models.
* :mod:`iclr_lab.core.book`: gluing a report's numbers into a chapter (and into launch notebooks).
* :mod:`iclr_lab.core.scoreboard`: every chapter's claims in one table.
"""

from iclr_lab.core.registry import Chapter, chapter, chapters, load, reproduce
from iclr_lab.core.report import Claim, ClaimFailure, Report, timed
from iclr_lab.core.scales import SCALES, Scale, check_scale, pick, seed_everything

__all__ = [
    "SCALES",
    "Chapter",
    "Claim",
    "ClaimFailure",
    "Report",
    "Scale",
    "chapter",
    "chapters",
    "check_scale",
    "load",
    "pick",
    "reproduce",
    "seed_everything",
    "timed",
]
