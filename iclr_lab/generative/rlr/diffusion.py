"""A tiny DDPM on 2-D points, small enough that the exact gradient of a reward can be computed.

The reverse chain is written as a recursion with injected Gaussian noise (``rlr-eq-chain``):
``x_{t-1} = mu_theta(x_t, t) + sigma_t eps_t`` for ``t = T, ..., 1``, with ``sigma_t = sqrt(beta_t)``
at *every* step (including the last), so that every step has a likelihood ratio. The denoiser is an
MLP ``eps_theta(x, t)``; fine-tuning touches only an *adapter* ``phi``, of one of two kinds
(``TinyDiffusion(adapter=...)``, or :meth:`TinyDiffusion.with_adapter` on a pretrained model):

* ``"shared"`` (the default): an additive change of the MLP's last linear layer, one adapter shared
  by all ``T`` steps, as LoRA weights are in the paper (below);
* ``"per_step"``: one bounded drift per step, ``mu'_t = mu_theta(x_t, t) + PER_STEP_BOUND tanh(u_t)``
  with ``u_t`` in R^2, so ``phi = (u_1, ..., u_T)`` has ``2 T`` numbers and step ``t`` uses only
  ``u_t`` (the design of the chapter's spec, under which the early steps' credit cannot be
  borrowed by the last step).

The shared adapter adds ``ADAPTER_BOUND * tanh(dW h + db)`` to the noise prediction, where ``h`` is the
last hidden layer. ``phi`` is a flat vector of ``2 * hidden + 2`` numbers (the weight change,
row-major, then the bias change). Every function that takes it also accepts one adapter per
sample, shape ``(n, d)``: that is how the estimators get per-trajectory gradients from one
backward pass (sample ``i`` only touches row ``i``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed

__all__ = ["ADAPTERS", "ADAPTER_BOUND", "MODES", "PER_STEP_BOUND", "TinyDiffusion", "Trajectory",
           "mode_fraction", "pretrain", "sample_mixture", "target_reward"]

#: the four modes of the 2-D training data; the mixture's standard deviation is ``MODE_STD``
MODES = np.array([[2.0, 0.0], [0.0, 2.0], [-2.0, 0.0], [0.0, -2.0]])
MODE_STD = 0.25
#: the adapter changes the noise prediction by at most this much per coordinate and step
#: (``rlr-eq-adapter``), so the last steps, whose coefficient ``beta_t / sqrt(1 - abar_t)`` is small,
#: cannot move a sample far on their own
ADAPTER_BOUND = 1.0
#: the per-step adapter moves step ``t``'s mean by at most this much per coordinate
#: (``rlr-eq-adapter-step``): the last step alone cannot carry a sample from one mode to another
PER_STEP_BOUND = 0.3
#: the adapter kinds of :class:`TinyDiffusion`
ADAPTERS = ("shared", "per_step")

Reward = Callable[[torch.Tensor], torch.Tensor]


def sample_mixture(n: int, gen: torch.Generator) -> torch.Tensor:
    """``n`` points (``n >= 1``) of the 4-mode Gaussian mixture (centres ``MODES``, std
    ``MODE_STD``), drawn from ``gen``."""
    n = check_int("n", n, 1)
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")
    idx = torch.randint(0, len(MODES), (n,), generator=gen)
    centres = torch.as_tensor(MODES, dtype=torch.float32)[idx]
    return centres + MODE_STD * torch.randn(n, 2, generator=gen)


def target_reward(target: tuple[float, float]) -> Reward:
    """The differentiable reward ``R(x) = -||x - target||^2`` (``rlr-eq-objective``), one value per row."""
    c = torch.tensor([float(check_range("target[0]", target[0])),
                      float(check_range("target[1]", target[1]))])

    def reward(x: torch.Tensor) -> torch.Tensor:
        return -((x - c) ** 2).sum(-1)

    return reward


def mode_fraction(x: torch.Tensor, target: tuple[float, float], radius: float = 1.0) -> float:
    """Fraction of the points ``x`` (shape ``(n, 2)``, ``n >= 1``, finite) within ``radius``
    (in ``(0, inf)``) of ``target`` (two finite coordinates): the fine-tuning metric."""
    x = check_array("x", x, shape=(None, 2))
    c = torch.tensor([check_range("target[0]", target[0]), check_range("target[1]", target[1])])
    radius = check_range("radius", radius, 0.0, low_open=True)
    return float(((x - c).norm(dim=-1) <= radius).float().mean())


#: use :class:`_PerSampleAdapter` for per-sample adapters that require grad (the tests turn it off
#: to check that it gives what plain autograd gives, bit for bit)
_FAST = True


def _per_sample_pre(h: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """``dW_i h_i + db_i`` for one adapter per row: row ``i`` of ``phi`` acts on sample ``i`` only."""
    H = h.shape[1]
    w = phi[:, : 2 * H].view(-1, 2, H)
    return torch.bmm(h[:, None, :], w.transpose(1, 2))[:, 0] + phi[:, 2 * H:]


class _PerSampleAdapter(torch.autograd.Function):
    """``_per_sample_pre(h, phi.repeat(repeats, 1))`` with a hand-written backward.

    Autograd's backward of the batched product and the slices builds zero-filled ``(rows, d)``
    tensors and copies them; this one writes the per-sample gradient ``[g_i h_i^T, g_i]`` once
    (the same products, so the same numbers) and sums over ``repeats`` as ``Tensor.repeat``'s
    backward does, so that a per-sample ``phi`` need not be repeated. With ``zero`` (``phi`` is
    all zeros) the forward is the exact ``0`` and ``phi`` sends nothing back to ``h`` (its
    contribution ``g^T dW`` is an exact zero).
    """

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, phi: torch.Tensor, repeats: int,
                zero: bool) -> torch.Tensor:
        rows = phi if repeats == 1 else phi.repeat(repeats, 1)
        ctx.repeats, ctx.zero, ctx.n = repeats, zero, phi.shape[0]
        if zero:
            ctx.save_for_backward(h)
            return h.new_zeros(h.shape[0], 2)
        ctx.save_for_backward(h, rows)
        return _per_sample_pre(h, rows)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        h = ctx.saved_tensors[0]
        m, H = h.shape
        grad_phi = torch.empty(m, 2 * H + 2, dtype=g.dtype)
        torch.mul(g[:, :, None], h[:, None, :], out=grad_phi[:, : 2 * H].view(m, 2, H))
        grad_phi[:, 2 * H:] = g
        if ctx.repeats != 1:
            grad_phi = grad_phi.reshape(ctx.repeats, ctx.n, -1).sum([0])
        grad_h = None
        if ctx.needs_input_grad[0] and not ctx.zero:
            # g^T dW row by row; bmm sums the two products in this order, so the same numbers
            w = ctx.saved_tensors[1][:, : 2 * H].view(-1, 2, H)
            grad_h = g[:, 0:1] * w[:, 0] + g[:, 1:2] * w[:, 1]
        return grad_h, grad_phi, None, None


@dataclass
class Trajectory:
    """One batch of reverse chains: ``xs[t]`` is ``x_t`` (``t = 0..T``), ``zs[t]`` the noise
    ``sigma_t eps_t`` injected at step ``t`` (``zs[0]`` is unused and zero). With
    ``TinyDiffusion.trajectory(..., features=True)`` also ``feats[t]``, the last hidden layer
    ``h(x_t, t)``, and ``heads[t]``, the trunk's noise prediction ``head(h)`` before the adapter
    (row 0 of both unused), so that the estimators need not recompute them."""

    xs: torch.Tensor
    zs: torch.Tensor
    feats: torch.Tensor | None = None
    heads: torch.Tensor | None = None


class TinyDiffusion(nn.Module):
    """A DDPM with ``T`` steps on 2-D points and an MLP denoiser ``eps_theta(x, t)``.

    ``beta_t`` is linear from ``beta_min`` to ``beta_max``; the reverse step is the DDPM mean
    ``mu = (x - beta_t / sqrt(1 - abar_t) eps) / sqrt(alpha_t)`` plus noise of std
    ``sigma_t = sqrt(beta_t)`` (``rlr-eq-chain``). ``mean(x, t, phi)`` evaluates it with the adapter
    ``phi``: added to the last layer (``adapter="shared"``, ``rlr-eq-adapter``), or as a bounded
    drift of step ``t``'s mean (``adapter="per_step"``, ``rlr-eq-adapter-step``).

    Args:
        steps: number of denoising steps ``T`` (>= 2).
        hidden: width of the MLP's two hidden layers.
        beta_min, beta_max: the noise schedule's ends, ``0 < beta_min <= beta_max < 1``.
        seed: seeds the initial weights, in ``[0, 2**32 - 1]``.
        adapter: ``"shared"`` or ``"per_step"`` (``ADAPTERS``; the module docstring).

    ``steps`` is in ``[2, 1000]`` and ``hidden`` in ``[2, 4096]``.
    """

    betas: torch.Tensor
    sigmas: torch.Tensor
    inv_sqrt_alpha: torch.Tensor
    eps_coef: torch.Tensor
    abar: torch.Tensor
    freqs: torch.Tensor

    def __init__(self, steps: int = 20, hidden: int = 64, beta_min: float = 1e-3,
                 beta_max: float = 0.25, seed: int = 0, adapter: str = "shared") -> None:
        super().__init__()
        self.adapter = check_choice("adapter", adapter, ADAPTERS)
        self.steps = check_int("steps", steps, 2, 1000)
        self.hidden = check_int("hidden", hidden, 2, 4096)
        beta_min = check_range("beta_min", beta_min, 0.0, 1.0, low_open=True, high_open=True)
        beta_max = check_range("beta_max", beta_max, beta_min, 1.0, high_open=True)
        gen = torch.Generator().manual_seed(check_seed(seed))
        betas = torch.linspace(beta_min, beta_max, self.steps, dtype=torch.float64)
        alphas = 1.0 - betas
        abar = torch.cumprod(alphas, 0)
        # index t-1 holds step t's constants
        self.register_buffer("betas", betas.float())
        self.register_buffer("sigmas", betas.sqrt().float())
        self.register_buffer("inv_sqrt_alpha", (1.0 / alphas.sqrt()).float())
        self.register_buffer("eps_coef", (betas / (1.0 - abar).sqrt()).float())
        self.register_buffer("abar", abar.float())
        self.register_buffer("freqs", torch.exp(-math.log(100.0) * torch.arange(8) / 8.0))
        # the time embedding of every step t = 0..T, looked up by ``features`` (the same numbers
        # as computing it row by row: sin and cos act element by element)
        self._emb_table = self._embed(torch.arange(self.steps + 1))
        self.l1 = nn.Linear(2 + 16, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, 2)
        with torch.no_grad():
            for layer in (self.l1, self.l2, self.head):
                bound = 1.0 / math.sqrt(layer.in_features)
                layer.weight.uniform_(-bound, bound, generator=gen)
                layer.bias.uniform_(-bound, bound, generator=gen)

    @property
    def adapter_size(self) -> int:
        """``d``, the number of adapter parameters: ``2 * hidden + 2`` (shared), ``2 * T`` (per step)."""
        return 2 * self.hidden + 2 if self.adapter == "shared" else 2 * self.steps

    def with_adapter(self, adapter: str) -> TinyDiffusion:
        """A copy of this model with an adapter of kind ``adapter`` (``ADAPTERS``) that shares the
        trunk's weights and buffers (the same tensors, not copies): fine-tune a pretrained model's
        per-step adapter with ``model.with_adapter("per_step")``."""
        adapter = check_choice("adapter", adapter, ADAPTERS)
        new = copy.copy(self)
        # fresh module / parameter / buffer dicts (the tensors in them are shared)
        new._modules, new._parameters = dict(self._modules), dict(self._parameters)
        new._buffers = dict(self._buffers)
        new.adapter = adapter
        return new

    def zero_adapter(self) -> torch.Tensor:
        """The adapter ``phi = 0`` (the pretrained model)."""
        return torch.zeros(self.adapter_size)

    def _embed(self, t: torch.Tensor) -> torch.Tensor:
        """The sinusoidal embedding of the steps ``t`` (n,), shape (n, 16)."""
        ang = (t.float() / self.steps)[:, None] * 100.0 * self.freqs[None, :]
        return torch.cat([torch.sin(ang), torch.cos(ang)], dim=1)

    def features(self, x: torch.Tensor, t: torch.Tensor | int) -> torch.Tensor:
        """The last hidden layer ``h(x, t)`` for points ``x`` (n, 2) at integer steps ``t`` (n,)
        (or one step ``t`` for every row)."""
        emb = self._emb_table[t] if isinstance(t, torch.Tensor) else self._emb_table[t].expand(len(x), -1)
        # F.linear on the layers' tensors: the same product as calling the layer, without the
        # module call's Python frames (this runs some 40,000 times in a reproduce)
        l1, l2 = self.l1, self.l2
        h = nn.functional.silu(nn.functional.linear(torch.cat([x, emb], dim=1), l1.weight, l1.bias))
        return nn.functional.silu(nn.functional.linear(h, l2.weight, l2.bias))

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        """The trunk's output layer on the features ``h`` (``F.linear``, as in :meth:`features`)."""
        head = self.head
        return nn.functional.linear(h, head.weight, head.bias)

    def eps(self, x: torch.Tensor, t: torch.Tensor | int, phi: torch.Tensor | None = None) -> torch.Tensor:
        """The noise prediction ``eps_theta(x, t)`` with the adapter ``phi`` (shape (d,) or (n, d)).

        For the per-step adapter it is the noise prediction that gives :meth:`mean`'s drifted mean,
        ``eps_theta - (sqrt(alpha_t) / c_t) PER_STEP_BOUND tanh(u_t)`` (``c_t`` the mean's
        noise coefficient), equal to :meth:`mean` up to rounding."""
        if self.adapter == "shared" or phi is None:
            return self._eps(self.features(x, t), phi)
        i = t - 1 if not isinstance(t, torch.Tensor) else (t - 1)[:, None]
        k = 1.0 / (self.eps_coef[i] * self.inv_sqrt_alpha[i])
        return self._head(self.features(x, t)) - k * self._drift(t, phi)

    def _eps(self, h: torch.Tensor, phi: torch.Tensor | None, out: torch.Tensor | None = None,
             repeats: int = 1, zero: bool = False) -> torch.Tensor:
        """:meth:`eps` from the features ``h`` (and ``out = head(h)`` if known). ``repeats`` and
        ``zero`` are for per-sample adapters that require grad: ``phi`` (n, d) stands for
        ``phi.repeat(repeats, 1)``, and ``zero`` says that it is all zeros (see
        :class:`_PerSampleAdapter`)."""
        out = self._head(h) if out is None else out
        if phi is not None:
            if phi.dim() == 2 and phi.requires_grad and torch.is_grad_enabled() and _FAST:
                pre = _PerSampleAdapter.apply(h, phi, repeats, zero)
            else:
                pre = self.adapter_pre(h, phi if repeats == 1 else phi.repeat(repeats, 1))
            bounded = torch.tanh(pre)
            if ADAPTER_BOUND != 1.0:  # times 1.0 is exact: skip it
                bounded = ADAPTER_BOUND * bounded
            out = out + bounded
        return out

    def _drift(self, t: torch.Tensor | int, phi: torch.Tensor, repeats: int = 1) -> torch.Tensor:
        """The per-step adapter's drift ``PER_STEP_BOUND tanh(u_t)`` of step ``t`` (one step for
        every row, or one per row) for ``phi`` of shape (2T,) or (n, 2T), the latter standing for
        ``phi.repeat(repeats, 1)``; plain autograd (row ``i`` only touches row ``i`` of ``phi``)."""
        T = self.steps
        if phi.dim() == 1:
            u = phi.view(T, 2)[t - 1]
        else:
            rows = (phi if repeats == 1 else phi.repeat(repeats, 1)).view(-1, T, 2)
            if isinstance(t, torch.Tensor):
                u = rows[torch.arange(rows.shape[0]), t - 1]
            else:
                u = rows[:, t - 1]
        return PER_STEP_BOUND * torch.tanh(u)

    def _step(self, x: torch.Tensor, t: torch.Tensor | int, h: torch.Tensor,
              phi: torch.Tensor | None, out: torch.Tensor | None = None, repeats: int = 1,
              zero: bool = False) -> torch.Tensor:
        """:meth:`mean` from the features ``h`` of ``(x, t)`` (and ``out = head(h)`` if known);
        ``repeats`` and ``zero`` as in :meth:`_eps`. The shared adapter's path is
        ``_mean(x, t, _eps(h, phi, ...))``; the per-step adapter adds its drift to the trunk's mean."""
        if self.adapter == "shared":
            return self._mean(x, t, self._eps(h, phi, out, repeats=repeats, zero=zero))
        mu = self._mean(x, t, self._head(h) if out is None else out)
        return mu if phi is None else mu + self._drift(t, phi, repeats)

    def adapter_pre(self, h: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
        """``dW h + db``, the shared adapter's output before its ``tanh`` bound (``rlr-eq-adapter``)."""
        if self.adapter != "shared":
            raise ValueError("adapter_pre is the shared adapter's; this model's adapter is "
                             f"{self.adapter!r}")
        H = self.hidden
        if phi.dim() == 1:
            return h @ phi[: 2 * H].view(2, H).T + phi[2 * H:]
        return _per_sample_pre(h, phi)

    def mean(self, x: torch.Tensor, t: torch.Tensor | int, phi: torch.Tensor | None = None) -> torch.Tensor:
        """The reverse-step mean ``mu_theta(x_t, t)`` of ``rlr-eq-chain``; ``t`` holds steps in 1..T
        (one per row, or one step for every row)."""
        if self.adapter == "shared":
            return self._mean(x, t, self.eps(x, t, phi))
        return self._step(x, t, self.features(x, t), phi)

    def _mean(self, x: torch.Tensor, t: torch.Tensor | int, eps: torch.Tensor) -> torch.Tensor:
        """:meth:`mean` from the noise prediction ``eps`` (``t``: one step per row, or one for all)."""
        if not isinstance(t, torch.Tensor):
            return (x - self.eps_coef[t - 1] * eps) * self.inv_sqrt_alpha[t - 1]
        i = t - 1
        return (x - self.eps_coef[i, None] * eps) * self.inv_sqrt_alpha[i, None]

    def sigma(self, t: torch.Tensor) -> torch.Tensor:
        """The noise std ``sigma_t = sqrt(beta_t)`` of step ``t`` (one value per entry of ``t``)."""
        return self.sigmas[t - 1]

    def full(self, n: int, t: int) -> torch.Tensor:
        """``n`` copies of the step index ``t`` (a helper for batched calls)."""
        return torch.full((n,), t, dtype=torch.long)

    @torch.no_grad()
    def trajectory(self, n: int, gen: torch.Generator, phi: torch.Tensor | None = None,
                   perturb: torch.Tensor | None = None, features: bool = False) -> Trajectory:
        """Run the reverse chain for ``n`` samples without a graph and keep every state and noise.

        ``perturb``, shape ``(T + 1, n, d)``, adds ``perturb[t]`` to the adapter at step ``t``
        (the parameter perturbations of the zeroth-order terms, ``rlr-eq-zo``). ``features``
        also keeps each step's features and trunk output (:class:`Trajectory`).
        """
        n = check_int("n", n, 1)
        T = self.steps
        xs = torch.zeros(T + 1, n, 2)
        zs = torch.zeros(T + 1, n, 2)
        feats = torch.zeros(T + 1, n, self.hidden) if features else None
        heads = torch.zeros(T + 1, n, 2) if features else None
        xs[T] = torch.randn(n, 2, generator=gen)
        for t in range(T, 0, -1):
            p = phi
            if perturb is not None:
                base = self.zero_adapter() if phi is None else phi
                p = base + perturb[t]
            zs[t] = self.sigmas[t - 1] * torch.randn(n, 2, generator=gen)
            h = self.features(xs[t], t)
            out = self._head(h)
            if feats is not None and heads is not None:
                feats[t], heads[t] = h, out
            xs[t - 1] = self._step(xs[t], t, h, p, out) + zs[t]
        return Trajectory(xs, zs, feats, heads)

    @torch.no_grad()
    def sample(self, n: int, gen: torch.Generator, phi: torch.Tensor | None = None) -> torch.Tensor:
        """``n`` samples ``x_0`` of the model with adapter ``phi``."""
        return self.trajectory(n, gen, phi).xs[0]


class _CosineAdam:
    """``torch.optim.Adam`` (its defaults, the single-tensor path it takes on the CPU) under
    ``torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)``, written out op for op so that it
    gives the same numbers, bit for bit (``tests/generative/test_rlr_fast.py`` checks it), without
    ``torch.optim``'s per-step machinery or the ``torch._dynamo`` import its constructor triggers
    (over a second of CPU, once per process)."""

    def __init__(self, params: list[torch.Tensor], *, lr: float, steps: int) -> None:
        self.params, self.lr, self.base_lr, self.t_max, self.epoch = params, lr, lr, steps, 0
        self.exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in params]
        self.exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in params]
        self.step_t = [torch.tensor(0.0) for _ in params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2, eps, lr = 0.9, 0.999, 1e-8, self.lr
        for p, m, v, step_t in zip(self.params, self.exp_avg, self.exp_avg_sq, self.step_t,
                                   strict=True):
            grad = p.grad
            assert grad is not None
            step_t += 1
            m.lerp_(grad, 1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step = step_t.item()
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            step_size = lr / bias_correction1
            bias_correction2_sqrt = bias_correction2**0.5
            denom = (v.sqrt() / bias_correction2_sqrt).add_(eps)
            p.addcdiv_(m, denom, value=-step_size)
        # CosineAnnealingLR's recursive form (eta_min = 0), as its ``get_lr`` computes it
        self.epoch += 1
        e, T = self.epoch, self.t_max
        if (e - 1 - T) % (2 * T) == 0:
            self.lr = self.lr + (self.base_lr - 0) * (1 - math.cos(math.pi / T)) / 2
        else:
            self.lr = ((1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
                       * (self.lr - 0) + 0)


def pretrain(model: TinyDiffusion, *, steps: int = 1500, batch_size: int = 256, lr: float = 3e-3,
             seed: int = 0) -> list[float]:
    """Fit ``eps_theta`` to the 4-mode mixture with the DDPM noise-prediction loss; returns the losses.

    Adam with a cosine-decayed learning rate; the data and the noise come from ``seed``.
    ``steps`` and ``batch_size`` are at least 1, ``lr`` in ``(0, inf)``, ``seed`` in
    ``[0, 2**32 - 1]``.
    """
    if not isinstance(model, TinyDiffusion):
        raise TypeError(f"model must be a TinyDiffusion, got {type(model).__name__}")
    steps = check_int("steps", steps, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    lr = check_range("lr", lr, 0.0, low_open=True)
    gen = torch.Generator().manual_seed(check_seed(seed))
    opt = _CosineAdam(list(model.parameters()), lr=lr, steps=steps)
    losses = []
    for _ in range(steps):
        x0 = sample_mixture(batch_size, gen)
        t = torch.randint(1, model.steps + 1, (batch_size,), generator=gen)
        noise = torch.randn(batch_size, 2, generator=gen)
        ab = model.abar[t - 1, None]
        xt = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
        loss = ((model.eps(xt, t) - noise) ** 2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    for p in model.parameters():
        p.requires_grad_(False)  # the trunk is frozen from here on; only adapters are trained
    return losses
