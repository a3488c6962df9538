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


# --- exact counts per tensor kind, sums, turn-taking, the network model ---------------------------

def test_counts_are_exact_per_kind_and_rounds_count_calls():
    from iclr_lab.core.collective import TENSOR_KINDS, CommCounts

    def fn(comm):
        w = [torch.zeros(10), torch.zeros(3, dtype=torch.float64)]
        comm.all_reduce_mean(w, kind="parameters")            # 10 * 4 + 3 * 8 = 64 bytes
        comm.all_reduce_mean([torch.zeros(5)], kind="first_moment")
        comm.all_reduce_mean([torch.zeros(5)], kind="first_moment")
        comm.all_reduce_mean([torch.zeros(7, dtype=torch.float16)], kind="second_moment")
        comm.all_reduce_mean([torch.zeros(1)])                  # "other" by default
        before = comm.counts()
        comm.all_reduce_sum([torch.zeros(4)], kind="gradients")
        return comm.counts(), comm.counts() - before, comm.bytes_sent, comm.calls

    for counts, delta, sent, calls in run_simulated(fn, 3):
        assert counts.bytes == {"parameters": 64, "gradients": 16, "first_moment": 40,
                                "second_moment": 14, "other": 4}
        assert counts.rounds == {"parameters": 1, "gradients": 1, "first_moment": 2,
                                 "second_moment": 1, "other": 1}
        assert (counts.total_bytes, counts.total_rounds) == (sent, calls) == (138, 6)
        assert delta == CommCounts({"gradients": 16}, {"gradients": 1})
        row = counts.as_row()
        assert row["bytes"] == 138 and all(f"rounds_{k}" in row for k in TENSOR_KINDS)
        assert (delta + (counts - delta)) == counts


def test_all_reduce_sum_and_a_weighted_mean_from_two_sums():
    def fn(comm):
        present = comm.rank != 1                      # worker 1 sits this round out
        x = torch.full((2,), float(comm.rank + 1)) * present
        weight = torch.tensor([float(present)])
        comm.all_reduce_sum([x, weight])
        return x / weight

    for mean in run_simulated(fn, 3):
        assert torch.equal(mean, torch.full((2,), 2.0))   # (1 + 3) / 2


def test_unknown_kind_and_unknown_counts_are_rejected():
    from iclr_lab.core.collective import CommCounts

    with pytest.raises(ValueError, match="kind"):
        run_simulated(lambda comm: comm.all_reduce_mean([torch.zeros(1)], kind="momentum"), 1)
    with pytest.raises(ValueError, match="bytes"):
        CommCounts({"weights": 3})


def test_workers_take_turns_so_a_shared_list_records_rank_order():
    """Exactly one worker runs at a time and the turn passes in rank order at each collective."""
    log: list[tuple[int, int]] = []

    def fn(comm):
        for step in range(3):
            log.append((step, comm.rank))
            comm.all_reduce_mean([torch.zeros(1)])

    run_simulated(fn, 4)
    assert log == [(s, r) for s in range(3) for r in range(4)]


@pytest.mark.parametrize("extra_rank", [0, 1, 2])
def test_different_numbers_of_collective_calls_are_an_error_not_a_hang(extra_rank):
    def fn(comm):
        for _ in range(2 + (comm.rank == extra_rank)):
            comm.all_reduce_mean([torch.zeros(1)])

    with pytest.raises(RuntimeError, match="same collective calls"):
        run_simulated(fn, 3)


def test_different_collectives_at_once_are_an_error():
    def fn(comm):
        (comm.all_reduce_sum if comm.rank else comm.all_reduce_mean)([torch.zeros(1)])

    with pytest.raises(ValueError, match="different collectives"):
        run_simulated(fn, 2)


def test_comm_seconds_is_the_ring_model():
    from iclr_lab.core.collective import CommCounts, comm_seconds

    counts = CommCounts({"parameters": 1000}, {"parameters": 2})
    # 2 (K - 1) * (rounds * latency + bytes / (K * bandwidth)) with K = 4
    assert comm_seconds(counts, 4, bandwidth=100.0, latency=0.5) == pytest.approx(6 * (1.0 + 2.5))
    assert comm_seconds(counts, 1, bandwidth=100.0, latency=0.5) == 0.0
    with pytest.raises(ValueError, match="bandwidth"):
        comm_seconds(counts, 4, bandwidth=0.0)
    with pytest.raises(ValueError, match="latency"):
        comm_seconds(counts, 4, bandwidth=1.0, latency=-1.0)
    with pytest.raises(ValueError, match="world_size"):
        comm_seconds(counts, 0, bandwidth=1.0)


def test_bad_backend_is_rejected():
    from iclr_lab.core.collective import run_processes

    with pytest.raises(ValueError, match="backend"):
        run_processes(_local_sgd, 2, backend="mpi")
    with pytest.raises(ValueError, match="start_method"):
        run_processes(_local_sgd, 2, start_method="thread")
