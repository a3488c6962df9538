"""Train the RISP chapter's gradient-step denoiser by denoising score matching.

    python -m iclr_lab.recovery.risp.train_prior            # writes the shipped gs_denoiser.pt/.json
    python -m iclr_lab.recovery.risp.train_prior --steps 50 --out /tmp/gs.pt   # a quick try

Each step draws ``--batch`` patches of ``--patch x --patch`` pixels from bundled scikit-image
pictures (grey, at three scales, with random flips and quarter turns), adds Gaussian noise of
standard deviation ``sigma`` and takes an Adam step on the denoising loss
``mean ||D(x + sigma e) - x||^2`` with ``D = Id - grad g_N`` the gradient-step denoiser
(``risp-eq-gs``). Since ``D(z) - z = -grad g_N(z)``, this is exactly denoising score matching
(Vincent, 2011) for the score model ``-grad g_N / sigma^2``: the loss is
``sigma^4 E||s(z) + e / sigma||^2``. Training goes through ``grad g_N`` (double backprop).

The pictures the chapter tests on never enter training: ``camera`` (the deblurring problem) and
``astronaut`` (the held-out denoising check of the tests). ``cat`` is ``chelsea`` under another
name, and ``checkerboard`` and ``horse`` are synthetic two-level pictures; they are left out too.

Deterministic: step ``t`` draws its patches and noise from ``numpy.random.default_rng([seed, t])``
and the weights start from ``torch.manual_seed(seed)``; torch runs on one thread, so the same seed
gives the same weights on the same machine. Outputs: the weights file (``{"format", "config",
"state_dict"}``, read by :func:`~iclr_lab.recovery.risp.prior.load_denoiser` with
``torch.load(weights_only=True)``) and, beside it with the suffix ``.json``, the configuration,
the training curve, the CPU time, the machine and the code version.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr_lab.core.provenance import code_version, sha256
from iclr_lab.core.validation import check_array, check_int, check_range, check_seed
from iclr_lab.recovery.risp import prior
from iclr_lab.recovery.risp.prior import FORMAT, WEIGHTS, build_network, gs_denoise

if TYPE_CHECKING:
    import torch

__all__ = ["HELD_OUT", "TRAIN_IMAGES", "TrainConfig", "main", "patches", "train"]

#: The bundled pictures the denoiser learns from (none of them is a test picture of the chapter).
TRAIN_IMAGES: tuple[str, ...] = ("brick", "chelsea", "clock", "coffee", "coins", "grass", "gravel",
                                 "moon", "page", "rocket", "text")
#: The pictures never used for training (the chapter's deblurring picture and the held-out
#: denoising check of the tests).
HELD_OUT: tuple[str, ...] = ("camera", "astronaut")
#: Downscaling factors of the training pyramid: the chapter restores pictures of 64 to 128 pixels,
#: 4 to 8 times smaller than the originals, so the fine scales of the originals matter less.
SCALES: tuple[int, ...] = (2, 4, 8)


@dataclass(frozen=True)
class TrainConfig:
    """Training hyper-parameters (validated).

    Attributes:
        steps: Adam steps (>= 0).
        batch: patches per step (>= 1).
        patch: patch side in pixels (>= 8).
        lr: peak learning rate (> 0), reached after ``warmup`` steps, then cosine decay to 0.
        warmup: linear warm-up steps (>= 1).
        seed: seeds the initial weights and every batch, an integer in ``[0, 2**32 - 1]``.
        log_every: steps between two points of the recorded training curve.
    """

    steps: int = 3000
    batch: int = 16
    patch: int = 32
    lr: float = 2e-3
    warmup: int = 50
    seed: int = 0
    log_every: int = 25

    def __post_init__(self) -> None:
        check_int("steps", self.steps, 0)
        check_int("batch", self.batch, 1)
        check_int("patch", self.patch, 8, 256)
        check_range("lr", self.lr, 0, 1, low_open=True)
        check_int("warmup", self.warmup, 1)
        check_seed(self.seed)
        check_int("log_every", self.log_every, 1)


def pyramid(names: Sequence[str] = TRAIN_IMAGES, scales: Sequence[int] = SCALES,
            min_side: int = 32) -> list[np.ndarray]:
    """The training pictures, grey in [0, 1], each downscaled (anti-aliased) by every factor in
    ``scales``; levels smaller than ``min_side`` are dropped."""
    from skimage.transform import rescale

    from iclr_lab.core.datasets import image

    for name in names:
        if name in HELD_OUT:
            raise ValueError(f"names must not hold a held-out picture {HELD_OUT}, got {name!r}")
    out = []
    for name in names:
        img = image(name)
        for s in scales:
            level = rescale(img, 1.0 / check_int("scale", s, 1), anti_aliasing=True)
            if min(level.shape) >= min_side:
                out.append(np.clip(level, 0.0, 1.0))
    return out


def patches(levels: Sequence[np.ndarray], count: int, side: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` random ``side x side`` patches, each from a picture drawn uniformly from
    ``levels``, at a uniform position, under one of the 8 flips and quarter turns.
    Returns float32 of shape ``(count, 1, side, side)``.

    Args:
        levels: a non-empty sequence of finite 2-D pictures, each at least ``side`` pixels a side.
        count: the number of patches, ``>= 1``.
        side: the patch side in pixels, ``>= 1``.
        rng: the numpy ``Generator`` the patches are drawn from.
    """
    count = check_int("count", count, 1)
    side = check_int("side", side, 1)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    if isinstance(levels, np.ndarray) or not isinstance(levels, Sequence) or not levels:
        raise TypeError("levels must be a non-empty sequence of 2-D pictures")
    for i, level in enumerate(levels):
        img = check_array(f"levels[{i}]", level, ndim=2)
        if min(img.shape) < side:
            raise ValueError(f"levels[{i}] must be at least side = {side} pixels a side, got shape "
                             f"{img.shape}")
    return _patches(levels, count, side, rng)


