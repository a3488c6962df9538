"""Reference solvers: a nearest-neighbour construction and PyVRP (pinned in ``requirements.txt``).

PyVRP works on integers, so coordinates-derived distances, times and limits are multiplied by
``SCALE = 10**4`` and rounded, demands are the integers 1..9 with capacity ``Q`` (RouteFinder's
recipe, with one change: travel and service times, distances and earliest starts are rounded up,
latest starts and limits down, so a route PyVRP finds feasible in integers is feasible in floats
too; plain rounding can let a tight route through by a few 1e-4). Its routes are re-evaluated in
float by :func:`~iclr_lab.routing.checker.check_solution`, so every reported cost is in the
instance's own units. The conversions:

* open routes (O): every arc into the depot has distance and duration 0;
* backhauls (B): clients get a delivery or a pickup, and pickup -> delivery arcs are forbidden with a
  huge distance and duration (so pickups come last in a route); mixed backhauls (MB): the same
  without forbidden arcs, PyVRP then checking the true load profile;
* limit (L): ``VehicleType.max_distance``;
* time windows (TW): client windows and service durations, the depot's window ``[0, 4.6]`` as the
  vehicles' shift; travel duration equals distance;
* an unlimited fleet: ``n`` vehicles.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from iclr_lab.core.validation import check_int, check_range, check_seed
from iclr_lab.routing.checker import check_solution, routes_from_actions
from iclr_lab.routing.env import MultiTaskVRPEnv
from iclr_lab.routing.instances import VRPBatch

__all__ = ["PYVRP_VERSION", "SCALE", "nearest_neighbour", "pyvrp_solve"]

SCALE = 10_000
PYVRP_VERSION = "0.14.1"
_FORBIDDEN = 10**9  # distance of a forbidden arc: far above any feasible route's scaled length


def nearest_neighbour(instances: VRPBatch) -> tuple[torch.Tensor, list[list[list[int]]]]:
    """Greedy construction: from the current node go to the nearest feasible customer; back to the
    depot only when no customer is feasible.

    Returns:
        ``(costs [B], routes)`` with ``routes[b]`` the list of routes of instance ``b``.
    """
    env = MultiTaskVRPEnv(instances, num_starts=1)
    state = env.reset()
    actions = []
    for _ in range(env.max_steps()):
        if bool(state.done.all()):
            break
        mask = env.mask(state)
        d = torch.gather(env.dist, 1, state.current[..., None].expand(-1, -1, env.num_nodes))
        score = torch.where(mask, d, math.inf)
        score[..., 0] = torch.where(mask[..., 1:].any(-1), math.inf, 0.0)  # depot only as a last resort
        action = score.argmin(-1)
        state = env.step(state, action)
        actions.append(action)
    tours = torch.stack(actions, -1)[:, 0]
    return state.cost[:, 0].clone(), [routes_from_actions(t.tolist()) for t in tours]


def _model(instance: VRPBatch) -> Any:
    import pyvrp

    locs = instance.locs[0].double()
    n = locs.shape[0] - 1
    cap = instance.capacity
    q = [round(v * cap) for v in instance.linehaul[0].double().tolist()]
    p = [round(v * cap) for v in instance.backhaul[0].double().tolist()]
    tw = instance.time_windows[0].double()
    svc = instance.service[0].double().tolist()
    limit = float(instance.limit[0])
    is_open = bool(instance.open_route[0])
    has_tw = bool(torch.isfinite(tw[1:, 1]).any())

    def up(x: float) -> int:  # conservative for travel, service, earliest starts
        return math.ceil(x * SCALE - 1e-9)

    def down(x: float) -> int:  # conservative for latest starts and limits
        return math.floor(x * SCALE + 1e-9)

    m = pyvrp.Model()
    depot_late = down(float(tw[0, 1])) if has_tw else pyvrp.constants.MAX_VALUE
    where = [m.add_location(float(locs[c, 0]), float(locs[c, 1])) for c in range(n + 1)]
    depot = m.add_depot(where[0], tw_early=0, tw_late=depot_late)
    m.add_vehicle_type(num_available=n, capacity=cap, start_depot=depot, end_depot=depot, tw_early=0,
                       tw_late=depot_late,
                       max_distance=down(limit) if math.isfinite(limit) else pyvrp.constants.MAX_VALUE)
    for c in range(1, n + 1):
        late = float(tw[c, 1])
        m.add_client(
            where[c], delivery=q[c], pickup=p[c],
            service_duration=up(svc[c]), tw_early=up(float(tw[c, 0])),
            tw_late=down(late) if math.isfinite(late) else pyvrp.constants.MAX_VALUE)
    dist = torch.cdist(locs, locs)
    for i in range(n + 1):
        for j in range(n + 1):
            if i == j:
                continue
            d = up(float(dist[i, j]))
            if j == 0 and is_open:
                d = 0
            if not instance.mixed_backhaul and p[i] > 0 and q[j] > 0:
                d = _FORBIDDEN
            m.add_edge(where[i], where[j], distance=d, duration=d)
    return m


def pyvrp_solve(instance: VRPBatch, time_limit: float = 1.0, *, iterations: int | None = None,
                seed: int = 0) -> tuple[float, list[list[int]]]:
    """Solve one instance with PyVRP's iterated local search for ``time_limit`` seconds.

    ``time_limit`` is wall-clock time, so on a loaded machine the search gets less CPU and may
    return a worse solution; pass ``iterations`` to stop after a fixed number of iterations
    instead (reproducible whatever the load; both given: whichever comes first).

    Args:
        instance: a batch of one instance (``batch[i]``).
        time_limit: seconds of search, in ``(0, 600]``.
        iterations: optional iteration budget, at least 1.
        seed: PyVRP's random seed, an integer in ``[0, 2**32 - 1]``.

    Returns:
        ``(cost, routes)``: the float cost re-evaluated by the independent checker, and the routes
        (customer indices). Raises ``RuntimeError`` if PyVRP's best solution is infeasible or the
        checker rejects it.
    """
    from pyvrp.stop import MaxIterations, MaxRuntime, MultipleCriteria

    if not isinstance(instance, VRPBatch) or instance.batch_size != 1:
        raise ValueError("instance must be a VRPBatch of one instance (use batch[i])")
    time_limit = check_range("time_limit", time_limit, 0.0, 600.0, low_open=True)
    iterations = None if iterations is None else check_int("iterations", iterations, 1)
    seed = check_seed(seed)
    stop: Any = MaxRuntime(time_limit)
    if iterations is not None:
        stop = MultipleCriteria([stop, MaxIterations(iterations)])
    res = _model(instance).solve(stop, seed=seed, collect_stats=False, display=False)
    if not res.best.is_feasible():
        raise RuntimeError("PyVRP found no feasible solution within the time limit")
    routes = [[int(a.idx) + 1 for a in r.schedule() if a.is_client()] for r in res.best.routes()]
    # PyVRP enforces the physical load profile, so its mixed-backhaul routes pass the strict rule
    check = check_solution(instance, routes, mb_rule="profile")
    if not check.feasible:
        raise RuntimeError(f"PyVRP's solution fails the checker: {check.violations[:3]}")
    return check.cost, routes
