"""The user's-own-script recipe (examples/desloc_torchrun.py) under real torchrun, two gloo ranks,
and the torch.distributed behaviour it relies on: bucketed all-reduces, PostLocalSGD parity, a dead
rank that ends in a clear error instead of a hang."""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from iclr_lab.core.collective import (
    Collective,
    TorchDistributedCollective,
    buckets,
    run_processes,
    run_simulated,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "desloc_torchrun.py"


def _example():
    spec = importlib.util.spec_from_file_location("desloc_torchrun", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return env | {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def test_the_torchrun_example_matches_the_simulator(tmp_path):
    out = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(EXAMPLE), "--steps", "20", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    real = json.loads(out.read_text())
    simulated = run_simulated(functools.partial(_example().train, steps=20), 2)[0]
    # two ranks: the same sums in the same order, so the same bits
    assert real["final_loss"] == simulated["final_loss"]
    assert real["bytes_sent"] == simulated["bytes_sent"]


def test_buckets_keep_order_cap_size_and_split_by_dtype():
    ts = [torch.zeros(10), torch.zeros(10), torch.zeros(10, dtype=torch.float64), torch.zeros(100),
          torch.zeros(5)]
    assert [len(b) for b in buckets(ts, 80)] == [2, 1, 1, 1]  # 40 + 40 bytes; dtype; over the cap
    assert [len(b) for b in buckets(ts, 0)] == [1] * 5
    assert [len(b) for b in buckets(ts, 10**6)] == [2, 1, 2]
    assert [t for b in buckets(ts, 80) for t in b] == ts  # same objects, same order


def _many_tensors(rank: int) -> list[torch.Tensor]:
    sizes = torch.randint(1, 3000, (110,), generator=torch.Generator().manual_seed(10))  # shared
    gen = torch.Generator().manual_seed(20 + rank)  # the values, this rank's own
    ts = [torch.randn(int(s), generator=gen) for s in sizes]
    ts.insert(50, torch.randn(7, 9, generator=gen, dtype=torch.float64))
    ts.append(torch.randn(8, 6, generator=gen).t())  # not contiguous
    return ts


def _bucketed_vs_per_tensor(comm: Collective) -> list[tuple[bool, int, int]]:
    out = []
    base = _many_tensors(comm.rank)
    reference = [t.clone() for t in base]
    TorchDistributedCollective(bucket_cap_mb=0).all_reduce_mean(reference, kind="parameters")
    for cap in (25.0, 0.01):
        c = TorchDistributedCollective(bucket_cap_mb=cap)
        ts = [t.clone() for t in base]
        c.all_reduce_mean(ts, kind="parameters")
        same = all(torch.equal(a, b) for a, b in zip(ts, reference, strict=True))
        out.append((same, c.counts().total_bytes, c.counts().total_rounds))
    return out


def test_bucketed_all_reduce_equals_the_per_tensor_path_bit_for_bit_on_two_gloo_ranks():
    results = run_processes(_bucketed_vs_per_tensor, 2, start_method="forkserver")
    nbytes = sum(t.numel() * t.element_size() for t in _many_tensors(0))
    for rank_result in results:
        for same, sent, rounds in rank_result:
            assert same
            assert (sent, rounds) == (nbytes, 1)  # counted as the call, whatever the buckets


def _desloc_vs_post_local_sgd(comm: Collective, period: int = 4, steps: int = 13) -> bool:
    from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
    from torch.distributed.optim import PostLocalSGDOptimizer

    from iclr_lab.distributed import DESLOC

    ex = _example()
    x, y = ex.make_shard(comm.rank, 0)
    finals = []
    for which in ("desloc", "post_local_sgd"):
        model = ex.make_model(0)
        if which == "desloc":
            opt = DESLOC(model.parameters(), lr=1e-2, sync_periods=(period, math.inf, math.inf),
                         comm=comm)
        else:
            opt = PostLocalSGDOptimizer(torch.optim.Adam(model.parameters(), lr=1e-2),
                                        PeriodicModelAverager(period=period, warmup_steps=period - 1))
        for i in range(steps):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x[32 * i:32 * i + 32]), y[32 * i:32 * i + 32]).backward()
            opt.step()
        finals.append([p.detach().clone() for p in model.parameters()])
    return all(torch.equal(a, b) for a, b in zip(*finals, strict=True))


def test_desloc_with_moments_never_averaged_is_post_local_sgd_bit_for_bit():
    assert run_processes(_desloc_vs_post_local_sgd, 2, start_method="forkserver") == [True, True]


DYING = textwrap.dedent('''
    import os, signal, sys, time, torch
    from iclr_lab.core.collective import CollectiveError, init_from_env
    comm = init_from_env("gloo", timeout=20)
    t = torch.ones(1000)
    for step in range(50):
        if comm.rank == 1 and step == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            comm.all_reduce_mean([t])
        except CollectiveError as err:
            print("CLEAR:", err, flush=True)
            # os._exit: after a peer died, gloo's threads can abort the interpreter's normal
            # teardown (SIGABRT, "terminate called without an active exception"), which has
            # nothing to do with the error the user sees; the test is about that error
            os._exit(7)
    print("no error", flush=True)
''')


def test_a_dead_rank_stops_the_others_with_a_clear_error_not_a_hang():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    start = time.perf_counter()
    for rank in range(2):
        env = _env() | {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                        "WORLD_SIZE": "2", "LOCAL_RANK": str(rank)}
        procs.append(subprocess.Popen([sys.executable, "-c", DYING], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    try:
        out, err = procs[0].communicate(timeout=120)
    finally:
        for p in procs:
            p.kill()
    elapsed = time.perf_counter() - start
    assert procs[0].returncode == 7, out + err[-2000:]
    assert "CLEAR: rank 0 of 2: an all-reduce of other failed" in out
    assert elapsed < 60, f"the surviving rank took {elapsed:.0f} s to stop"


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_init_from_env_rejects_bad_timeout(bad):
    from iclr_lab.core.collective import init_from_env

    with pytest.raises(ValueError, match="timeout"):
        init_from_env("gloo", timeout=bad)
