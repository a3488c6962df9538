"""A tiny DDPM on 2-D points, small enough that the exact gradient of a reward can be computed.

The reverse chain is written as a recursion with injected Gaussian noise (``rlr-eq-chain``):
``x_{t-1} = mu_theta(x_t, t) + sigma_t eps_t`` for ``t = T, ..., 1``, with ``sigma_t = sqrt(beta_t)``
at *every* step (including the last), so that every step has a likelihood ratio. The denoiser is an
MLP ``eps_theta(x, t)``; fine-tuning touches only an *adapter*: an additive change ``phi`` of the
MLP's last linear layer, one adapter shared by all ``T`` steps, as LoRA weights are in the paper.

The adapter adds ``ADAPTER_BOUND * tanh(dW h + db)`` to the noise prediction, where ``h`` is the
last hidden layer. ``phi`` is a flat vector of ``2 * hidden + 2`` numbers (the weight change,
row-major, then the bias change). Every function that takes it also accepts one adapter per
sample, shape ``(n, d)``: that is how the estimators get per-trajectory gradients from one
backward pass (sample ``i`` only touches row ``i``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from iclr_lab.core.validation import check_int, check_range

__all__ = ["ADAPTER_BOUND", "MODES", "TinyDiffusion", "Trajectory", "mode_fraction", "pretrain",
           "sample_mixture", "target_reward"]

#: the four modes of the 2-D training data; the mixture's standard deviation is ``MODE_STD``
MODES = np.array([[2.0, 0.0], [0.0, 2.0], [-2.0, 0.0], [0.0, -2.0]])
MODE_STD = 0.25
#: the adapter changes the noise prediction by at most this much per coordinate and step
#: (``rlr-eq-adapter``), so the last steps, whose coefficient ``beta_t / sqrt(1 - abar_t)`` is small,
#: cannot move a sample far on their own
ADAPTER_BOUND = 1.0

Reward = Callable[[torch.Tensor], torch.Tensor]


def sample_mixture(n: int, gen: torch.Generator) -> torch.Tensor:
    """``n`` points of the 4-mode Gaussian mixture (centres ``MODES``, std ``MODE_STD``)."""
    n = check_int("n", n, 1)
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
    """Fraction of the points ``x`` within ``radius`` of ``target`` (the fine-tuning metric)."""
    c = torch.tensor([float(target[0]), float(target[1])])
    return float(((x - c).norm(dim=-1) <= radius).float().mean())


@dataclass
class Trajectory:
    """One batch of reverse chains: ``xs[t]`` is ``x_t`` (``t = 0..T``), ``zs[t]`` the noise
    ``sigma_t eps_t`` injected at step ``t`` (``zs[0]`` is unused and zero)."""

    xs: torch.Tensor
    zs: torch.Tensor


class TinyDiffusion(nn.Module):
    """A DDPM with ``T`` steps on 2-D points and an MLP denoiser ``eps_theta(x, t)``.

    ``beta_t`` is linear from ``beta_min`` to ``beta_max``; the reverse step is the DDPM mean
    ``mu = (x - beta_t / sqrt(1 - abar_t) eps) / sqrt(alpha_t)`` plus noise of std
    ``sigma_t = sqrt(beta_t)`` (``rlr-eq-chain``). ``mean(x, t, phi)`` evaluates it with the adapter
    ``phi`` added to the last layer (``rlr-eq-adapter``).

    Args:
        steps: number of denoising steps ``T`` (>= 2).
        hidden: width of the MLP's two hidden layers.
        beta_min, beta_max: the noise schedule's ends, ``0 < beta_min <= beta_max < 1``.
        seed: seeds the initial weights.
    """

    betas: torch.Tensor
    sigmas: torch.Tensor
    inv_sqrt_alpha: torch.Tensor
    eps_coef: torch.Tensor
    abar: torch.Tensor
    freqs: torch.Tensor

    def __init__(self, steps: int = 20, hidden: int = 64, beta_min: float = 1e-3,
                 beta_max: float = 0.25, seed: int = 0) -> None:
        super().__init__()
        self.steps = check_int("steps", steps, 2, 1000)
        self.hidden = check_int("hidden", hidden, 2, 4096)
        beta_min = check_range("beta_min", beta_min, 0.0, 1.0, low_open=True, high_open=True)
        beta_max = check_range("beta_max", beta_max, beta_min, 1.0, high_open=True)
        gen = torch.Generator().manual_seed(check_int("seed", seed, 0))
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
        """``d = 2 * hidden + 2``: the number of adapter parameters."""
        return 2 * self.hidden + 2

    def zero_adapter(self) -> torch.Tensor:
        """The adapter ``phi = 0`` (the pretrained model)."""
        return torch.zeros(self.adapter_size)

    def features(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The last hidden layer ``h(x, t)`` for points ``x`` (n, 2) at integer steps ``t`` (n,)."""
        ang = (t.float() / self.steps)[:, None] * 100.0 * self.freqs[None, :]
        emb = torch.cat([torch.sin(ang), torch.cos(ang)], dim=1)
        h = nn.functional.silu(self.l1(torch.cat([x, emb], dim=1)))
        return nn.functional.silu(self.l2(h))

    def eps(self, x: torch.Tensor, t: torch.Tensor, phi: torch.Tensor | None = None) -> torch.Tensor:
        """The noise prediction ``eps_theta(x, t)`` with the adapter ``phi`` (shape (d,) or (n, d))."""
        h = self.features(x, t)
        out = self.head(h)
        if phi is not None:
            out = out + ADAPTER_BOUND * torch.tanh(self.adapter_pre(h, phi))
        return out

    def adapter_pre(self, h: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
        """``dW h + db``, the adapter's output before its ``tanh`` bound (``rlr-eq-adapter``)."""
        H = self.hidden
        if phi.dim() == 1:
            return h @ phi[: 2 * H].view(2, H).T + phi[2 * H:]
        # one adapter per sample: row i of phi acts on sample i only
        w = phi[:, : 2 * H].view(-1, 2, H)
        return torch.einsum("nh,nkh->nk", h, w) + phi[:, 2 * H:]

    def mean(self, x: torch.Tensor, t: torch.Tensor, phi: torch.Tensor | None = None) -> torch.Tensor:
        """The reverse-step mean ``mu_theta(x_t, t)`` of ``rlr-eq-chain``; ``t`` holds steps in 1..T."""
        i = t - 1
        return (x - self.eps_coef[i, None] * self.eps(x, t, phi)) * self.inv_sqrt_alpha[i, None]

    def sigma(self, t: torch.Tensor) -> torch.Tensor:
        """The noise std ``sigma_t = sqrt(beta_t)`` of step ``t`` (one value per entry of ``t``)."""
        return self.sigmas[t - 1]

    def full(self, n: int, t: int) -> torch.Tensor:
        """``n`` copies of the step index ``t`` (a helper for batched calls)."""
        return torch.full((n,), t, dtype=torch.long)

    @torch.no_grad()
    def trajectory(self, n: int, gen: torch.Generator, phi: torch.Tensor | None = None,
                   perturb: torch.Tensor | None = None) -> Trajectory:
        """Run the reverse chain for ``n`` samples without a graph and keep every state and noise.

        ``perturb``, shape ``(T + 1, n, d)``, adds ``perturb[t]`` to the adapter at step ``t``
        (the parameter perturbations of the zeroth-order terms, ``rlr-eq-zo``).
        """
        n = check_int("n", n, 1)
        T = self.steps
        xs = torch.zeros(T + 1, n, 2)
        zs = torch.zeros(T + 1, n, 2)
        xs[T] = torch.randn(n, 2, generator=gen)
        for t in range(T, 0, -1):
            p = phi
            if perturb is not None:
                base = self.zero_adapter() if phi is None else phi
                p = base + perturb[t]
            zs[t] = self.sigmas[t - 1] * torch.randn(n, 2, generator=gen)
            xs[t - 1] = self.mean(xs[t], self.full(n, t), p) + zs[t]
        return Trajectory(xs, zs)

    @torch.no_grad()
    def sample(self, n: int, gen: torch.Generator, phi: torch.Tensor | None = None) -> torch.Tensor:
        """``n`` samples ``x_0`` of the model with adapter ``phi``."""
        return self.trajectory(n, gen, phi).xs[0]


def pretrain(model: TinyDiffusion, *, steps: int = 1500, batch_size: int = 256, lr: float = 3e-3,
             seed: int = 0) -> list[float]:
    """Fit ``eps_theta`` to the 4-mode mixture with the DDPM noise-prediction loss; returns the losses.

    Adam with a cosine-decayed learning rate; the data and the noise come from ``seed``.
    """
    steps = check_int("steps", steps, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    lr = check_range("lr", lr, 0.0, low_open=True)
    gen = torch.Generator().manual_seed(check_int("seed", seed, 0))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
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
        sched.step()
        losses.append(float(loss.detach()))
    for p in model.parameters():
        p.requires_grad_(False)  # the trunk is frozen from here on; only adapters are trained
    return losses
