"""A linear probe: do the re-embedded nodes carry the visit state of the trajectories?

At decoding step ``j`` each node ``n`` has a target, the fraction of the instance's ``S``
trajectories that have already served it. A ridge regression predicts it from
``[node embedding, j / T]``, once with the chain's embeddings as step ``j`` starts (``H_j``: the
encoder's output re-embedded by TSNR at every earlier step; ``rollout(record=True)`` records them
before the step's own re-embedding) and once with the encoder's ``H_0``. The step fraction is in both
feature sets, so the static probe already knows "how far along" decoding is; the chain's gain is
what the embeddings add beyond it. The probe is fitted on half of the instances and its R^2 measured
on the other half. This probe is a design of the chapter, not of the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from iclr_lab.core.validation import check_range
from iclr_lab.routing.instances import VRPBatch
from iclr_lab.routing.model import Rollout, RoutingPolicy, rollout

__all__ = ["ProbeResult", "visit_state_probe"]


@dataclass(frozen=True)
class ProbeResult:
    """Held-out R^2 of the probe with the step's embeddings (``chain``) and with the encoder's
    (``static``); ``gain = chain - static``."""

    chain: float
    static: float

    @property
    def gain(self) -> float:
        """``chain - static``."""
        return self.chain - self.static


def _design(emb: torch.Tensor, steps: int) -> torch.Tensor:
    """``emb [T, B, N, D]`` -> rows ``[T*B*N, D + 2]`` with the step fraction and a constant."""
    t, b, n, _ = emb.shape
    frac = (torch.arange(t, dtype=emb.dtype) / max(steps - 1, 1))[:, None, None, None].expand(t, b, n, 1)
    return torch.cat([emb, frac, torch.ones_like(frac)], -1).reshape(-1, emb.shape[-1] + 2)


def _ridge_r2(x_tr: torch.Tensor, y_tr: torch.Tensor, x_te: torch.Tensor, y_te: torch.Tensor,
              lam: float) -> float:
    x_tr, y_tr, x_te, y_te = (a.double() for a in (x_tr, y_tr, x_te, y_te))
    eye = torch.eye(x_tr.shape[1], dtype=torch.float64)
    eye[-1, -1] = 0.0  # the intercept is not penalised
    w = torch.linalg.solve(x_tr.T @ x_tr + lam * eye, x_tr.T @ y_tr)
    resid = y_te - x_te @ w
    return float(1 - resid.pow(2).sum() / (y_te - y_te.mean()).pow(2).sum())


@torch.no_grad()
def visit_state_probe(policy: RoutingPolicy, instances: VRPBatch, *, ridge: float = 1e-2,
                      p_reembed: float = 1.0, recorded: Rollout | None = None) -> ProbeResult:
    """Fit the probe on the first half of ``instances`` and score it on the second half.

    Args:
        policy: the policy (greedy multi-start decoding, evaluation mode for the call).
        instances: at least 2 instances; decoding runs one trajectory per customer.
        ridge: ridge penalty, in ``(0, inf)``.
        p_reembed: TSNR probability while decoding (``P_ts``), in ``[0, 1]``.
        recorded: the decoding to probe when the caller already has it, i.e. what
            ``rollout(policy, instances, greedy=True, p_reembed=p_reembed, record=True)`` returns
            (``solve(..., record=True).identity``); by default the probe decodes itself.
    """
    if not isinstance(instances, VRPBatch):
        raise TypeError(f"instances must be a VRPBatch, got {type(instances).__name__}")
    if instances.batch_size < 2:
        raise ValueError(f"instances must hold at least 2 instances, got {instances.batch_size}")
    ridge = check_range("ridge", ridge, 0.0, low_open=True)
    p_reembed = check_range("p_reembed", p_reembed, 0.0, 1.0)
    r = recorded
    if r is None:
        was = policy.training
        policy.eval()
        try:
            r = rollout(policy, instances, greedy=True, p_reembed=p_reembed, record=True)
        finally:
            policy.train(was)
    if r.embeddings is None:
        raise ValueError("recorded must be a rollout with record=True (it has no embeddings)")
    emb = r.embeddings  # [T, B, N, D], before decoding step k (k + 1 actions taken)
    t = emb.shape[0]
    n = instances.num_nodes
    onehot = torch.nn.functional.one_hot(r.actions, n).to(emb.dtype)  # [B, S, T + 1, N]
    seen = (onehot.cumsum(2) > 0).to(emb.dtype)[:, :, :t]  # visited after k + 1 actions
    target = seen.mean(1).permute(1, 0, 2)  # [T, B, N]
    target[..., 0] = 0.0  # the depot is never "served"
    half = instances.batch_size // 2
    out = []
    for e in (emb, emb[:1].expand_as(emb)):
        x_tr, x_te = _design(e[:, :half], t), _design(e[:, half:], t)
        y_tr, y_te = target[:, :half].reshape(-1, 1), target[:, half:].reshape(-1, 1)
        out.append(_ridge_r2(x_tr, y_tr, x_te, y_te, ridge))
    return ProbeResult(chain=out[0], static=out[1])
