"""Frank–Wolfe with an adaptive Bregman step size, for relatively smooth, weakly convex functions.

Reproduces Takahashi, Pokutta & Takeda, "Fast Frank–Wolfe Algorithms with Adaptive Bregman
Step-Size for Weakly Convex Functions" (ICLR 2026, arXiv 2504.04330). The chapter is
``book/recovery/frank_wolfe_bregman.md``. The package splits in four:

* :mod:`~iclr_lab.recovery.frank_wolfe_bregman.algorithms`: what a user imports: the linear
  minimisation oracles, the kernels, the step rules and :func:`frank_wolfe`;
* :mod:`~iclr_lab.recovery.frank_wolfe_bregman.problems`: the chapter's objectives (phase retrieval,
  the l_p loss, Poisson/KL);
* :mod:`~iclr_lab.recovery.frank_wolfe_bregman.experiments`: the chapter's :func:`reproduce` and
  its claims;
* :mod:`~iclr_lab.recovery.frank_wolfe_bregman.figures`: its charts and explorer.
"""

from iclr_lab.recovery.frank_wolfe_bregman.algorithms import (
    LMO,
    Box,
    BregmanAdaptive,
    Burg,
    Constant,
    Euclidean,
    EuclideanAdaptive,
    FWResult,
    Kernel,
    KSparse,
    L1Ball,
    L2Ball,
    OpenLoop,
    Quartic,
    Shannon,
    ShortStep,
    Simplex,
    StepRequest,
    StepResult,
    StepRule,
    evals_per_iteration,
    frank_wolfe,
)
from iclr_lab.recovery.frank_wolfe_bregman.experiments import (
    SIZES,
    estimate_growth,
    half_rates,
    linear_rate,
    lp_hard_instance,
    lp_instance,
    numbers,
    phase_retrieval_instance,
    poisson_instance,
    reproduce,
    slope_ratio,
)
from iclr_lab.recovery.frank_wolfe_bregman.figures import (
    charts,
    explorer,
    scaling_chart,
    scaling_profile,
)
from iclr_lab.recovery.frank_wolfe_bregman.problems import LpLoss, PhaseRetrieval, PoissonKL

__all__ = [
    "LMO",
    "SIZES",
    "Box",
    "BregmanAdaptive",
    "Burg",
    "Constant",
    "Euclidean",
    "EuclideanAdaptive",
    "FWResult",
    "KSparse",
    "Kernel",
    "L1Ball",
    "L2Ball",
    "LpLoss",
    "OpenLoop",
    "PhaseRetrieval",
    "PoissonKL",
    "Quartic",
    "Shannon",
    "ShortStep",
    "Simplex",
    "StepRequest",
    "StepResult",
    "StepRule",
    "charts",
    "estimate_growth",
    "evals_per_iteration",
    "explorer",
    "frank_wolfe",
    "half_rates",
    "linear_rate",
    "lp_hard_instance",
    "lp_instance",
    "numbers",
    "phase_retrieval_instance",
    "poisson_instance",
    "reproduce",
    "scaling_chart",
    "scaling_profile",
    "slope_ratio",
]
