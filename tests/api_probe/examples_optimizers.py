"""Probe examples for ``iclr_lab.optimizers`` (see ``api_probe.examples``).

Every example is a valid call with tiny sizes (a 4-3 linear model, a one-layer GPT of width 8, two
or four steps, probe batches of 8), so that a call the probe makes with one bad value fails fast or,
were a check missing, would still return well inside the probe's timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: a one-layer GPT of width 8 (the smallest the chapter's code builds quickly)
_GPT = {"vocab": 16, "context": 4, "d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16}


def _params() -> list[Any]:
    import torch

    return [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.ones(2, 2))]


def _linear() -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Linear(4, 3)


def _gpt_config() -> Any:
    from iclr_lab.optimizers.dnt import GPTConfig

    return GPTConfig(**_GPT)


def _gpt(with_grad: bool = False) -> Any:
    import torch

    from iclr_lab.optimizers.dnt import TinyGPT

    torch.manual_seed(0)
    model = TinyGPT(_gpt_config(), "dnt")
    if with_grad:
        tokens = torch.arange(20).remainder(16).view(4, 5)
        model.loss(tokens).backward()
    return model


def _batch() -> dict[str, Any]:
    import torch

    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(6, 4, generator=g), "y": torch.arange(6) % 3}


def _digits() -> Any:
    from iclr_lab.core.datasets import digits

    return digits(seed=0)


def _digits_split() -> Any:
    from iclr_lab.optimizers.doit import digits_split

    return digits_split()


def _doit_run_many() -> dict[str, Any]:
    from iclr_lab.optimizers.doit._batched import Job

    return {"jobs": [Job("DOIT", 0, {"SGD": 0.1, "Adam": 1e-3}, cycle=2)], "steps": 2, "n_ini": 1,
            "eval_every": 1, "probe_size": 8, "data": _digits_split()}


def _restart_shock() -> dict[str, Any]:
    import pandas as pd

    from iclr_lab.optimizers.doit import DEFAULT_RATES

    tuning = pd.DataFrame({"optimizer": list(DEFAULT_RATES), "lr": list(DEFAULT_RATES.values()),
                           "val_loss": [1.0, 0.9, 0.8, 0.7, 0.6], "chosen": [True] * 5})
    return {"rates": dict(DEFAULT_RATES), "tuning": tuning, "seed": 0, "steps": 4, "cycle": 2,
            "grid": [0.1], "probe_size": 8, "data": _digits_split()}


def _timeline() -> dict[str, Any]:
    import pandas as pd

    cycles = pd.DataFrame({"tau": [2, 2], "cycle": [0, 1], "start": [0, 2], "end": [2, 4],
                           "choice": ["SGD", "Adam"], "phase": ["cold start", "acquisition"],
                           "score": [0.1, 0.2]})
    losses = pd.DataFrame({"tau": [2] * 4, "step": [1, 2, 3, 4], "probe_loss": [2.0, 1.9, 1.8, 1.7]})
    return {"cycles": cycles, "losses": losses}


def _dnt_train_many() -> dict[str, Any]:
    from iclr_lab.optimizers.dnt.stacked import Spec

    return {"specs": [Spec("pre", "adamw", 1e-3), Spec("dnt", "msgdw", 0.1)], "steps": 2,
            "batch_size": 2, "config": _gpt_config(), "val_sequences": 4}


def _subblock() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {"w1": rng.standard_normal((8, 4)), "w2": rng.standard_normal((4, 8)),
            "x": rng.standard_normal(4)}


def _vradam_train_many() -> dict[str, Any]:
    from iclr_lab.optimizers.vradam.stacked import Spec

    return {"specs": [Spec(True, 1e-3, 0), Spec(False, 1e-3, 0)], "steps": 2, "data": _digits(),
            "eval_every": 1, "weight_decay": 1e-4, "lr_cutoff": 19.0}


def _rate_many() -> dict[str, Any]:
    from iclr_lab.optimizers.vradam.stacked import RateSpec

    return {"specs": [RateSpec(True, 0.05, 0, beta3=1.0), RateSpec(False, 0.05, 0)], "steps": 2,
            "data": _digits(), "penalty": 0.01, "lr_cutoff": 19.0, "every": 1}


_O = "iclr_lab.optimizers"
EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {
    # the optimizers
    f"{_O}.DOIT": lambda: {"model": _linear(), "candidates": {"SGD": 0.1, "Adam": 1e-3}},
    f"{_O}.VRAdam": lambda: {"params": _params()},
    f"{_O}.VRMomentum": lambda: {"params": _params()},
    # dnt
    f"{_O}.dnt.heavy_tail_stats": lambda: {"model": _gpt(with_grad=True)},
    f"{_O}.dnt.jacobian_spectrum": lambda: {"d": 4, "d_ff": 8},
    f"{_O}.dnt.make_optimizer": lambda: {"model": _gpt(), "name": "adamw", "lr": 1e-3},
    f"{_O}.dnt.midnorm_invariance": lambda: {"d": 4, "d_ff": 8},
    f"{_O}.dnt.no_decay": lambda: {"name": "blocks.0.ffn.fc.weight", "p": _params()[1]},
    f"{_O}.dnt.stacked.train_many": _dnt_train_many,
    f"{_O}.dnt.subblock_jacobian": _subblock,
    f"{_O}.dnt.train_lm": lambda: {"norm": "dnt", "optimizer": "msgdw", "lr": 0.1, "steps": 2,
                                   "batch_size": 2, "config": _gpt_config(), "val_sequences": 4,
                                   "eval_every": 1},
    # doit
    f"{_O}.doit._batched.run_many": _doit_run_many,
    f"{_O}.doit.acquisition_values": lambda: {"mu": [0.1, 0.2], "sigma": [1.0, 0.5],
                                              "coefficient": 0.5},
    f"{_O}.doit.cross_entropy_closure": lambda: {"model": _linear(), **_batch()},
    f"{_O}.doit.exploration_coefficient": lambda: {"cycle": 3},
    f"{_O}.doit.explorer_chart": lambda: {"tau": 2, "n_ini": 1, "steps": 4},
    f"{_O}.doit.feature_weights": lambda: {"model": _linear()},
    f"{_O}.doit.make_optimizer": lambda: {"name": "SGDM", "params": _params(), "lr": 0.05},
    f"{_O}.doit.probe_fn": _batch,
    f"{_O}.doit.restart_shock": _restart_shock,
    f"{_O}.doit.run_method": lambda: {"method": "DOIT", "seed": 0, "rates": {"SGD": 0.1, "Adam": 1e-3},
                                      "steps": 4, "cycle": 2, "n_ini": 1, "eval_every": 2,
                                      "probe_size": 8, "data": _digits_split()},
    f"{_O}.doit.score": lambda: {"l0": 2.0, "losses": [1.9, 1.7]},
    f"{_O}.doit.score_terms": lambda: {"l0": 2.0, "losses": [1.9, 1.7]},
    f"{_O}.doit.state_features": lambda: {"weights": [_params()[1], _linear().weight]},
    f"{_O}.doit.timeline_chart": _timeline,
    f"{_O}.doit.train_with_doit": lambda: {"model": _linear_digits(), "data": _digits(),
                                           "steps": 2, "eval_every": 1, "probe_size": 8,
                                           "candidates": {"SGD": 0.1}, "cycle": 1, "n_ini": 1},
    f"{_O}.doit.tune_rates": lambda: {"grid": [0.1, 0.3], "seed": 0, "steps": 2, "eval_every": 1,
                                      "data": _digits_split()},
    # vradam
    f"{_O}.vradam.calibrate_beta3": lambda: {"data": _digits(), "seed": 0, "steps": 2,
                                             "batch_size": 8},
    f"{_O}.vradam.edge_velocity": lambda: {"r": 1.5, "beta3": 1.0},
    f"{_O}.vradam.gate": lambda: {"sq_norm": 2.0, "beta3": 1.0, "lr_cutoff": 19.0},
    f"{_O}.vradam.momentum_matrix": lambda: {"e": 1.0},
    f"{_O}.vradam.quadratic_explorer_chart": lambda: {"steps": 4},
    f"{_O}.vradam.rate_run": lambda: {"method": "VRAdam", "seed": 0, "steps": 2, "beta3": 1.0,
                                      "every": 1, "batch_size": 8, "data": _digits()},
    f"{_O}.vradam.stability_limit": lambda: {"beta": 0.9},
    f"{_O}.vradam.stacked.rate_many": _rate_many,
    f"{_O}.vradam.stacked.train_many": _vradam_train_many,
    f"{_O}.vradam.switching_radius": lambda: {"c": 0.5, "grid": 4},
    f"{_O}.vradam.train_digits": lambda: {"method": "VRAdam (β₃=1)", "lr": 1e-3, "seed": 0,
                                          "steps": 2, "eval_every": 1, "data": _digits()},
    f"{_O}.vradam.two_cycle": lambda: {"r": 1.5},
    f"{_O}.vradam.vr_momentum_quadratic": lambda: {"r": [0.5, 1.5, 2.5], "steps": 4},
}


def _linear_digits() -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Linear(64, 10)


_DIVERGED = ("documented: a non-finite loss is a diverged step and gets the worst score, -1 (DOIT "
             "scores a cycle whose loss blew up, and the chapter's runs rely on it); -inf and "
             "negative losses are refused")

#: (public path, parameter or "*", probe label or "*") -> why the probe's finding is right as it is
ALLOW: dict[tuple[str, str, str], str] = {
    (f"{_O}.dnt.no_decay", "p", "*"): "a predicate on the parameter's shape (ndim < 2, the norm gains "
    "and biases); it reads no entry, so an empty, reshaped or NaN tensor is a valid input",
    (f"{_O}.doit.score", "l0", "nan"): _DIVERGED,
    (f"{_O}.doit.score", "l0", "inf"): _DIVERGED,
    (f"{_O}.doit.score_terms", "l0", "nan"): _DIVERGED,
    (f"{_O}.doit.score_terms", "l0", "inf"): _DIVERGED,
}
