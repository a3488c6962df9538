"""Probe examples for ``iclr_lab.recovery`` (see ``api_probe.examples``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {}

#: (public path, parameter or "*", probe label or "*") -> why the probe's finding is right as it is
ALLOW: dict[tuple[str, str, str], str] = {}


# ---------------------------------------------------------------------------------------------
# frank_wolfe_bregman, risp and tubal_fgd (tiny sizes and few iterations: every call is quick)

_FWB = "iclr_lab.recovery.frank_wolfe_bregman"
_RISP = "iclr_lab.recovery.risp"
_TUBAL = "iclr_lab.recovery.tubal_fgd"


def _rng() -> Any:
    import numpy as np

    return np.random.default_rng(0)


def _fw_problem() -> dict[str, Any]:
    """``||x - c||^2 / 2`` over the probability simplex of R^3, from its centre."""
    import numpy as np

    from iclr_lab.recovery.frank_wolfe_bregman import Simplex

    c = np.array([0.6, 0.3, 0.1])
    return {"f": lambda x: 0.5 * float((x - c) @ (x - c)), "grad": lambda x: x - c,
            "lmo": Simplex(), "x0": np.full(3, 1 / 3), "max_iter": 5}


def _fw_curve() -> dict[str, Any]:
    import numpy as np

    return {"h": 0.9 ** np.arange(100.0), "window": (0, 99)}


def _risp_problem() -> dict[str, Any]:
    from iclr_lab.recovery.risp import make_problem

    problem = make_problem(8)
    return {"problem": problem, "x0": problem.start(), "iters": 2}


def _risp_net() -> Any:
    import torch

    from iclr_lab.recovery.risp.prior import build_network

    torch.manual_seed(0)
    return build_network(_risp_config())


def _risp_config() -> Any:
    from iclr_lab.recovery.risp.prior import DenoiserConfig

    return DenoiserConfig(channels=2, depth=2)


def _risp_batch() -> dict[str, Any]:
    import torch

    return {"net": _risp_net(), "x": torch.zeros(1, 1, 8, 8)}


def _risp_report() -> dict[str, Any]:
    import numpy as np
    import pandas as pd

    from iclr_lab.core.report import Report

    images = pd.DataFrame({"panel": ["truth"] * 4, "row": [0, 0, 1, 1], "col": [0, 1, 0, 1],
                           "value": np.linspace(0, 1, 4)})
    return {"report": Report(slug="risp", scale="smoke", seed=0, tables={"images": images},
                             claims=[])}


def _tubal_x(n: int = 3, k: int = 2) -> Any:
    from iclr_lab.recovery.tubal_fgd import planted_tensor

    return planted_tensor(n, 1, k, 0)


def _tubal_meas() -> Any:
    from iclr_lab.recovery.tubal_fgd import gaussian_measurements

    return gaussian_measurements(_tubal_x(), 12, 0.0, 0)


def _tubal_descend() -> dict[str, Any]:
    import numpy as np

    meas = _tubal_meas()
    u0 = 1e-3 * np.random.default_rng(0).standard_normal((1, 1, 3, 2, 2))
    return {"u0": u0, "a_train": meas.A[None], "y_train": meas.y[None, None], "eta": 0.1,
            "steps": 2, "a_val": meas.A[None, :3], "y_val": meas.y[None, None, :3],
            "x_star": _tubal_x()[None], "r": 1, "monitor_at": (1,)}


def _tubal_complete() -> dict[str, Any]:
    import numpy as np

    gen = np.random.default_rng(0)
    truth = gen.uniform(size=(4, 4, 3))
    mask = gen.uniform(size=truth.shape) < 0.6
    return {"observed": np.where(mask, truth, 0.0), "mask": mask, "R": 2, "steps": 2,
            "truth": truth, "rng": 0}


EXAMPLES.update({
    f"{_FWB}.Constant": lambda: {"gamma": 0.5},
    f"{_FWB}.KSparse": lambda: {"K": 2},
    f"{_FWB}.LpLoss": lambda: {"A": _rng().standard_normal((4, 3)), "b": _rng().standard_normal(4)},
    f"{_FWB}.PhaseRetrieval": lambda: {"A": _rng().standard_normal((4, 3)),
                                       "b": _rng().uniform(size=4)},
    f"{_FWB}.PoissonKL": lambda: {"A": _rng().uniform(size=(4, 3)), "b": _rng().uniform(size=4)},
    f"{_FWB}.ShortStep": lambda: {"L": 1.0},
    f"{_FWB}.estimate_growth": lambda: {"M": 2.0 ** _rng().uniform(size=20)},
    f"{_FWB}.frank_wolfe": _fw_problem,
    f"{_FWB}.half_rates": _fw_curve,
    f"{_FWB}.linear_rate": _fw_curve,
    f"{_FWB}.slope_ratio": _fw_curve,
    f"{_FWB}.lp_hard_instance": lambda: {"m": 6, "n": 3, "p": 1.1, "rng": _rng()},
    f"{_FWB}.lp_instance": lambda: {"m": 6, "n": 3, "p": 1.1, "rng": _rng()},
    f"{_FWB}.phase_retrieval_instance": lambda: {"m": 6, "n": 4, "K": 2, "s": 2, "rng": _rng()},
    f"{_FWB}.poisson_instance": lambda: {"m": 6, "n": 4, "s": 2, "rng": _rng()},
    f"{_RISP}.LearnedPrior": lambda: {"net": _risp_net(), "config": _risp_config()},
    f"{_RISP}.image_figure": _risp_report,
    f"{_RISP}.make_operator": lambda: {"kind": "inpaint", "shape": (8, 8)},
    f"{_RISP}.nesterov_restart": _risp_problem,
    f"{_RISP}.red": _risp_problem,
    f"{_RISP}.risp": _risp_problem,
    f"{_RISP}.psnr": lambda: {"x": _rng().uniform(size=(4, 4)), "truth": _rng().uniform(size=(4, 4))},
    f"{_RISP}.prior.gs_denoise": _risp_batch,
    f"{_RISP}.prior.gs_grad": _risp_batch,
    f"{_RISP}.train_prior.patches": lambda: {"levels": [_rng().uniform(size=(8, 8))], "count": 2,
                                             "side": 4, "rng": _rng()},
    f"{_TUBAL}.Measurements": lambda: {"A": _rng().standard_normal((4, 2, 2, 2)),
                                       "y": _rng().standard_normal(4)},
    f"{_TUBAL}.block_circulant": lambda: {"a": _tubal_x()},
    f"{_TUBAL}.complete": _tubal_complete,
    f"{_TUBAL}.completion_figure": lambda: {"images": {"a": _rng().uniform(size=(4, 4, 3))},
                                            "names": ["a"]},
    f"{_TUBAL}.default_step": lambda: {"meas": _tubal_meas()},
    f"{_TUBAL}.descend": _tubal_descend,
    f"{_TUBAL}.fgd": lambda: {"train": _tubal_meas(), "R": 2, "steps": 2, "x_star": _tubal_x(),
                              "u0": 1e-3 * _rng().standard_normal((3, 2, 2))},
    f"{_TUBAL}.fold": lambda: {"m": _rng().standard_normal((6, 2)), "k": 3},
    f"{_TUBAL}.gaussian_measurements": lambda: {"x_star": _tubal_x(), "m": 4, "sigma": 0.1,
                                                "rng": 0},
    f"{_TUBAL}.planted_tensor": lambda: {"n": 3, "r": 1, "k": 2, "rng": 0},
    f"{_TUBAL}.psnr": lambda: {"estimate": _rng().uniform(size=(4, 4, 3)),
                               "truth": _rng().uniform(size=(4, 4, 3))},
    f"{_TUBAL}.small_init": lambda: {"n": 3, "R": 2, "k": 2, "alpha": 1e-3, "rng": 0},
    f"{_TUBAL}.spectral_init": lambda: {"meas": _tubal_meas(), "R": 2},
    f"{_TUBAL}.stage_metrics": lambda: {"u": _rng().standard_normal((3, 2, 2)), "x_star": _tubal_x(),
                                        "r": 1},
    f"{_TUBAL}.t_identity": lambda: {"n": 2, "k": 3},
    f"{_TUBAL}.t_product": lambda: {"a": _tubal_x(), "b": _tubal_x()},
    f"{_TUBAL}.t_spectral_norm": lambda: {"a": _tubal_x()},
    f"{_TUBAL}.t_svd": lambda: {"a": _tubal_x()},
    f"{_TUBAL}.t_transpose": lambda: {"a": _tubal_x()},
    f"{_TUBAL}.tubal_rank": lambda: {"a": _tubal_x()},
    f"{_TUBAL}.unfold": lambda: {"a": _tubal_x()},
})
