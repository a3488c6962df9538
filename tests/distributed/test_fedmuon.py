"""Tests of the FedMuon chapter: Newton-Schulz, the LMO, the toy of Theorem 1, federated training
on the collective (world sizes, communication counts), bad arguments and the explorer."""

from dataclasses import replace

import pytest
import torch

from iclr_lab.core.collective import run_simulated
from iclr_lab.distributed import fedmuon
from iclr_lab.distributed.fedmuon import FedMethod, FedSetup
from iclr_lab.distributed.fedmuon.stacked import lmo_stacked, newton_schulz_stacked, toy_runs, train_stacked

SMALL = FedSetup(clients=4, sampled=2, local_steps=2, rounds=3, batch=8, hidden=8, eval_every=1)


def _quintic_by_definition(G, steps):
    a, b, c = fedmuon.KELLER
    X = G / (G.norm() + 1e-7)
    for _ in range(steps):
        X = a * X + b * X @ X.T @ X + c * X @ X.T @ X @ X.T @ X
    return X


def test_newton_schulz_equals_the_quintic_written_from_its_definition_in_float64():
    gen = torch.Generator().manual_seed(0)
    for shape in [(6, 4), (4, 6), (5, 5)]:
        G = torch.randn(*shape, generator=gen, dtype=torch.float64)
        for steps in (0, 1, 5):
            ref = _quintic_by_definition(G.T, steps).T if shape[0] > shape[1] else \
                _quintic_by_definition(G, steps)
            out = fedmuon.newton_schulz(G, steps)
            assert out.dtype == torch.float64
            torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)


def test_newton_schulz_in_bfloat16_agrees_with_torch_muon():
    from torch.optim._muon import _zeropower_via_newtonschulz

    gen = torch.Generator().manual_seed(1)
    for shape in [(16, 8), (8, 16)]:
        G = torch.randn(*shape, generator=gen).to(torch.bfloat16)
        ours = fedmuon.newton_schulz(G, 5).float()
        theirs = _zeropower_via_newtonschulz(G, fedmuon.KELLER, 5, 1e-7).float()
        exact = fedmuon.newton_schulz(G.double(), 5).float()
        # bfloat16 keeps 8 bits of mantissa and the quintic amplifies rounding (slope 3.4 at 0): both
        # are 1-5% (Frobenius, relative) from the float64 result of the same input, and so from
        # each other. The bound is bfloat16 tolerance, far below the size of a real mistake (a
        # wrong coefficient or a missing transpose moves the output by tens of percent).
        for out in (ours, theirs):
            assert float((out - exact).norm() / exact.norm()) < 6e-2
        assert float((ours - theirs).norm() / theirs.norm()) < 6e-2


