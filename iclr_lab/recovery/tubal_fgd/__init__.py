"""Low-tubal-rank tensor recovery by factorized gradient descent from a small initialization.

Reproduces Liu, Geng, Wang, Tang, Han & Wang, "The Power of Small Initialization in Noisy
Low-Tubal-Rank Tensor Recovery" (ICLR 2026, arXiv 2603.02729). The chapter is
``book/recovery/tubal_fgd.md``. The package splits in four:

* :mod:`~iclr_lab.recovery.tubal_fgd.algebra`: the t-product, t-transpose, t-SVD and tubal rank;
* :mod:`~iclr_lab.recovery.tubal_fgd.method`: what a user imports: Gaussian measurements, the small
  and the spectral start, :func:`fgd` with validation-based early stopping, and the four-stage
  metrics;
* :mod:`~iclr_lab.recovery.tubal_fgd.experiments`: the chapter's :func:`reproduce`, its claims,
  charts and explorer;
* :mod:`~iclr_lab.recovery.tubal_fgd.completion`: asymmetric FGD for tensor completion and the
  chapter's colour-image demonstration.
"""

from iclr_lab.recovery.tubal_fgd.algebra import (
    block_circulant,
    fold,
    t_identity,
    t_product,
    t_spectral_norm,
    t_svd,
    t_transpose,
    tubal_rank,
    unfold,
)
from iclr_lab.recovery.tubal_fgd.completion import (
    CompletionResult,
    complete,
    completion_demo,
    completion_figure,
    psnr,
)
from iclr_lab.recovery.tubal_fgd.experiments import (
    SIZES,
    book_problem,
    charts,
    explore_run,
    explorer,
    numbers,
    reproduce,
)
from iclr_lab.recovery.tubal_fgd.method import (
    FGDResult,
    Measurements,
    Trajectory,
    default_step,
    descend,
    fgd,
    gaussian_measurements,
    planted_tensor,
    small_init,
    spectral_init,
    stage_metrics,
)

__all__ = [
    "SIZES",
    "CompletionResult",
    "FGDResult",
    "Measurements",
    "Trajectory",
    "block_circulant",
    "book_problem",
    "charts",
    "complete",
    "completion_demo",
    "completion_figure",
    "default_step",
    "descend",
    "explore_run",
    "explorer",
    "fgd",
    "fold",
    "gaussian_measurements",
    "numbers",
    "planted_tensor",
    "psnr",
    "reproduce",
    "small_init",
    "spectral_init",
    "stage_metrics",
    "t_identity",
    "t_product",
    "t_spectral_norm",
    "t_svd",
    "t_transpose",
    "tubal_rank",
    "unfold",
]
