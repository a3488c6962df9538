"""The environment's masks against the independent checker, and the checker's violations."""

from __future__ import annotations

import pytest
import torch

from iclr_lab.routing.checker import check_solution, routes_from_actions
from iclr_lab.routing.env import MultiTaskVRPEnv
from iclr_lab.routing.instances import VARIANTS, generate

ALL = VARIANTS[:-1]  # 16 in-distribution + 8 mixed-backhaul variants


def _random_rollout(variant: str, n: int, batch: int, starts: int, seed: int):
    inst = generate(variant, n, batch, seed=seed)
    env = MultiTaskVRPEnv(inst, starts)
    gen = torch.Generator().manual_seed(seed)
    state = env.step(env.reset(), env.start_nodes())
    actions = [env.start_nodes()]
    states = []
    while not bool(state.done.all()):
        mask = env.mask(state)
        assert bool(mask.any(-1).all()), "a trajectory has no feasible move"
        states.append((state, mask))
        a = torch.multinomial(mask.float().reshape(-1, mask.shape[-1]), 1, generator=gen)
        a = a.reshape(mask.shape[:2])
        state = env.step(state, a)
        actions.append(a)
    return inst, env, torch.stack(actions, -1), state, states


@pytest.mark.parametrize("variant", ALL)
def test_every_env_solution_passes_the_checker(variant: str) -> None:
    inst, _, tours, final, _ = _random_rollout(variant, 12, 6, 4, seed=7)
    rule = "env" if inst.mixed_backhaul else "profile"
    for b in range(6):
        for s in range(4):
            res = check_solution(inst[b], routes_from_actions(tours[b, s].tolist()), mb_rule=rule)
            assert res.feasible, (variant, res.violations)
            assert res.cost == pytest.approx(float(final.cost[b, s]), abs=1e-4)


@pytest.mark.parametrize("variant", ["VRPBLTW", "OVRPBLTW", "VRPMBLTW", "OVRPMBL", "CVRP", "VRPLTW"])
def test_mask_equals_checker_on_every_candidate(variant: str) -> None:
    """For random partial solutions, customer j is masked feasible iff appending it to the current
    route leaves the partial solution feasible for the checker (ignoring unserved customers)."""
    inst, env, tours, _, states = _random_rollout(variant, 10, 3, 2, seed=11)
    rule = "env" if inst.mixed_backhaul else "profile"
    for t, (_, mask) in enumerate(states[::3]):
        step = 3 * t + 1  # states[k] is the state after k + 1 actions
        for b in range(3):
            for s in range(2):
                prefix = routes_from_actions(tours[b, s, :step].tolist())
                ends_at_depot = int(tours[b, s, step - 1]) == 0
                for j in range(1, env.num_nodes):
                    if ends_at_depot or not prefix:
                        routes = [*prefix, [j]]
                    else:
                        routes = [*prefix[:-1], prefix[-1] + [j]]
                    res = check_solution(inst[b], routes, mb_rule=rule)
                    ok = not (res.kinds() - {"missing"})
                    assert ok == bool(mask[b, s, j]), (variant, b, s, j, res.violations)


def test_mb_profile_is_stricter_than_the_env_rule() -> None:
    inst, _, tours, _, _ = _random_rollout("VRPMB", 20, 16, 8, seed=2)
    n_env = n_prof = 0
    for b in range(16):
        for s in range(8):
            routes = routes_from_actions(tours[b, s].tolist())
            env_ok = check_solution(inst[b], routes, mb_rule="env").feasible
            prof_ok = check_solution(inst[b], routes, mb_rule="profile").feasible
            assert env_ok and (env_ok or not prof_ok)
            n_env += env_ok
            n_prof += prof_ok
    assert n_prof <= n_env


def _one(variant: str, **kw):
    return generate(variant, 8, 1, seed=kw.get("seed", 0), dtype=torch.float64)


