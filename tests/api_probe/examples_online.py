"""Probe examples for ``iclr_lab.online`` (see ``api_probe.examples``).

Sizes are tiny (horizons of a few dozen rounds, 2x2 games, bid grids of 11 points), so that every
probe call that gets past the argument checks still returns well inside the probe's time limit.
Arrays that may have several columns (``discounted_regret``'s ``learner_losses``, ``dnp_trace``'s
``bits``, ``roi_violation``'s ``reward`` and ``cost``) are given with two, so that the probe's
"wrong shape" (then flattened) is a shape the callable must refuse rather than another valid one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

_P = "iclr_lab.online"
_OCO = f"{_P}.discounted_oco"
_FOB = f"{_P}.l2fob"
_UL = f"{_P}.utility_learning"

#: the probe's horizon for discounted OCO
_T = 12


def _y() -> np.ndarray:
    return np.linspace(-0.5, 0.5, _T)


def _losses() -> np.ndarray:
    return np.abs(np.stack([np.zeros(_T), np.full(_T, 0.2)], axis=1) - _y()[:, None])


def _auction() -> Any:
    from iclr_lab.online.l2fob import FirstPriceAuction

    return FirstPriceAuction(grid_size=11)


def _pd() -> Any:
    from iclr_lab.online.utility_learning import prisoners_dilemma

    return prisoners_dilemma()


def _hedge() -> Any:
    from iclr_lab.online.utility_learning import Hedge

    return Hedge()


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {
    # discounted OCO
    f"{_OCO}.AbsoluteLoss": lambda: {"y": 0.3, "x": np.array([1.0, -0.5])},
    f"{_OCO}.DNP": lambda: {"n": 10.0, "Z": 0.1},
    f"{_OCO}.LinearLoss": lambda: {"g": np.array([1.0, -0.5])},
    f"{_OCO}.OGD": lambda: {"lr": 0.5},
    f"{_OCO}.SOGD": lambda: {"T": 16, "D": 2.0, "G": 1.0},
    f"{_OCO}.SquaredLoss": lambda: {"x": np.array([1.0, -0.5]), "y": 0.3},
    f"{_OCO}.checkpoints": lambda: {"T": _T, "n": 8.0},
    f"{_OCO}.discounted_comparator": lambda: {"lam": 0.9, "family": "absolute", "data": _y(),
                                              "times": np.array([1, 5, _T])},
    f"{_OCO}.discounted_regret": lambda: {"learner_losses": _losses(), "lam": 0.9,
                                          "family": "absolute", "data": _y(),
                                          "times": np.array([1, 5, _T])},
    f"{_OCO}.discounted_sum": lambda: {"values": _y(), "lam": 0.9},
    f"{_OCO}.dnp_confidence": lambda: {"x": np.array([0.0, 1.0, 5.0]), "n": 10.0, "Z": 0.1},
    f"{_OCO}.dnp_saturation": lambda: {"n": 10.0, "Z": 0.1},
    f"{_OCO}.dnp_trace": lambda: {"n": np.array([10.0, 30.0]), "Z": 0.1,
                                  "bits": np.tile([[1.0], [-0.5], [0.25]], (4, 2))},
    f"{_OCO}.dnp_trace_chart": lambda: {"n": 10.0, "T": 20},
    f"{_OCO}.fixed_step_grid": lambda: {"T": 16},
    f"{_OCO}.projected_step": lambda: {"W": np.zeros((3, 2)), "lr": np.full(3, 0.1),
                                       "grad": np.ones((3, 2)), "radius": 1.0},
    f"{_OCO}.sogd_bound": lambda: {"lam": 0.9, "T": 16, "D": 2.0, "G": 1.0},
    f"{_OCO}.two_scale_stream": lambda: {"T": 16, "rng": _rng(), "half_period": 2},
    f"{_OCO}.worst_regret": lambda: {"losses": _losses(), "y": _y(), "n": 8.0},
    # L2FOB
    f"{_FOB}.CompetingBidOracle": lambda: {"grid_size": 11, "K": 2, "kind": "full"},
    f"{_FOB}.fluid_optimum": lambda: {"env": _auction(), "rho": 0.01, "gamma": 1.8,
                                      "value_bins": 8},
    f"{_FOB}.roi_violation": lambda: {"reward": np.full((4, 2), 0.2), "cost": np.full((4, 2), 0.1),
                                      "gamma": np.array([1.8, 3.0])},
    f"{_FOB}.run": lambda: {"policy": _l2fob(), "env": _auction(), "T": 5},
    f"{_FOB}.trajectories": lambda: {"T": 20},
    f"{_FOB}.trajectory_chart": lambda: {"T": 20},
    f"{_FOB}.value_moments": lambda: {"hist": np.ones((2, 5)), "grid": np.linspace(0.0, 1.0, 5)},
    # utility learning
    f"{_UL}.LearnerBank": lambda: {"rows": 2, "contexts": 1, "m": 3},
    f"{_UL}.NormalFormGame": lambda: {"utilities": _pd().utilities},
    f"{_UL}.dominance_payments": lambda: {"estimate": _pd().utilities, "recommended": (0, 0),
                                          "slack": 0.1},
    f"{_UL}.equivalence_error": lambda: {"true": _pd().utilities,
                                         "estimate": _pd().utilities + 0.1},
    f"{_UL}.learn_utilities": lambda: {"game": _pd(), "agents": _hedge(), "T": 16},
    f"{_UL}.naive_probing": lambda: {"u": np.array([0.5, -0.5]), "agent": _hedge(), "T": 8,
                                     "probes": 2},
    f"{_UL}.optimal_cep": lambda: {"utilities": _pd().utilities, "objective": _pd().welfare()},
    f"{_UL}.pay_against": lambda: {"u": np.array([0.5, -0.5, 0.0]), "agent": _hedge(), "T": 10},
    f"{_UL}.payment_set_diameter": lambda: {"m": 3},
    f"{_UL}.project_payments": lambda: {"y": np.array([0.5, 1.5, 2.5])},
    f"{_UL}.random_game": lambda: {"shape": (2, 3), "rng": _rng()},
    f"{_UL}.random_prisoners_dilemma": lambda: {"rng": _rng()},
    f"{_UL}.random_utilities": lambda: {"m": 3, "rng": _rng()},
    f"{_UL}.single_agent": lambda: {"u": np.array([0.5, -0.5])},
    f"{_UL}.steer": lambda: {"game": _pd(), "agents": _hedge(), "T": 40,
                             "target": _pd().welfare()},
    f"{_UL}.steering_paths_chart": lambda: {"T": 40},
    f"{_UL}.strategic_center": lambda: {"utilities": _pd().utilities},
}


def _l2fob() -> Any:
    from iclr_lab.online.l2fob import L2FOB

    return L2FOB()


#: (public path, parameter or "*", probe label or "*") -> why the probe's finding is right as it is
ALLOW: dict[tuple[str, str, str], str] = {
    (f"{_OCO}.discounted_sum", "values", "wrong shape"):
        "the recursion runs along axis 0 of an array of any shape (rounds first, then anything: "
        "the squared-loss comparator sums (T, d, d) Gram matrices): every shape is valid",
    (f"{_OCO}.dnp_confidence", "x", "wrong shape"):
        "elementwise in x: any shape that n broadcasts to is valid (with one memory, any shape)",
    (f"{_UL}.project_payments", "y", "wrong shape"):
        "projects each row of an array of shape (..., m): every shape with an action axis is a "
        "valid batch of payment vectors",
}
