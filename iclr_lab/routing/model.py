"""A POMO-style multi-task routing policy with CCL's context chain, or a static-context decoder.

Encoder (RouteFinder's RF-TE, small): the depot token embeds the global attributes
``[open, x0, y0, L, l_0]``, each customer ``[x, y, q_L, q_B, e, l, s]`` (linear, no bias); then
pre-norm Transformer layers (RMSNorm, multi-head attention, SwiGLU feed-forward) and a final norm.

Decoder, per step and per trajectory ``i`` at node ``tau_i`` (``H`` are node embeddings shared by
the ``S`` trajectories of an instance, ``H_0`` the encoder's output):

* ``decoder="static"`` (the MTPOMO/RouteFinder-like baseline): context
  ``q_i = W_ctx [H_0[tau_i]; available load; time; remaining length]``; ``H`` never changes.
* ``decoder="ccl"``: **RGCR** builds four raw constraint vectors
  ``c^B = [q_L(tau), q_B(tau), available load]``, ``c^L = [x_tau, y_tau, L - length]``,
  ``c^O = [x_tau, y_tau, distance so far]``, ``c^TW = [e_tau, l_tau, s_tau, t]``, embeds them
  ``C^k = W_k c^k`` and gates them, eq. ``ccl_vrp-eq-gate``,
  ``g^k = sigmoid((<H[tau], C^k> + eps) / sqrt(D)) * 1[attribute k present]`` (``eps ~ N(0, 0.1^2)``
  in training only), so the gate of an absent attribute is exactly 0; the step context is
  ``q_i = W_ctx [H[tau_i]; sum_k g^k C^k + W_S [C^B; C^L; C^O; C^TW]]``.
  **TSNR** then, with probability ``p_reembed`` (one coin per step for the whole batch), re-embeds
  the nodes once for all trajectories, eq. ``ccl_vrp-eq-tsnr``: the nodes attend over
  ``[q_1, ..., q_S; H]`` with the additive bias ``-log d(n, .)`` (0 where ``d = 0``), followed by a
  SwiGLU block; the pointer's keys and values are recomputed from the new ``H``, which later steps
  keep (the "chain of context").

Pointer (both decoders): ``g_i = W_o(q_i + MHA(q_i, K, V; mask_i))``, logits
``10 tanh(<g_i, K_logit[n]> / sqrt(D))``, infeasible nodes at ``-inf``.

Inference: :func:`solve` runs every start greedily on the 8 symmetric copies of each instance and
keeps the best of the ``8 S`` tours.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from iclr_lab.core.validation import check_choice, check_int, check_range
from iclr_lab.routing.checker import routes_from_actions
from iclr_lab.routing.env import REMAINING_CAP, MultiTaskVRPEnv, VRPState
from iclr_lab.routing.instances import SYMMETRIES, VRPBatch

__all__ = ["GATE_NAMES", "PolicyConfig", "Rollout", "RoutingPolicy", "Solution", "rollout", "solve",
           "tsnr_flops"]

GATE_NAMES = ("B", "L", "O", "TW")  # order of RGCR's constraint vectors and gates
CLIP = 10.0  # logit clipping C * tanh(u), POMO's and RL4CO's value


@dataclass(frozen=True)
class PolicyConfig:
    """Architecture of a :class:`RoutingPolicy` (stored with every checkpoint).

    Attributes:
        decoder: ``"ccl"`` (RGCR + TSNR) or ``"static"``.
        dim: embedding width ``D``.
        heads: attention heads.
        layers: encoder layers.
        ffn: SwiGLU inner width.
        p_reembed: probability of a TSNR step during training (``P_tr``).
        gate_noise: standard deviation of the gates' training noise.
    """

    decoder: str = "ccl"
    dim: int = 64
    heads: int = 4
    layers: int = 3
    ffn: int = 128
    p_reembed: float = 0.75
    gate_noise: float = 0.1

    def __post_init__(self) -> None:
        check_choice("decoder", self.decoder, ("ccl", "static"))
        check_int("dim", self.dim, 4)
        check_int("heads", self.heads, 1)
        if self.dim % self.heads:
            raise ValueError(f"dim must be a multiple of heads ({self.heads}), got {self.dim}")
        check_int("layers", self.layers, 0)
        check_int("ffn", self.ffn, 1)
        check_range("p_reembed", self.p_reembed, 0.0, 1.0)
        check_range("gate_noise", self.gate_noise, 0.0)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON- and ``weights_only``-safe)."""
        return asdict(self)


