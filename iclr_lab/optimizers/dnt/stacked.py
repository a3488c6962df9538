"""Many :func:`~iclr_lab.optimizers.dnt.training.train_lm` runs trained at once, as one stack.

A run of the chapter is a 40k-parameter GPT; on a CPU a third of its step is per-operation
overhead (Python, autograd's bookkeeping, the optimizer's loop), the same for one model as for
thirty. :func:`train_many` trains ``M`` runs together: every weight of every model is row ``m`` of
one tensor of shape ``(M, ...)``, each layer is one batched matrix product over the rows, and one
backward pass gives every model its own gradient (the models share no parameter and no reduction,
so model ``m``'s gradient is that of its own loss). Each run may have its own placement
(a norm that is off in a model is an identity there: ``torch.where`` on a per-model flag, whose
backward passes no gradient to the unused branch), optimizer, peak rate, clipping and seed.

It is the computation of ``train_lm`` written for a stack, not a new method:

* the initial weights are those of ``TinyGPT(config, placement)`` after ``torch.manual_seed(seed)``
  (copied in), the minibatches, validation set and probe batch are ``train_lm``'s;
* AdamW and mSGDW are PyTorch's update rules (``torch.optim.AdamW`` and ``torch.optim.SGD`` with
  momentum, plus the decoupled decay of ``dnt-eq-msgdw``) with each row's rate, the schedule is
  :meth:`~iclr_lab.optimizers.dnt.training.Recipe.schedule`, the clipping that of
  ``torch.nn.utils.clip_grad_norm_``, per model;
* a run whose loss or gradient norm becomes non-finite stops there, as in ``train_lm``, and leaves
  the stack (so do probes that stop early), so the others no longer pay for it.

The numbers equal ``train_lm``'s up to the rounding of batched against single matrix products
(``tests/optimizers/test_dnt_stacked.py`` compares them in float64 to 1e-9 and in float32 over a
short run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch.nn import functional as F  # noqa: N812 - the usual alias

from iclr_lab.core.languages import ZipfLanguage
from iclr_lab.core.validation import check_choice, check_int, check_range
from iclr_lab.optimizers.dnt.model import (
    PLACEMENTS,
    GPTConfig,
    Placement,
    TinyGPT,
    heavy_tail_stats,
    weight_tensors,
)
from iclr_lab.optimizers.dnt.training import OPTIMIZERS, Recipe, Run, _histograms

__all__ = ["Spec", "train_many"]

_FULL = Placement(input_norm=True, ffn_prenorm=True, qk_norm=True, mid_norm=True)


@dataclass(frozen=True)
class Spec:
    """One run of :func:`train_many`: what :func:`~iclr_lab.optimizers.dnt.training.train_lm` takes.

    Args:
        norm: ``"pre"``, ``"dnt"`` or a :class:`~iclr_lab.optimizers.dnt.model.Placement`.
        optimizer: ``"adamw"`` or ``"msgdw"``.
        lr: the peak learning rate.
        seed: the run's seed (language, weights, minibatches, validation and probe batches).
        clip: clip the model's global gradient norm to this value (``None``: no clipping).
        stats_at: the step at which to measure the probe batch's gradient (``None``: never).
        stop_at: stop after this many steps (``None``: run them all).
    """

    norm: str | Placement
    optimizer: str
    lr: float
    seed: int = 0
    clip: float | None = None
    stats_at: int | None = None
    stop_at: int | None = None

    @property
    def placement(self) -> Placement:
        """The placement of the run's model."""
        return self.norm if isinstance(self.norm, Placement) else PLACEMENTS[self.norm]


# the per-model flags, in the order of the norms of a block (Placement field names)
_FLAGS = ("input_norm", "attn_prenorm", "qk_norm", "mid_norm", "ffn_prenorm", "final_norm")


