"""Sparse ReLU network recovery by iterative hard thresholding (IHT).

Reproduces Fridovich-Keil & Pilanci, "A Recovery Guarantee for Sparse Neural Networks" (ICLR 2026,
arXiv 2509.20323). The chapter is ``book/recovery/sparse_relu_iht.md``. The package splits in two:

* :mod:`~iclr_lab.recovery.sparse_relu_iht.method`: what a user imports: the planted network
  (:func:`planted_mlp`), the sensing operator applied block by block (:class:`SensingOperator`),
  :func:`iht`, and the baselines :func:`least_squares`, :func:`omp`, :func:`imp` and :func:`imp_sweep`;
* :mod:`~iclr_lab.recovery.sparse_relu_iht.experiments`: the chapter's :func:`reproduce`, its
  claims, charts and explorer.
"""

from iclr_lab.recovery.sparse_relu_iht.experiments import (
    SIZES,
    charts,
    explorer,
    numbers,
    phase_grid,
    phase_grid_chart,
    reproduce,
)
from iclr_lab.recovery.sparse_relu_iht.method import (
    IHTResult,
    IMPResult,
    PlantedMLP,
    SensingOperator,
    hard_threshold,
    iht,
    imp,
    imp_rounds,
    imp_sweep,
    least_squares,
    omp,
    planted_mlp,
    psnr,
    relu_net,
)

__all__ = [
    "SIZES",
    "IHTResult",
    "IMPResult",
    "PlantedMLP",
    "SensingOperator",
    "charts",
    "explorer",
    "hard_threshold",
    "iht",
    "imp",
    "imp_rounds",
    "imp_sweep",
    "least_squares",
    "numbers",
    "omp",
    "phase_grid",
    "phase_grid_chart",
    "planted_mlp",
    "psnr",
    "relu_net",
    "reproduce",
]
