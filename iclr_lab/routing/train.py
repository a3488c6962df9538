"""Train a routing policy with shared-baseline REINFORCE on mixed multi-task batches.

    python -m iclr_lab.routing.train --model ccl --nodes 20 --seed 0 --steps 600 --out runs/ccl-0

Each step draws a fresh batch of ``--batch`` instances from the mixed distribution (each of O, B, L,
TW present with probability 1/2, RouteFinder's "all" preset), rolls out one trajectory per customer
(POMO's starts), normalises each return by the running mean of its variant (RouteFinder's
exponential reward normalisation, ``alpha = 0.25``, divided), subtracts the mean over the starts of
the same instance (POMO's shared baseline, eq. ``ccl_vrp-eq-reinforce``) and takes an Adam step
with gradient-norm clipping.

Deterministic and resumable: step ``t`` seeds both its batch and torch's generator with a function
of ``(seed, t)``, and the checkpoint holds the weights, Adam's state, the reward statistics and the
learning curve, so ``--steps 200`` after an interrupted ``--steps 100`` gives the same weights as
one uninterrupted run (on the same machine, one thread). Outputs in ``--out``:

* ``checkpoint.pt``: everything needed to resume;
* ``policy.pt``: the policy alone (``{"format", "config", "state_dict"}``), what
  :func:`load_policy` reads;
* ``config.json``: the arguments, the architecture, the code version and the learning curve.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from iclr_lab.core.progress import progress
from iclr_lab.core.provenance import ShippedFileError, code_version, load_torch, sha256
from iclr_lab.core.validation import check_choice, check_int, check_range
from iclr_lab.routing.instances import generate
from iclr_lab.routing.model import PolicyConfig, RoutingPolicy, rollout

__all__ = ["FORMAT", "SHIPPED_SEEDS", "TrainConfig", "load_policy", "main", "shipped_path",
           "train"]

FORMAT = "iclr_lab.routing.policy/1"
CHECKPOINTS = Path(__file__).with_name("checkpoints")  # shipped policies: <model>-<seed>.pt (+ .json)
SHIPPED_SEEDS = (0, 1, 2)
EMA_ALPHA = 0.25


class TrainConfig:
    """Training hyper-parameters (validated): ``nodes``, ``batch``, ``steps``, ``lr``,
    ``weight_decay``, ``clip``, ``seed``, ``log_every``."""

    def __init__(self, *, nodes: int = 20, batch: int = 64, steps: int = 600, lr: float = 1e-3,
                 weight_decay: float = 1e-6, clip: float = 1.0, seed: int = 0, log_every: int = 10) -> None:
        self.nodes = check_int("nodes", nodes, 2)
        self.batch = check_int("batch", batch, 1)
        self.steps = check_int("steps", steps, 0)
        self.lr = check_range("lr", lr, 0.0, low_open=True)
        self.weight_decay = check_range("weight_decay", weight_decay, 0.0)
        self.clip = check_range("clip", clip, 0.0, low_open=True)
        self.seed = check_int("seed", seed, 0, 2**31 - 1)
        self.log_every = check_int("log_every", log_every, 1)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields."""
        return dict(vars(self))


def _step_seed(seed: int, step: int) -> int:
    return (seed * 1_000_003 + step) % (2**62)


def _variant_index(flags: torch.Tensor) -> torch.Tensor:
    """Index 0..15 of the variant from ``(O, B, L, TW)`` flags."""
    return (flags.long() * torch.tensor([8, 4, 2, 1])).sum(-1)


