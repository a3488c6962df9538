"""Probe examples for ``iclr_lab.recovery.sparse_relu_iht`` (see ``api_probe.examples``).

Tiny planted networks (``n = 30`` samples, ``d = 4`` inputs, 2 or 3 neurons) and one or two steps,
so that every probe call is quick.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_SRL = "iclr_lab.recovery.sparse_relu_iht"


def _planted() -> Any:
    import numpy as np

    from iclr_lab.recovery.sparse_relu_iht import planted_mlp

    return planted_mlp(30, 4, 2, 3, np.random.default_rng(0))


def _data() -> dict[str, Any]:
    P = _planted()
    return {"X": P.X, "y": P.y}


def _dense() -> dict[str, Any]:
    from iclr_lab.recovery.sparse_relu_iht import SensingOperator

    P = _planted()
    return {"A": SensingOperator(P.X, 2, generators=P.fused).dense(), "y": P.y}


def _imp() -> dict[str, Any]:
    import torch  # noqa: F401 - imported here, outside the probe's two-second deadline

    return {**_data(), "width": 2, "s": 3, "budget": 40, "lr": 1e-2}


def _imp_sweep() -> dict[str, Any]:
    import torch  # noqa: F401 - imported here, outside the probe's two-second deadline

    return {**_data(), "width": 2, "ss": [3, 5], "epochs": 2, "lr": 1e-2}


def _rng() -> Any:
    import numpy as np

    return np.random.default_rng(0)


EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {
    f"{_SRL}.SensingOperator": lambda: {"X": _planted().X, "p": 2},
    f"{_SRL}.hard_threshold": lambda: {"v": __import__("numpy").array([0.5, -2.0, 1.0]), "s": 2},
    f"{_SRL}.iht": lambda: {**_data(), "s": 3, "width": 2, "steps": 2, "refine": 1,
                            "w_true": _planted().fused},
    f"{_SRL}.imp": _imp,
    f"{_SRL}.imp_rounds": lambda: {"total": 20, "s": 3, "prune_fraction": 0.1},
    f"{_SRL}.imp_sweep": _imp_sweep,
    f"{_SRL}.least_squares": _dense,
    f"{_SRL}.omp": lambda: {**_dense(), "s": 3},
    f"{_SRL}.phase_grid": lambda: {"ms": [2], "ss": [2], "n": 30, "d": 4, "seed": 0, "steps": 2,
                                   "refine": 1},
    f"{_SRL}.planted_mlp": lambda: {"n": 30, "d": 4, "m": 2, "s": 3, "rng": _rng()},
    f"{_SRL}.psnr": lambda: {"y": _planted().y, "y_hat": _planted().y + 0.1},
    f"{_SRL}.relu_net": lambda: {"X": _planted().X, "W": _planted().W,
                                 "v": __import__("numpy").ones(2)},
}

#: (public path, parameter or "*", probe label or "*") -> why the probe's finding is right as it is
ALLOW: dict[tuple[str, str, str], str] = {
    (f"{_SRL}.psnr", "y_hat", "all-NaN"): (
        "documented: a NaN prediction (a fit that diverged) gives a NaN PSNR, which the "
        "learning-rate tuning (core.tuning.tune) reads as a diverged run"),
}
