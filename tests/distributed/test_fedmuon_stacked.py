"""The FedMuon chapter's stacked runs (iclr_lab/distributed/fedmuon/stacked.py) equal the serial
ones to float rounding (bit for bit where batched and single BLAS kernels round alike; not on an
AVX-512 AMD EPYC, where a few entries differ by about 1e-7): train_stacked vs train_clients on the
thread simulator, toy_runs vs toy_run, the batched Newton-Schulz map and LMO vs the per-matrix
ones."""

from dataclasses import replace

import pandas as pd
import pytest
import torch

from iclr_lab.core.collective import run_simulated
from iclr_lab.distributed import fedmuon
from iclr_lab.distributed.fedmuon import FedMethod, FedSetup
from iclr_lab.distributed.fedmuon.experiments import _run, _run_all
from iclr_lab.distributed.fedmuon.stacked import (
    lmo_stacked,
    newton_schulz_stacked,
    toy_runs,
    train_stacked,
)

# hidden 8: a tall output layer (10 x 8) and layers whose sizes are not multiples of 64 (the
# padded and row-by-row element-wise paths); hidden 64: the chapter's shapes (the block path)
SMALL = FedSetup(clients=5, sampled=3, local_steps=2, rounds=3, batch=8, hidden=8, eval_every=1)
BOOK_SHAPES = FedSetup(clients=4, sampled=2, local_steps=2, rounds=2, batch=8, hidden=64, eval_every=1)

METHODS = [FedMethod("fm", "fedmuon", 0.05), FedMethod("fm big", "fedmuon", 0.5, alpha=0.3),
           FedMethod("lm", "localmuon", 0.05), FedMethod("carry", "localmuon", 0.2, carry=True),
           FedMethod("scaffold", "scaffold", 0.05), FedMethod("scaffold b", "scaffold", 0.1, beta=0.5),
           FedMethod("svd", "fedmuon", 0.1, ns_steps=None), FedMethod("T0", "localmuon", 0.1, ns_steps=0),
           FedMethod("adam", "adam", 0.01), FedMethod("adam big", "adam", 0.3)]


def _same(got: pd.DataFrame, want: pd.DataFrame, name: str) -> None:
    """Every entry equal to a relative 1e-5 (floats; about 1e-7 is what kernels that round
    differently give here), integers (rounds, bytes) and labels exactly."""
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-5, atol=1e-7, obj=name)
    for c in got.columns:
        if got[c].dtype.kind != "f":
            assert got[c].equals(want[c]), (name, c)


def _serial(method, setup, seed):
    return run_simulated(lambda comm: fedmuon.train_clients(comm, method, setup, seed), 1)[0]


@pytest.mark.parametrize("setup", [SMALL, BOOK_SHAPES], ids=["hidden8", "hidden64"])
def test_train_stacked_equals_train_clients_bit_for_bit(setup):
    stacked = train_stacked(METHODS, setup, 1)
    for method, table in zip(METHODS, stacked, strict=True):
        serial = _serial(method, setup, 1)
        if method.ns_steps is None:
            # The exact-SVD LMO is discontinuous at a rank-deficient gradient (a client's batch of
            # 8 gives one): the null space's singular vectors jump with rounding-level changes of
            # G, so kernels that round differently part ways after the first step. Only the
            # evaluation before any step, and the bytes, must agree; lmo_stacked itself equals lmo
            # on the same input (test below).
            _same(table.iloc[:1], serial.iloc[:1], method.name)
            assert table["bytes"].equals(serial["bytes"]), method.name
            continue
        _same(table, serial, method.name)  # every entry, bytes included


def test_run_all_equals_run_and_keeps_the_order():
    methods = [METHODS[4], METHODS[0], METHODS[2]]
    for got, method in zip(_run_all(methods, SMALL, 0), methods, strict=True):
        _same(got, _run(method, SMALL, 0), method.name)


def test_newton_schulz_and_lmo_stacked_equal_the_serial_maps_per_matrix():
    gen = torch.Generator().manual_seed(3)
    for shape in [(64, 64), (10, 64), (64, 10), (8, 8), (3, 5), (5, 3)]:
        G = torch.randn(6, *shape, generator=gen) * 1e-2
        for steps in (0, 1, 5):
            ref = torch.stack([fedmuon.newton_schulz(g, steps) for g in G])
            assert torch.equal(newton_schulz_stacked(G, steps), ref)
        for ns in (None, 5):
            ref = torch.stack([fedmuon.lmo(g, ns_steps=ns) for g in G.double()])
            assert torch.equal(lmo_stacked(G.double(), ns), ref)
    v = torch.randn(6, 10, generator=gen)
    assert torch.equal(lmo_stacked(v, 5), torch.stack([fedmuon.lmo(r) for r in v]))


@pytest.mark.parametrize("dim", [8, 4], ids=["batched", "per-matrix fallback"])
def test_toy_runs_equal_toy_run_bit_for_bit(dim):
    A = fedmuon.toy_matrix(dim, seed=2)
    runs = [("localmuon", 0.0, 0, None), ("localmuon_carry", 0.0, 0, None), ("fedmuon", 0.0, 0, None),
            ("localmuon", 0.1, 3, None), ("fedmuon", 0.1, 4, None), ("fedmuon", 0.0, 0, 0),
            ("fedmuon", 0.05, 5, 2), ("localmuon_carry", 0.1, 1, 5)]
    curves = toy_runs(runs, A, rounds=25, local_steps=3, alpha=0.4, lr0=0.2)
    for (method, noise, seed, ns), got in zip(runs, curves, strict=True):
        ref = fedmuon.toy_run(method, A, rounds=25, local_steps=3, alpha=0.4, lr0=0.2,
                              ns_steps=ns, noise=noise, seed=seed)
        assert torch.equal(got, ref), (method, noise, seed, ns)


def test_stacked_runs_check_their_arguments():
    with pytest.raises(ValueError, match="methods"):
        train_stacked([], SMALL, 0)
    with pytest.raises(TypeError, match="methods"):
        train_stacked(["fedmuon"], SMALL, 0)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="setup"):
        train_stacked(METHODS[:1], replace, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed"):
        train_stacked(METHODS[:1], SMALL, -1)
    with pytest.raises(ValueError, match="method"):
        toy_runs([("sgd", 0.0, 0, None)], fedmuon.toy_matrix(2))
    with pytest.raises(ValueError, match="runs"):
        toy_runs([], fedmuon.toy_matrix(2))