class _Stack:
    """The parameters, optimizer state and per-model settings of the runs still training."""

    def __init__(self, config: GPTConfig, specs: Sequence[Spec], rows: list[int],
                 dtype: torch.dtype) -> None:
        self.config, self.rows = config, rows
        inits = []
        for k in rows:
            torch.manual_seed(specs[k].seed)
            inits.append(dict(TinyGPT(config, specs[k].norm).to(dtype).named_parameters()))
        shapes = dict(TinyGPT(config, _FULL).named_parameters())
        self.params: dict[str, torch.Tensor] = {}
        for name, p in shapes.items():
            rows_ = [init[name].detach() if name in init else torch.ones(p.shape, dtype=dtype)
                     for init in inits]
            self.params[name] = torch.stack(rows_).requires_grad_()
        # the flat copy holds the decayed tensors (matrices and the embedding: one row per model)
        # first, so that the decay is one product on its first columns
        self.flat_names = sorted(self.params, key=lambda n: self.params[n].ndim <= 2)
        self.n_decayed = sum(math.prod(self.params[n].shape[1:]) for n in self.flat_names
                             if self.params[n].ndim > 2)
        self.flags = {f: torch.tensor([getattr(specs[k].placement, f) for k in rows])
                      for f in _FLAGS}
        self._pack()
        # the optimizer state, one row per model, in the flat copy's columns
        self.state: dict[str, torch.Tensor] = {s: torch.zeros_like(self.flat) for s in ("m", "v", "buf")}

    def _pack(self) -> None:
        """The flat copy ``(M, P)`` of the parameters that the optimizer updates (a few large
        operations per step instead of a dozen per tensor), and the per-model norm flags as Python
        truth values for :func:`_norm`."""
        m = len(self.rows)
        self.sizes = [math.prod(self.params[n].shape[1:]) for n in self.flat_names]
        self.views = [self.params[n].detach().view(m, k)
                      for n, k in zip(self.flat_names, self.sizes, strict=True)]
        self.flat = torch.cat(self.views, dim=1)
        self.any = {f: bool(v.any()) for f, v in self.flags.items()}
        self.all = {f: bool(v.all()) for f, v in self.flags.items()}

    def flat_grads(self, grads: dict[str, torch.Tensor]) -> torch.Tensor:
        """``grads`` (by parameter name) as one ``(M, P)`` tensor, in the flat copy's columns."""
        return torch.cat([grads[n].reshape(grads[n].shape[0], -1) for n in self.flat_names], dim=1)

    def unpack(self) -> None:
        """Copy the updated flat copy back into the parameters."""
        torch._foreach_copy_(self.views, list(self.flat.split(self.sizes, dim=1)))

    def keep(self, mask: list[bool]) -> None:
        """Drop the rows whose ``mask`` entry is False (params, optimizer state and flags)."""
        idx = torch.tensor([i for i, k in enumerate(mask) if k], dtype=torch.long)
        self.rows = [r for r, k in zip(self.rows, mask, strict=True) if k]
        self.params = {n: p.detach().index_select(0, idx).requires_grad_()
                       for n, p in self.params.items()}
        self.flags = {f: v.index_select(0, idx) for f, v in self.flags.items()}
        self.state = {s: t.index_select(0, idx) for s, t in self.state.items()}
        self._pack()


def _norm(x: torch.Tensor, gain: torch.Tensor, stack: _Stack, flag: str) -> torch.Tensor:
    """RMSNorm of the last dimension with each model's gain, where the model has the norm ``flag``.

    ``x`` has the models on its first dimension; ``gain`` is ``(M, k)``.
    """
    if not stack.any[flag]:
        return x
    on = stack.flags[flag]
    shape = (gain.shape[0],) + (1,) * (x.ndim - 2) + (gain.shape[1],)
    y = F.rms_norm(x, (x.shape[-1],), eps=stack.config.norm_eps) * gain.view(shape)
    if stack.all[flag]:
        return y
    return torch.where(on.view((-1,) + (1,) * (x.ndim - 1)), y, x)


