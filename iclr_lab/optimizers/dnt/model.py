"""The Deeply Normalized Transformer (Qi, Chen, Xiao, Ye, He, Li & Lin, ICLR 2026) as a tiny GPT.

The chapter is ``book/optimizers/dnt.md``; equations are cited by their label there.

* :class:`GPTConfig`: the sizes of the model (vocabulary, context, width, heads, layers).
* :class:`Placement`: where the normalisations go. ``"pre"`` is the standard pre-norm GPT
  (``dnt-eq-prenorm``); ``"dnt"`` is the paper's L-DNT (``dnt-eq-dnt``): InputNorm on the embedding,
  PreNorm before attention only, QK-norm with a learnable gain (``dnt-eq-qknorm``), MidNorm on each
  sub-block's output before the residual add (``dnt-eq-midnorm``), and a final norm. No PostNorm,
  no weight normalisation.
* :class:`TinyGPT`: the model, built from :class:`torch.nn.RMSNorm` and
  :func:`torch.nn.functional.scaled_dot_product_attention`.
* :func:`heavy_tail_stats`: how heavy-tailed a model's current gradients are, per weight matrix
  (excess kurtosis, the 99.9th/50th percentile ratio, the Hill tail index) and across them (the
  spread of gradient RMS and of ``||g|| / ||W||``), the statistics of ``dnt-eq-spread``.
* :func:`decoupled_weight_decay`: the ``theta <- (1 - eta lambda) theta`` half of mSGDW
  (``dnt-eq-msgdw``); the momentum half is :class:`torch.optim.SGD`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the usual alias

from iclr_lab.core.validation import check_choice, check_int, check_range

__all__ = ["NORMS", "PLACEMENTS", "GPTConfig", "HeavyTailStats", "Placement", "TinyGPT",
           "decoupled_weight_decay", "heavy_tail_stats", "no_decay", "weight_tensors"]

Activation = Literal["gelu", "relu"]


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of a :class:`TinyGPT`.

    Args:
        vocab: number of tokens (the embedding is tied to the output layer, as in nanoGPT).
        context: the longest sequence, for the learned position embedding.
        d_model: width of the residual stream; must be divisible by ``n_heads``.
        n_heads: attention heads; each has ``d_model // n_heads`` dimensions.
        n_layers: transformer blocks.
        d_ff: hidden width of the feed-forward sub-block.
        activation: ``"gelu"`` (nanoGPT) or ``"relu"`` (the activation of the paper's Proposition
            on MidNorm, which makes the FFN exactly invariant to rescaling its first matrix).
        norm_eps: the ``epsilon`` of every RMSNorm.
        init_std: standard deviation of the weight initialisation (nanoGPT: 0.02; the output
            matrices of each sub-block get ``init_std / sqrt(2 n_layers)``).
    """

    vocab: int = 512
    context: int = 32
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 256
    activation: Activation = "gelu"
    norm_eps: float = 1e-6
    init_std: float = 0.02

    def __post_init__(self) -> None:
        check_int("vocab", self.vocab, 2)
        check_int("context", self.context, 1)
        check_int("d_model", self.d_model, 1)
        check_int("n_heads", self.n_heads, 1)
        check_int("n_layers", self.n_layers, 1)
        check_int("d_ff", self.d_ff, 1)
        check_choice("activation", self.activation, ("gelu", "relu"))
        check_range("norm_eps", self.norm_eps, 0.0, 1.0)
        check_range("init_std", self.init_std, 0.0, 10.0, low_open=True)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be divisible by n_heads, got d_model={self.d_model} "
                             f"and n_heads={self.n_heads}")

    @property
    def head_dim(self) -> int:
        """Dimensions per attention head."""
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class Placement:
    """Which normalisations a :class:`TinyGPT` has (all are RMSNorm with a learnable gain).

    Args:
        input_norm: InputNorm on the embedding (token plus position) before the first block.
        ffn_prenorm: PreNorm before the feed-forward sub-block.
        qk_norm: QK-norm: RMSNorm over each head's queries and keys, with a learnable gain.
        mid_norm: MidNorm on the output of each sub-block (after ``W_o`` and after ``W_2``),
            before the residual addition.
        final_norm: a norm before the output layer.
        attn_prenorm: PreNorm before attention (on in both of the chapter's models; off only in
            the leave-one-out ablation of DNT).
    """

    input_norm: bool = False
    ffn_prenorm: bool = True
    qk_norm: bool = False
    mid_norm: bool = False
    final_norm: bool = True
    attn_prenorm: bool = True