def test_lmo_closed_forms_and_the_descent_property():
    gen = torch.Generator().manual_seed(2)
    G = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    D = fedmuon.lmo(G)
    # -U V^T has unit singular values and <G, D> = -||G||_* (the trace norm)
    torch.testing.assert_close(torch.linalg.svdvals(D), torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close((G * D).sum(), -torch.linalg.svdvals(G).sum())
    torch.testing.assert_close(fedmuon.lmo(G, "frobenius"), -G / G.norm())
    torch.testing.assert_close(fedmuon.lmo(G, "sign"), -torch.sign(G))
    v = torch.tensor([3.0, 4.0], dtype=torch.float64)
    torch.testing.assert_close(fedmuon.lmo(v), -v / 5)
    assert float(fedmuon.lmo(torch.zeros(3, 3)).abs().max()) == 0.0
    for T in (0, 1, 2, 5):
        assert float((G * fedmuon.lmo(G, ns_steps=T)).sum()) < 0


def test_localmuon_is_stuck_on_the_toy_and_fedmuon_converges():
    A = fedmuon.toy_matrix(4, seed=0)
    local = fedmuon.toy_run("localmuon", A, rounds=40)
    carry = fedmuon.toy_run("localmuon_carry", A, rounds=40)
    fed = fedmuon.toy_run("fedmuon", A, rounds=40)
    assert float((local / local[0] - 1).abs().max()) < 1e-12
    assert float((carry / carry[0] - 1).abs().max()) < 1e-12
    assert float(fed[-1] / fed[0]) < 0.2


def test_fedmuon_toy_equals_the_server_equations_by_hand():
    # one round with K = 1: the control variates start at 0, so round 0 is a LocalMuon round
    A = fedmuon.toy_matrix(3, seed=4)
    out = fedmuon.toy_run("fedmuon", A, rounds=2, local_steps=1, alpha=1.0, lr0=0.1)
    x1 = (0.1 * fedmuon.lmo(-A) + 0.1 * fedmuon.lmo(3 * A)) / 2     # = 0
    c1 = [x1 - A, 3 * (x1 + A)]                                      # clients' last momenta
    C = (c1[0] + c1[1]) / 2
    eta = 0.1 / 2 ** 0.5
    xs = [x1 + eta * fedmuon.lmo((x1 - A) - c1[0] + C),
          x1 + eta * fedmuon.lmo(3 * (x1 + A) - c1[1] + C)]
    X2 = (xs[0] + xs[1]) / 2
    ref = torch.linalg.matrix_norm((X2 - A) / 2 + 1.5 * (X2 + A))
    torch.testing.assert_close(out[2], ref)


def _train(method, setup, world):
    return run_simulated(lambda comm: fedmuon.train_clients(comm, method, setup, 0), world)[0]


def test_two_workers_train_the_same_model_and_fedmuon_sends_twice_the_bytes():
    fm = FedMethod("FedMuon", "fedmuon", 0.05)
    one, two = _train(fm, SMALL, 1), _train(fm, SMALL, 2)
    torch.testing.assert_close(torch.tensor(one["loss"].to_numpy()), torch.tensor(two["loss"].to_numpy()),
                               rtol=1e-5, atol=1e-6)
    lm = _train(FedMethod("LocalMuon", "localmuon", 0.05), SMALL, 1)
    payload = fedmuon.model_bytes(SMALL)
    assert int(lm["bytes"].iloc[-1]) == SMALL.rounds * payload
    assert int(one["bytes"].iloc[-1]) == 2 * SMALL.rounds * payload


def test_fedmuon_with_zero_control_variates_is_localmuon_in_round_one():
    setup = replace(SMALL, clients=2, sampled=2, rounds=1)
    a = _train(FedMethod("a", "fedmuon", 0.05), setup, 1)
    b = _train(FedMethod("b", "localmuon", 0.05), setup, 1)
    assert a["loss"].iloc[-1] == pytest.approx(b["loss"].iloc[-1], rel=1e-6)


def test_one_client_fedmuon_is_single_machine_muon_on_every_round():
    # N = S = 1: the server's C equals the client's C_1 after every round (the 1/N rule), so the
    # correction vanishes and the momentum continues from the last round: Muon with EMA momentum,
    # i.e. LocalMuon with carried momentum. A stale C, a wrong server weight or a momentum that
    # restarts from zero breaks the equality from round two on.
    setup = replace(SMALL, clients=1, sampled=1, rounds=4)
    a = _train(FedMethod("a", "fedmuon", 0.05), setup, 1)
    b = _train(FedMethod("b", "localmuon", 0.05, carry=True), setup, 1)
    c = _train(FedMethod("c", "localmuon", 0.05), setup, 1)
    torch.testing.assert_close(torch.tensor(a["loss"].to_numpy()), torch.tensor(b["loss"].to_numpy()),
                               rtol=1e-6, atol=1e-7)
    assert abs(a["loss"].iloc[-1] - c["loss"].iloc[-1]) > 1e-6  # the carried momentum matters


def test_client_shards_split_the_training_set_and_check_their_setup():
    setup = replace(SMALL, clients=6)
    data = fedmuon.client_shards(replace(setup, dirichlet=0.1), 0)
    sizes = [len(data.worker(i)[1]) for i in range(setup.clients)]
    assert sum(sizes) == len(data.split.y_train)
    with pytest.raises(TypeError, match="setup"):
        fedmuon.client_shards("digits", 0)  # type: ignore[arg-type]


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="steps"):
        fedmuon.newton_schulz(torch.ones(2, 2), -1)
    with pytest.raises(ValueError, match="G must be"):
        fedmuon.newton_schulz(torch.ones(3), 1)
    with pytest.raises(ValueError, match="norm"):
        fedmuon.lmo(torch.ones(2, 2), "nuclear")
    with pytest.raises(ValueError, match="local_steps"):
        FedSetup(local_steps=0)
    with pytest.raises(ValueError, match="dirichlet"):
        FedSetup(dirichlet=0.0)
    with pytest.raises(ValueError, match="sampled"):
        FedSetup(clients=4, sampled=5)
    with pytest.raises(ValueError, match="lr"):
        FedMethod("x", "fedmuon", -0.1)
    with pytest.raises(ValueError, match="algorithm"):
        FedMethod("x", "fedadam", 0.1)
    with pytest.raises(ValueError, match="method"):
        fedmuon.toy_run("sgd", fedmuon.toy_matrix(2))
    with pytest.raises(ValueError, match="A must be"):
        fedmuon.toy_run("fedmuon", torch.ones(3))
    with pytest.raises(ValueError, match="noise"):
        fedmuon.toy_run("fedmuon", fedmuon.toy_matrix(2), noise=-1.0)


