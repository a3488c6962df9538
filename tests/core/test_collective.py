import pytest
import torch

from iclr_lab.core.collective import Collective, run_gloo, run_simulated


def _local_sgd(comm: Collective) -> tuple[list[float], int]:
    """A miniature local-SGD run: 5 local steps on each worker's own data, then average the
    weights. Stands in for the distributed chapters' training functions."""
    # Identical initial model on every worker, drawn from a private generator: simulated workers
    # are threads, and the global RNG would be shared (and raced) between them.
    model = torch.nn.Linear(4, 1)
    init = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=init))
    gen = torch.Generator().manual_seed(100 + comm.rank)  # each worker's own data
    x = torch.randn(64, 4, generator=gen)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * comm.rank
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(4):
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        comm.all_reduce_mean(list(model.parameters()))
        losses.append(torch.nn.functional.mse_loss(model(x), y).item())
    return losses, comm.bytes_sent


def test_simulated_all_reduce_is_the_mean_in_place_and_counts_bytes():
    def fn(comm):
        a = torch.full((3,), float(comm.rank))
        b = torch.arange(4.0) * (comm.rank + 1)
        comm.all_reduce_mean([a, b])
        return a, b, comm.bytes_sent, comm.calls

    for (a, b, sent, calls) in run_simulated(fn, 3):
        assert torch.equal(a, torch.full((3,), 1.0))
        assert torch.equal(b, torch.arange(4.0) * 2)
        assert (sent, calls) == ((3 + 4) * 4, 1)


def test_workers_end_with_identical_models():
    results = run_simulated(_local_sgd, 3)
    assert all(r[1] == 4 * 5 * 4 for r in results)  # 4 rounds x (4 weights + 1 bias) x 4 bytes
    losses = [r[0] for r in results]
    assert losses[0] != losses[1], "workers see different data"


def test_an_error_in_one_worker_is_raised_not_hung():
    def fn(comm):
        if comm.rank == 1:
            raise RuntimeError("worker 1 failed")
        comm.all_reduce_mean([torch.zeros(2)])

    with pytest.raises(RuntimeError, match="worker 1 failed"):
        run_simulated(fn, 3)


def test_mismatched_shapes_are_an_error():
    def fn(comm):
        comm.all_reduce_mean([torch.zeros(2 + comm.rank)])

    with pytest.raises(ValueError, match="different shapes"):
        run_simulated(fn, 2)


def test_bad_arguments():
    with pytest.raises(ValueError, match="world_size"):
        run_simulated(lambda comm: None, 0)
    with pytest.raises(TypeError, match="torch.Tensor"):
        run_simulated(lambda comm: comm.all_reduce_mean([1.0]), 1)


def test_two_gloo_processes_match_the_simulator():
    simulated = run_simulated(_local_sgd, 2)
    real = run_gloo(_local_sgd, 2)
    assert real == simulated  # bit for bit: same losses, same byte counts
