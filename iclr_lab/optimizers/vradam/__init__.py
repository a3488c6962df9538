"""VRAdam: Velocity-Regularized Adam (Vaidhyanathan, Schorling, Ares & Osborne, ICLR 2026).

The chapter is ``book/optimizers/vradam.md``. The package splits in three:

* :mod:`~iclr_lab.optimizers.vradam.optimizer`: :class:`VRAdam` and :class:`VRMomentum`, the
  optimizers an engineer imports (also as ``from iclr_lab.optimizers import VRAdam``);
* :mod:`~iclr_lab.optimizers.vradam.quadratic`: VR-momentum on a quadratic, the theory's toy;
* :mod:`~iclr_lab.optimizers.vradam.experiments`: the chapter's :func:`reproduce`, claims and charts.
"""

from iclr_lab.optimizers.vradam.experiments import (
    COLORS,
    KAPPA,
    METHODS,
    calibrate_beta3,
    charts,
    numbers,
    rate_run,
    reproduce,
    train_digits,
)
from iclr_lab.optimizers.vradam.optimizer import VRAdam, VRMomentum, gate
from iclr_lab.optimizers.vradam.quadratic import (
    edge_velocity,
    explorer,
    momentum_matrix,
    quadratic_explorer_chart,
    stability_limit,
    switching_radius,
    two_cycle,
    vr_momentum_quadratic,
)

__all__ = [
    "COLORS",
    "KAPPA",
    "METHODS",
    "VRAdam",
    "VRMomentum",
    "calibrate_beta3",
    "charts",
    "edge_velocity",
    "explorer",
    "gate",
    "momentum_matrix",
    "numbers",
    "quadratic_explorer_chart",
    "rate_run",
    "reproduce",
    "stability_limit",
    "switching_radius",
    "train_digits",
    "two_cycle",
    "vr_momentum_quadratic",
]
