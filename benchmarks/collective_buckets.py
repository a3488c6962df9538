"""Bucketed against per-tensor all-reduces, and the ring cost model against measured gloo times.

    python benchmarks/collective_buckets.py [--repeats 30]

Two gloo processes on loopback, one thread each.

1. **Bucketed against per-tensor.** A DES-LOC step on an MLP of 60 linear layers (120 parameter
   tensors), every state averaged every step (periods 1, 1, 1: three all-reduce calls a step, of 120
   tensors each), with ``bucket_cap_mb=25`` (one all-reduce per call) and ``bucket_cap_mb=0`` (one
   per tensor). Prints the median step time of each and their ratio.
2. **The cost model** (:func:`iclr_lab.core.collective.comm_seconds`, the convention the
   distributed chapters' "loss against time" charts use: ``2 (K - 1) (rounds * latency + bytes /
   (K * bandwidth))``) fitted by least squares to the median time of one all-reduce at three
   message sizes. Prints the fitted latency and bandwidth and each size's measured and modelled
   time.
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import time

import numpy as np
import torch

from iclr_lab.core.collective import (
    Collective,
    CommCounts,
    TorchDistributedCollective,
    comm_seconds,
    run_processes,
)

SIZES = (1_000, 100_000, 2_000_000)  # float32 elements: 4 KB, 400 KB, 8 MB


def _step_times(comm: Collective, repeats: int) -> dict[str, float]:
    from iclr_lab.distributed import DESLOC

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(60)])
    x = torch.randn(32, 64)
    out = {}
    for cap in (25.0, 0.0):
        c = TorchDistributedCollective(bucket_cap_mb=cap)
        opt = DESLOC(model.parameters(), lr=1e-4, sync_periods=(1, 1, 1), comm=c)
        times = []
        for i in range(repeats + 3):
            start = time.perf_counter()
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
            if i >= 3:  # warm-up steps
                times.append(time.perf_counter() - start)
        out[f"cap_{cap:g}"] = statistics.median(times)
    return out


def _all_reduce_times(comm: Collective, repeats: int) -> dict[int, float]:
    out = {}
    for n in SIZES:
        t = torch.ones(n)
        times = []
        for i in range(repeats + 3):
            start = time.perf_counter()
            comm.all_reduce_sum([t])
            if i >= 3:
                times.append(time.perf_counter() - start)
        out[n] = statistics.median(times)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=30)
    args = p.parse_args()
    steps = run_processes(functools.partial(_step_times, repeats=args.repeats), 2,
                          start_method="forkserver")[0]
    bucketed, per_tensor = steps["cap_25"], steps["cap_0"]
    print(f"DES-LOC step, 120 tensors, 3 averaged states per step, 2 gloo ranks: bucketed "
          f"{1e3 * bucketed:.2f} ms, per tensor {1e3 * per_tensor:.2f} ms, "
          f"ratio {bucketed / per_tensor:.2f}")

    measured = run_processes(functools.partial(_all_reduce_times, repeats=args.repeats), 2,
                             start_method="forkserver")[0]
    k = 2
    # time = 2 (k - 1) latency + (2 (k - 1) / k) bytes / bandwidth: linear in (latency, 1 / bandwidth)
    nbytes = np.array([4.0 * n for n in SIZES])
    design = np.column_stack([np.full(len(SIZES), 2.0 * (k - 1)), 2.0 * (k - 1) / k * nbytes])
    (latency, inv_bw), *_ = np.linalg.lstsq(design, np.array([measured[n] for n in SIZES]), rcond=None)
    latency, bandwidth = max(latency, 0.0), 1.0 / inv_bw if inv_bw > 0 else math.inf
    print(f"cost model fit: latency {1e6 * latency:.1f} us, bandwidth {bandwidth / 1e9:.2f} GB/s")
    for n, b in zip(SIZES, nbytes, strict=True):
        model = comm_seconds(CommCounts({"other": int(b)}, {"other": 1}), k, bandwidth=bandwidth,
                             latency=latency)
        print(f"  {int(b):>10,d} bytes: measured {1e3 * measured[n]:8.3f} ms, model {1e3 * model:8.3f} ms "
              f"({model / measured[n]:.2f}x)")


if __name__ == "__main__":
    main()
