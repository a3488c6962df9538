"""DES-LOC: Desynced Low Communication Adaptive Optimizers (Iacob et al., ICLR 2026).

The chapter is ``book/distributed/desloc.md``. The package splits in four:

* :mod:`~iclr_lab.distributed.desloc.optimizer`: the optimizer an engineer imports,
  :class:`~iclr_lab.distributed.desloc.optimizer.DESLOC` (also as
  ``from iclr_lab.distributed import DESLOC``), and the exact communication cost;
* :mod:`~iclr_lab.distributed.desloc.training`: the training functions, one worker each, written
  against the collective interface
  (:func:`~iclr_lab.distributed.desloc.training.train_worker`,
  :func:`~iclr_lab.distributed.desloc.training.rosenbrock_worker`,
  :func:`~iclr_lab.distributed.desloc.training.drift_run`);
* :mod:`~iclr_lab.distributed.desloc.stacked`: Experiment A's runs with every worker of every
  seed stacked in one tensor pass (what ``reproduce`` uses; equal to ``train_worker`` on the
  simulator bit for bit);
* :mod:`~iclr_lab.distributed.desloc.experiments`: the chapter's
  :func:`~iclr_lab.distributed.desloc.experiments.reproduce`,
  :func:`~iclr_lab.distributed.desloc.experiments.launch` (what ``iclr-lab launch desloc``
  runs), claims, charts and explorer.
"""

from iclr_lab.distributed.desloc.experiments import (
    budget_chart,
    charts,
    explorer,
    launch,
    numbers,
    reproduce,
    tuned_rates,
)
from iclr_lab.distributed.desloc.optimizer import (
    DESLOC,
    communication_cost,
    half_life,
    sync_events,
    units_per_step,
)
from iclr_lab.distributed.desloc.training import (
    DESLOC_NAME,
    METHODS,
    DigitsSetup,
    Method,
    RosenbrockSetup,
    drift_run,
    main_methods,
    rosenbrock_worker,
    train_worker,
)

__all__ = [
    "DESLOC",
    "DESLOC_NAME",
    "METHODS",
    "DigitsSetup",
    "Method",
    "RosenbrockSetup",
    "budget_chart",
    "charts",
    "communication_cost",
    "drift_run",
    "explorer",
    "half_life",
    "launch",
    "main_methods",
    "numbers",
    "reproduce",
    "rosenbrock_worker",
    "sync_events",
    "train_worker",
    "tuned_rates",
    "units_per_step",
]
