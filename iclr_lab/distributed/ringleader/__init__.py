"""Ringleader ASGD: asynchronous SGD with optimal time complexity under data heterogeneity.

Reproduces Maranjyan & Richtárik, "Ringleader ASGD: The First Asynchronous SGD with Optimal Time
Complexity under Data Heterogeneity" (ICLR 2026, arXiv 2509.22860). The chapter is
``book/distributed/ringleader.md``. The package splits in three:

* :mod:`~iclr_lab.distributed.ringleader.timing`: how long a worker takes per gradient (fixed,
  the authors' noisy model, exponential, time-varying, outages), and the ``TimeModel`` protocol;
* :mod:`~iclr_lab.distributed.ringleader.simulator`: the event-driven simulator (a heap of worker
  finish times), Ringleader ASGD and its baselines, and :func:`simulate`;
* :mod:`~iclr_lab.distributed.ringleader.experiments`: the chapter's :func:`reproduce`, its claims,
  charts and explorer.

The methods are asynchronous, so they do not use the synchronous collective interface of
:mod:`iclr_lab.core.collective`.
"""

from iclr_lab.distributed.ringleader.experiments import (
    COLORS,
    L_SMOOTH,
    MU,
    SIZES,
    SPREAD,
    STEPS,
    TARGET,
    charts,
    explorer,
    gantt_chart,
    make_problem,
    naive_floor,
    numbers,
    reproduce,
    tail_metric,
    time_to_target,
)
from iclr_lab.distributed.ringleader.simulator import (
    METHODS,
    GradientTable,
    Horizon,
    Problem,
    Quadratic,
    SeedRows,
    Simulator,
    ia2sgd,
    malenia,
    minibatch_sgd,
    naive_asgd,
    rennala,
    ringleader,
    run_method,
    run_seeds,
    simulate,
    theory_step,
)
from iclr_lab.distributed.ringleader.timing import (
    TIME_MODELS,
    AuthorsTimes,
    ExponentialTimes,
    FixedTimes,
    OutageTimes,
    TimeVaryingTimes,
    authors_times,
    fixed_times,
    make_time_model,
)

__all__ = [
    "COLORS",
    "L_SMOOTH",
    "METHODS",
    "MU",
    "SIZES",
    "SPREAD",
    "STEPS",
    "TARGET",
    "TIME_MODELS",
    "AuthorsTimes",
    "ExponentialTimes",
    "FixedTimes",
    "GradientTable",
    "Horizon",
    "OutageTimes",
    "Problem",
    "Quadratic",
    "SeedRows",
    "Simulator",
    "TimeVaryingTimes",
    "authors_times",
    "charts",
    "explorer",
    "fixed_times",
    "gantt_chart",
    "ia2sgd",
    "make_problem",
    "make_time_model",
    "malenia",
    "minibatch_sgd",
    "naive_asgd",
    "naive_floor",
    "numbers",
    "rennala",
    "reproduce",
    "ringleader",
    "run_method",
    "run_seeds",
    "simulate",
    "tail_metric",
    "theory_step",
    "time_to_target",
]