def _patches(levels: Sequence[np.ndarray], count: int, side: int, rng: np.random.Generator
             ) -> np.ndarray:
    """:func:`patches` without the checks, for the training loop (its levels come from
    :func:`pyramid`, at least ``patch`` pixels a side; checking every picture at every step would
    only cost time)."""
    out = np.empty((count, 1, side, side), dtype=np.float32)
    for i in range(count):
        img = levels[int(rng.integers(len(levels)))]
        r = int(rng.integers(img.shape[0] - side + 1))
        c = int(rng.integers(img.shape[1] - side + 1))
        p = img[r:r + side, c:c + side]
        p = np.rot90(p, int(rng.integers(4)))
        out[i, 0] = p[:, ::-1] if rng.integers(2) else p
    return out


def train(config: prior.DenoiserConfig | None = None, train_config: TrainConfig | None = None
          ) -> tuple[torch.nn.Sequential, dict[str, Any]]:
    """Train ``R`` and return it with a record: the training curve (``step``, ``loss``: the mean
    squared error of ``D`` on the step's batch, ``psnr``: the same in dB, ``cpu_s``) and the total
    CPU seconds. Runs on one torch thread."""
    import torch

    from iclr_lab.core.nn import warmup_cosine
    from iclr_lab.core.progress import progress

    dc = prior.DenoiserConfig() if config is None else config
    tc = TrainConfig() if train_config is None else train_config
    if not isinstance(dc, prior.DenoiserConfig) or not isinstance(tc, TrainConfig):
        raise TypeError("config must be a DenoiserConfig and train_config a TrainConfig")
    torch.set_num_threads(1)
    torch.manual_seed(tc.seed)
    net = build_network(dc)
    opt = torch.optim.Adam(net.parameters(), lr=tc.lr)
    levels = pyramid(min_side=tc.patch)
    history: dict[str, list[float]] = {"step": [], "loss": [], "psnr": [], "cpu_s": []}
    cpu0 = time.process_time()
    running, seen = 0.0, 0
    for step in progress(range(tc.steps), desc="train GS denoiser", total=tc.steps):
        rng = np.random.default_rng([tc.seed, step])
        clean = torch.from_numpy(_patches(levels, tc.batch, tc.patch, rng))
        noisy = clean + dc.sigma * torch.from_numpy(rng.standard_normal(clean.shape).astype(np.float32))
        for group in opt.param_groups:
            group["lr"] = warmup_cosine(step + 1, tc.lr, tc.warmup, max(tc.steps, tc.warmup + 1))
        loss = (gs_denoise(net, noisy, create_graph=True) - clean).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        running, seen = running + float(loss.detach()), seen + 1
        if (step + 1) % tc.log_every == 0 or step + 1 == tc.steps:
            mse = running / seen
            history["step"].append(float(step + 1))
            history["loss"].append(mse)
            history["psnr"].append(-10.0 * float(np.log10(mse)))
            history["cpu_s"].append(time.process_time() - cpu0)
            running, seen = 0.0, 0
    net.eval()
    for q in net.parameters():
        q.requires_grad_(False)
    return net, {"history": history, "cpu_s": time.process_time() - cpu0, "levels": len(levels)}