def test_checker_catches_each_violation() -> None:
    inst = _one("CVRP")
    every = [[c] for c in range(1, 9)]
    assert check_solution(inst, every).feasible
    dup = check_solution(inst, [[1, 2], [2], [3], [4], [5], [6], [7], [8]])
    assert dup.kinds() == {"duplicate"} and dup.violations[0].node == 2
    assert check_solution(inst, [[c] for c in range(1, 8)]).kinds() == {"missing"}
    assert check_solution(inst, [[0, 1], *every[1:]]).kinds() >= {"index"}
    # capacity: a demand too large for one vehicle
    big = generate("CVRP", 40, 1, seed=0)
    assert "capacity" in check_solution(big, [list(range(1, 41))]).kinds()
    # backhaul order: a delivery after a pickup in one route
    vb = generate("VRPB", 20, 1, seed=1)
    picks = [c for c in range(1, 21) if float(vb.backhaul[0, c]) > 0]
    drops = [c for c in range(1, 21) if float(vb.linehaul[0, c]) > 0]
    rest = [[c] for c in range(1, 21) if c not in (picks[0], drops[0])]
    assert check_solution(vb, [[drops[0], picks[0]], *rest]).feasible
    res = check_solution(vb, [[picks[0], drops[0]], *rest])
    assert res.kinds() == {"backhaul_order"} and res.violations[0].node == drops[0]
    # length limit: one route through every customer is longer than L
    vl = generate("VRPL", 20, 1, seed=0)
    res = check_solution(vl, [list(range(1, 21))])
    assert "length" in res.kinds()
    # time window: the farthest-late customer visited after a long detour
    vt = generate("VRPTW", 20, 1, seed=0)
    order = sorted(range(1, 21), key=lambda c: -float(vt.time_windows[0, c, 1]))
    assert "time_window" in check_solution(vt, [order]).kinds()
    assert check_solution(vt, [[c] for c in range(1, 21)]).feasible


def test_open_routes_cost_no_return() -> None:
    closed, opened = generate("CVRP", 6, 1, seed=0), generate("OVRP", 6, 1, seed=0)
    routes = [[c] for c in range(1, 7)]
    d0 = closed.distances()[0, 0, 1:]
    assert check_solution(closed, routes).cost == pytest.approx(float(2 * d0.sum()), rel=1e-6)
    assert check_solution(opened, routes).cost == pytest.approx(float(d0.sum()), rel=1e-6)


def test_checker_bad_inputs() -> None:
    inst = generate("CVRP", 5, 2, seed=0)
    with pytest.raises(ValueError, match="instance"):
        check_solution(inst, [[1, 2, 3, 4, 5]])
    with pytest.raises(ValueError, match="mb_rule"):
        check_solution(inst[0], [[1, 2, 3, 4, 5]], mb_rule="loose")
    with pytest.raises(ValueError, match="num_starts"):
        MultiTaskVRPEnv(inst, 0)
    with pytest.raises(TypeError, match="instances"):
        MultiTaskVRPEnv(inst.locs)  # type: ignore[arg-type]


def test_features_are_finite() -> None:
    inst = generate("mixed", 20, 32, seed=0)
    env = MultiTaskVRPEnv(inst, 4)
    state = env.step(env.reset(), env.start_nodes())
    for f in (env.node_features(), env.global_features(), env.context_features(state)):
        assert bool(torch.isfinite(f).all())
    assert env.node_features().shape == (32, 21, 7) and env.global_features().shape == (32, 5)


def test_mb_rules_differ_on_an_early_pickup() -> None:
    """A pickup of 9 before deliveries of 27: the constructive rule (and the env's mask) accepts
    it, the physical load profile (36 > 30 after the pickup) does not; served last it is fine."""
    from dataclasses import replace

    base = generate("VRPMB", 4, 1, seed=0, dtype=torch.float64)
    inst = replace(base, linehaul=torch.tensor([[0, 0, 9, 9, 9]]) / 30.0,
                   backhaul=torch.tensor([[0, 9, 0, 0, 0]]) / 30.0)
    early, late = [[1, 2, 3, 4]], [[2, 3, 4, 1]]
    assert check_solution(inst, early, mb_rule="env").feasible
    res = check_solution(inst, early, mb_rule="profile")
    assert res.kinds() == {"capacity"} and res.violations[0].node == 1
    assert check_solution(inst, late, mb_rule="profile").feasible
    env = MultiTaskVRPEnv(inst, 1)
    state = env.reset()
    for node in early[0]:
        assert bool(env.mask(state)[0, 0, node])
        state = env.step(state, torch.tensor([[node]]))


@pytest.mark.parametrize(("action", "error", "match"), [
    (torch.full((2, 3), 11), ValueError, r"indices in \[0, 10\]"),
    (torch.full((2, 3), -1), ValueError, r"indices in \[0, 10\]"),
    (torch.ones(2, 3), TypeError, "integer"),
    (torch.ones(6, dtype=torch.long), ValueError, r"shape \[2, 3\]"),
    ([[1, 2, 3], [1, 2, 3]], TypeError, "integer"),
])
def test_bad_actions_are_refused_with_a_clear_error(action, error, match) -> None:
    env = MultiTaskVRPEnv(generate("CVRP", 10, 2, seed=0), num_starts=3)
    with pytest.raises(error, match=match):
        env.step(env.reset(), action)
