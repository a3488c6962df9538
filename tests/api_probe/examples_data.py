"""Probe examples for ``iclr_lab.data`` (see ``api_probe.examples``).

Tiny sizes throughout (one expert of three epochs, four pairs, one outer iteration, one evaluation
step), so that a probe call that a check fails to stop still ends well inside the probe's timeout.
The digits data and the expert are built once (``functools.cache``): every callable reads them and
none writes to them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np


@functools.cache
def _digits() -> Any:
    from iclr_lab.data.amd import paired_digits

    return paired_digits(0)


@functools.cache
def _experts() -> Any:
    from iclr_lab.data.amd import train_experts

    return train_experts(_digits(), n_experts=1, epochs=3, seed=0)


def _gen() -> Any:
    import torch

    return torch.Generator().manual_seed(0)


def _thetas(n_models: int = 2, grad: bool = False) -> dict[str, Any]:
    from iclr_lab.data.amd import init_params

    theta_v, theta_l = init_params(n_models, _gen())
    return {"theta_v": theta_v.requires_grad_(grad), "theta_l": theta_l.requires_grad_(grad)}


def _pairs(n: int = 6) -> dict[str, Any]:
    import torch

    data = _digits()
    rows = data.train[:n]
    return {"images": torch.from_numpy(data.images[rows]), "texts": torch.from_numpy(data.texts[rows])}


def _distill_kw() -> dict[str, Any]:
    return {"data": _digits(), "experts": _experts(), "n_pairs": 4, "iterations": 1, "syn_steps": 1,
            "expert_epochs": 1}


def _eval_kw() -> dict[str, Any]:
    return {"data": _digits(), **_pairs(), "lrs": (0.1,), "n_inits": 1, "steps": 1}


def _embeddings() -> dict[str, Any]:
    import torch

    g = _gen()
    v = torch.nn.functional.normalize(torch.randn(12, 32, generator=g), dim=1)
    t = torch.nn.functional.normalize(v + 0.1 * torch.randn(12, 32, generator=g), dim=1)
    return {"img_emb": v, "txt_emb": t}


def _matching() -> dict[str, Any]:
    traj = _experts()
    return {"student_v": traj.v[0, 1] + 0.01, "student_l": traj.l[0, 1] + 0.01,
            "start_v": traj.v[0, 0], "start_l": traj.l[0, 0], "target_v": traj.v[0, 1],
            "target_l": traj.l[0, 1]}


def _curation_data() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 4))
    y = np.where(X[:, 0] >= 0, 1.0, -1.0)
    return {"X": X, "y": y, "keep": np.abs(X[:, 1]) < 1.0, "lam": 0.1}


def _reward_class() -> dict[str, Any]:
    from iclr_lab.data.imitation_reward_class import make_instance

    inst = make_instance("decoy", size=6, n_contexts=5, n_answers=8, kappa=3, decoy_sizes=(1, 2))
    xs, ys = inst.sample(4, np.random.default_rng(0))
    return {"S": inst.S, "xs": xs, "ys": ys, "truth": inst.S[inst.truth]}


def _run_online() -> dict[str, Any]:
    from iclr_lab.data.imitation_reward_class import RewardClassLearner

    kw = _reward_class()
    return {"learner": RewardClassLearner(kw.pop("S")), **kw}


def _policy() -> dict[str, Any]:
    kw = _reward_class()
    return {"probs": kw["truth"] / kw["truth"].sum(axis=1, keepdims=True), "truth": kw["truth"]}


_A = "iclr_lab.data.amd."
_C = "iclr_lab.data.data_curation."
_I = "iclr_lab.data.imitation_reward_class."

EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {
    # amd
    _A + "async_ranges": lambda: {"traj": _experts(), "expert_epochs": 1},
    _A + "contrastive_grad": lambda: {**_thetas(grad=True), **_pairs()},
    _A + "contrastive_loss": lambda: {**_thetas(), **_pairs()},
    _A + "encode": lambda: {**_thetas(), **_pairs()},
    _A + "distill": _distill_kw,
    _A + "distill_many": lambda: {**_distill_kw(), "runs": [("mtt", "random", 0)]},
    _A + "evaluate_set": _eval_kw,
    _A + "rate_sweep": _eval_kw,
    _A + "evaluate_sets": lambda: {"data": _digits(), "sets": [tuple(_pairs().values())],
                                   "lrs": (0.1,), "n_inits": 1, "steps": 1},
    _A + "init_params": lambda: {"n_models": 2, "gen": _gen()},
    _A + "kmeans_prototypes": lambda: {"data": _digits(), "theta_v": _experts().v[0, -1],
                                       "theta_l": _experts().l[0, -1], "n_pairs": 4},
    _A + "matching_loss": _matching,
    _A + "random_subset": lambda: {"data": _digits(), "n_pairs": 4},
    _A + "stratified_subset": lambda: {"data": _digits(), "n_pairs": 4},
    _A + "retrieval_recall": _embeddings,
    _A + "text_encoder": lambda: {"tokens": _digits().tokens[:6]},
    _A + "train_experts": lambda: {"data": _digits(), "n_experts": 1, "epochs": 1},
    _A + "train_on_set": lambda: {**_pairs(), "lrs": (0.1,), "steps": 1, "gen": _gen()},
    _A + "train_on_sets": lambda: {"sets": [tuple(_pairs().values())], "lrs": (0.1,), "steps": 1,
                                   "gen": _gen()},
    # data_curation
    _C + "Geometry": lambda: {"rho": 0.9, "rho_star": 0.7, "rho_g": 0.6},
    _C + "angle_error": lambda: {"w": np.array([1.0, 0.5, -0.2]), "w_star": np.array([1.0, 0.0, 0.0])},
    _C + "keep_mask": lambda: {"rule": "agree_hard", "keep_fraction": 0.5,
                               "t": np.array([-2.0, -0.1, 0.1, 2.0]),
                               "y": np.array([-1.0, 1.0, -1.0, 1.0])},
    _C + "kept_moments": lambda: {"geometry": __import__(_C[:-1], fromlist=["STRONG"]).STRONG,
                                  "rule": "keep_hard", "keep_fraction": 0.5},
    _C + "limit_error": lambda: {"rule": "keep_hard", "keep_fraction": 0.5, "rho": 0.999,
                                 "rho_star": 0.9999, "rho_g": 0.999},
    _C + "ridge": _curation_data,
    _C + "sample": lambda: {"n": 10, "d": 4, "w_g": np.array([1.0, 0.0, 0.0, 0.0]),
                            "rng": np.random.default_rng(0)},
    _C + "self_train": lambda: {"rule": "keep_hard", "keep_fraction": 0.5, "rounds": 2, "n": 40,
                                "d": 5},
    _C + "simulate": lambda: {"rule": "keep_hard", "keep_fraction": 0.5, "n": 40, "d": 5},
    _C + "theory_error": lambda: {"rule": "keep_hard", "keep_fraction": 0.5, "phi": 0.1},
    _C + "threshold": lambda: {"rule": "keep_hard", "keep_fraction": 0.5},
    # imitation_reward_class
    _I + "RewardClassLearner": lambda: {"S": _reward_class()["S"]},
    _I + "check_reward_class": lambda: {"S": _reward_class()["S"]},
    _I + "make_instance": lambda: {"kind": "decoy", "size": 6, "n_contexts": 5, "n_answers": 8,
                                   "kappa": 3, "decoy_sizes": (1, 2)},
    _I + "mle_policy": _reward_class,
    _I + "policy_value": _policy,
    _I + "run_online": _run_online,
    _I + "theorem4_ratio": lambda: {"mistakes": 3.0, "errors": 1.0, "n_hyp": 11, "gamma": 0.5},
}

#: (public path, parameter or "*", probe label or "*") -> why the probe's finding is right as it is
ALLOW: dict[tuple[str, str, str], str] = {}
