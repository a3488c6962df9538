"""RLR: the Recursive Likelihood Ratio optimizer for diffusion models (Ren et al., ICLR 2026).

The chapter is ``book/generative/rlr.md``. The package splits in three:

* :mod:`~iclr_lab.generative.rlr.diffusion`: ``TinyDiffusion``, a 2-D DDPM whose exact reward
  gradient can be computed, its pre-training, and the reward;
* :mod:`~iclr_lab.generative.rlr.estimators`: the gradient estimators (full and truncated
  backprop, DDPO's likelihood ratio, RLR) and :func:`finetune`;
* :mod:`~iclr_lab.generative.rlr.experiments`: the chapter's :func:`reproduce`, claims, charts and
  explorer.
"""

from iclr_lab.generative.rlr.diffusion import (
    ADAPTER_BOUND,
    ADAPTERS,
    MODES,
    PER_STEP_BOUND,
    TinyDiffusion,
    Trajectory,
    mode_fraction,
    pretrain,
    sample_mixture,
    target_reward,
)
from iclr_lab.generative.rlr.estimators import (
    METHODS,
    estimate_gradient,
    finetune,
    lr_step_closed_form,
    step_terms,
)
from iclr_lab.generative.rlr.experiments import (
    COLORS,
    GRAD_TARGET,
    LR_GRID,
    TUNE_TARGET,
    bias_variance,
    charts,
    explorer,
    explorer_chart,
    numbers,
    reproduce,
)

__all__ = [
    "ADAPTERS",
    "ADAPTER_BOUND",
    "COLORS",
    "GRAD_TARGET",
    "LR_GRID",
    "METHODS",
    "MODES",
    "PER_STEP_BOUND",
    "TUNE_TARGET",
    "TinyDiffusion",
    "Trajectory",
    "bias_variance",
    "charts",
    "estimate_gradient",
    "explorer",
    "explorer_chart",
    "finetune",
    "lr_step_closed_form",
    "mode_fraction",
    "numbers",
    "pretrain",
    "reproduce",
    "sample_mixture",
    "step_terms",
    "target_reward",
]