def train(policy_config: PolicyConfig, train_config: TrainConfig, out: str | Path,
          *, resume: bool = True) -> RoutingPolicy:
    """Train (or resume training of) a policy and write its files to ``out``; return the policy.

    Args:
        policy_config: the architecture.
        train_config: the hyper-parameters; ``steps`` is the total, counting steps already done.
        out: output folder (created).
        resume: continue from ``out/checkpoint.pt`` if present (its architecture must match).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tc = train_config
    torch.manual_seed(tc.seed)
    policy = RoutingPolicy(policy_config)
    opt = torch.optim.Adam(policy.parameters(), lr=tc.lr, weight_decay=tc.weight_decay)
    ema = torch.zeros(16, dtype=torch.float64)
    seen = torch.zeros(16, dtype=torch.bool)
    history: dict[str, list[float]] = {"step": [], "cost": [], "cpu_s": []}
    start = 0
    ckpt_path = out / "checkpoint.pt"
    if resume and ckpt_path.exists():
        ck = load_torch(ckpt_path, remake="use --no-resume to start over")
        if ck.get("config") != policy_config.to_dict():
            raise ValueError(f"out: {ckpt_path} was trained with architecture {ck.get('config')}, "
                             f"not {policy_config.to_dict()}; use another --out")
        policy.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        ema, seen, history, start = ck["ema"], ck["seen"], ck["history"], int(ck["step"])
    policy.train()
    cpu0 = time.process_time() - (history["cpu_s"][-1] if history["cpu_s"] else 0.0)
    for step in progress(range(start, tc.steps), desc=f"train {policy_config.decoder}",
                         total=max(tc.steps - start, 0)):
        s = _step_seed(tc.seed, step)
        torch.manual_seed(s)
        batch = generate("mixed", tc.nodes, tc.batch, seed=s)
        r = rollout(policy, batch)
        reward = -r.cost.double()  # [B, S]
        var = _variant_index(batch.flags())
        with torch.no_grad():
            for v in var.unique().tolist():
                m = float(reward[var == v].mean())
                ema[v] = m if not seen[v] else (1 - EMA_ALPHA) * ema[v] + EMA_ALPHA * m
                seen[v] = True
        norm = reward / ema[var].abs()[:, None]
        adv = (norm - norm.mean(-1, keepdim=True)).float()
        loss = -(adv * r.log_prob).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), tc.clip)
        opt.step()
        if (step + 1) % tc.log_every == 0 or step + 1 == tc.steps:
            history["step"].append(float(step + 1))
            history["cost"].append(float(r.cost.min(-1).values.mean()))
            history["cpu_s"].append(time.process_time() - cpu0)
            _save(out, policy, opt, ema, seen, history, step + 1, policy_config, tc)
    if start >= tc.steps and not (out / "policy.pt").exists():
        _save(out, policy, opt, ema, seen, history, start, policy_config, tc)
    return policy


def _save(out: Path, policy: RoutingPolicy, opt: torch.optim.Optimizer, ema: torch.Tensor, seen: torch.Tensor,
          history: dict[str, list[float]], step: int, pc: PolicyConfig, tc: TrainConfig) -> None:
    cfg = pc.to_dict()
    tmp = out / "checkpoint.pt.tmp"
    torch.save({"model": policy.state_dict(), "optim": opt.state_dict(), "ema": ema, "seen": seen,
                "history": history, "step": step, "config": cfg}, tmp)
    tmp.replace(out / "checkpoint.pt")  # atomic: an interrupted save leaves the previous checkpoint
    torch.save({"format": FORMAT, "config": cfg, "state_dict": policy.state_dict()}, out / "policy.pt")
    meta = {"format": FORMAT, "code_version": code_version(), "sha256": sha256(out / "policy.pt"),
            "policy": cfg, "train": tc.to_dict(), "step": step, "history": history}
    (out / "config.json").write_text(json.dumps(meta, indent=1) + "\n")


def shipped_path(model: str, seed: int = 0) -> Path:
    """Path of a shipped policy file, ``checkpoints/<model>-<seed>.pt`` (its training record is the
    ``.json`` beside it); ``model`` is ``"ccl"`` or ``"static"``, ``seed`` one of
    ``SHIPPED_SEEDS`` (0, 1, 2)."""
    check_choice("model", model, ("ccl", "static"))
    # an integer range first (its message states the accepted seeds), then the shipped ones
    seed = check_choice("seed", check_int("seed", seed, min(SHIPPED_SEEDS), max(SHIPPED_SEEDS)),
                        SHIPPED_SEEDS)
    return CHECKPOINTS / f"{model}-{seed}.pt"


def load_policy(path_or_name: str | Path, *, seed: int = 0,
                config: PolicyConfig | None = None) -> RoutingPolicy:
    """Load a policy in evaluation mode.

    Args:
        path_or_name: ``"ccl"`` or ``"static"`` (the shipped checkpoints), a ``policy.pt`` /
            ``checkpoint.pt`` file, or a training folder.
        seed: which shipped training seed (0, 1 or 2) when ``path_or_name`` names a model; seed 0 is
            the chapter's main checkpoint.
        config: if given, the architecture the checkpoint must have.

    Raises:
        FileNotFoundError: no such checkpoint.
        iclr_lab.core.provenance.ShippedFileError: the file differs from the sha256 in its record
            (a shipped policy must have one), is truncated or corrupt, or holds non-finite weights.
        ValueError: the file is not a routing policy, or its architecture differs from ``config``
            or from its own recorded configuration.
    """
    # checked even when a path makes it unused, so that a bad seed is never silently ignored
    check_int("seed", seed, min(SHIPPED_SEEDS), max(SHIPPED_SEEDS))
    p = Path(path_or_name)
    if str(path_or_name) in ("ccl", "static"):
        p = shipped_path(str(path_or_name), seed)
        if not p.exists():
            raise FileNotFoundError(f"path_or_name: no shipped checkpoint {p}; train one with "
                                    f"python -m iclr_lab.routing.train --model {path_or_name} --out DIR")
    elif p.is_dir():
        p = p / "policy.pt"
    if not p.exists():
        raise FileNotFoundError(f"path_or_name: {p} does not exist")
    # the training record beside the weights holds their hash (shipped: <name>.json; a training
    # folder: config.json, the record of its policy.pt, not of its resumable checkpoint.pt)
    record = p.with_name("config.json") if p.name == "policy.pt" else p.with_suffix(".json")
    expected = json.loads(record.read_text()).get("sha256") if record.exists() else None
    if str(path_or_name) in ("ccl", "static") and expected is None:
        raise ShippedFileError(f"{record}: the shipped policy's record holds no sha256")
    ck = load_torch(p, expected_sha256=expected,
                    remake="reinstall the package, or retrain with python -m iclr_lab.routing.train")
    if not isinstance(ck, dict) or "config" not in ck or not ({"state_dict", "model"} & set(ck)):
        raise ValueError(f"path_or_name: {p} is not a routing policy checkpoint")
    state: dict[str, torch.Tensor] = ck["state_dict"] if "state_dict" in ck else ck["model"]
    try:
        saved = PolicyConfig(**ck["config"])
    except TypeError as err:
        raise ValueError(f"path_or_name: {p} records an unknown architecture {ck['config']}") from err
    if config is not None and saved != config:
        raise ValueError(f"path_or_name: {p} holds architecture {saved}, expected {config}")
    policy = RoutingPolicy(saved)
    own = policy.state_dict()
    if set(own) != set(state) or any(own[k].shape != state[k].shape for k in own):
        raise ValueError(f"path_or_name: {p} does not match the current {saved.decoder} architecture "
                         "(saved by another version of the code?)")
    policy.load_state_dict(state)
    return policy.eval()


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point (``python -m iclr_lab.routing.train --help``)."""
    ap = argparse.ArgumentParser(prog="python -m iclr_lab.routing.train", description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("ccl", "static"), required=True)
    ap.add_argument("--nodes", type=int, default=20, help="customers per instance")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=600, help="total training steps")
    ap.add_argument("--batch", type=int, default=64, help="instances per step")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--ffn", type=int, default=128)
    ap.add_argument("--p-reembed", type=float, default=0.75, help="TSNR probability in training")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-resume", action="store_true", help="start over even if --out has a checkpoint")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    torch.set_num_threads(check_int("threads", a.threads, 1))
    pc = PolicyConfig(decoder=a.model, dim=a.dim, heads=a.heads, layers=a.layers, ffn=a.ffn,
                      p_reembed=a.p_reembed)
    tc = TrainConfig(nodes=a.nodes, batch=a.batch, steps=a.steps, lr=a.lr, seed=a.seed, log_every=a.log_every)
    train(pc, tc, a.out, resume=not a.no_resume)


if __name__ == "__main__":
    main()
