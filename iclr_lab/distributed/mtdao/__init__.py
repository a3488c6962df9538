"""MT-DAO: Multi-Timescale Distributed Adaptive Optimizers with Local Updates (Iacob et al., ICLR 2026).

The chapter is ``book/distributed/mtdao.md``. The package splits in four:

* :mod:`~iclr_lab.distributed.mtdao.optimizer`: the optimizer an engineer imports,
  :class:`~iclr_lab.distributed.mtdao.optimizer.MTDAO` (also as
  ``from iclr_lab.distributed import MTDAO``), and the exact communication cost;
* :mod:`~iclr_lab.distributed.mtdao.theory`: the time-scale arithmetic (momentum variance,
  information kept, impulse response, the constants of the paper's theorem);
* :mod:`~iclr_lab.distributed.mtdao.training`: the training function, one worker, written against
  the collective interface (:func:`~iclr_lab.distributed.mtdao.training.train_worker`);
* :mod:`~iclr_lab.distributed.mtdao.experiments`: the chapter's
  :func:`~iclr_lab.distributed.mtdao.experiments.reproduce`,
  :func:`~iclr_lab.distributed.mtdao.experiments.launch` (what ``iclr-lab launch mtdao`` runs),
  claims, charts and explorer.
"""

from iclr_lab.distributed.mtdao.experiments import (
    LOCAL_ADAMS,
    METHODS,
    MTDAO_NAME,
    MTDAOS,
    SLOW_ADAMS,
    charts,
    explorer,
    impulse_chart,
    launch,
    methods,
    numbers,
    reproduce,
    seed_blocks,
    tuned_choice,
    tuned_local_adam,
)
from iclr_lab.distributed.mtdao.optimizer import (
    MTDAO,
    check_sync_periods,
    communication_cost,
    units_per_step,
)
from iclr_lab.distributed.mtdao.theory import (
    anchor_share,
    beta_omega,
    information_kept,
    momentum_variance,
    sync_penalty,
    update_weights,
    variance_check,
)
from iclr_lab.distributed.mtdao.training import DigitsSetup, Method, model_bytes, train_worker

__all__ = [
    "LOCAL_ADAMS",
    "METHODS",
    "MTDAO",
    "MTDAOS",
    "MTDAO_NAME",
    "SLOW_ADAMS",
    "DigitsSetup",
    "Method",
    "anchor_share",
    "beta_omega",
    "charts",
    "check_sync_periods",
    "communication_cost",
    "explorer",
    "impulse_chart",
    "information_kept",
    "launch",
    "methods",
    "model_bytes",
    "momentum_variance",
    "numbers",
    "reproduce",
    "seed_blocks",
    "sync_penalty",
    "train_worker",
    "tuned_choice",
    "tuned_local_adam",
    "units_per_step",
    "update_weights",
    "variance_check",
]
