"""Probe examples for ``iclr_lab.core`` (see ``api_probe.examples``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _df() -> Any:
    import pandas as pd

    return pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [3.0, 2.0, 1.0], "lr": [0.1, 0.1, 0.2],
                         "seed": [0, 1, 0]})


def _tensors() -> dict[str, Any]:
    import torch

    return {"param": torch.zeros(3), "grad": torch.ones(3), "exp_avg": torch.zeros(3),
            "exp_avg_sq": torch.zeros(3)}


def _model() -> Any:
    import torch

    return torch.nn.Linear(4, 3)


def _data() -> dict[str, Any]:
    import torch

    g = torch.Generator().manual_seed(0)
    return {"model": _model(), "x": torch.randn(6, 4, generator=g), "y": torch.arange(6) % 3}


def _train() -> dict[str, Any]:
    import torch

    from iclr_lab.core.datasets import Split

    d = _data()
    x, y = d["x"].numpy(), d["y"].numpy()
    return {"model": d["model"], "optimizer": torch.optim.SGD(d["model"].parameters(), lr=0.1),
            "data": Split(x, y, x, y), "steps": 2, "batch_size": 4}


def _flat() -> dict[str, Any]:
    import torch

    return {"n_in": 4, "hidden": 3, "n_out": 2, "gen": torch.Generator().manual_seed(0)}


def _hub() -> Any:
    from iclr_lab.core.collective import _Hub

    return _Hub(2)


def _counts() -> Any:
    from iclr_lab.core.collective import CommCounts

    return CommCounts()


EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {
    "iclr_lab.core.Claim": lambda: {"name": "c", "statement": "s", "measured": 1.0,
                                    "threshold": 0.0},
    "iclr_lab.core.Report": lambda: {"slug": "doit", "scale": "smoke", "seed": 0, "tables": {},
                                     "claims": []},
    "iclr_lab.core.charts.reference_line": lambda: {"value": 1.0},
    "iclr_lab.core.charts.sweep": lambda: {"df": _df(), "x": "x", "y": "y", "param": "lr"},
    "iclr_lab.core.charts.thin": lambda: {"df": _df(), "x": "x"},
    "iclr_lab.core.collective.SimulatedCollective": lambda: {"rank": 0, "hub": _hub()},
    "iclr_lab.core.collective.buckets": lambda: {"tensors": [_tensors()["param"]], "cap_bytes": 16},
    "iclr_lab.core.collective.comm_seconds": lambda: {"counts": _counts(), "world_size": 2,
                                                      "bandwidth": 1e9},
    "iclr_lab.core.collective.run_gloo": lambda: {"fn": len, "world_size": 1},
    "iclr_lab.core.collective.run_processes": lambda: {"fn": len, "world_size": 1},
    "iclr_lab.core.collective.run_simulated": lambda: {"fn": len, "world_size": 1},
    "iclr_lab.core.datasets.gaussian_mixture": lambda: {"n": 6, "dim": 2, "classes": 2},
    "iclr_lab.core.datasets.low_rank": lambda: {"shape": (4, 3), "rank": 1},
    "iclr_lab.core.datasets.sparse_regression": lambda: {"n": 6, "dim": 4, "sparsity": 2},
    "iclr_lab.core.languages.zipf_weights": lambda: {"vocab": 5, "exponent": 1.1},
    "iclr_lab.core.nn.FlatMLP": _flat,
    "iclr_lab.core.nn.adam_update": lambda: {**_tensors(), "step": 1, "lr": 1e-3},
    "iclr_lab.core.nn.batch_indices": lambda: {"n": 6, "steps": 2, "batch_size": 3, "seed": 0},
    "iclr_lab.core.nn.evaluate": _data,
    "iclr_lab.core.nn.train_classifier": _train,
    "iclr_lab.core.nn.warmup_cosine": lambda: {"t": 1, "peak": 0.1, "warmup": 2, "steps": 10},
    "iclr_lab.core.progress.progress": lambda: {"iterable": [1, 2]},
    "iclr_lab.core.reproduce": lambda: {"slug": "no_such_chapter"},
    "iclr_lab.core.scoreboard.times_chart": lambda: {"times": {"doit": {"cpu": 1.0, "wall": 1.0}}},
    "iclr_lab.core.seed_everything": lambda: {"seed": 0},
    "iclr_lab.core.stability.measure": lambda: {"slug": "no_such_chapter"},
    "iclr_lab.core.stats.loglog_slope": lambda: {"x": np.array([1.0, 2.0, 4.0]),
                                                 "y": np.array([1.0, 0.5, 0.25])},
    "iclr_lab.core.stats.paired": lambda: {"a": np.array([1.0, 2.0, 3.0]),
                                           "b": np.array([1.5, 2.0, 2.0])},
    "iclr_lab.core.tuning.log_grid": lambda: {"default": 0.1},
    "iclr_lab.core.tuning.tune": lambda: {"method": "m", "score_many": lambda lrs: [1.0] * len(lrs),
                                          "default": 0.1},
    "iclr_lab.core.tuning.tuning_seeds": lambda: {"seed": 0, "count": 2},
    "iclr_lab.core.validation.check_int": lambda: {"name": "n", "value": 3},
    "iclr_lab.core.validation.check_range": lambda: {"name": "x", "value": 0.5},
    "iclr_lab.core.widgets.log_slider": lambda: {"description": "lr", "value": 0.1, "min": 1e-3,
                                                 "max": 1.0},
    "iclr_lab.core.widgets.slider": lambda: {"description": "a", "value": 0.5, "min": 0.0,
                                             "max": 1.0, "step": 0.1},
    "iclr_lab.core.worker_data.QuadraticToy": lambda: {"dim": 3, "n_workers": 2},
    "iclr_lab.core.worker_data.digit_shards": lambda: {"n_workers": 2},
    "iclr_lab.core.worker_data.shard_dirichlet": lambda: {"labels": np.arange(8) % 2,
                                                          "n_workers": 2, "alpha": 0.5},
    "iclr_lab.core.worker_data.shard_iid": lambda: {"labels": np.arange(8) % 2, "n_workers": 2},
    "iclr_lab.core.worker_data.shard_sorted": lambda: {"labels": np.arange(8) % 2, "n_workers": 2},
    "iclr_lab.core.worker_data.worker_seed": lambda: {"seed": 0, "rank": 1},
}

#: (public path, parameter or "*", probe label or "*") -> why the probe's finding is right as it is
ALLOW: dict[tuple[str, str, str], str] = {}
ALLOW.update({
    ("iclr_lab.core.validation.check_int", "low", "*"): "any integer is a valid bound",
    ("iclr_lab.core.validation.check_int", "high", "*"): "any integer is a valid bound; with "
    "high below the example's value the error is about that value, and names it (n)",
    ("iclr_lab.core.stats.paired", "a", "all-NaN"): "documented: a diverged run's NaN is kept, so "
    "the interval is NaN and a claim judged on it fails instead of passing on the other seeds",
    ("iclr_lab.core.stats.paired", "b", "all-NaN"): "documented, as for a",
    ("iclr_lab.core.nn.adam_update", "*", "all-NaN"): "documented: a per-step kernel of Adam: NaN "
    "propagates as in torch.optim.Adam, and a finiteness check per tensor per step would cost "
    "more than the update",
    ("iclr_lab.core.nn.adam_update", "*", "wrong shape"): "the in-place ops broadcast as in "
    "torch.optim.Adam's own kernel (a per-step kernel: shape checks would cost more than the "
    "update)",
    ("iclr_lab.core.nn.adam_update", "*", "empty"): "as for wrong shape",
})
ALLOW.update({
    ("iclr_lab.core.Claim", "measured", "*"): "documented: any real number, NaN and +-inf "
    "included (a diverged run measures NaN and its claim fails); a string is refused",
    ("iclr_lab.core.Claim", "control_measured", "*"): "documented, as for measured",
})