def test_ns_map_is_the_scalar_quintic_on_a_log_grid():
    df = fedmuon.ns_map(2, points=50)
    a, b, c = fedmuon.KELLER
    s = df["sigma"].to_numpy()
    assert s[0] == pytest.approx(1e-3) and s[-1] == pytest.approx(1.0)
    assert s[1] / s[0] == pytest.approx(s[-1] / s[-2])  # log-spaced
    p1 = a * s + b * s**3 + c * s**5
    assert df["output"].to_numpy() == pytest.approx(a * p1 + b * p1**3 + c * p1**5)
    with pytest.raises(ValueError, match="points"):
        fedmuon.ns_map(1, points=1)


def test_explorer_moves_its_chart():
    w = fedmuon.explorer()
    first = w.result.to_dict()
    w.children[0].value = 1
    assert w.result.to_dict() != first
    w.children[1].value = False
    w.result.to_dict()


def test_one_client_one_round_fedavg_adam_is_torch_adam():
    # N = S = 1, one round: the server takes the client's model, which took K steps of Adam from
    # zero moments on the client's batches (drawn as train_clients draws them); the step decays
    # linearly over the rounds, so in round one it is the full lr.
    from iclr_lab.distributed.fedmuon.training import _init, _loss

    setup = replace(SMALL, clients=1, sampled=1, rounds=1, local_steps=4)
    got = _train(FedMethod("adam", "adam", 0.01), setup, 1)  # seed 0
    data = fedmuon.client_shards(setup, 0)
    x, y = torch.as_tensor(data.worker(0)[0]), torch.as_tensor(data.worker(0)[1]).long()
    params = [p.clone().requires_grad_(True) for p in _init(setup, 0)]
    opt = torch.optim.Adam(params, lr=0.01, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    gen = torch.Generator().manual_seed(0)  # 1_000_003 seed + 1_009 round + client
    for _ in range(setup.local_steps):
        idx = torch.randint(len(y), (setup.batch,), generator=gen)
        opt.zero_grad()
        _loss(params, x[idx], y[idx]).backward()
        opt.step()
    x_all = torch.as_tensor(data.split.x_train)
    y_all = torch.as_tensor(data.split.y_train).long()
    with torch.no_grad():
        want = float(_loss(params, x_all, y_all))
    assert got["loss"].iloc[-1] == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("seed", [-1, 1.5, "0", None, 2**32])
def test_every_seeded_entry_refuses_a_bad_seed(seed):
    """Issue 24, item 4: ``toy_run`` took -1, 1.5, "0" and None (``int(seed)``); every entry that
    takes a seed now refuses what is not an integer in [0, 2**32 - 1], naming it."""
    A = fedmuon.toy_matrix(2)
    for call in (lambda: fedmuon.toy_run("fedmuon", A, rounds=1, seed=seed),
                 lambda: fedmuon.toy_matrix(2, seed),
                 lambda: fedmuon.client_shards(SMALL, seed),
                 lambda: train_stacked([FedMethod("m", "fedmuon", 0.1)], SMALL, seed),
                 lambda: run_simulated(lambda comm: fedmuon.train_clients(
                     comm, FedMethod("m", "fedmuon", 0.1), SMALL, seed), 1)):
        with pytest.raises((ValueError, TypeError), match="seed"):
            call()
    with pytest.raises((ValueError, TypeError), match=r"runs\[0\] seed"):
        toy_runs([("fedmuon", 0.0, seed, None)], A, rounds=1)


def test_bad_tensors_and_numbers_name_the_parameter():
    """Issue 24: empty and non-finite tensors, and every bad number, get an error naming the
    parameter before any work (they gave LAPACK's error, a NaN or nothing)."""
    nan = torch.full((3, 4), float("nan"))
    for call, match in [
        (lambda: fedmuon.lmo(nan), "G"),
        (lambda: fedmuon.lmo(torch.empty(0, 4)), "G"),
        (lambda: fedmuon.lmo(torch.ones(2, 2), eps=0.0), "eps"),
        (lambda: fedmuon.newton_schulz(torch.empty(0, 4)), "G"),
        (lambda: fedmuon.newton_schulz(nan), "G"),
        (lambda: fedmuon.newton_schulz(torch.ones(2, 2), coefficients=(1.0, 2.0)), "coefficients"),
        (lambda: fedmuon.toy_run("fedmuon", nan), "A"),
        (lambda: fedmuon.toy_run("fedmuon", torch.ones(2, 2), alpha=0.0), "alpha"),
        (lambda: toy_runs([("fedmuon", 0.0, 0, None)], torch.ones(2, 2), alpha=0.0), "alpha"),
        (lambda: toy_runs([("fedmuon", 0.0, 0, None)], torch.ones(2, 2), lr0=-1.0), "lr0"),
        (lambda: toy_runs([("fedmuon", -1.0, 0, None)], torch.ones(2, 2)), r"runs\[0\] noise"),
        (lambda: lmo_stacked(torch.ones(2, 2, 2), -1), "ns_steps"),
        (lambda: lmo_stacked(torch.ones(8), None), "G"),
        (lambda: newton_schulz_stacked(torch.ones(2, 2)), "G"),
        (lambda: fedmuon.methods(0.0, 0.1), "lr_lmo"),
        (lambda: fedmuon.methods(0.1, 0.1, float("nan")), "lr_adam"),
        (lambda: fedmuon.ns_map_chart(float("nan")), "steps"),
        (lambda: fedmuon.ns_map(2, coefficients=(1.0, float("inf"), 0.0)), "coefficients"),
        (lambda: fedmuon.local_lmo_steps([torch.ones(2)], [torch.ones(3)], lambda z, k: z, 1,
                                         0.5, 0.1), "m"),
        (lambda: FedMethod("m", "localmuon", 0.1, carry=1), "carry"),
    ]:
        with pytest.raises((ValueError, TypeError), match=match):
            call()


def test_the_training_loops_take_a_diverged_iterate_as_it_is():
    """The public LMO refuses a non-finite input, but a diverging run's iterate is its own: the
    training loops use the unchecked functions, so a diverged iterate goes on through the
    Newton-Schulz LMO (the chapter's) as before, and the tuner scores it as diverged."""
    x, m = [torch.full((2, 2), float("inf"))], [torch.zeros(2, 2)]
    fedmuon.local_lmo_steps(x, m, lambda z, k: [z[0]], 1, 0.5, 0.1)
    assert not torch.isfinite(x[0]).all()


# ---- the claims' controls and the tuning (experiments.py) --------------------------------------

def _tuned(best: dict[str, float]):
    """One Tuned per tuned method whose best tuning score is ``best[name]``."""
    from iclr_lab.core.tuning import Tuned

    return [Tuned(name, "lr", 0.1, (0.03, 0.1, 0.3), (1.0, score, float("inf")), 0.1, False, ())
            for name, score in best.items()]


def _tables(loss: dict[tuple[str, float], list[float]], acc: dict[tuple[str, float], list[float]]):
    """The tables `_claims` reads: a trivial toy and one `final` row per method, concentration and
    seed (three seeds)."""
    import pandas as pd

    from iclr_lab.distributed.fedmuon import experiments as ex

    rows = [{"method": m, "dirichlet": a, "lr": 0.1, "seed": s, "final_loss": loss[(m, a)][s],
             "test_acc": acc[(m, a)][s], "bytes": 0}
            for (m, a) in loss for s in range(3)]
    toy = pd.DataFrame([{"round": r, "ratio": 1.0, "method": m, "noise": n, "seed": 0}
                        for r in (0, 1) for m in (ex.FEDMUON, ex.LOCALMUON) for n in (0.0, 0.1)])
    toy_ns = pd.DataFrame([{"round": r, "ratio": 1.0, "T": t} for r in (0, 1)
                           for t in ("T = 0", "exact (SVD)")])
    return {"final": pd.DataFrame(rows), "toy": toy, "toy_ns": toy_ns}


def test_strongest_baseline_leaves_out_what_it_is_told_and_checks_its_names():
    from iclr_lab.distributed.fedmuon import experiments as ex

    tuned = _tuned({ex.FEDMUON: 0.001, ex.LOCALMUON: 0.01, ex.SCAFFOLD: 0.05, ex.ADAM: 0.02})
    assert ex.strongest_baseline(tuned) == ex.LOCALMUON  # FedMuon is not a baseline
    assert ex.strongest_baseline(tuned, exclude=(ex.LOCALMUON,)) == ex.ADAM
    assert ex.strongest_baseline(tuned, exclude=ex.LOCALMUON) == ex.ADAM  # one name as a string
    with pytest.raises(ValueError, match=r"exclude\[0\]"):
        ex.strongest_baseline(tuned, exclude=(ex.FEDMUON,))
    with pytest.raises(ValueError, match="exclude must leave"):
        ex.strongest_baseline(tuned, exclude=ex.BASELINES)
    with pytest.raises(ValueError, match="tuned has no result"):
        ex.strongest_baseline(tuned[:2])


def test_the_control_of_beating_the_baselines_is_not_compared_with_itself():
    # LocalMuon is the strongest baseline by the tuning score: the control (LocalMuon in FedMuon's
    # place) is compared with the strongest baseline other than itself (FedAvg-Adam here), not with
    # itself (a difference of 0 at every seed, which fails by construction), and it can pass
    from iclr_lab.distributed.fedmuon import experiments as ex

    het, iid = ex.ALPHAS
    loss = {(ex.FEDMUON, het): [0.10, 0.11, 0.12], (ex.LOCALMUON, het): [0.20, 0.21, 0.23],
            (ex.SCAFFOLD, het): [0.50, 0.52, 0.55], (ex.ADAM, het): [0.40, 0.40, 0.42]}
    loss |= {(m, iid): list(v) for (m, _), v in loss.items()}
    acc = {k: [0.9, 0.9, 0.9] for k in loss}
    acc[(ex.LOCALMUON, het)] = [0.95, 0.96, 0.96]
    tuned = _tuned({ex.FEDMUON: 0.001, ex.LOCALMUON: 0.01, ex.SCAFFOLD: 0.05, ex.ADAM: 0.02})
    claims = {c.name: c for c in ex._claims(_tables(loss, acc), tuned)}
    lo = claims["beats_baselines_loss"]
    assert lo.per_seed == pytest.approx([-0.10, -0.10, -0.11])       # FedMuon - LocalMuon
    assert lo.control_per_seed == pytest.approx([-0.20, -0.19, -0.19])  # LocalMuon - FedAvg-Adam
    assert lo.passed and lo.control_passed  # the control can pass: the test does not separate them
    ac = claims["beats_baselines_accuracy"]
    assert ac.per_seed == pytest.approx([-0.05, -0.06, -0.06])
    assert ac.control_per_seed == pytest.approx([0.05, 0.06, 0.06])
    assert not ac.passed and ac.control_passed
    assert ex.ADAM in lo.control and ex.ADAM in ac.control
    # with SCAFFOLD the strongest baseline, method and control face the same baseline
    tuned = _tuned({ex.FEDMUON: 0.001, ex.LOCALMUON: 0.03, ex.SCAFFOLD: 0.01, ex.ADAM: 0.02})
    lo = {c.name: c for c in ex._claims(_tables(loss, acc), tuned)}["beats_baselines_loss"]
    assert lo.per_seed == pytest.approx([-0.40, -0.41, -0.43])
    assert lo.control_per_seed == pytest.approx([-0.30, -0.31, -0.32])


def test_the_heterogeneity_claim_is_a_paired_difference_with_no_infinite_branch():
    # LocalMuon ends below FedMuon on near-IID data and a hair above it under skew: the old ratio
    # of gaps read this as infinite; the paired difference is the small positive number it is
    from iclr_lab.distributed.fedmuon import experiments as ex

    het, iid = ex.ALPHAS
    loss = {(ex.FEDMUON, het): [0.100, 0.100, 0.100], (ex.LOCALMUON, het): [0.101, 0.102, 0.101],
            (ex.SCAFFOLD, het): [0.3, 0.3, 0.3], (ex.ADAM, het): [0.2, 0.2, 0.2],
            (ex.FEDMUON, iid): [0.010, 0.010, 0.010], (ex.LOCALMUON, iid): [0.009, 0.008, 0.009],
            (ex.SCAFFOLD, iid): [0.05, 0.05, 0.05], (ex.ADAM, iid): [0.02, 0.03, 0.02]}
    acc = {k: [0.9, 0.9, 0.9] for k in loss}
    tuned = _tuned({ex.FEDMUON: 0.001, ex.LOCALMUON: 0.01, ex.SCAFFOLD: 0.05, ex.ADAM: 0.02})
    h = {c.name: c for c in ex._claims(_tables(loss, acc), tuned)}["heterogeneity"]
    assert h.per_seed == pytest.approx([0.002, 0.004, 0.002])
    assert h.measured == pytest.approx(0.002)
    # the control (FedAvg-Adam in FedMuon's place) is the same difference
    assert h.control_per_seed == pytest.approx([(0.101 - 0.2) - (0.009 - 0.02),
                                                (0.102 - 0.2) - (0.008 - 0.03),
                                                (0.101 - 0.2) - (0.009 - 0.02)])


def test_every_grid_is_refined_around_its_choice(monkeypatch):
    # stand-in training runs whose final loss is a bowl in log(lr) around 0.2 for every method,
    # infinite (diverged) above 0.5 for SCAFFOLD alone: every method's grid gains the geometric
    # midpoints to both neighbours of its choice, not only SCAFFOLD's
    import numpy as np
    import pandas as pd

    from iclr_lab.distributed.fedmuon import experiments as ex

    def fake_run_all(methods, setup, seed):
        out = []
        for m in methods:
            loss = float(np.log(m.lr / 0.2) ** 2)
            if m.name == ex.SCAFFOLD and m.lr > 0.5:
                loss = float("inf")
            out.append(pd.DataFrame({"method": m.name, "round": [0, 1], "loss": [9.0, loss],
                                     "test_acc": 0.5, "bytes": 0}).assign(
                                         lr=m.lr, dirichlet=setup.dirichlet, seed=seed))
        return out

    monkeypatch.setattr(ex, "_run_all", fake_run_all)
    tuned, table = ex._tune_all(ex._sizes("book"), 0)
    by = {t.method: t for t in tuned}
    # on the five-point grids the best point is 0.3; the refinement adds sqrt(0.1 * 0.3) = 0.173,
    # closer to 0.2, and sqrt(0.3 * 1) = 0.548: unrefined, FedMuon and LocalMuon would stay at 0.3
    for name in (ex.FEDMUON, ex.LOCALMUON, ex.SCAFFOLD):
        assert by[name].choice == pytest.approx(np.sqrt(0.03))
        assert any(v == pytest.approx(np.sqrt(0.3)) for v in by[name].grid)
        # SCAFFOLD's 0.3 sits next to its diverged 1.0: the tuner's midpoint 0.548 comes first
        assert len(by[name].grid) == (8 if name == ex.SCAFFOLD else 7)
    # FedAvg-Adam's grid (0.001-0.1) is extended to 1/3 at its edge, then refined around it
    assert np.sqrt(0.1 / 3) == pytest.approx(by[ex.ADAM].grid[5])
    assert by[ex.ADAM].choice == pytest.approx(np.sqrt(0.1 / 3))
    assert {round(v, 9) for v in table["lr"]} == {round(v, 9) for t in tuned for v in t.grid}
