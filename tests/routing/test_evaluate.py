"""The shipped checkpoints and test-set results: they match the current code, and a re-run agrees."""

from __future__ import annotations

import json

import pytest
import torch

from iclr_lab.routing.checker import check_solution
from iclr_lab.routing.evaluate import SOLVERS, TEST_COUNT, learning_curves, load_costs, test_instances
from iclr_lab.routing.instances import ID_VARIANTS, MB_VARIANTS
from iclr_lab.routing.model import PolicyConfig, solve
from iclr_lab.routing.solvers import nearest_neighbour
from iclr_lab.routing.train import SHIPPED_SEEDS, TrainConfig, load_policy, shipped_path

torch.set_num_threads(1)


@pytest.mark.parametrize("model", ["ccl", "static"])
@pytest.mark.parametrize("seed", SHIPPED_SEEDS)
def test_shipped_checkpoint_matches_architecture_and_record(model: str, seed: int) -> None:
    path = shipped_path(model, seed)
    assert path.stat().st_size <= 5 * 2**20
    meta = json.loads(path.with_suffix(".json").read_text())
    cfg = PolicyConfig(**meta["policy"])
    pol = load_policy(model, seed=seed, config=cfg)  # raises if the weights do not fit the architecture
    assert cfg.decoder == model and not pol.training
    assert TrainConfig(**meta["train"]).seed == seed
    assert meta["step"] == meta["train"]["steps"] and meta["history"]["step"][-1] == meta["step"]


def test_shipped_runs_have_equal_budgets() -> None:
    metas = [json.loads(shipped_path(m, s).with_suffix(".json").read_text())
             for m in ("ccl", "static") for s in SHIPPED_SEEDS]
    keys = ("nodes", "batch", "steps", "lr")
    assert len({tuple(m["train"][k] for k in keys) for m in metas}) == 1
    curves = learning_curves()
    assert set(curves["model"]) == {"ccl", "static"} and curves["cost"].gt(0).all()


def test_shipped_costs_table_is_complete() -> None:
    df = load_costs()
    assert len(df) == TEST_COUNT * len(ID_VARIANTS + MB_VARIANTS)
    assert set(SOLVERS) <= set(df.columns)
    assert df.groupby("variant").size().eq(TEST_COUNT).all()
    assert (df["ood"] == df["variant"].isin(MB_VARIANTS)).all()
    # the reference solver is a strong one: nearest neighbour does not beat it (in distribution, where
    # both respect the same constraints)
    ind = df[~df["ood"]]
    assert (ind["nn"] >= ind["pyvrp"] - 1e-4).all()


@pytest.mark.parametrize("variant", ["CVRP", "OVRPBLTW", "VRPMBL"])
def test_shipped_costs_match_a_rerun(variant: str) -> None:
    df = load_costs().set_index(["variant", "instance"])
    inst = test_instances(variant, count=3)
    nn_cost, _ = nearest_neighbour(inst)
    sol = solve(load_policy("ccl", seed=0), inst, augment=8)
    for i in range(3):
        assert float(nn_cost[i]) == pytest.approx(df.loc[(variant, i), "nn"], rel=1e-5)
        assert float(sol.cost[i]) == pytest.approx(df.loc[(variant, i), "ccl_0"], rel=1e-5)
        assert check_solution(inst[i], sol.routes[i]).cost == pytest.approx(float(sol.cost[i]), rel=1e-5)


def test_test_set_shares_geometry_across_variants() -> None:
    a, b = test_instances("CVRP", count=5), test_instances("OVRPMBLTW", count=5)
    assert torch.equal(a.locs, b.locs)
    assert torch.isinf(a.limit).all() and torch.isfinite(b.limit).all()
    five, full = test_instances("VRPTW", count=5), test_instances("VRPTW")
    assert torch.equal(five.time_windows, full.time_windows[:5])
    assert torch.equal(five.linehaul, full.linehaul[:5])


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="variant"):
        test_instances("VRPX")
    for count in (0, TEST_COUNT + 1):
        with pytest.raises(ValueError, match="count"):
            test_instances("CVRP", count=count)
    with pytest.raises(ValueError, match="seed"):
        load_policy("ccl", seed=3)
    # the message states the shipped seeds as a range (check_choice's listed them only)
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\]"):
        shipped_path("ccl", -1)
    with pytest.raises(TypeError, match="seed"):
        load_policy("ccl", seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model"):
        shipped_path("pomo")
