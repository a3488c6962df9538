"""Time ``VRAdam.step`` against ``torch.optim.AdamW(foreach=True).step`` on a ~1M-parameter model.

Usage: ``python benchmarks/vradam_step.py [--steps 500]``. One thread. Gradients are random but
fixed, so only the optimizer step is timed (no forward/backward). The two optimizers step
alternately inside one loop, so machine noise hits both alike. Prints the median step time of each,
and the ratio VRAdam / AdamW (target <= 1.2x).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from iclr_lab.optimizers import VRAdam


def model() -> torch.nn.Module:
    """4 x Linear(512, 512) + a 10-way head: about 1.06M parameters in 10 tensors."""
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(512, 10))
    return torch.nn.Sequential(*layers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=500)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    nets = {"AdamW(foreach=True)": model(), "VRAdam(foreach=True)": model()}
    grads = [torch.randn_like(p) * 1e-2 for p in nets["AdamW(foreach=True)"].parameters()]
    opts = {
        "AdamW(foreach=True)": torch.optim.AdamW(nets["AdamW(foreach=True)"].parameters(), lr=1e-3,
                                                 weight_decay=1e-2, foreach=True),
        "VRAdam(foreach=True)": VRAdam(nets["VRAdam(foreach=True)"].parameters(), lr=1e-3,
                                       weight_decay=1e-2, beta3=1.0, foreach=True),
    }
    times: dict[str, list[float]] = {k: [] for k in opts}
    for _ in range(args.steps):
        for name, opt in opts.items():
            for p, g in zip(nets[name].parameters(), grads, strict=True):
                p.grad = g
            t0 = time.perf_counter()
            opt.step()
            times[name].append(time.perf_counter() - t0)
    n = sum(p.numel() for p in model().parameters())
    print(f"parameters: {n:,}; steps: {args.steps} (first 10% dropped); threads: 1")
    med = {k: statistics.median(v[args.steps // 10:]) for k, v in times.items()}
    for name, t in med.items():
        print(f"{name:22s} median step {t * 1e3:7.3f} ms")
    ratio = med["VRAdam(foreach=True)"] / med["AdamW(foreach=True)"]
    print(f"ratio VRAdam / AdamW: {ratio:.3f}  (target <= 1.2)")


if __name__ == "__main__":
    main()
