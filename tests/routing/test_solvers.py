"""Reference solvers: nearest neighbour and PyVRP (skipped when PyVRP is not installed)."""

from __future__ import annotations

import pytest

from iclr_lab.routing.checker import check_solution
from iclr_lab.routing.instances import ID_VARIANTS, MB_VARIANTS, generate
from iclr_lab.routing.solvers import nearest_neighbour, pyvrp_solve


@pytest.mark.parametrize("variant", ID_VARIANTS + MB_VARIANTS)
def test_nearest_neighbour_is_feasible(variant: str) -> None:
    inst = generate(variant, 20, 8, seed=0)
    costs, routes = nearest_neighbour(inst)
    rule = "env" if inst.mixed_backhaul else "profile"
    for b in range(8):
        res = check_solution(inst[b], routes[b], mb_rule=rule)
        assert res.feasible, res.violations
        assert res.cost == pytest.approx(float(costs[b]), abs=1e-4)


@pytest.mark.parametrize("variant", ["CVRP", "OVRPB", "VRPBLTW", "OVRPLTW", "VRPMBTW", "VRPL"])
def test_pyvrp_passes_the_checker_and_beats_nearest_neighbour(variant: str) -> None:
    pytest.importorskip("pyvrp")
    inst = generate(variant, 12, 2, seed=1)
    nn_costs, _ = nearest_neighbour(inst)
    for b in range(2):
        cost, routes = pyvrp_solve(inst[b], time_limit=0.1)
        res = check_solution(inst[b], routes)  # the strict load profile, also for MB
        assert res.feasible and res.cost == pytest.approx(cost)
        assert cost <= float(nn_costs[b]) + 1e-6


def test_pyvrp_open_route_and_backhaul_conversions() -> None:
    pytest.importorskip("pyvrp")
    # open routes are cheaper than closed ones on the same geometry; backhaul order is kept
    closed, opened = generate("VRPB", 10, 1, seed=3), generate("OVRPB", 10, 1, seed=3)
    c_cost, _ = pyvrp_solve(closed, 0.1)
    o_cost, o_routes = pyvrp_solve(opened, 0.1)
    assert o_cost < c_cost
    assert "backhaul_order" not in check_solution(opened, o_routes).kinds()


def test_pyvrp_bad_inputs() -> None:
    pytest.importorskip("pyvrp")
    inst = generate("CVRP", 5, 2, seed=0)
    with pytest.raises(ValueError, match="instance"):
        pyvrp_solve(inst, 0.1)
    with pytest.raises(ValueError, match="time_limit"):
        pyvrp_solve(inst[0], 0.0)
    with pytest.raises(ValueError, match="iterations"):
        pyvrp_solve(inst[0], 1.0, iterations=0)
    # the seed went to PyVRP unchecked: -1 was PyVRP's own error, None its TypeError
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, "):
        pyvrp_solve(inst[0], 1.0, seed=-1)
    with pytest.raises(TypeError, match="seed"):
        pyvrp_solve(inst[0], 1.0, seed=None)  # type: ignore[arg-type]


def test_pyvrp_iteration_budget_is_reproducible() -> None:
    pytest.importorskip("pyvrp")
    inst = generate("VRPBLTW", 15, 1, seed=4)
    a = pyvrp_solve(inst, 60.0, iterations=300)
    b = pyvrp_solve(inst, 60.0, iterations=300)
    assert a == b
