"""MT-DAO's stacked runs (``iclr_lab.distributed.mtdao.stacked``): reproduce() trains every worker of
many runs in one tensor pass; each run's table must be the one ``run_simulated(train_worker)``
gives, bit for bit, and the stacked MTDAO must step each model as if it ran alone."""

import functools
import math

import pandas as pd
import pytest
import torch

from iclr_lab.core.collective import run_simulated
from iclr_lab.distributed.desloc.stacked import StackedCollective
from iclr_lab.distributed.mtdao import MTDAO, DigitsSetup, Method, methods, train_worker
from iclr_lab.distributed.mtdao.stacked import train_stacked

torch.set_num_threads(1)
INF = math.inf


@pytest.mark.parametrize("split", ["sorted", "iid"])
def test_stacked_runs_equal_the_threaded_train_worker_bit_for_bit(split):
    """All seven methods, two learning rates, two seeds, in one stacked pass (runs given out of
    order): every table entry (losses, accuracies, alignments, bytes, rounds) equals the thread
    simulator's."""
    setup = DigitsSetup(steps=16, warmup=2, eval_every=4, hidden=16, split=split)
    workers = 3
    chosen = methods(0.03, 4) if split == "sorted" else methods(0.03, 4)[:1] + methods(0.03, 4)[-1:]
    runs = [(m, s) for s in (3, 0) for m in chosen]
    runs += [(methods(0.1, 4)[0], 0), (methods(0.1, 4)[1], 3)]
    stacked = train_stacked(runs, setup, workers)
    assert len(stacked) == len(runs)
    for (method, seed), table in zip(runs, stacked, strict=True):
        run = functools.partial(train_worker, method=method, setup=setup, seed=seed)
        serial = run_simulated(run, workers)[0]
        pd.testing.assert_frame_equal(table, serial, check_exact=True,
                                      obj=f"{method.name}, lr {method.lr}, seed {seed}")


def test_stacked_runs_reject_bad_arguments():
    setup = DigitsSetup(steps=16, warmup=2, eval_every=4, hidden=8)
    m = Method("mt", 0.01, betas=(0.995, 0.999), weights=(0.9,), period=4)
    with pytest.raises(ValueError, match="runs must not be empty"):
        train_stacked([], setup, 2)
    with pytest.raises(ValueError, match="repeat"):
        train_stacked([(m, 0), (m, 0)], setup, 2)
    with pytest.raises(ValueError, match="multiple of the period"):
        train_stacked([(Method("mt", 0.01, betas=(0.995, 0.999), weights=(0.9,), period=5), 0)],
                      setup, 2)


def test_stacked_mtdao_steps_every_model_as_if_it_ran_alone():
    """MTDAO is element-wise: on stacked tensors (the 10-entry output biases of all models one
    contiguous tensor, so that most of them leave the vector path's scalar tail they take alone)
    each model must get its own run's numbers exactly. Many models, steps and random gradients;
    one average of everything at the end, so that earlier averages cannot absorb a 1-ulp
    difference."""
    runs, world, steps, periods = 16, 4, 40, (40, 40, 40)
    n = runs * world
    gen = torch.Generator().manual_seed(0)
    grads_a, grads_b = torch.randn(steps, n, 4800, generator=gen), torch.randn(steps, n, 10, generator=gen)
    start_a, start_b = torch.randn(n, 4800, generator=gen), torch.randn(n, 10, generator=gen)

    a, b = start_a.clone(), start_b.clone()
    a.grad, b.grad = torch.zeros_like(a), torch.zeros_like(b)
    opt = MTDAO([a, b], lr=1e-3, sync_periods=periods, comm=StackedCollective(world, runs))
    for t in range(steps):
        a.grad.copy_(grads_a[t])
        b.grad.copy_(grads_b[t])
        opt.step()

    def worker(comm, g):
        m = g * world + comm.rank
        x = torch.cat([start_a[m], start_b[m]])  # one flat tensor, as train_worker's theta
        o = MTDAO([x], lr=1e-3, sync_periods=periods, comm=comm)
        for t in range(steps):
            x.grad = torch.cat([grads_a[t, m], grads_b[t, m]])
            o.step()
        return x, o.state[x]["exp_avg"], comm.counts()

    for g in range(runs):
        for r, (x, u, counts) in enumerate(run_simulated(functools.partial(worker, g=g), world)):
            m = g * world + r
            assert torch.equal(torch.cat([a[m], b[m]]), x)
            assert torch.equal(torch.cat([opt.state[a]["exp_avg"][m], opt.state[b]["exp_avg"][m]]), u)
            assert counts == opt.comm.counts()  # one worker's bytes and rounds
