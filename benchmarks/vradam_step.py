"""Time ``VRAdam.step`` against ``torch.optim.AdamW(foreach=True).step`` on a ~1M-parameter model.

Usage: ``python benchmarks/vradam_step.py [--steps 400] [--repeats 3]``. One thread. Gradients are
random but fixed, so only the optimizer step is timed (forward/backward are excluded). Prints the
median step time of each optimizer and the ratio VRAdam / AdamW; the target is <= 1.2x.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from iclr_lab.optimizers import VRAdam


def model() -> torch.nn.Module:
    # 4 x (512*512 + 512) + 10-way head: about 1.06M parameters in 10 tensors
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(512, 10))
    return torch.nn.Sequential(*layers)


def time_steps(make_opt, steps: int) -> list[float]:
    torch.manual_seed(0)
    net = model()
    grads = [torch.randn_like(p) * 1e-2 for p in net.parameters()]
    opt = make_opt(net.parameters())
    times = []
    for _ in range(steps):
        for p, g in zip(net.parameters(), grads, strict=True):
            p.grad = g
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times[steps // 10:]  # drop warm-up


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    n = sum(p.numel() for p in model().parameters())
    opts = {
        "AdamW(foreach=True)": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=1e-2,
                                                             foreach=True),
        "VRAdam(foreach=True)": lambda ps: VRAdam(ps, lr=1e-3, weight_decay=1e-2, beta3=1.0,
                                                  foreach=True),
    }
    med: dict[str, list[float]] = {k: [] for k in opts}
    for _ in range(args.repeats):  # interleave to share machine noise
        for name, make in opts.items():
            med[name].append(statistics.median(time_steps(make, args.steps)))
    print(f"parameters: {n:,}; steps: {args.steps}; repeats: {args.repeats}; threads: 1")
    for name, v in med.items():
        print(f"{name:22s} medians per repeat (ms): " + ", ".join(f"{t * 1e3:.3f}" for t in v))
    best = {k: min(v) for k, v in med.items()}
    for name, t in best.items():
        print(f"{name:22s} median step {t * 1e3:7.3f} ms")
    ratio = best["VRAdam(foreach=True)"] / best["AdamW(foreach=True)"]
    print(f"ratio VRAdam / AdamW: {ratio:.3f}  (target <= 1.2)")


if __name__ == "__main__":
    main()
