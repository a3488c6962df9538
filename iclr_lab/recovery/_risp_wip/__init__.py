"""RISP: restarted inertia with score-based priors (accelerated RED), ``book/recovery/risp.md``.

The method a user imports is in :mod:`.method`; the chapter's experiments in :mod:`.experiments`.
"""

from iclr_lab.recovery._risp_wip.experiments import (
    SIZES,
    charts,
    explore,
    explorer,
    image_figure,
    numbers,
    reproduce,
)
from iclr_lab.recovery._risp_wip.method import (
    CauchyPrior,
    Operator,
    Problem,
    Trace,
    make_operator,
    make_problem,
    nesterov_restart,
    psnr,
    red,
    risp,
)

__all__ = ["SIZES", "CauchyPrior", "Operator", "Problem", "Trace", "charts", "explore", "explorer",
           "image_figure", "make_operator", "make_problem", "nesterov_restart", "numbers", "psnr",
           "red", "reproduce", "risp"]
