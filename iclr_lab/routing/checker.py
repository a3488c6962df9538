"""An independent, plain-Python checker of VRP solutions.

It shares no code with :mod:`iclr_lab.routing.env`: it walks each route in float64 Python arithmetic
and reports every violated constraint, so a bug in the environment's masks cannot hide itself.

Load rules (capacity is ``Q``; demands are checked in integer units ``round(q * Q)``):

* no backhaul / VRPB: the deliveries of a route sum to at most ``Q`` and so do its pickups; with
  backhauls, no delivery follows a pickup in a route (routes of pickups only are allowed, and a
  route may pick up while other deliveries wait for later routes, as in RouteFinder);
* mixed backhauls (MB): ``mb_rule="profile"`` (the default) checks the physical load profile that
  PyVRP checks: the vehicle leaves with all the route's deliveries and the load
  ``deliveries still on board + pickups collected`` stays at most ``Q`` after every stop.
  ``mb_rule="env"`` checks RouteFinder's constructive rule instead (at each stop, cumulative
  deliveries and pickups each at most ``Q`` and the delivery fits beside the pickups on board),
  which is looser: every profile-feasible route passes it, not the converse.

Times: service must start by the window's end (``<=``), early arrival waits, closed routes are back
at the depot by its window's end; open routes have no return arc, in the cost, the length limit or
the time check. Float comparisons allow ``tol``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from iclr_lab.core.validation import check_choice, check_range
from iclr_lab.routing.instances import VRPBatch

__all__ = ["CheckResult", "Violation", "check_solution", "routes_from_actions"]

KINDS = ("index", "missing", "duplicate", "capacity", "backhaul_order", "length", "time_window",
         "non_finite")


@dataclass(frozen=True)
class Violation:
    """One broken constraint: ``kind`` is one of ``index``, ``missing``, ``duplicate``,
    ``capacity``, ``backhaul_order``, ``length``, ``time_window``, ``non_finite`` (a cost that is
    not a finite number: the checker never calls such a solution feasible); ``route`` the route's position
    (-1 for the solution as a whole), ``node`` the customer concerned (-1 if none)."""

    kind: str
    route: int
    node: int
    detail: str


@dataclass(frozen=True)
class CheckResult:
    """Result of :func:`check_solution`: ``feasible`` iff ``violations`` is empty; ``cost`` is the
    total route length (open routes without their return arcs), computed even when infeasible."""

    feasible: bool
    cost: float
    violations: list[Violation] = field(default_factory=list)

    def kinds(self) -> set[str]:
        """The set of violated constraint kinds."""
        return {v.kind for v in self.violations}


def _dist(a: Sequence[float], b: Sequence[float]) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


def routes_from_actions(actions: Sequence[int]) -> list[list[int]]:
    """Split a giant tour (customers separated by depot visits ``0``) into routes."""
    routes: list[list[int]] = [[]]
    for a in actions:
        if int(a) == 0:
            if routes[-1]:
                routes.append([])
        else:
            routes[-1].append(int(a))
    return [r for r in routes if r]


def check_solution(instance: VRPBatch, routes: Sequence[Sequence[int]], *, mb_rule: str = "profile",
                   tol: float = 1e-5) -> CheckResult:
    """Check ``routes`` (lists of customer indices ``1..n``, depot omitted) against one instance.

    Args:
        instance: a :class:`~iclr_lab.routing.instances.VRPBatch` of exactly one instance
            (``batch[i]``).
        routes: the routes; empty routes are ignored.
        mb_rule: ``"profile"`` or ``"env"``, the mixed-backhaul load rule (module docstring).
        tol: slack for float comparisons of times and lengths.

    Returns:
        A :class:`CheckResult` listing every violation with its route and customer.
    """
    if not isinstance(instance, VRPBatch) or instance.batch_size != 1:
        raise ValueError("instance must be a VRPBatch of one instance (use batch[i])")
    check_choice("mb_rule", mb_rule, ("profile", "env"))
    tol = check_range("tol", tol, 0.0)
    locs = [tuple(p) for p in instance.locs[0].double().tolist()]
    n = len(locs) - 1
    cap = instance.capacity
    q = [round(v * cap) for v in instance.linehaul[0].double().tolist()]
    p = [round(v * cap) for v in instance.backhaul[0].double().tolist()]
    tw = instance.time_windows[0].double().tolist()
    svc = instance.service[0].double().tolist()
    limit = float(instance.limit[0])
    is_open = bool(instance.open_route[0])
    mixed = instance.mixed_backhaul
    out: list[Violation] = []
    seen: dict[int, int] = {}
    cost = 0.0
    for r, route in enumerate(routes):
        route = [int(c) for c in route]
        if not route:
            continue
        bad = [c for c in route if not 1 <= c <= n]
        if bad:
            out.append(Violation("index", r, bad[0], f"customer index {bad[0]} not in [1, {n}]"))
            continue
        for c in route:
            if c in seen:
                out.append(Violation("duplicate", r, c, f"customer {c} already served by route {seen[c]}"))
            else:
                seen[c] = r
        # length (and cost): depot -> route -> depot, the return free on open routes
        length = 0.0
        prev = 0
        for c in route:
            length += _dist(locs[prev], locs[c])
            prev = c
        ret = 0.0 if is_open else _dist(locs[prev], locs[0])
        cost += length + ret
        if length + ret > limit + tol:
            out.append(Violation("length", r, -1, f"route length {length + ret:.4f} > limit {limit:.4f}"))
        # load
        deliveries = sum(q[c] for c in route)
        pickups = sum(p[c] for c in route)
        if mixed and mb_rule == "profile":
            load = deliveries
            for c in route:
                load += p[c] - q[c]
                if load > cap:
                    out.append(Violation("capacity", r, c, f"load {load} > {cap} after customer {c}"))
                    break
            if deliveries > cap:
                out.append(Violation("capacity", r, -1, f"deliveries {deliveries} > {cap} at the start"))
        elif mixed:
            u_l = u_b = 0
            for c in route:
                if u_l + q[c] > cap or u_b + p[c] > cap or q[c] > cap - u_b:
                    out.append(Violation("capacity", r, c, f"customer {c} breaks the constructive MB "
                                         f"rule (delivered {u_l}, picked {u_b})"))
                    break
                u_l += q[c]
                u_b += p[c]
        else:
            if deliveries > cap:
                out.append(Violation("capacity", r, -1, f"deliveries {deliveries} > {cap}"))
            if pickups > cap:
                out.append(Violation("capacity", r, -1, f"pickups {pickups} > {cap}"))
            picked = False
            for c in route:
                if p[c] > 0:
                    picked = True
                elif picked and q[c] > 0:
                    out.append(Violation("backhaul_order", r, c, f"delivery {c} after a pickup"))
                    break
        # time windows
        t = 0.0
        prev = 0
        for c in route:
            arrive = t + _dist(locs[prev], locs[c])
            if arrive > tw[c][1] + tol:
                out.append(Violation("time_window", r, c, f"arrival {arrive:.4f} after {tw[c][1]:.4f}"))
                break
            t = max(arrive, tw[c][0]) + svc[c]
            prev = c
        else:
            if not is_open:
                back = t + _dist(locs[prev], locs[0])
                if back > tw[0][1] + tol:
                    out.append(Violation("time_window", r, 0, f"back at the depot at {back:.4f} "
                                         f"after {tw[0][1]:.4f}"))
    if not math.isfinite(cost):
        out.append(Violation("non_finite", -1, -1, f"the total cost {cost} is not finite"))
    missing = sorted(set(range(1, n + 1)) - set(seen))
    if missing:
        out.append(Violation("missing", -1, missing[0],
                             f"{len(missing)} customer(s) not served: {missing[:5]}"))
    return CheckResult(not out, cost, out)
