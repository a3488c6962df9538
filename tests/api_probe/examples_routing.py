"""Probe examples for ``iclr_lab.routing`` (see ``api_probe.examples``).

Tiny instances (3 customers) and a tiny policy (width 8, one layer), so that every probe call is
quick; torch and the package are imported inside the functions, so the table is cheap to import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _batch(batch: int = 2, variant: str = "CVRP") -> Any:
    from iclr_lab.routing.instances import generate

    return generate(variant, 3, batch, seed=0)


def _policy(decoder: str = "ccl") -> Any:
    from iclr_lab.routing.model import PolicyConfig, RoutingPolicy

    return RoutingPolicy(PolicyConfig(decoder=decoder, dim=8, heads=1, layers=1, ffn=8))


def _vrp_batch() -> dict[str, Any]:
    from dataclasses import fields

    b = _batch(2, "VRPBLTW")
    return {f.name: getattr(b, f.name) for f in fields(b)}


EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {
    "iclr_lab.routing.ccl_vrp.gate_trace": lambda: {"pol": _policy(), "instances": _batch()},
    "iclr_lab.routing.ccl_vrp.live_sample": lambda: {"instances": list(range(10)), "per_variant": 2,
                                                     "seed": 0},
    "iclr_lab.routing.ccl_vrp.test_instance": lambda: {"variant": "CVRP", "instance": 0},
    "iclr_lab.routing.checker.check_solution": lambda: {"instance": _batch(1), "routes": [[1, 2, 3]]},
    "iclr_lab.routing.env.MultiTaskVRPEnv": lambda: {"instances": _batch()},
    "iclr_lab.routing.evaluate.test_instances": lambda: {"variant": "CVRP", "count": 2},
    "iclr_lab.routing.instances.VRPBatch": _vrp_batch,
    "iclr_lab.routing.instances.capacity_for": lambda: {"n": 5},
    "iclr_lab.routing.instances.generate": lambda: {"variant": "CVRP", "n": 3, "batch": 2, "seed": 0},
    "iclr_lab.routing.model.rollout": lambda: {"policy": _policy(), "instances": _batch()},
    "iclr_lab.routing.model.solve": lambda: {"policy": _policy(), "instances": _batch(), "augment": 1},
    "iclr_lab.routing.model.tsnr_flops": lambda: {"num_nodes": 4, "num_starts": 3},
    "iclr_lab.routing.probe.visit_state_probe": lambda: {"policy": _policy(), "instances": _batch()},
    "iclr_lab.routing.solvers.pyvrp_solve": lambda: {"instance": _batch(1), "iterations": 10},
    "iclr_lab.routing.train.load_policy": lambda: {"path_or_name": "ccl"},
    "iclr_lab.routing.train.shipped_path": lambda: {"model": "ccl"},
}

#: (public path, parameter or "*", probe label or "*") -> why the probe's finding is right as it is
ALLOW: dict[tuple[str, str, str], str] = {}
