"""Probe examples for ``iclr_lab.generative`` (see ``api_probe.examples``).

A tiny, untrained ``TinyDiffusion`` (3 steps, width 4) and a handful of samples, so that every
probe call is quick; torch and the package are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _model() -> Any:
    from iclr_lab.generative.rlr import TinyDiffusion

    return TinyDiffusion(steps=3, hidden=4)


def _reward() -> Any:
    from iclr_lab.generative.rlr import target_reward

    return target_reward((0.0, 0.0))


def _gen() -> Any:
    import torch

    return torch.Generator().manual_seed(0)


def _closed_form() -> dict[str, Any]:
    import torch

    model = _model()
    traj = model.trajectory(4, _gen(), features=True)
    return {"model": model, "traj": traj, "adv": torch.linspace(-1.0, 1.0, 4), "step": 1,
            "phi": model.zero_adapter()}


def _with_phi(**kw: Any) -> dict[str, Any]:
    model = _model()
    return {"model": model, "reward": _reward(), "phi": model.zero_adapter(), **kw}


def _mode_fraction() -> dict[str, Any]:
    import torch

    return {"x": torch.zeros(5, 2), "target": (0.0, 0.0)}


EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {
    "iclr_lab.generative.rlr.bias_variance": lambda: {"model": _model(), "n_ref": 4, "n_main": 4,
                                                      "n_other": 4, "n_zo": 4, "ks": (1, 2), "h": 1},
    "iclr_lab.generative.rlr.estimate_gradient": lambda: _with_phi(method="ddpo", n_samples=4),
    "iclr_lab.generative.rlr.finetune": lambda: {"method": "ddpo", "model": _model(),
                                                 "reward": _reward(), "steps": 1, "batch_size": 2,
                                                 "eval_every": 1, "eval_samples": 4,
                                                 "snapshot_samples": 2},
    "iclr_lab.generative.rlr.lr_step_closed_form": _closed_form,
    "iclr_lab.generative.rlr.mode_fraction": _mode_fraction,
    "iclr_lab.generative.rlr.pretrain": lambda: {"model": _model(), "steps": 2, "batch_size": 4},
    "iclr_lab.generative.rlr.sample_mixture": lambda: {"n": 4, "gen": _gen()},
    "iclr_lab.generative.rlr.step_terms": lambda: _with_phi(n_samples=4, step=1),
}

#: (public path, parameter or "*", probe label or "*") -> why the probe's finding is right as it is
ALLOW: dict[tuple[str, str, str], str] = {}
