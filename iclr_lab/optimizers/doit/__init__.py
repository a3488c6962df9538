"""DOIT: Dynamic Optimizer Interleaving Training ("Towards Dynamic Interleaving Optimizers", ICLR 2026).

The chapter is ``book/optimizers/doit.md``. The package splits in two:

* :mod:`~iclr_lab.optimizers.doit.method`: what a user imports: the controller :class:`DOIT`, the
  cycle score, the state features, the acquisition, and :func:`train_with_doit`;
* :mod:`~iclr_lab.optimizers.doit.experiments`: the chapter's :func:`reproduce`, its claims, charts
  and explorer.

DOIT is a controller that owns a ``torch.optim`` optimizer and replaces it every few steps; it is not
itself a :class:`torch.optim.Optimizer`.
"""

from iclr_lab.optimizers.doit.experiments import (
    BASELINES,
    METHODS,
    SIZES,
    DigitsSplit,
    Run,
    best_single,
    charts,
    digits_split,
    explorer,
    explorer_chart,
    numbers,
    reproduce,
    restart_shock,
    run_method,
    timeline_chart,
    tune_rates,
)
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
    "timeline_chart",
    "train_with_doit",
    "tune_rates",
]