def save(net: torch.nn.Module, config: prior.DenoiserConfig, train_config: TrainConfig,
         record: dict[str, Any], out: str | Path) -> tuple[Path, Path]:
    """Write the weights to ``out`` and the record beside it (suffix ``.json``)."""
    import torch

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format": FORMAT, "config": config.to_dict(), "state_dict": net.state_dict()}, out)
    meta = {"format": FORMAT, "command": "python -m iclr_lab.recovery.risp.train_prior",
            "code_version": code_version(), "sha256": sha256(out), "denoiser": config.to_dict(),
            "train": asdict(train_config),
            "train_images": list(TRAIN_IMAGES), "held_out": list(HELD_OUT), "scales": list(SCALES),
            "pyramid_levels": record["levels"], "cpu_seconds": record["cpu_s"],
            "machine": {"python": platform.python_version(), "torch": torch.__version__,
                        "processor": platform.processor() or platform.machine(), "threads": 1},
            "parameters": sum(int(q.numel()) for q in net.parameters()), "history": record["history"]}
    meta_path = out.with_suffix(".json")
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    return out, meta_path


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: train with the given settings and write the two files."""
    d, t = prior.DenoiserConfig(), TrainConfig()
    ap = argparse.ArgumentParser(prog="python -m iclr_lab.recovery.risp.train_prior",
                                 description="Train the RISP chapter's gradient-step denoiser.")
    ap.add_argument("--steps", type=int, default=t.steps)
    ap.add_argument("--batch", type=int, default=t.batch)
    ap.add_argument("--patch", type=int, default=t.patch)
    ap.add_argument("--lr", type=float, default=t.lr)
    ap.add_argument("--seed", type=int, default=t.seed)
    ap.add_argument("--channels", type=int, default=d.channels)
    ap.add_argument("--depth", type=int, default=d.depth)
    ap.add_argument("--sigma", type=float, default=d.sigma)
    ap.add_argument("--out", type=Path, default=WEIGHTS, help=f"weights file (default {WEIGHTS})")
    a = ap.parse_args(argv)
    dc = prior.DenoiserConfig(a.channels, a.depth, a.sigma)
    tc = TrainConfig(steps=a.steps, batch=a.batch, patch=a.patch, lr=a.lr, seed=a.seed)
    net, record = train(dc, tc)
    w, m = save(net, dc, tc, record, a.out)
    h = record["history"]
    last = f", last training PSNR {h['psnr'][-1]:.2f} dB" if h["psnr"] else ""
    print(f"wrote {w} and {m}: {record['cpu_s']:.0f} CPU s{last}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
