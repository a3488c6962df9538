"""RISP: restarted inertia with score-based priors, an accelerated RED for imaging.

Reproduces Renaud, Hermant, Wei & Sun, "Provably Accelerated Imaging with Restarted Inertia and
Score-based Image Priors" (ICLR 2026, arXiv 2510.07470). The chapter is ``book/recovery/risp.md``.
The package splits in two:

* :mod:`~iclr_lab.recovery.risp.method`: what a user imports: the forward operators
  (:func:`make_operator`), the classical Cauchy prior, the deblurring problem, and the solvers
  :func:`red`, :func:`risp` and :func:`nesterov_restart`;
* :mod:`~iclr_lab.recovery.risp.prior`: the learned prior, a small gradient-step denoiser
  (:class:`LearnedPrior`, shipped weights in ``gs_denoiser.pt``), trained by
  :mod:`~iclr_lab.recovery.risp.train_prior` (``python -m iclr_lab.recovery.risp.train_prior``);
* :mod:`~iclr_lab.recovery.risp.experiments`: the chapter's :func:`reproduce`, its claims, charts
  and explorer.

Importing the package does not import torch; the learned prior imports it when it is used.
"""

from iclr_lab.recovery.risp.experiments import (
    SIZES,
    charts,
    explore,
    explorer,
    image_figure,
    numbers,
    reproduce,
)
from iclr_lab.recovery.risp.method import (
    CauchyPrior,
    Operator,
    Prior,
    Problem,
    Trace,
    make_operator,
    make_problem,
    nesterov_restart,
    psnr,
    red,
    risp,
)
from iclr_lab.recovery.risp.prior import DenoiserConfig, LearnedPrior, load_denoiser

__all__ = ["SIZES", "CauchyPrior", "DenoiserConfig", "LearnedPrior", "Operator", "Prior", "Problem",
           "Trace", "charts", "explore", "explorer", "image_figure", "load_denoiser", "make_operator",
           "make_problem", "nesterov_restart", "numbers", "psnr", "red", "reproduce", "risp"]
