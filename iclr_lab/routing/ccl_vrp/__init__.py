"""CCL: Chain-of-Context Learning for multi-task vehicle routing (Gui et al., ICLR 2026).

The chapter is ``book/routing/ccl_vrp.md``. The method itself lives in the routing library beside
this package (:mod:`iclr_lab.routing.instances`, :mod:`~iclr_lab.routing.env`,
:mod:`~iclr_lab.routing.checker`, :mod:`~iclr_lab.routing.model`, :mod:`~iclr_lab.routing.train`,
:mod:`~iclr_lab.routing.solvers`, :mod:`~iclr_lab.routing.probe`,
:mod:`~iclr_lab.routing.evaluate`); this package holds the chapter's experiments:

* :mod:`~iclr_lab.routing.ccl_vrp.data`: the shipped policies, the test set, and the views of them
  that the experiments and the explorers share (route stops, gate traces);
* :mod:`~iclr_lab.routing.ccl_vrp.experiments`: :func:`reproduce`, the claims, the live re-run of
  the shipped test costs and the numbers the prose quotes;
* :mod:`~iclr_lab.routing.ccl_vrp.explore`: the charts, the picture of the variants and the two
  live explorers (routes against PyVRP, and RGCR's gates along a tour).
"""

from iclr_lab.routing.ccl_vrp.data import (
    LABELS,
    MODELS,
    PICTURE_VARIANTS,
    PYVRP_SETTINGS,
    TRAIN_SEEDS,
    gate_trace,
    policy,
    route_stops,
    test_instance,
)
from iclr_lab.routing.ccl_vrp.experiments import instance_gaps, live_sample, numbers, reproduce
from iclr_lab.routing.ccl_vrp.explore import (
    COLORS,
    GATE_COLORS,
    charts,
    explorer,
    gate_chart,
    gate_explorer,
    route_chart,
    variant_figure,
)

__all__ = [
    "COLORS",
    "GATE_COLORS",
    "LABELS",
    "MODELS",
    "PICTURE_VARIANTS",
    "PYVRP_SETTINGS",
    "TRAIN_SEEDS",
    "charts",
    "explorer",
    "gate_chart",
    "gate_explorer",
    "gate_trace",
    "instance_gaps",
    "live_sample",
    "numbers",
    "policy",
    "reproduce",
    "route_chart",
    "route_stops",
    "test_instance",
    "variant_figure",
]
