"""DNT: a Deeply Normalized Transformer that can be trained by momentum SGD (Qi et al., ICLR 2026).

The chapter is ``book/optimizers/dnt.md``. The package splits in five:

* :mod:`~iclr_lab.optimizers.dnt.model`: :class:`GPTConfig`, :class:`TinyGPT` with its
  normalisation :class:`Placement` (``"pre"`` or ``"dnt"``), :func:`heavy_tail_stats` and the
  decoupled weight decay of mSGDW; what an engineer imports;
* :mod:`~iclr_lab.optimizers.dnt.training`: :func:`train_lm`, the training loop on a seeded Zipf
  language (:class:`iclr_lab.core.languages.ZipfLanguage`);
* :mod:`~iclr_lab.optimizers.dnt.theory`: the exact invariances on one sub-block and the live
  Jacobian explorer;
* :mod:`~iclr_lab.optimizers.dnt.experiments`: the chapter's :func:`reproduce`, claims and charts;
* :mod:`~iclr_lab.optimizers.dnt.stacked`: many ``train_lm`` runs trained as one stack (the
  chapter's runs).
"""

from iclr_lab.optimizers.dnt.experiments import (
    ABLATIONS,
    CELLS,
    GRIDS,
    Cell,
    ablation_label,
    charts,
    explorer,
    numbers,
    reproduce,
)
from iclr_lab.optimizers.dnt.model import (
    NORMS,
    PLACEMENTS,
    GPTConfig,
    HeavyTailStats,
    Placement,
    TinyGPT,
    decoupled_weight_decay,
    heavy_tail_stats,
    no_decay,
    weight_tensors,
)
from iclr_lab.optimizers.dnt.theory import (
    LAYOUTS,
    jacobian_explorer_chart,
    jacobian_spectrum,
    midnorm_invariance,
    subblock_jacobian,
)
from iclr_lab.optimizers.dnt.training import (
    OPTIMIZERS,
    POOLED,
    Recipe,
    Run,
    make_optimizer,
    train_lm,
)

__all__ = [
    "ABLATIONS",
    "CELLS",
    "GRIDS",
    "LAYOUTS",
    "NORMS",
    "OPTIMIZERS",
    "PLACEMENTS",
    "POOLED",
    "Cell",
    "GPTConfig",
    "HeavyTailStats",
    "Placement",
    "Recipe",
    "Run",
    "TinyGPT",
    "ablation_label",
    "charts",
    "decoupled_weight_decay",
    "explorer",
    "heavy_tail_stats",
    "jacobian_explorer_chart",
    "jacobian_spectrum",
    "make_optimizer",
    "midnorm_invariance",
    "no_decay",
    "numbers",
    "reproduce",
    "subblock_jacobian",
    "train_lm",
    "weight_tensors",
]