def _hidden(stack: _Stack, params: dict[str, torch.Tensor], tokens: torch.Tensor) -> torch.Tensor:
    """The final hidden states ``(M, b * t, d)`` of every model on its own tokens ``(M, b, t)``
    (the logits are these times each model's tied embedding: :func:`_losses`)."""
    cfg = stack.config
    m, b, t = tokens.shape
    d, h, dh, v = cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.vocab
    offsets = (torch.arange(m) * v).view(m, 1, 1)
    embed = params["embed.weight"]
    x = F.embedding(tokens + offsets, embed.view(m * v, d)) + params["pos.weight"][:, :t].unsqueeze(1)
    x = _norm(x, params["input_norm.weight"], stack, "input_norm")      # (M, b, t, d)
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        a = _norm(x, params[p + "attn_prenorm.weight"], stack, "attn_prenorm")
        qkv = torch.bmm(a.reshape(m, b * t, d), params[p + "attn.qkv.weight"].transpose(1, 2))
        q, k, val = (z.reshape(m, b, t, h, dh) for z in qkv.split(d, dim=-1))
        q = _norm(q, params[p + "attn.q_norm.weight"], stack, "qk_norm")
        k = _norm(k, params[p + "attn.k_norm.weight"], stack, "qk_norm")
        q, k, val = (z.reshape(m * b, t, h, dh).transpose(1, 2) for z in (q, k, val))
        y = F.scaled_dot_product_attention(q, k, val, is_causal=True)
        y = torch.bmm(y.transpose(1, 2).reshape(m, b * t, d),
                      params[p + "attn.out.weight"].transpose(1, 2))
        x = x + _norm(y, params[p + "attn_midnorm.weight"], stack, "mid_norm").view(m, b, t, d)
        f = _norm(x, params[p + "ffn_prenorm.weight"], stack, "ffn_prenorm").reshape(m, b * t, d)
        hid = torch.bmm(f, params[p + "ffn.fc.weight"].transpose(1, 2))
        hid = F.gelu(hid) if cfg.activation == "gelu" else F.relu(hid)
        f = torch.bmm(hid, params[p + "ffn.proj.weight"].transpose(1, 2))
        x = x + _norm(f, params[p + "ffn_midnorm.weight"], stack, "mid_norm").view(m, b, t, d)
    x = _norm(x, params["final_norm.weight"], stack, "final_norm")
    return x.reshape(m, b * t, d)


#: models per chunk of the vocabulary projection and cross-entropy in :func:`_losses`
_CHUNK = 4


def _losses(stack: _Stack, tokens: torch.Tensor) -> torch.Tensor:
    """Each model's mean next-token cross-entropy on its own sequences ``(M, b, t + 1)``.

    The logits are the stack's largest tensor (``M * b * t * vocab``: 17 MB for 33 models of the
    chapter), and every pass over them is bound by memory. Computed for :data:`_CHUNK` models at a
    time, the logits, their softmax and its gradient stay in the cache: about 40% less time for
    this part of the step, and the same numbers (each model's products and rows are computed alone
    either way; ``tests/optimizers/test_dnt_stacked.py`` checks that chunking changes no bit).
    """
    x = _hidden(stack, stack.params, tokens[:, :, :-1])
    embed, targets = stack.params["embed.weight"], tokens[:, :, 1:]
    out = []
    # split, not slices: the backward of a split is one concatenation, that of each slice a
    # zero tensor of the whole size
    for xs, es, ts in zip(x.split(_CHUNK), embed.split(_CHUNK), targets.split(_CHUNK),
                          strict=True):
        logits = torch.bmm(xs, es.transpose(1, 2))
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ts.reshape(-1),
                             reduction="none")
        out.append(ce.view(logits.shape[0], -1).mean(1))
    return torch.cat(out)