#: The standard pre-norm GPT (``"pre"``) and the paper's L-DNT (``"dnt"``), by name.
PLACEMENTS: dict[str, Placement] = {
    "pre": Placement(),
    "dnt": Placement(input_norm=True, ffn_prenorm=False, qk_norm=True, mid_norm=True),
}
NORMS: tuple[str, ...] = tuple(PLACEMENTS)


def _norm(on: bool, dim: int, eps: float) -> torch.nn.Module:
    return nn.RMSNorm(dim, eps=eps) if on else nn.Identity()


class Attention(nn.Module):
    """Causal multi-head self-attention with optional QK-norm (``dnt-eq-qknorm``)."""

    def __init__(self, config: GPTConfig, qk_norm: bool) -> None:
        super().__init__()
        d, self.n_heads, self.head_dim = config.d_model, config.n_heads, config.head_dim
        self.qkv = nn.Linear(d, 3 * d, bias=False)  # rows: W_q, then W_k, then W_v
        self.out = nn.Linear(d, d, bias=False)  # W_o
        # one gain vector over the head dimension, shared by the heads
        self.q_norm = _norm(qk_norm, self.head_dim, config.norm_eps)
        self.k_norm = _norm(qk_norm, self.head_dim, config.norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.n_heads, self.head_dim).transpose(1, 2) for z in (q, k, v))
        q, k = self.q_norm(q), self.k_norm(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class FeedForward(nn.Module):
    """``W_2 act(W_1 x)``, no biases."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.d_ff, bias=False)  # W_1
        self.proj = nn.Linear(config.d_ff, config.d_model, bias=False)  # W_2
        self.act: torch.nn.Module = nn.GELU() if config.activation == "gelu" else nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    """One transformer block: ``x + Mid(Attn(Pre(x)))``, then ``x + Mid(FFN(Pre'(x)))``
    (``dnt-eq-dnt``; without MidNorm and with both PreNorms it is ``dnt-eq-prenorm``)."""

    def __init__(self, config: GPTConfig, placement: Placement) -> None:
        super().__init__()
        d, eps = config.d_model, config.norm_eps
        self.attn_prenorm = _norm(placement.attn_prenorm, d, eps)
        self.attn = Attention(config, placement.qk_norm)
        self.attn_midnorm = _norm(placement.mid_norm, d, eps)
        self.ffn_prenorm = _norm(placement.ffn_prenorm, d, eps)
        self.ffn = FeedForward(config)
        self.ffn_midnorm = _norm(placement.mid_norm, d, eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn_midnorm(self.attn(self.attn_prenorm(x)))
        return x + self.ffn_midnorm(self.ffn(self.ffn_prenorm(x)))


class TinyGPT(nn.Module):
    """A small decoder-only language model with switchable normalisation placements.

    Args:
        config: sizes (:class:`GPTConfig`).
        norm: ``"pre"`` (the standard pre-norm GPT, ``dnt-eq-prenorm``), ``"dnt"`` (the paper's
            L-DNT, ``dnt-eq-dnt``), or a :class:`Placement` for an ablation.

    ``model(tokens)`` maps an integer tensor of shape ``(batch, time)`` to logits of shape
    ``(batch, time, vocab)``; :meth:`loss` is the mean next-token cross-entropy.

    Example:
        >>> model = TinyGPT(GPTConfig(vocab=64, context=8), norm="dnt")
        >>> model(torch.zeros(2, 8, dtype=torch.long)).shape
        torch.Size([2, 8, 64])
    """

    def __init__(self, config: GPTConfig, norm: str | Placement = "pre") -> None:
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        if isinstance(norm, Placement):
            placement = norm
            self.norm_name = "custom"
        else:
            placement = PLACEMENTS[check_choice("norm", norm, NORMS)]
            self.norm_name = norm
        self.config, self.placement = config, placement
        d = config.d_model
        self.embed = nn.Embedding(config.vocab, d)
        self.pos = nn.Embedding(config.context, d)
        self.input_norm = _norm(placement.input_norm, d, config.norm_eps)
        self.blocks = nn.ModuleList(Block(config, placement) for _ in range(config.n_layers))
        self.final_norm = _norm(placement.final_norm, d, config.norm_eps)
        self._init_weights()

    def _init_weights(self) -> None:
        std = self.config.init_std
        for name, p in self.named_parameters():
            if p.ndim == 2:
                # nanoGPT: the matrices that write into the residual stream start smaller
                scale = 1 / math.sqrt(2 * self.config.n_layers) if name.endswith(
                    ("attn.out.weight", "ffn.proj.weight")) else 1.0
                nn.init.normal_(p, 0.0, std * scale)

    def residual_stream(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """The residual stream ``x_0, x_1, ..., x_L`` (after InputNorm, then after each block)."""
        if tokens.ndim != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"tokens must be an integer tensor of shape (batch, time), got "
                             f"{tuple(tokens.shape)} {tokens.dtype}")
        t = tokens.shape[1]
        if not 1 <= t <= self.config.context:
            raise ValueError(f"tokens must have between 1 and context={self.config.context} "
                             f"positions, got {t}")
        x = self.input_norm(self.embed(tokens) + self.pos.weight[:t])
        xs = [x]
        for block in self.blocks:
            x = block(x)
            xs.append(x)
        return xs

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of shape ``(batch, time, vocab)`` for integer ``tokens`` of shape ``(batch, time)``."""
        x = self.residual_stream(tokens)[-1]
        return self.final_norm(x) @ self.embed.weight.T  # tied output layer

    def loss(self, tokens: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of predicting ``tokens[:, 1:]`` from the prefixes before them."""
        logits = self(tokens[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


# ---------------------------------------------------------------------------------------------
# mSGDW: torch's momentum SGD plus decoupled weight decay
# ---------------------------------------------------------------------------------------------

def no_decay(name: str, p: torch.Tensor) -> bool:
    """Whether parameter ``name`` is exempt from weight decay: norm gains and other vectors, as in
    nanoGPT (the matrices and the embeddings are decayed)."""
    return p.ndim < 2


@torch.no_grad()
def decoupled_weight_decay(optimizer: torch.optim.SGD) -> None:
    """Apply ``theta <- (1 - lr * weight_decay) theta`` to every group of a momentum-SGD optimizer.

    Call it right before ``optimizer.step()``: together they are mSGDW (``dnt-eq-msgdw``),
    ``b_t = mu b_{t-1} + g_t`` and ``theta_t = (1 - eta_t lambda) theta_{t-1} - eta_t b_t``. The
    decay is read from each group's ``"decoupled_weight_decay"`` entry (absent means 0), so the
    optimizer's own, coupled ``weight_decay`` stays 0 and untouched.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    for group in optimizer.param_groups:
        wd = check_range("decoupled_weight_decay", group.get("decoupled_weight_decay", 0.0), 0.0)
        params = [p for p in group["params"] if p.grad is not None]
        if wd and params:
            torch._foreach_mul_(params, 1.0 - group["lr"] * wd)


# ---------------------------------------------------------------------------------------------
# heavy-tail statistics of the gradients
# ---------------------------------------------------------------------------------------------

def weight_tensors(model: TinyGPT, *, embedding: bool = False
                   ) -> Iterator[tuple[str, torch.Tensor, torch.Tensor | None]]:
    """``(name, weight, gradient)`` for every weight matrix of ``model``, with ``W_q``, ``W_k`` and
    ``W_v`` split out of the fused ``qkv`` matrix (named ``blocks.0.attn.W_q`` and so on).

    Norm gains are vectors and are left out; so is the (tied) embedding unless ``embedding``.
    """
    if not isinstance(model, TinyGPT):
        raise TypeError(f"model must be a TinyGPT, got {type(model).__name__}")
    d = model.config.d_model
    names = {"attn.out.weight": "attn.W_o", "ffn.fc.weight": "ffn.W_1", "ffn.proj.weight": "ffn.W_2"}
    for name, p in model.named_parameters():
        if p.ndim != 2 or name == "pos.weight":
            continue
        if name == "embed.weight":
            if embedding:
                yield "embedding", p, p.grad
            continue
        prefix, _, tail = name.partition(".attn.") if ".attn.qkv" in name else (name, "", "")
        if tail == "qkv.weight":
            for i, part in enumerate(("W_q", "W_k", "W_v")):
                g = None if p.grad is None else p.grad[i * d:(i + 1) * d]
                yield f"{prefix}.attn.{part}", p[i * d:(i + 1) * d], g
            continue
        short = next((f"{name[: -len(k)]}{v}" for k, v in names.items() if name.endswith(k)), name)
        yield short, p, p.grad


def _hill(abs_values: np.ndarray, k: int) -> float:
    """Hill's estimator of the tail index from the ``k`` largest values (``dnt-eq-hill``)."""
    top = np.sort(abs_values)[::-1][: k + 1]
    if top[k] <= 0:
        return math.nan
    return float(1.0 / np.mean(np.log(top[:k] / top[k])))


@dataclass(frozen=True)
class HeavyTailStats:
    """What :func:`heavy_tail_stats` measures.

    Attributes:
        per_tensor: one row per weight matrix: ``tensor``, ``n`` (entries), ``grad_rms``,
            ``weight_rms``, ``grad_over_weight`` (``||g|| / ||W||``), ``excess_kurtosis`` (0 for
            a Gaussian), ``tail_ratio`` (99.9th over 50th percentile of ``|g|``) and ``hill``
            (the Hill tail index of ``|g|``; smaller is heavier, below 2 the variance is infinite).
        rms_spread: ``max / min`` of ``grad_rms`` across the tensors.
        ratio_spread: ``max / min`` of ``grad_over_weight`` across the tensors (``dnt-eq-spread``).
    """

    per_tensor: pd.DataFrame
    rms_spread: float
    ratio_spread: float


@torch.no_grad()
def heavy_tail_stats(model: TinyGPT, *, embedding: bool = False,
                     hill_fraction: float = 0.01) -> HeavyTailStats:
    """Heavy-tail statistics of the gradients currently stored in ``model`` (call ``backward`` first).

    Per weight matrix (see :func:`weight_tensors`; ``W_q``, ``W_k``, ``W_v`` separately, the
    embedding only if ``embedding``): the excess kurtosis ``E[(g - mean)^4] / Var(g)^2 - 3``, the
    ratio of the 99.9th to the 50th percentile of ``|g|``, and Hill's tail index
    (``dnt-eq-hill``) from the largest ``hill_fraction`` of the ``|g|`` (at least 50 entries, since
    fewer make the estimate noisy).
    Across the matrices: the spread (max over min) of the gradient RMS and of ``||g|| / ||W||``
    (``dnt-eq-spread``), the scale differences one global SGD learning rate cannot follow.
    """
    check_range("hill_fraction", hill_fraction, 0.0, 0.5, low_open=True)
    rows = []
    for name, w, g in weight_tensors(model, embedding=embedding):
        if g is None:
            raise ValueError(f"tensor {name} has no gradient: call loss.backward() before "
                             "heavy_tail_stats(model)")
        gv = g.detach().double().flatten().numpy()
        wv = w.detach().double().flatten().numpy()
        a = np.abs(gv)
        centred = gv - gv.mean()
        var = float(np.mean(centred**2))
        k = max(50, int(hill_fraction * a.size))
        med = float(np.median(a))
        rows.append({
            "tensor": name, "n": int(a.size),
            "grad_rms": float(np.sqrt(np.mean(gv**2))),
            "weight_rms": float(np.sqrt(np.mean(wv**2))),
            "grad_over_weight": float(np.linalg.norm(gv) / np.linalg.norm(wv)),
            "excess_kurtosis": float(np.mean(centred**4) / var**2 - 3.0) if var > 0 else math.nan,
            "tail_ratio": float(np.quantile(a, 0.999) / med) if med > 0 else math.inf,
            "hill": _hill(a, min(k, a.size - 1)),
        })
    df = pd.DataFrame(rows)
    return HeavyTailStats(df, _spread(df.grad_rms), _spread(df.grad_over_weight))


def _spread(values: pd.Series) -> float:
    lo = float(values.min())
    return float(values.max()) / lo if lo > 0 else math.inf
