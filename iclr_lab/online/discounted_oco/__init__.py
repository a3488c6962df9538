"""Discounted online convex optimisation: SOGD and the Discounted-Normal-Predictor.

Reproduces Yang, Yang & Zhang, "Discounted Online Convex Optimization: Uniform Regret Across a
Continuous Interval" (ICLR 2026, arXiv 2505.19491). The chapter is ``book/online/discounted_oco.md``.
The package splits in two:

* :mod:`~iclr_lab.online.discounted_oco.learners`: what a user imports: the losses, :class:`OGD`,
  :class:`DNP`, :class:`SOGD`, and the discounted regret;
* :mod:`~iclr_lab.online.discounted_oco.experiments`: the chapter's experiments and :func:`reproduce`;
  :mod:`~iclr_lab.online.discounted_oco.claims`, its claims and glued numbers;
  :mod:`~iclr_lab.online.discounted_oco.figures`, its charts and explorer.
"""

from iclr_lab.online.discounted_oco.claims import numbers
from iclr_lab.online.discounted_oco.experiments import (
    SIZES,
    checkpoints,
    fixed_step_grid,
    reproduce,
    two_scale_stream,
    worst_regret,
)
from iclr_lab.online.discounted_oco.figures import charts, dnp_trace_chart, explorer
from iclr_lab.online.discounted_oco.learners import (
    DNP,
    OGD,
    SOGD,
    AbsoluteLoss,
    LinearLoss,
    RoundLoss,
    SquaredLoss,
    discounted_comparator,
    discounted_regret,
    discounted_sum,
    dnp_confidence,
    dnp_saturation,
    dnp_trace,
    projected_step,
    run,
    sogd_bound,
)

__all__ = [
    "DNP",
    "OGD",
    "SIZES",
    "SOGD",
    "AbsoluteLoss",
    "LinearLoss",
    "RoundLoss",
    "SquaredLoss",
    "charts",
    "checkpoints",
    "discounted_comparator",
    "discounted_regret",
    "discounted_sum",
    "dnp_confidence",
    "dnp_saturation",
    "dnp_trace",
    "dnp_trace_chart",
    "explorer",
    "fixed_step_grid",
    "numbers",
    "projected_step",
    "reproduce",
    "run",
    "sogd_bound",
    "two_scale_stream",
    "worst_regret",
]