class RMSNorm(nn.Module):
    """Root-mean-square normalisation with a learned gain."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(nn.Module):
    """``W_2 (silu(W_1 x) * W_3 x)``."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w13 = nn.Linear(dim, 2 * hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.w13(x).chunk(2, -1)
        return self.w2(F.silu(a) * b)


class MHA(nn.Module):
    """Multi-head attention with an optional additive bias or boolean mask (True = attend)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                bias: torch.Tensor | None = None) -> torch.Tensor:
        """``q [.., Lq, D]`` attends over keys ``k`` and values ``v`` (``[.., Lk, D]``);
        ``bias [.., Lq, Lk]`` is added to every head's scores."""
        h = self.heads
        split = lambda t: t.unflatten(-1, (h, -1)).transpose(-3, -2)  # noqa: E731
        b = None if bias is None else bias.unsqueeze(-3)
        out = F.scaled_dot_product_attention(split(self.wq(q)), split(self.wk(k)), split(self.wv(v)),
                                             attn_mask=b)
        return self.wo(out.transpose(-3, -2).flatten(-2))


class EncoderLayer(nn.Module):
    """Pre-norm Transformer layer: ``h + MHA(RMS h)``, then ``h + SwiGLU(RMS h)``."""

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.n1, self.n2 = RMSNorm(cfg.dim), RMSNorm(cfg.dim)
        self.att = MHA(cfg.dim, cfg.heads)
        self.ffn = SwiGLU(cfg.dim, cfg.ffn)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = self.n1(h)
        h = h + self.att(x, x, x)
        return h + self.ffn(self.n2(h))


