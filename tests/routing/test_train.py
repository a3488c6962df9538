"""Training script: determinism, resumption, checkpoint files, loading, bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from iclr_lab.routing.model import PolicyConfig, RoutingPolicy
from iclr_lab.routing.train import FORMAT, TrainConfig, load_policy, main, train

torch.set_num_threads(1)
SMALL = {"dim": 16, "heads": 2, "layers": 1, "ffn": 32}


def _args(out: Path, steps: int, model: str = "ccl") -> list[str]:
    return ["--model", model, "--nodes", "6", "--batch", "4", "--steps", str(steps), "--seed", "3",
            "--log-every", "1", "--dim", "16", "--heads", "2", "--layers", "1", "--ffn", "32",
            "--out", str(out)]


def _params(p: RoutingPolicy) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in p.state_dict().items()}


@pytest.mark.parametrize("model", ["ccl", "static"])
def test_resume_equals_uninterrupted(tmp_path: Path, model: str) -> None:
    main(_args(tmp_path / "a", 4, model))
    main(_args(tmp_path / "b", 2, model))
    main(_args(tmp_path / "b", 4, model))  # resumes from step 2
    a, b = load_policy(tmp_path / "a"), load_policy(tmp_path / "b")
    for k, v in _params(a).items():
        assert torch.equal(v, b.state_dict()[k]), k
    ja = json.loads((tmp_path / "a" / "config.json").read_text())
    jb = json.loads((tmp_path / "b" / "config.json").read_text())
    assert ja["history"]["cost"] == jb["history"]["cost"] and ja["step"] == 4
    assert ja["format"] == FORMAT and ja["code_version"] and ja["policy"]["decoder"] == model
    # the same seed twice gives the same weights; the weights moved from their initialisation
    main(_args(tmp_path / "c", 4, model))
    assert all(torch.equal(v, load_policy(tmp_path / "c").state_dict()[k]) for k, v in _params(a).items())
    torch.manual_seed(3)
    init = RoutingPolicy(PolicyConfig(decoder=model, **SMALL))
    assert any(not torch.equal(v, init.state_dict()[k]) for k, v in _params(a).items())


def test_checkpoints_load_with_weights_only(tmp_path: Path) -> None:
    main(_args(tmp_path, 1))
    for name in ("policy.pt", "checkpoint.pt"):
        ck = torch.load(tmp_path / name, weights_only=True)
        assert ck["config"]["decoder"] == "ccl"
    pol = load_policy(tmp_path / "policy.pt", config=PolicyConfig(decoder="ccl", **SMALL))
    assert not pol.training


def test_load_rejects_other_architectures(tmp_path: Path) -> None:
    main(_args(tmp_path / "ccl", 1, "ccl"))
    with pytest.raises(ValueError, match="expected"):
        load_policy(tmp_path / "ccl", config=PolicyConfig(decoder="static", **SMALL))
    # a file whose recorded config does not match its weights (e.g. another code version)
    ck = torch.load(tmp_path / "ccl" / "policy.pt", weights_only=True)
    ck["config"]["decoder"] = "static"
    torch.save(ck, tmp_path / "forged.pt")
    with pytest.raises(ValueError, match="does not match the current static architecture"):
        load_policy(tmp_path / "forged.pt")
    torch.save({"weight": torch.zeros(3)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a routing policy"):
        load_policy(tmp_path / "other.pt")
    with pytest.raises(FileNotFoundError, match="path_or_name"):
        load_policy(tmp_path / "missing.pt")
    # resuming a run with another architecture is refused
    with pytest.raises(ValueError, match="another --out"):
        train(PolicyConfig(decoder="static", **SMALL), TrainConfig(nodes=6, batch=4, steps=2),
              tmp_path / "ccl")


def test_bad_training_inputs() -> None:
    with pytest.raises(ValueError, match="nodes"):
        TrainConfig(nodes=1)
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(lr=0.0)
    with pytest.raises(ValueError, match="batch"):
        TrainConfig(batch=0)
    with pytest.raises(SystemExit):
        main(["--model", "mtpomo", "--out", "x"])
