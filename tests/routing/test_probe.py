"""The visit-state probe (iclr_lab.routing.probe)."""

from __future__ import annotations

import pytest
import torch

from iclr_lab.routing.instances import generate
from iclr_lab.routing.model import PolicyConfig, RoutingPolicy
from iclr_lab.routing.probe import visit_state_probe

torch.set_num_threads(1)
SMALL = {"dim": 16, "heads": 2, "layers": 1, "ffn": 32}


def test_static_decoder_has_no_gain_and_r2_is_at_most_one() -> None:
    torch.manual_seed(0)
    inst = generate("mixed", 10, 8, seed=1)
    res = visit_state_probe(RoutingPolicy(PolicyConfig(decoder="static", **SMALL)), inst)
    assert res.chain == pytest.approx(res.static, abs=1e-12) and res.gain == pytest.approx(0.0, abs=1e-12)
    assert res.static <= 1.0
    torch.manual_seed(0)
    ccl = RoutingPolicy(PolicyConfig(decoder="ccl", **SMALL))
    on, off = visit_state_probe(ccl, inst), visit_state_probe(ccl, inst, p_reembed=0.0)
    assert on.chain <= 1.0 and off.gain == pytest.approx(0.0, abs=1e-12)


def test_probe_bad_inputs() -> None:
    pol = RoutingPolicy(PolicyConfig(**SMALL))
    with pytest.raises(ValueError, match="instances"):
        visit_state_probe(pol, generate("CVRP", 5, 1, seed=0))
    with pytest.raises(ValueError, match="ridge"):
        visit_state_probe(pol, generate("CVRP", 5, 2, seed=0), ridge=0.0)
    with pytest.raises(ValueError, match="p_reembed"):
        visit_state_probe(pol, generate("CVRP", 5, 2, seed=0), p_reembed=-1.0)