class TSNR(nn.Module):
    """Trajectory-shared node re-embedding, eq. ``ccl_vrp-eq-tsnr``: nodes ``H [B, N, D]`` attend
    over ``[contexts Q [B, S, D]; H]`` with an additive bias, then a SwiGLU block."""

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.nq, self.nk, self.nv, self.nf = (RMSNorm(cfg.dim) for _ in range(4))
        self.att = MHA(cfg.dim, cfg.heads)
        self.ffn = SwiGLU(cfg.dim, cfg.ffn)

    def forward(self, h: torch.Tensor, ctx: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        x = torch.cat([ctx, h], -2)
        h = h + self.att(self.nq(h), self.nk(x), self.nv(x), bias)
        return h + self.ffn(self.nf(h))


def neg_log_distance(d: torch.Tensor) -> torch.Tensor:
    """``-log d`` with 0 where ``d == 0`` (a node and itself, or trajectories at the depot)."""
    return torch.where(d > 0, -torch.log(d.clamp_min(1e-12)), torch.zeros_like(d))


@dataclass
class Rollout:
    """Result of :func:`rollout`: ``cost [B, S]``, ``log_prob [B, S]`` (sum over steps, the forced
    first move excluded), ``actions [B, S, T]`` and, when recorded, ``gates [T, B, S, 4]`` and the
    node embeddings ``[T, B, N, D]`` before each step."""

    cost: torch.Tensor
    log_prob: torch.Tensor
    actions: torch.Tensor
    gates: torch.Tensor | None = None
    embeddings: torch.Tensor | None = None


class RoutingPolicy(nn.Module):
    """The encoder-decoder policy; see the module docstring and :class:`PolicyConfig`."""

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__()
        cfg = config or PolicyConfig()
        self.config = cfg
        d = cfg.dim
        self.embed_depot = nn.Linear(5, d, bias=False)
        self.embed_node = nn.Linear(7, d, bias=False)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.layers))
        self.final_norm = RMSNorm(d)
        self.kvl = nn.Linear(d, 3 * d, bias=False)  # pointer's glimpse keys, values, logit keys
        self.pointer_q = nn.Linear(d, d, bias=False)
        self.pointer_o = nn.Linear(d, d, bias=False)
        if cfg.decoder == "static":
            self.context = nn.Linear(d + 3, d, bias=False)
        else:
            self.raw = nn.ModuleList(nn.Linear(k, d, bias=False) for k in (3, 3, 3, 4))
            self.w_s = nn.Linear(4 * d, d, bias=False)
            self.context = nn.Linear(2 * d, d, bias=False)
            self.tsnr = TSNR(cfg)

    # ------------------------------------------------------------------------- encoder
    def encode(self, env: MultiTaskVRPEnv) -> torch.Tensor:
        """``[B, N, D]`` node embeddings ``H_0``."""
        feats = env.node_features()
        h = torch.cat([self.embed_depot(env.global_features())[:, None], self.embed_node(feats[:, 1:])], 1)
        for layer in self.layers:
            h = layer(h)
        return self.final_norm(h)

    # ------------------------------------------------------------------------- context
    def constraint_vectors(self, env: MultiTaskVRPEnv, state: VRPState) -> list[torch.Tensor]:
        """RGCR's raw vectors ``c^B, c^L, c^O, c^TW`` (``[B, S, 3|4]``, finite)."""
        i = env.inst
        cur = state.current
        g = lambda x: torch.gather(x, 1, cur)  # noqa: E731  [B, N] -> [B, S]
        x, y = g(i.locs[..., 0]), g(i.locs[..., 1])
        avail, _, remaining = env.context_features(state).unbind(-1)
        c_b = torch.stack([g(i.linehaul), g(i.backhaul), avail], -1)
        c_l = torch.stack([x, y, remaining.clamp(max=REMAINING_CAP)], -1)
        c_o = torch.stack([x, y, state.cost], -1)
        c_tw = torch.stack([g(i.time_windows[..., 0]), g(i.time_windows[..., 1]), g(i.service), state.time],
                           -1)
        return [c_b, c_l, c_o, torch.nan_to_num(c_tw, posinf=0.0)]

    def step_context(self, env: MultiTaskVRPEnv, state: VRPState, h: torch.Tensor,
                     present: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Context ``q [B, S, D]`` and, for CCL, the gates ``[B, S, 4]`` (eq. ``ccl_vrp-eq-gate``)."""
        h_cur = torch.gather(h, 1, state.current[..., None].expand(-1, -1, h.shape[-1]))
        if self.config.decoder == "static":
            return self.context(torch.cat([h_cur, env.context_features(state)], -1)), None
        embs = [w(c) for w, c in zip(self.raw, self.constraint_vectors(env, state), strict=True)]
        c = torch.stack(embs, -2)  # [B, S, 4, D]
        score = (h_cur[..., None, :] * c).sum(-1)
        if self.training and self.config.gate_noise > 0:
            score = score + self.config.gate_noise * torch.randn_like(score)
        gates = torch.sigmoid(score / math.sqrt(self.config.dim)) * present[:, None, :]
        unified = (gates[..., None] * c).sum(-2) + self.w_s(c.flatten(-2))
        return self.context(torch.cat([h_cur, unified], -1)), gates

    def reembed(self, env: MultiTaskVRPEnv, state: VRPState, h: torch.Tensor,
                q: torch.Tensor) -> torch.Tensor:
        """TSNR (eq. ``ccl_vrp-eq-tsnr``): new ``H`` shared by all trajectories."""
        d_ctx = torch.gather(env.dist, 2, state.current[:, None, :].expand(-1, env.num_nodes, -1))
        bias = neg_log_distance(torch.cat([d_ctx, env.dist], -1))  # [B, N, S + N]
        return self.tsnr(h, q, bias)

    def pointer(self, q: torch.Tensor, cache: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked, clipped logits ``[B, S, N]``."""
        k, v, k_logit = cache.chunk(3, -1)
        heads = self.config.heads
        split = lambda t: t.unflatten(-1, (heads, -1)).transpose(-3, -2)  # noqa: E731
        att = F.scaled_dot_product_attention(split(self.pointer_q(q)), split(k),
                                             split(v), attn_mask=mask[:, None])
        glimpse = self.pointer_o(q + att.transpose(-3, -2).flatten(-2))
        u = torch.einsum("bsd,bnd->bsn", glimpse, k_logit) / math.sqrt(self.config.dim)
        return (CLIP * torch.tanh(u)).masked_fill(~mask, -math.inf)


def rollout(policy: RoutingPolicy, instances: VRPBatch, *, num_starts: int | None = None,
            greedy: bool = False, p_reembed: float | None = None, record: bool = False) -> Rollout:
    """Build one tour per start for every instance.

    Args:
        policy: the policy.
        instances: the batch.
        num_starts: trajectories per instance, at least 1 (default: one per customer, POMO);
            trajectory ``i`` first visits customer ``1 + i mod n``.
        greedy: argmax instead of sampling.
        p_reembed: probability of a TSNR step, in ``[0, 1]`` (default: the config's ``P_tr`` in
            training mode, 1 in evaluation mode); ignored by the static decoder.
        record: keep the gates and the node embeddings of every step.
    """
    if not isinstance(instances, VRPBatch):
        raise TypeError(f"instances must be a VRPBatch, got {type(instances).__name__}")
    n = instances.num_nodes - 1
    s = n if num_starts is None else check_int("num_starts", num_starts, 1)
    p = (policy.config.p_reembed if policy.training else 1.0) if p_reembed is None else check_range(
        "p_reembed", p_reembed, 0.0, 1.0)
    env = MultiTaskVRPEnv(instances, s)
    present = instances.flags()[:, [1, 2, 0, 3]]  # (O, B, L, TW) -> RGCR's (B, L, O, TW)
    h = policy.encode(env)
    cache = policy.kvl(h)
    start = env.start_nodes()
    state = env.step(env.reset(), start)
    actions, logps, gates, embs = [start], [], [], []
    for _ in range(env.max_steps()):
        if bool(state.done.all()):
            break
        if record:
            embs.append(h.detach())
        q, g = policy.step_context(env, state, h, present)
        if g is not None:
            if record:
                gates.append(g.detach())
            if p >= 1.0 or (p > 0.0 and float(torch.rand(())) < p):
                h = policy.reembed(env, state, h, q)
                cache = policy.kvl(h)
        mask = env.mask(state)
        logp = torch.log_softmax(policy.pointer(q, cache, mask), -1)
        if greedy:
            a = logp.argmax(-1)
        else:
            a = torch.multinomial(logp.exp().flatten(0, 1), 1).view(state.current.shape)
        logps.append(torch.gather(logp, 2, a[..., None])[..., 0])
        state = env.step(state, a)
        actions.append(a)
    if not bool(state.done.all()):
        raise RuntimeError("decoding did not finish within the step bound")  # a masking bug
    return Rollout(cost=state.cost, log_prob=torch.stack(logps, -1).sum(-1),
                   actions=torch.stack(actions, -1), gates=torch.stack(gates) if gates else None,
                   embeddings=torch.stack(embs) if embs else None)


@dataclass
class Solution:
    """Result of :func:`solve`: best ``cost [B]`` and ``routes[b]`` over starts and symmetries;
    with ``solve(record=True)``, ``identity`` is the recorded rollout of the untransformed
    instances (what ``rollout(policy, instances, greedy=True, p_reembed=..., record=True)``
    returns), for analyses of the same decoding."""

    cost: torch.Tensor
    routes: list[list[list[int]]]
    identity: Rollout | None = None


@torch.no_grad()
def solve(policy: RoutingPolicy, instances: VRPBatch, augment: int = 8, *,
          p_reembed: float = 1.0, record: bool = False) -> Solution:
    """Greedy multi-start decoding on ``augment`` symmetric copies of each instance (POMO inference).

    Args:
        policy: the policy (put in evaluation mode for the call).
        instances: the batch.
        augment: number of symmetries of the unit square used, 1..8 (identity first).
        p_reembed: TSNR probability at test time (``P_ts``), in ``[0, 1]``; 1 makes decoding
            deterministic.
        record: record the identity symmetry's rollout (gates and embeddings) and return it as
            ``Solution.identity``; recording changes no number of the decoding.
    """
    if not isinstance(instances, VRPBatch):
        raise TypeError(f"instances must be a VRPBatch, got {type(instances).__name__}")
    augment = check_int("augment", augment, 1, 8)
    p_reembed = check_range("p_reembed", p_reembed, 0.0, 1.0)
    was_training = policy.training
    policy.eval()
    try:
        best_cost = torch.full((instances.batch_size,), math.inf, dtype=instances.locs.dtype)
        best_tour: list[list[int]] = [[] for _ in range(instances.batch_size)]
        identity = None
        for fn in SYMMETRIES[:augment]:
            r = rollout(policy, instances.transform(fn), greedy=True, p_reembed=p_reembed,
                        record=record and fn == SYMMETRIES[0])
            identity = r if identity is None else identity
            cost, idx = r.cost.min(-1)
            for b in range(instances.batch_size):
                if float(cost[b]) < float(best_cost[b]):
                    best_cost[b] = cost[b]
                    best_tour[b] = r.actions[b, int(idx[b])].tolist()
    finally:
        policy.train(was_training)
    return Solution(best_cost, [routes_from_actions(t) for t in best_tour],
                    identity if record else None)


def tsnr_flops(num_nodes: int, num_starts: int, config: PolicyConfig | None = None, *,
               shared: bool = True) -> int:
    """Floating-point operations of one TSNR step for one instance, counted by
    ``torch.utils.flop_counter`` on the actual module: ``shared=True`` re-embeds the nodes once
    for all ``num_starts`` trajectories (CCL); ``shared=False`` gives every trajectory its own node
    embeddings, attending over its own context and nodes. Attention runs on PyTorch's math backend
    here so that its two matrix products are counted too; the total equals
    ``2 T (2 N D^2 + 2 K D^2 + 2 N K D + 3 N D F)`` with ``N`` nodes, ``K`` keys (``S + N`` shared,
    ``1 + N`` per trajectory), ``T`` re-embeddings (1 shared, ``S`` per trajectory) and SwiGLU width
    ``F``. ``num_nodes`` is at least 2 (a depot and a customer), ``num_starts`` at least 1."""
    num_nodes = check_int("num_nodes", num_nodes, 2)
    num_starts = check_int("num_starts", num_starts, 1)
    # imported after the checks: the counter's first use imports torch._dynamo (over a CPU second)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    cfg = config or PolicyConfig()
    block = TSNR(cfg)
    d = cfg.dim
    h = torch.randn(1, num_nodes, d)
    if shared:
        args = (h, torch.randn(1, num_starts, d), torch.zeros(1, num_nodes, num_starts + num_nodes))
    else:
        args = (h.expand(num_starts, -1, -1), torch.randn(num_starts, 1, d),
                torch.zeros(num_starts, num_nodes, 1 + num_nodes))
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        block(*args)
    return int(counter.get_total_flops())
