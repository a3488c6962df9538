"""The shipped policies, the chapter's test set, and the views of them that the experiments and
the explorers share (so that neither imports the other).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch

from iclr_lab.core.validation import check_choice, check_int, check_range
from iclr_lab.routing.evaluate import TEST_COUNT
from iclr_lab.routing.instances import ID_VARIANTS, MB_VARIANTS, VRPBatch
from iclr_lab.routing.model import GATE_NAMES, RoutingPolicy, rollout

if TYPE_CHECKING:
    from iclr_lab.routing.model import Rollout

__all__ = ["LABELS", "MODELS", "PICTURE_VARIANTS", "PYVRP_SETTINGS", "TRAIN_SEEDS", "gate_trace",
           "policy", "route_stops", "test_instance"]

MODELS = ("ccl", "static")
TRAIN_SEEDS = (0, 1, 2)
#: display names of the solvers in tables and charts
LABELS = {"ccl": "CCL", "static": "static decoder", "nn": "nearest neighbour", "pyvrp": "PyVRP"}
#: the settings the shipped PyVRP references were solved with (an iteration budget, so that a live
#: re-solve gives the same routes whatever the machine's load)
PYVRP_SETTINGS: dict[str, Any] = {"time_limit": 600.0, "iterations": 2000, "seed": 0}
#: variants of one test instance drawn in the chapter's picture (and solved live with PyVRP)
PICTURE_VARIANTS = ("CVRP", "OVRP", "VRPB", "VRPL", "VRPTW", "VRPBLTW", "OVRPBLTW", "VRPMB")


@functools.lru_cache(maxsize=8)
def policy(model: str, seed: int = 0) -> RoutingPolicy:
    """The shipped policy ``model`` (``"ccl"`` or ``"static"``) of training seed ``seed`` (0, 1, 2),
    loaded once per process, in evaluation mode."""
    from iclr_lab.routing.train import load_policy

    check_choice("model", model, MODELS)
    check_choice("seed", check_int("seed", seed, min(TRAIN_SEEDS), max(TRAIN_SEEDS)), TRAIN_SEEDS)
    return load_policy(model, seed=seed)


@functools.lru_cache(maxsize=32)
def _test_set(variant: str) -> VRPBatch:
    from iclr_lab.routing.evaluate import test_instances

    return test_instances(variant)


def test_instance(variant: str, instance: int) -> VRPBatch:
    """Instance ``instance`` (0..99) of the chapter's test set for ``variant`` (a batch of one): the
    row ``(variant, instance)`` of the shipped costs."""
    check_choice("variant", variant, ID_VARIANTS + MB_VARIANTS)
    instance = check_int("instance", instance, 0, TEST_COUNT - 1)  # before the set is generated
    return _test_set(variant)[instance]


test_instance.__test__ = False  # type: ignore[attr-defined]  # not a pytest test, whatever imports it


def route_stops(instance: VRPBatch, routes: Sequence[Sequence[int]]) -> pd.DataFrame:
    """One row per stop of ``routes`` on ``instance`` (a batch of one): ``route``, ``order``,
    ``node``, ``x``, ``y``, ``kind`` (depot, delivery or pickup); each route starts at the depot and
    ends there, the last arc flagged ``free`` on open routes."""
    locs = instance.locs[0].double().tolist()
    pickup = (instance.backhaul[0] > 0).tolist()
    free = bool(instance.open_route[0])
    rows = []
    for r, route in enumerate(routes):
        path = [0, *[int(c) for c in route], 0]
        for k, node in enumerate(path):
            rows.append({"route": r, "order": k, "node": node, "x": locs[node][0], "y": locs[node][1],
                         "kind": "depot" if node == 0 else ("pickup" if pickup[node] else "delivery"),
                         "free": free and k == len(path) - 1})
    return pd.DataFrame(rows)


def gate_trace(pol: RoutingPolicy, instances: VRPBatch, *, p_reembed: float = 1.0) -> pd.DataFrame:
    """RGCR's gates (eq. ``ccl_vrp-eq-gate``) along the greedy tour of the best start of each
    instance (identity symmetry): one row per instance x decoding step x constraint, with the
    current node and its kind. Steps after the tour is complete are dropped. ``p_reembed``, the
    TSNR probability while decoding, is in ``[0, 1]``."""
    if not isinstance(pol, RoutingPolicy) or pol.config.decoder != "ccl":
        raise ValueError("pol must be a CCL policy (the static decoder has no gates)")
    if not isinstance(instances, VRPBatch):
        raise TypeError(f"instances must be a VRPBatch, got {type(instances).__name__}")
    p_reembed = check_range("p_reembed", p_reembed, 0.0, 1.0)
    with torch.no_grad():
        was = pol.training
        pol.eval()
        try:
            r: Rollout = rollout(pol, instances, greedy=True, p_reembed=p_reembed, record=True)
        finally:
            pol.train(was)
    assert r.gates is not None
    best = r.cost.argmin(-1)
    rows = []
    for b in range(instances.batch_size):
        s = int(best[b])
        acts = r.actions[b, s].tolist()  # acts[0] is the forced start; gates[k] come before acts[k + 1]
        last = max(k for k, a in enumerate(acts) if a != 0) + 1  # the final return to the depot
        pickup = (instances.backhaul[b] > 0).tolist()
        for k in range(min(last, r.gates.shape[0])):
            node = acts[k]
            kind = "depot" if node == 0 else ("pickup" if pickup[node] else "delivery")
            for j, name in enumerate(GATE_NAMES):
                rows.append({"variant": instances.variants[b], "instance": b, "step": k + 1,
                             "node": node, "kind": kind, "constraint": name,
                             "gate": float(r.gates[k, b, s, j])})
    return pd.DataFrame(rows)
