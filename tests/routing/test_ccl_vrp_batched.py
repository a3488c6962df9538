"""What the ccl_vrp chapter computes once and reads twice equals what it used to compute again: the
recorded identity rollout of ``solve(record=True)`` (read by the probe and the drift) and the
shipped FLOP counts of one TSNR step (counted again here)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from pandas.testing import assert_frame_equal

from iclr_lab.routing.ccl_vrp import experiments as ex
from iclr_lab.routing.evaluate import count_flops, load_flops
from iclr_lab.routing.instances import generate
from iclr_lab.routing.model import PolicyConfig, RoutingPolicy, rollout, solve
from iclr_lab.routing.probe import visit_state_probe

torch.set_num_threads(1)
SMALL = {"dim": 16, "heads": 2, "layers": 1, "ffn": 32}


@pytest.mark.parametrize("decoder", ["ccl", "static"])
def test_recorded_identity_rollout_is_the_rollout_and_changes_no_solution(decoder: str) -> None:
    torch.manual_seed(0)
    pol = RoutingPolicy(PolicyConfig(decoder=decoder, **SMALL)).eval()
    inst = generate("mixed", 8, 6, seed=2)
    plain, rec = solve(pol, inst, augment=3), solve(pol, inst, augment=3, record=True)
    assert plain.identity is None and rec.identity is not None
    assert torch.equal(plain.cost, rec.cost) and plain.routes == rec.routes
    with torch.no_grad():
        ref = rollout(pol, inst, greedy=True, p_reembed=1.0, record=True)
    assert ref.embeddings is not None and rec.identity.embeddings is not None
    for name in ("cost", "log_prob", "actions", "embeddings"):
        assert torch.equal(getattr(rec.identity, name), getattr(ref, name)), name
    if decoder == "ccl":
        assert ref.gates is not None and rec.identity.gates is not None
        assert torch.equal(rec.identity.gates, ref.gates)
    assert visit_state_probe(pol, inst, recorded=rec.identity) == visit_state_probe(pol, inst)


def test_probe_rejects_an_unrecorded_rollout() -> None:
    pol = RoutingPolicy(PolicyConfig(decoder="ccl", **SMALL)).eval()
    inst = generate("CVRP", 5, 2, seed=0)
    with pytest.raises(ValueError, match="recorded"):
        visit_state_probe(pol, inst, recorded=rollout(pol, inst, greedy=True))  # record=False


def test_shipped_flops_are_counted_again() -> None:
    nodes = (10, 20)
    assert_frame_equal(load_flops(nodes), count_flops(nodes), check_exact=True)
    assert_frame_equal(ex._flops(nodes), count_flops(nodes), check_exact=True)
    every = load_flops((10, 20, 50, 100, 200))
    assert list(every.columns) == ["customers", "scheme", "flops"] and len(every) == 10
    assert isinstance(every, pd.DataFrame) and (every.flops > 0).all()
    with pytest.raises(ValueError, match="nodes"):
        load_flops((30,))
