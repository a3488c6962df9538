"""DES-LOC in your own ``torchrun`` job: your model, your data, no chapter code.

Run it on one machine with two processes (gloo on the CPU), or on GPUs with NCCL::

    torchrun --standalone --nproc-per-node 2 examples/desloc_torchrun.py
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        examples/desloc_torchrun.py --device cuda

The only iclr_lab lines are the two imports, ``comm = init_from_env()`` and the optimizer. Coming
from PyTorch's own local SGD, the switch is (``PeriodicModelAverager`` averages only the
parameters, so its DES-LOC twin never averages the moments; ``warmup_steps=K - 1`` puts its
averages after the same steps as DES-LOC's, and the two then agree bit for bit, a test checks it)::

    -import torch.distributed as dist
    -from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
    -from torch.distributed.optim import PostLocalSGDOptimizer
    +from iclr_lab.core.collective import init_from_env
    +from iclr_lab.distributed import DESLOC
    -dist.init_process_group("gloo")
    +comm = init_from_env()
    -opt = PostLocalSGDOptimizer(torch.optim.Adam(model.parameters(), lr=lr),
    -                            PeriodicModelAverager(period=16, warmup_steps=15))
    +opt = DESLOC(model.parameters(), lr=lr, sync_periods=(16, 48, 96), comm=comm)

with DES-LOC's own periods for the two moments in place of "never". ``init_from_env`` sets one
torch thread per process (``--threads`` for more), and a collective that fails because another rank
died raises :class:`iclr_lab.core.collective.CollectiveError` within ``--timeout`` seconds instead
of hanging. The states are averaged where the parameters live: on the GPU with NCCL, in buckets of
at most 25 MiB (one all-reduce each, as DistributedDataParallel buckets its gradients).

``train`` is an ordinary function of the collective, so the same run executes on the package's
thread simulator too (``iclr_lab.core.collective.run_simulated(train, 2)``): the test
``tests/core/test_torchrun_example.py`` starts this script with ``torch.distributed.run`` on two
gloo processes and checks that its final loss equals the simulator's.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from iclr_lab.core.collective import Collective, init_from_env
from iclr_lab.distributed import DESLOC


def make_model(seed: int, width: int = 64, depth: int = 3) -> torch.nn.Module:
    """Your model: the same initial weights on every rank (one seed for all)."""
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = [torch.nn.Linear(16, width), torch.nn.Tanh()]
    for _ in range(depth - 1):
        layers += [torch.nn.Linear(width, width), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))


def make_shard(rank: int, seed: int, n: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """Your data: this rank's own shard of a noisy regression task (a private generator per rank)."""
    gen = torch.Generator().manual_seed(seed * 1000 + 17)
    w = torch.randn(16, 1, generator=gen)  # the task, shared
    gen.manual_seed(seed * 1000 + 101 + rank)  # the shard, this rank's own
    x = torch.randn(n, 16, generator=gen)
    y = torch.sin(x @ w) + 0.1 * torch.randn(n, 1, generator=gen)
    return x, y


def train(comm: Collective, *, steps: int = 120, lr: float = 3e-3, batch: int = 32,
          periods: tuple[float, float, float] = (8, 24, 48), seed: int = 0,
          device: str = "cpu") -> dict[str, float]:
    """Train with DES-LOC on this rank's shard; return the final loss averaged over the ranks and
    the bytes this rank sent."""
    model = make_model(seed).to(device)
    x, y = (t.to(device) for t in make_shard(comm.rank, seed))
    opt = DESLOC(model.parameters(), lr=lr, sync_periods=periods, comm=comm)
    order = torch.Generator().manual_seed(seed * 1000 + 7 + comm.rank)
    for _ in range(steps):
        idx = torch.randint(0, len(x), (batch,), generator=order).to(device)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[idx]), y[idx]).backward()
        opt.step()
    with torch.no_grad():
        loss = torch.nn.functional.mse_loss(model(x), y).reshape(1)
    comm.all_reduce_mean([loss])
    return {"final_loss": float(loss.item()), "bytes_sent": float(comm.bytes_sent)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--periods", type=float, nargs=3, default=(8, 24, 48), metavar=("KX", "KU", "KV"),
                   help="sync periods of the parameters and the two moments (inf: never)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a collective may wait")
    p.add_argument("--out", type=Path, help="rank 0 writes its result here as JSON")
    args = p.parse_args(argv)
    comm = init_from_env("nccl" if args.device == "cuda" else "gloo", timeout=args.timeout,
                         threads=args.threads)
    if args.device == "cuda":
        args.device = f"cuda:{torch.cuda.current_device()}"
    periods = tuple(math.inf if k == math.inf else int(k) for k in args.periods)
    start = time.perf_counter()
    result = train(comm, steps=args.steps, lr=args.lr, periods=periods, seed=args.seed,  # type: ignore[arg-type]
                   device=args.device)
    result["seconds"] = time.perf_counter() - start
    if comm.rank == 0:
        print(f"DES-LOC on {comm.world_size} ranks: final loss {result['final_loss']:.6f}, "
              f"{result['bytes_sent']:.0f} bytes sent per rank, {result['seconds']:.2f} s")
        if args.out:
            args.out.write_text(json.dumps(result))
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
