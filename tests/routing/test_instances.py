"""Instance generation (iclr_lab.routing.instances): RouteFinder's statistics, seeding, errors."""

from __future__ import annotations

import math

import pytest
import torch

from iclr_lab.routing.instances import (
    HORIZON,
    ID_VARIANTS,
    MB_VARIANTS,
    VARIANTS,
    capacity_for,
    generate,
    variant_flags,
)


def test_variant_lists() -> None:
    assert len(ID_VARIANTS) == 16 and len(MB_VARIANTS) == 8 and len(set(VARIANTS)) == 25
    assert {"CVRP", "OVRP", "VRPB", "VRPL", "VRPTW", "OVRPBLTW"} <= set(ID_VARIANTS)
    assert {"VRPMB", "OVRPMBLTW"} <= set(MB_VARIANTS)
    assert variant_flags("OVRPBL") == {"O": True, "B": True, "MB": False, "L": True, "TW": False}
    assert variant_flags("VRPMBTW") == {"O": False, "B": False, "MB": True, "L": False, "TW": True}
    assert variant_flags("CVRP") == {"O": False, "B": False, "MB": False, "L": False, "TW": False}


def test_capacity_rule() -> None:
    assert [capacity_for(n) for n in (10, 20, 50, 100)] == [30, 30, 40, 50]


@pytest.mark.parametrize("variant", VARIANTS)
def test_deterministic_and_attributes(variant: str) -> None:
    a, b = generate(variant, 20, 64, seed=3), generate(variant, 20, 64, seed=3)
    c = generate(variant, 20, 64, seed=4)
    for f in ("locs", "linehaul", "backhaul", "time_windows", "service", "limit", "open_route"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f
    assert not torch.equal(a.locs, c.locs)
    assert a.locs.shape == (64, 21, 2) and a.capacity == 30
    if variant == "mixed":
        # each attribute kept with probability 1/2, independently per instance
        assert 10 < len(set(a.variants)) <= 16 and all(v in ID_VARIANTS for v in a.variants)
        return
    fl = variant_flags(variant)
    assert set(a.variants) == {variant}
    assert bool(a.open_route.all()) == fl["O"] and bool(a.open_route.any()) == fl["O"]
    assert bool(torch.isfinite(a.limit).all()) == fl["L"]
    assert bool(torch.isfinite(a.time_windows[:, 1:, 1]).all()) == fl["TW"]
    has_pickups = bool((a.backhaul > 0).any())
    assert has_pickups == (fl["B"] or fl["MB"])
    assert a.mixed_backhaul == fl["MB"]


def test_shared_geometry_across_variants() -> None:
    cvrp, vrpb = generate("CVRP", 20, 32, seed=0), generate("VRPB", 20, 32, seed=0)
    assert torch.equal(cvrp.locs, vrpb.locs)
    # removing B turns every pickup into a delivery of the same size
    assert torch.allclose(cvrp.linehaul, vrpb.linehaul + vrpb.backhaul)


def test_generation_statistics() -> None:
    inst = generate("VRPBLTW", 20, 2000, seed=0, dtype=torch.float64)
    units = torch.round((inst.linehaul + inst.backhaul)[:, 1:] * 30)
    assert units.min() == 1 and units.max() == 9
    assert abs(float(units.mean()) - 5.0) < 0.05  # uniform on 1..9
    frac_back = float((inst.backhaul[:, 1:] > 0).double().mean())
    assert abs(frac_back - 0.2) < 0.01
    # exactly one of delivery / pickup per customer
    assert bool(((inst.linehaul[:, 1:] > 0) ^ (inst.backhaul[:, 1:] > 0)).all())
    s, tw = inst.service[:, 1:], inst.time_windows[:, 1:]
    assert 0.15 <= float(s.min()) and float(s.max()) <= 0.18
    w = tw[..., 1] - tw[..., 0]
    assert 0.18 - 1e-9 <= float(w.min()) and float(w.max()) <= 0.2 + 1e-9
    d0 = (inst.locs[:, 1:] - inst.locs[:, :1]).norm(dim=-1)
    # reachable straight from the depot, and back by the horizon after service
    assert bool((tw[..., 0] >= d0 - 1e-9).all())
    assert bool((tw[..., 1] + s + d0 <= HORIZON + 1e-9).all())
    lo = 2 * d0.max(-1).values
    assert bool((inst.limit >= lo - 1e-9).all())
    assert bool((inst.limit <= torch.clamp(lo + 1e-6, min=2.8) + 1e-9).all())
    assert float(inst.time_windows[:, 0, 1].max()) == HORIZON


def test_transform_keeps_distances() -> None:
    inst = generate("CVRP", 10, 4, seed=0, dtype=torch.float64)
    for fn in ("id", "x", "y", "xy", "t", "tx", "ty", "txy"):
        assert torch.allclose(inst.transform(fn).distances(), inst.distances())
    with pytest.raises(ValueError, match="fn"):
        inst.transform("rot")


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="variant"):
        generate("VRPX", 20, 1, 0)
    with pytest.raises(ValueError, match=r"n must be an integer in \[2, inf\]"):
        generate("CVRP", 1, 1, 0)
    with pytest.raises(ValueError, match="batch"):
        generate("CVRP", 20, 0, 0)
    with pytest.raises(TypeError, match="seed"):
        generate("CVRP", 20, 1, 1.5)
    with pytest.raises(ValueError, match="variant"):
        variant_flags("mixed")
    assert math.isinf(float(generate("CVRP", 5, 1, 0).limit[0]))


