"""Probe examples for ``iclr_lab.distributed`` (see ``api_probe.examples``).

Every example is small (a world of one or two workers, a few steps, 3 x 4 matrices), so that a call
the probe makes with a value that the callable accepts still returns well within its time limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

D = "iclr_lab.distributed"


def _solo() -> Any:
    """A world of one worker: every all-reduce leaves its tensors as they are."""
    from iclr_lab.core.collective import Collective

    class Solo(Collective):
        def _all_reduce(self, tensors: list[Any], op: Any) -> None:
            pass

    return Solo(0, 1)


def _param() -> list[Any]:
    import torch

    return [torch.zeros(3, requires_grad=True)]


# --- desloc --------------------------------------------------------------------------------------

def _desloc_method() -> Any:
    from iclr_lab.distributed.desloc import Method

    return Method("DES-LOC", (4, 12, 24))


def _desloc_setup() -> Any:
    from iclr_lab.distributed.desloc import DigitsSetup

    return DigitsSetup(steps=8, batch_size=4, warmup=1, hidden=4, eval_every=4)


def _rosenbrock_setup() -> Any:
    from iclr_lab.distributed.desloc import RosenbrockSetup

    return RosenbrockSetup(workers=2, steps=8, kx=4, record_every=4)


# --- fedmuon -------------------------------------------------------------------------------------

def _fed_method() -> Any:
    from iclr_lab.distributed.fedmuon import FedMethod

    return FedMethod("FedMuon", "fedmuon", 0.1)


def _fed_setup() -> Any:
    from iclr_lab.distributed.fedmuon import FedSetup

    return FedSetup(clients=2, sampled=1, local_steps=1, rounds=1, batch=4, hidden=4, eval_every=1)


def _matrix() -> Any:
    import torch

    return torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _stack() -> Any:
    import torch

    return torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _toy_grad(z: list[Any], k: int) -> list[Any]:
    return [z[0] - 1.0]


# --- mtdao ---------------------------------------------------------------------------------------

def _mtdao_method() -> Any:
    from iclr_lab.distributed.mtdao import Method

    return Method("MT-DAO", 0.01, betas=(0.99, 0.999), weights=(0.9,), period=4)


def _mtdao_setup() -> Any:
    from iclr_lab.distributed.mtdao import DigitsSetup

    return DigitsSetup(steps=8, batch_size=4, warmup=1, hidden=4, eval_every=4)


# --- ringleader ----------------------------------------------------------------------------------

def _problem() -> Any:
    from iclr_lab.distributed.ringleader import make_problem

    return make_problem(3, 4, 1.0)


def _times() -> Any:
    from iclr_lab.distributed.ringleader import fixed_times

    return fixed_times(3)


def _sim() -> Any:
    from iclr_lab.distributed.ringleader import Simulator

    return Simulator(_problem(), _times(), 0.1, 20.0, checkpoints=4)


def _quadratic() -> dict[str, Any]:
    import numpy as np

    return {"eigenvalues": np.array([0.5, 1.0]), "centers": np.array([[0.0, 1.0], [1.0, 0.0],
                                                                      [0.5, 0.5]]),
            "x_star": np.array([0.5, 0.5]), "x0": np.array([3.0, 3.0]), "noise": 0.1}


def _grad_sq() -> Any:
    import numpy as np

    return np.array([[4.0, 2.0, 1.0, 0.5], [4.0, 3.0, 2.5, 2.0]])


def _times_row() -> Any:
    import numpy as np

    return np.array([0.0, 1.0, 2.0, 3.0])


EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {
    # local_sync, and the optimizers exported by the part
    f"{D}.local_sync.due": lambda: {"step": 4, "period": 2},
    f"{D}.DESLOC": lambda: {"params": _param()},
    f"{D}.MTDAO": lambda: {"params": _param()},
    # desloc
    f"{D}.desloc.Method": lambda: {"name": "DES-LOC", "sync_periods": (4, 12, 24)},
    f"{D}.desloc.DigitsSetup": lambda: {"steps": 8, "warmup": 1},
    f"{D}.desloc.RosenbrockSetup": lambda: {"steps": 8, "kx": 4, "record_every": 4},
    f"{D}.desloc.budget_chart": lambda: {},
    f"{D}.desloc.communication_cost": lambda: {"sync_periods": (4, 12, 24), "steps": 8},
    f"{D}.desloc.sync_events": lambda: {"sync_periods": (4, 12, 24), "steps": 8},
    f"{D}.desloc.drift_run": lambda: {"setup": _desloc_setup(), "seed": 0, "windows": (1, 2)},
    f"{D}.desloc.half_life": lambda: {"beta": 0.9},
    f"{D}.desloc.launch": lambda: {"comm": _solo(), "scale": "smoke"},
    f"{D}.desloc.reproduce": lambda: {"scale": "smoke"},
    f"{D}.desloc.main_methods": lambda: {"kx": 4},
    f"{D}.desloc.training.sweep_methods": lambda: {"kx": 4},
    f"{D}.desloc.rosenbrock_worker": lambda: {"comm": _solo(), "method": _desloc_method(),
                                              "setup": _rosenbrock_setup(), "seed": 0},
    f"{D}.desloc.train_worker": lambda: {"comm": _solo(), "method": _desloc_method(),
                                         "setup": _desloc_setup(), "seed": 0},
    f"{D}.desloc.stacked.StackedCollective": lambda: {"world_size": 2},
    f"{D}.desloc.stacked.rosenbrock_stacked": lambda: {"method": _desloc_method(),
                                                       "setup": _rosenbrock_setup(), "seed": 0},
    f"{D}.desloc.stacked.train_stacked": lambda: {"method": _desloc_method(),
                                                  "setup": _desloc_setup(), "seeds": (0,),
                                                  "workers": 2},
    # fedmuon
    f"{D}.fedmuon.FedMethod": lambda: {"name": "FedMuon", "algorithm": "fedmuon", "lr": 0.1},
    f"{D}.fedmuon.FedSetup": lambda: {"clients": 2, "sampled": 1, "rounds": 1},
    f"{D}.fedmuon.client_shards": lambda: {"setup": _fed_setup(), "seed": 0},
    f"{D}.fedmuon.launch": lambda: {"comm": _solo(), "scale": "smoke"},
    f"{D}.fedmuon.reproduce": lambda: {"scale": "smoke"},
    f"{D}.fedmuon.lmo": lambda: {"G": _matrix()},
    f"{D}.fedmuon.newton_schulz": lambda: {"G": _matrix()},
    f"{D}.fedmuon.local_lmo_steps": lambda: {"x": [_matrix()], "m": [_matrix() * 0],
                                             "grad_fn": _toy_grad, "steps": 2, "alpha": 0.5,
                                             "lr": 0.1},
    f"{D}.fedmuon.methods": lambda: {"lr_lmo": 0.1, "lr_sgd": 0.1},
    f"{D}.fedmuon.ns_map": lambda: {"steps": 2, "points": 4},
    f"{D}.fedmuon.ns_map_chart": lambda: {},
    f"{D}.fedmuon.toy_matrix": lambda: {"dim": 3},
    f"{D}.fedmuon.toy_run": lambda: {"method": "fedmuon", "A": _matrix(), "rounds": 2,
                                     "local_steps": 1},
    f"{D}.fedmuon.train_clients": lambda: {"comm": _solo(), "method": _fed_method(),
                                           "setup": _fed_setup(), "seed": 0},
    f"{D}.fedmuon.stacked.lmo_stacked": lambda: {"G": _stack(), "ns_steps": 5},
    f"{D}.fedmuon.stacked.newton_schulz_stacked": lambda: {"G": _stack()},
    f"{D}.fedmuon.stacked.toy_runs": lambda: {"runs": [("fedmuon", 0.0, 0, None)], "A": _matrix(),
                                              "rounds": 2, "local_steps": 1},
    f"{D}.fedmuon.stacked.train_stacked": lambda: {"methods": [_fed_method()],
                                                   "setup": _fed_setup(), "seed": 0},
    # mtdao
    f"{D}.mtdao.Method": lambda: {"name": "MT-DAO", "lr": 0.01, "period": 4},
    f"{D}.mtdao.DigitsSetup": lambda: {"steps": 8, "warmup": 1},
    f"{D}.mtdao.anchor_share": lambda: {"betas": (0.99,), "weights": (0.9,), "K": 4},
    f"{D}.mtdao.beta_omega": lambda: {"betas": (0.99,), "weights": (0.9,)},
    f"{D}.mtdao.check_sync_periods": lambda: {"periods": (4, 4, 4)},
    f"{D}.mtdao.communication_cost": lambda: {"sync_periods": (4, 4, 4), "steps": 8},
    f"{D}.mtdao.impulse_chart": lambda: {},
    f"{D}.mtdao.information_kept": lambda: {"beta": 0.9, "K": 4},
    f"{D}.mtdao.momentum_variance": lambda: {"beta": 0.9, "K": 4},
    f"{D}.mtdao.update_weights": lambda: {"betas": (0.99,), "weights": (0.9,), "lags": 4},
    f"{D}.mtdao.sync_penalty": lambda: {"px": 0.25, "p_moments": (0.25,), "betas": (0.99,),
                                        "weights": (0.9,)},
    f"{D}.mtdao.variance_check": lambda: {"betas": (0.9,), "periods": (1, 2), "chains": 8},
    f"{D}.mtdao.launch": lambda: {"comm": _solo(), "scale": "smoke"},
    f"{D}.mtdao.reproduce": lambda: {"scale": "smoke"},
    f"{D}.mtdao.methods": lambda: {"lr": 0.01, "period": 4},
    f"{D}.mtdao.model_bytes": lambda: {"hidden": 4},
    f"{D}.mtdao.train_worker": lambda: {"comm": _solo(), "method": _mtdao_method(),
                                        "setup": _mtdao_setup(), "seed": 0},
    f"{D}.mtdao.stacked.train_stacked": lambda: {"runs": [(_mtdao_method(), 0)],
                                                 "setup": _mtdao_setup(), "workers": 2},
    # ringleader
    f"{D}.ringleader.AuthorsTimes": lambda: {"tau": (1.0, 2.0), "scale": (1.0, 1.0)},
    f"{D}.ringleader.ExponentialTimes": lambda: {"tau": (1.0, 2.0)},
    f"{D}.ringleader.FixedTimes": lambda: {"tau": (1.0, 2.0)},
    f"{D}.ringleader.TimeVaryingTimes": lambda: {"tau": (1.0, 2.0), "period": 10.0,
                                                 "amplitude": 0.5, "phase": (0.0, 1.0)},
    f"{D}.ringleader.OutageTimes": lambda: {"tau": (1.0, 2.0), "down": (1,), "start": 2.0,
                                            "end": 5.0},
    f"{D}.ringleader.GradientTable": lambda: {"n": 3, "shape": (2, 4)},
    f"{D}.ringleader.Quadratic": _quadratic,
    f"{D}.ringleader.Simulator": lambda: {"problem": _problem(), "times": _times(), "steps": 0.1,
                                          "horizon": 20.0, "checkpoints": 4},
    f"{D}.ringleader.run_method": lambda: {"method": "Ringleader", "problem": _problem(),
                                           "times": _times(), "horizon": 20.0, "steps": 0.1,
                                           "checkpoints": 4},
    f"{D}.ringleader.SeedRows": lambda: {"problems": [_problem(), _problem()], "seeds": [0, 1]},
    f"{D}.ringleader.run_seeds": lambda: {"method": "Ringleader", "problems": [_problem(), _problem()],
                                          "times": _times(), "horizon": 20.0, "steps": 0.1,
                                          "seeds": [0, 1], "checkpoints": 4},
    f"{D}.ringleader.simulate": lambda: {"method": "Ringleader", "problem": _problem(),
                                         "time_model": _times(), "budget": 20.0, "checkpoints": 4},
    f"{D}.ringleader.malenia": lambda: {"sim": _sim()},
    f"{D}.ringleader.rennala": lambda: {"sim": _sim()},
    f"{D}.ringleader.authors_times": lambda: {"n": 3},
    f"{D}.ringleader.fixed_times": lambda: {"n": 3},
    f"{D}.ringleader.experiments.heavy_times": lambda: {"n": 3},
    f"{D}.ringleader.make_time_model": lambda: {"kind": "time-varying", "n": 3},
    f"{D}.ringleader.make_problem": lambda: {"n": 3, "dim": 4, "noise": 1.0},
    f"{D}.ringleader.gantt_chart": lambda: {"n": 3},
    f"{D}.ringleader.reproduce": lambda: {"scale": "smoke"},
    f"{D}.ringleader.tail_metric": lambda: {"grad_sq": _grad_sq()},
    f"{D}.ringleader.time_to_target": lambda: {"times": _times_row(),
                                               "grad_sq": _grad_sq(), "target": 1.0},
    f"{D}.ringleader.theory_step": lambda: {"n": 3, "L": 1.0, "eps": 0.1, "B": 3.0, "sigma": 1.0},
}

#: (public path, parameter or "*", probe label or "*") -> why the probe's finding is right as it is
ALLOW: dict[tuple[str, str, str], str] = {
    (f"{D}.fedmuon.lmo", "G", "wrong shape"):
        "the probe's wrong shape of a matrix is a vector, which lmo documents and takes: a bias "
        "has one singular value, so its spectral LMO is the Frobenius one (local_lmo_steps passes "
        "every bias through it)",
    (f"{D}.ringleader.tail_metric", "grad_sq", "wrong shape"):
        "the probe's wrong shape is one row of checkpoints (1-D); tail_metric documents any number "
        "of leading axes (rows, seeds x rows) over the checkpoints of the last one",
    (f"{D}.ringleader.tail_metric", "grad_sq", "all-NaN"):
        "NaN is the simulator's documented mark of a diverged row; every row diverged gives NaN "
        "for every row, which the tuner reads as diverged",
    (f"{D}.ringleader.time_to_target", "grad_sq", "all-NaN"):
        "NaN is the simulator's documented mark of a diverged row, which never reaches the target: "
        "every row diverged gives inf for every row, as documented",
}
