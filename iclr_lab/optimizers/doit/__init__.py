"""DOIT: Dynamic Optimizer Interleaving Training ("Towards Dynamic Interleaving Optimizers", ICLR 2026).

The chapter is ``book/optimizers/doit.md``. The package splits in four:

* :mod:`~iclr_lab.optimizers.doit.method`: what a user imports: the controller :class:`DOIT`, the
  cycle score, the state features, the acquisition, and :func:`train_with_doit`;
* :mod:`~iclr_lab.optimizers.doit.experiments`: the chapter's :func:`reproduce` (the tuning, the
  runs, the restart experiment) and its explorer;
* :mod:`~iclr_lab.optimizers.doit.claims`: the claims and the numbers the prose quotes;
* :mod:`~iclr_lab.optimizers.doit.figures`: the figures.

DOIT is a controller that owns a ``torch.optim`` optimizer and replaces it every few steps; it is not
itself a :class:`torch.optim.Optimizer`.
"""

from iclr_lab.optimizers.doit.claims import best_single, numbers, steps_to_target
from iclr_lab.optimizers.doit.experiments import (
    BASELINES,
    METHODS,
    SIZES,
    DigitsSplit,
    Run,
    digits_split,
    explorer,
    explorer_chart,
    reproduce,
    restart_shock,
    run_method,
    tune_rates,
)
from iclr_lab.optimizers.doit.figures import charts, timeline_chart
from iclr_lab.optimizers.doit.method import (
    ACQUISITIONS,
    DEFAULT_RATES,
    DOIT,
    OPTIMIZERS,
    Cycle,
    acquisition_values,
    cross_entropy_closure,
    exploration_coefficient,
    feature_weights,
    make_optimizer,
    probe_fn,
    score,
    score_terms,
    state_features,
    train_with_doit,
)

__all__ = [
    "ACQUISITIONS",
    "BASELINES",
    "DEFAULT_RATES",
    "DOIT",
    "METHODS",
    "OPTIMIZERS",
    "SIZES",
    "Cycle",
    "DigitsSplit",
    "Run",
    "acquisition_values",
    "best_single",
    "charts",
    "cross_entropy_closure",
    "digits_split",
    "exploration_coefficient",
    "explorer",
    "explorer_chart",
    "feature_weights",
    "make_optimizer",
    "numbers",
    "probe_fn",
    "reproduce",
    "restart_shock",
    "run_method",
    "score",
    "score_terms",
    "state_features",
    "steps_to_target",
    "timeline_chart",
    "train_with_doit",
    "tune_rates",
]