def _col(values: Sequence[float], like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(list(values), dtype=like.dtype).view(-1, *([1] * (like.ndim - 1)))


def train_many(specs: Sequence[Spec], *, steps: int = 250, batch_size: int = 32,
               config: GPTConfig | None = None, recipe: Recipe | None = None,
               val_sequences: int = 256, dtype: torch.dtype = torch.float32,
               languages: dict[int, ZipfLanguage] | None = None) -> list[Run]:
    """Train every run of ``specs`` at once; return one :class:`~iclr_lab.optimizers.dnt.training.Run`
    per spec, in order, with what ``train_lm(..., eval_every=steps)`` returns for it.

    ``languages`` maps a seed to its language (default ``ZipfLanguage(vocab, seed)``).
    Each run's ``model`` is a :class:`~iclr_lab.optimizers.dnt.model.TinyGPT` holding its final
    weights.
    """
    config = config or GPTConfig()
    recipe = recipe or Recipe()
    steps = check_int("steps", steps, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    check_int("val_sequences", val_sequences, 1)
    for s in specs:
        check_choice("optimizer", s.optimizer, OPTIMIZERS)
        check_range("lr", s.lr, 0.0, low_open=True)
        if s.stats_at is not None:
            check_int("stats_at", s.stats_at, 0, steps)
    languages = dict(languages or {})
    seeds = sorted({s.seed for s in specs})
    length = config.context + 1
    train, val, probe = {}, {}, {}
    for seed in seeds:
        lang = languages.get(seed) or ZipfLanguage(vocab=config.vocab, seed=seed)
        train[seed] = torch.from_numpy(lang.sample(steps * batch_size, length,
                                                   np.random.default_rng([seed, 1])))
        val[seed] = torch.from_numpy(lang.sample(val_sequences, length,
                                                 np.random.default_rng([seed, 2])))
        probe[seed] = torch.from_numpy(lang.sample(32, length, np.random.default_rng([seed, 3])))
    # AdamW rows first, then mSGDW rows: each optimizer updates a contiguous slice (a view)
    order = sorted(range(len(specs)), key=lambda k: (specs[k].optimizer != "adamw", k))
    stack = _Stack(config, specs, order, dtype)
    stop = {k: steps if specs[k].stop_at is None else check_int("stop_at", specs[k].stop_at, 1, steps)
            for k in order}
    losses: dict[int, list[float]] = {k: [] for k in order}
    norms: dict[int, list[float]] = {k: [] for k in order}
    stats: dict[int, tuple[object, pd.DataFrame]] = {}
    finished: dict[int, tuple[dict[str, torch.Tensor], bool]] = {}
    beta1, beta2 = recipe.adamw_betas

    def finish(done: list[bool], diverged: list[bool]) -> None:
        for i, k in enumerate(stack.rows):
            if done[i]:
                finished[k] = ({n: p[i].detach().clone() for n, p in stack.params.items()},
                               diverged[i])
        if any(done):
            stack.keep([not d for d in done])

    for step in range(steps):
        if not stack.rows:
            break
        specs_now = [specs[k] for k in stack.rows]
        if any(s.stats_at == step for s in specs_now):
            _probe(stack, specs, probe, step, stats)
        batch = torch.stack([train[s.seed][step * batch_size:(step + 1) * batch_size]
                             for s in specs_now])
        loss = _losses(stack, batch)
        names = list(stack.params)
        grads = _grads(loss, stack, names)
        g = stack.flat_grads(dict(zip(names, grads, strict=True)))
        m = len(stack.rows)
        per = torch.stack([torch.linalg.vector_norm(t.reshape(m, -1), dim=1) for t in grads])
        gnorm = torch.linalg.vector_norm(per, dim=0)
        values, gvals = loss.detach().tolist(), gnorm.tolist()
        for k, lv, gv in zip(stack.rows, values, gvals, strict=True):
            losses[k].append(lv)
            norms[k].append(gv)
        bad = [not (math.isfinite(lv) and math.isfinite(gv)) for lv, gv in zip(values, gvals,
                                                                               strict=True)]
        if any(bad):
            finish(bad, bad)
            keep = [i for i, b in enumerate(bad) if not b]
            if not stack.rows:
                break
            idx = torch.tensor(keep, dtype=torch.long)
            g = g.index_select(0, idx)
            gnorm = gnorm.index_select(0, idx)
            specs_now = [specs[k] for k in stack.rows]
        clips = [math.inf if s.clip is None else s.clip for s in specs_now]
        if any(math.isfinite(c) for c in clips):
            coef = (torch.tensor(clips, dtype=gnorm.dtype) / (gnorm + 1e-6)).clamp(max=1.0)
            g = g * coef.view(-1, 1)
        mult = recipe.schedule(step, steps)
        _update(stack, g, [s.lr * mult for s in specs_now], [s.optimizer for s in specs_now],
                recipe, step + 1, beta1, beta2)
        done = [stop[k] == step + 1 for k in stack.rows]
        if any(d and specs[k].stats_at == step + 1 for d, k in zip(done, stack.rows, strict=True)):
            _probe(stack, specs, probe, step + 1, stats)
        if any(done):
            finish(done, [False] * len(done))
    results = []
    for k, spec in enumerate(specs):
        params, diverged = finished[k]
        model = TinyGPT(config, spec.norm).to(dtype)
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(params[name])
        final = math.inf
        if not diverged:
            final = _evaluate(model, val[spec.seed])
            diverged = not math.isfinite(final)
        n_steps = len(losses[k])
        row = {"step": n_steps, "val_loss": math.inf if diverged else final,
               "train_loss": math.inf if diverged else losses[k][-1]}
        with torch.no_grad():
            weights = {n: float(w.norm()) for n, w, _ in weight_tensors(model, embedding=True)}
        st = stats.get(k)
        results.append(Run(pd.DataFrame([row]), math.inf if diverged else final, diverged,
                           st[0] if st else None, st[1] if st else None,  # type: ignore[arg-type]
                           np.asarray(losses[k]), np.asarray(norms[k]), weights, model))
    return results


def _grads(loss: torch.Tensor, stack: _Stack, names: list[str]) -> list[torch.Tensor]:
    """The gradient of every model's loss for every stacked parameter (zeros for a gain that no
    model of the stack uses)."""
    params = [stack.params[n] for n in names]
    grads = torch.autograd.grad(loss.sum(), params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]


@torch.no_grad()
def _evaluate(model: TinyGPT, tokens: torch.Tensor, chunk: int = 128) -> float:
    losses = [float(model.loss(tokens[i:i + chunk])) * len(tokens[i:i + chunk])
              for i in range(0, len(tokens), chunk)]
    return sum(losses) / len(tokens)


def _probe(stack: _Stack, specs: Sequence[Spec], probe: dict[int, torch.Tensor], step: int,
           out: dict[int, tuple[object, pd.DataFrame]]) -> None:
    """Gradient statistics of each asking model's probe batch at its current weights."""
    tokens = torch.stack([probe[specs[k].seed] for k in stack.rows])
    names = list(stack.params)
    grads = _grads(_losses(stack, tokens), stack, names)
    for i, k in enumerate(stack.rows):
        if specs[k].stats_at != step or k in out:
            continue
        model = TinyGPT(stack.config, specs[k].norm).to(stack.params[names[0]].dtype)
        own = dict(zip(names, grads, strict=True))
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(stack.params[name][i])
                p.grad = own[name][i].clone()
        out[k] = (heavy_tail_stats(model), _histograms(model))


@torch.no_grad()
def _update(stack: _Stack, g: torch.Tensor, lrs: list[float], opts: list[str], recipe: Recipe,
            step: int, beta1: float, beta2: float) -> None:
    """One optimizer step of every row of the flat copy (gradient ``g``, the same shape): AdamW
    on the first rows, mSGDW on the rest; then the parameters take the new values."""
    n_adam, p, k = sum(o == "adamw" for o in opts), stack.flat, stack.n_decayed
    if n_adam:
        pa, ga = p[:n_adam], g[:n_adam]
        lr = _col(lrs[:n_adam], pa)
        pa[:, :k].mul_(1 - lr * recipe.adamw_weight_decay)
        m, v = stack.state["m"][:n_adam], stack.state["v"][:n_adam]
        m.lerp_(ga, 1 - beta1)
        v.mul_(beta2).addcmul_(ga, ga, value=1 - beta2)
        bc1, bc2 = 1 - beta1 ** step, 1 - beta2 ** step
        denom = (v.sqrt() / math.sqrt(bc2)).add_(1e-8)
        pa.sub_(m / denom * (lr / bc1))
    if n_adam < len(opts):
        ps, gs = p[n_adam:], g[n_adam:]
        lr = _col(lrs[n_adam:], ps)
        ps[:, :k].mul_(1 - lr * recipe.msgdw_weight_decay)
        buf = stack.state["buf"][n_adam:]
        if step == 1:
            buf.copy_(gs)
        else:
            buf.mul_(recipe.momentum).add_(gs)
        ps.sub_(buf * lr)
    stack.unpack()
