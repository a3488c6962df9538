"""The policy: RGCR gates, TSNR's shared re-embedding, decoding feasibility, augmentation."""

from __future__ import annotations

import pytest
import torch

from iclr_lab.routing.checker import check_solution, routes_from_actions
from iclr_lab.routing.env import MultiTaskVRPEnv
from iclr_lab.routing.instances import ID_VARIANTS, generate
from iclr_lab.routing.model import PolicyConfig, RoutingPolicy, rollout, solve, tsnr_flops

torch.set_num_threads(1)
SMALL = {"dim": 16, "heads": 2, "layers": 1, "ffn": 32}


def _policy(decoder: str = "ccl", seed: int = 0) -> RoutingPolicy:
    torch.manual_seed(seed)
    return RoutingPolicy(PolicyConfig(decoder=decoder, **SMALL))


@pytest.mark.parametrize("decoder", ["ccl", "static"])
def test_sampled_and_greedy_tours_pass_the_checker(decoder: str) -> None:
    pol = _policy(decoder)
    inst = generate("mixed", 10, 16, seed=0)
    torch.manual_seed(1)
    for greedy in (False, True):
        r = rollout(pol, inst, greedy=greedy)
        for b in range(16):
            for s in range(10):
                res = check_solution(inst[b], routes_from_actions(r.actions[b, s].tolist()))
                assert res.feasible, res.violations
                assert res.cost == pytest.approx(float(r.cost[b, s]), abs=1e-4)
        assert bool(torch.isfinite(r.log_prob).all())


def test_gates_of_absent_constraints_are_exactly_zero() -> None:
    pol = _policy("ccl").train()  # training mode: the gate noise is on, the zeros must survive it
    names = ("B", "L", "O", "TW")
    for variant in ("CVRP", "OVRP", "VRPBTW", "OVRPLTW", "VRPBLTW", "OVRPBLTW"):
        inst = generate(variant, 10, 4, seed=2)
        r = rollout(pol, inst, record=True)
        assert r.gates is not None
        flags = inst.flags()[:, [1, 2, 0, 3]]
        for k, name in enumerate(names):
            g = r.gates[..., k]
            if name in variant.replace("VRP", "", 1) or (name == "O" and variant.startswith("O")):
                assert bool((g[:, flags[:, k] > 0] > 0).all()), (variant, name)
            else:
                assert bool((g == 0).all()), (variant, name)


def test_static_decoder_keeps_embeddings_and_ccl_changes_them() -> None:
    inst = generate("VRPLTW", 8, 2, seed=3)
    r_static = rollout(_policy("static").eval(), inst, greedy=True, record=True)
    r_ccl = rollout(_policy("ccl").eval(), inst, greedy=True, record=True)
    assert r_static.embeddings is not None and r_ccl.embeddings is not None
    assert torch.equal(r_static.embeddings[0], r_static.embeddings[-1])
    assert not torch.allclose(r_ccl.embeddings[0], r_ccl.embeddings[-1])
    # P_ts = 0 switches TSNR off: the embeddings never move
    r_off = rollout(_policy("ccl").eval(), inst, greedy=True, record=True, p_reembed=0.0)
    assert r_off.embeddings is not None and torch.equal(r_off.embeddings[0], r_off.embeddings[-1])


def test_shared_reembedding_costs_fewer_flops() -> None:
    cfg = PolicyConfig()
    for n in (11, 21, 51):
        shared, per_traj = tsnr_flops(n, n - 1, cfg), tsnr_flops(n, n - 1, cfg, shared=False)
        assert 0 < shared < per_traj
        assert tsnr_flops(n, n - 1, cfg) == shared  # a count, not a timing
    # the count matches the closed form, attention's two products included
    n, s, d, f = 21, 20, cfg.dim, cfg.ffn

    def closed(t: int, k: int) -> int:
        return 2 * t * (2 * n * d * d + 2 * k * d * d + 2 * n * k * d + 3 * n * d * f)

    assert tsnr_flops(n, s, cfg) == closed(1, s + n)
    assert tsnr_flops(n, s, cfg, shared=False) == closed(s, 1 + n)
    # the ratio grows with the number of trajectories, roughly like S / 2 or more
    assert tsnr_flops(51, 50, shared=False) / tsnr_flops(51, 50) > 10


def test_solve_augmentation_never_hurts_and_routes_match_costs() -> None:
    pol = _policy("ccl").eval()
    inst = generate("OVRPBTW", 10, 4, seed=5)
    one, eight = solve(pol, inst, augment=1), solve(pol, inst, augment=8)
    assert bool((eight.cost <= one.cost + 1e-6).all())
    for b in range(4):
        res = check_solution(inst[b], eight.routes[b])
        assert res.feasible and res.cost == pytest.approx(float(eight.cost[b]), abs=1e-4)
    assert pol.training is False


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="decoder"):
        PolicyConfig(decoder="mtpomo")
    with pytest.raises(ValueError, match="dim must be a multiple of heads"):
        PolicyConfig(dim=10, heads=4)
    with pytest.raises(ValueError, match="p_reembed"):
        PolicyConfig(p_reembed=1.5)
    pol = _policy()
    inst = generate("CVRP", 5, 1, seed=0)
    with pytest.raises(ValueError, match="augment"):
        solve(pol, inst, augment=9)
    with pytest.raises(ValueError, match="num_starts"):
        rollout(pol, inst, num_starts=0)
    with pytest.raises(ValueError, match="num_nodes"):
        tsnr_flops(1, 1)
    # solve checks its own p_reembed before decoding (it was found only inside rollout)
    with pytest.raises(ValueError, match=r"p_reembed must be in \[0, 1\]"):
        solve(pol, inst, p_reembed=float("nan"))
    with pytest.raises(TypeError, match="instances"):
        rollout(pol, inst.locs)  # type: ignore[arg-type]
    assert MultiTaskVRPEnv(inst, 3).start_nodes().tolist() == [[1, 2, 3]]
    assert len(ID_VARIANTS) == 16