@pytest.mark.parametrize(("field", "index", "value", "match"), [
    ("locs", (0, 3, 0), math.nan, "locs must be finite"),
    ("locs", (0, 3, 1), math.inf, "locs must be finite"),
    ("linehaul", (0, 2), -0.1, "linehaul must be in"),
    ("linehaul", (0, 2), math.nan, "linehaul must be in"),
    ("backhaul", (0, 2), 1.5, "backhaul must be in"),
    ("time_windows", (0, 4, 1), math.nan, "time_windows"),
    ("time_windows", (0, 4, 0), 10.0, "time_windows"),  # e > l
    ("service", (0, 4), -1.0, "service"),
    ("limit", (0,), math.nan, "limit"),
])
def test_bad_instance_data_is_refused_at_construction(field, index, value, match) -> None:
    from dataclasses import replace

    good = generate("VRPBLTW", 10, 2, seed=0)
    t = getattr(good, field).clone()
    t[index] = value
    if field == "time_windows" and index[-1] == 0:
        t[index[:-1] + (1,)] = 1.0
    with pytest.raises(ValueError, match=match):
        replace(good, **{field: t})


def test_bad_instance_shapes_and_names_are_refused() -> None:
    from dataclasses import replace

    good = generate("CVRP", 10, 2, seed=0)
    with pytest.raises(ValueError, match=r"linehaul must have shape \[2, 11\]"):
        replace(good, linehaul=good.linehaul[:, :5])
    with pytest.raises(ValueError, match="variants must name"):
        replace(good, variants=("CVRP",))
    with pytest.raises(ValueError, match="locs must be a"):
        replace(good, locs=good.locs[0])
    # an empty batch named its first mismatching field (linehaul), not locs
    with pytest.raises(ValueError, match="locs must hold at least one instance"):
        replace(good, locs=good.locs[:0])
    # a float open_route (NaN, say) was taken as it was
    with pytest.raises(TypeError, match="open_route must be a bool tensor"):
        replace(good, open_route=torch.full((2,), math.nan))
    with pytest.raises(TypeError, match="locs must be a floating-point tensor"):
        replace(good, locs=good.locs.long())


def test_the_checker_never_calls_a_non_finite_solution_feasible() -> None:
    from iclr_lab.routing.checker import check_solution

    inst = generate("CVRP", 10, 1, seed=0)
    routes = [[c] for c in range(1, 11)]
    assert check_solution(inst, routes).feasible
    inst.locs[0, 3, 0] = math.nan  # mutated after construction, behind the validation's back
    result = check_solution(inst, routes)
    assert not result.feasible and "non_finite" in result.kinds()
