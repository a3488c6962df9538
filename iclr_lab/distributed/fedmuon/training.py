"""Federated training on digits with Dirichlet label skew and partial participation, written once
against :class:`iclr_lab.core.collective.Collective`.

The N clients are spread over the workers of ``comm`` (client ``i`` lives on rank
``i mod world_size``). Each round the same S clients are sampled on every rank (a shared seeded
draw); each rank runs its sampled clients' local steps, then one all-reduce *sum* of the model
deltas (and, for FedMuon and SCAFFOLD, of the control-variate deltas) forms the server update
(``fedmuon-eq-server``). One simulated worker and several real processes therefore run the same
algorithm; only the order of the floating-point sums differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from iclr_lab.core.collective import Collective
from iclr_lab.core.validation import check_choice, check_int, check_range, check_seed
from iclr_lab.core.worker_data import WorkerShards, digit_shards
from iclr_lab.distributed.fedmuon.method import local_lmo_steps

__all__ = ["ALGORITHMS", "FedMethod", "FedSetup", "client_shards", "model_bytes", "train_clients"]

#: The algorithms of :class:`FedMethod`. FedMuon is equation ``fedmuon-eq-local`` with the corrected
#: momentum, LocalMuon is FedAvg with local Muon, SCAFFOLD runs local heavy-ball momentum on the
#: corrected gradient, with the mean local gradient of the round as its control variate, and
#: FedAvg-Adam (``"adam"``) is FedAvg with local Adam, its moments started at zero every round.
ALGORITHMS: tuple[str, ...] = ("fedmuon", "localmuon", "scaffold", "adam")
#: FedAvg-Adam's moment coefficients and epsilon (PyTorch's defaults).
ADAM_BETAS: tuple[float, float] = (0.9, 0.999)
ADAM_EPS = 1e-8


@dataclass(frozen=True)
class FedMethod:
    """One federated method.

    Attributes:
        name: the label in tables and charts (a string).
        algorithm: one of :data:`~iclr_lab.distributed.fedmuon.training.ALGORITHMS`.
        lr: the local step size, in (0, inf) (the LMO step ``eta`` for the LMO methods, the SGD
            step for SCAFFOLD, Adam's step for FedAvg-Adam); it decays linearly to 0 over the
            rounds.
        alpha: the momentum's EMA weight ``alpha`` in ``fedmuon-eq-local`` (LMO methods), in
            (0, 1].
        beta: SCAFFOLD's heavy-ball momentum ``m <- beta m + g``, in [0, 1).
        carry: LocalMuon keeps each client's momentum across rounds (otherwise it starts at 0).
        ns_steps: Newton-Schulz iterations of the spectral LMO, an integer >= 0 (``None``: exact
            SVD).

    Raises:
        TypeError, ValueError: a field outside the range above, naming the field.
    """

    name: str
    algorithm: str
    lr: float
    alpha: float = 0.5
    beta: float = 0.9
    carry: bool = False
    ns_steps: int | None = 5

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string, got {type(self.name).__name__}")
        check_choice("algorithm", self.algorithm, ALGORITHMS)
        check_range("lr", self.lr, 0, low_open=True)
        check_range("alpha", self.alpha, 0, 1, low_open=True)
        check_range("beta", self.beta, 0, 1, high_open=True)
        if not isinstance(self.carry, bool):
            raise TypeError(f"carry must be True or False, got {type(self.carry).__name__}")
        if self.ns_steps is not None:
            check_int("ns_steps", self.ns_steps, 0)


@dataclass(frozen=True)
class FedSetup:
    """The federated digits problem.

    Attributes:
        clients: N, the number of clients (>= 1).
        sampled: S, the clients sampled each round (partial participation), in [1, clients].
        local_steps: K, local steps per round (>= 1).
        rounds: R, communication rounds (>= 1).
        batch: examples per local step (>= 1).
        hidden: width of the two hidden layers of the MLP 64 -> hidden -> hidden -> 10 (>= 1).
        dirichlet: the Dirichlet concentration of the label skew, in (0, inf) (smaller: more
            heterogeneous).
        eval_every: rounds between evaluations (>= 1; the last round is always evaluated).

    Raises:
        TypeError, ValueError: a field outside the range above, naming the field.
    """

    clients: int = 16
    sampled: int = 8
    local_steps: int = 5
    rounds: int = 60
    batch: int = 32
    hidden: int = 64
    dirichlet: float = 0.1
    eval_every: int = 5

    def __post_init__(self) -> None:
        check_int("clients", self.clients, 1)
        check_int("sampled", self.sampled, 1, self.clients)
        check_int("local_steps", self.local_steps, 1)
        check_int("rounds", self.rounds, 1)
        check_int("batch", self.batch, 1)
        check_int("hidden", self.hidden, 1)
        check_range("dirichlet", self.dirichlet, 0, low_open=True)
        check_int("eval_every", self.eval_every, 1)


def _init(setup: FedSetup, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(10_000 + int(seed))
    sizes = [(setup.hidden, 64), (setup.hidden, setup.hidden), (10, setup.hidden)]
    params: list[torch.Tensor] = []
    for out, inp in sizes:  # PyTorch's (out, in) layout; uniform +-1/sqrt(in) as nn.Linear
        bound = inp ** -0.5
        params.append((torch.rand(out, inp, generator=gen) * 2 - 1) * bound)
        params.append((torch.rand(out, generator=gen) * 2 - 1) * bound)
    return params


def _loss(params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    h = x
    for j in range(0, len(params) - 2, 2):
        h = torch.relu(h @ params[j].T + params[j + 1])
    return torch.nn.functional.cross_entropy(h @ params[-2].T + params[-1], y)


def model_bytes(setup: FedSetup) -> int:
    """Bytes of one float32 copy of the model (what one model-sized upload moves)."""
    h = setup.hidden
    return 4 * (64 * h + h + h * h + h + 10 * h + 10)


def client_shards(setup: FedSetup, seed: int) -> WorkerShards:
    """The clients' data of ``setup``: standardised digits split over ``setup.clients`` clients by a
    Dirichlet label split of concentration ``setup.dirichlet``, drawn with ``seed`` (an integer in
    [0, 2**32 - 1])."""
    if not isinstance(setup, FedSetup):
        raise TypeError(f"setup must be a FedSetup, got {type(setup).__name__}")
    seed = check_seed(seed)
    return digit_shards(setup.clients, "dirichlet", alpha=setup.dirichlet, seed=seed, standardize=True)


def train_clients(comm: Collective, method: FedMethod, setup: FedSetup, seed: int) -> pd.DataFrame:
    """Train ``method`` on ``setup`` with this worker's share of the clients; return the log.

    One row per evaluation: ``round``, ``loss`` (global training loss over all clients' data),
    ``test_acc``, ``bytes`` (payload this worker all-reduced so far in this run) and ``method``.
    Client sampling and mini-batches depend only on ``seed``, the round and the client, never on
    the rank, so every world size trains the same model.

    Raises:
        TypeError, ValueError: ``comm`` is not a collective, ``method`` or ``setup`` of the wrong
            type, or ``seed`` not an integer in [0, 2**32 - 1].
    """
    if not isinstance(comm, Collective):
        raise TypeError(f"comm must be an iclr_lab.core.collective.Collective, "
                        f"got {type(comm).__name__}")
    if not isinstance(method, FedMethod):
        raise TypeError(f"method must be a FedMethod, got {type(method).__name__}")
    if not isinstance(setup, FedSetup):
        raise TypeError(f"setup must be a FedSetup, got {type(setup).__name__}")
    seed = check_seed(seed)
    data = client_shards(setup, seed)
    xs = [torch.as_tensor(data.worker(i)[0]) for i in range(setup.clients)]
    ys = [torch.as_tensor(data.worker(i)[1]).long() for i in range(setup.clients)]
    x_all = torch.as_tensor(data.split.x_train)
    y_all = torch.as_tensor(data.split.y_train).long()
    x_te = torch.as_tensor(data.split.x_test)
    y_te = torch.as_tensor(data.split.y_test).long()
    mine = [i for i in range(setup.clients) if i % comm.world_size == comm.rank]
    X = _init(setup, seed)
    zeros = [torch.zeros_like(p) for p in X]
    C = [z.clone() for z in zeros]                                   # server control variate
    Ci = {i: [z.clone() for z in zeros] for i in mine}               # client control variates
    Mi = {i: [z.clone() for z in zeros] for i in mine}               # carried momenta
    uses_cv = method.algorithm in ("fedmuon", "scaffold")
    rows: list[dict[str, object]] = []
    start_bytes = comm.counts().total_bytes  # a collective may have served earlier runs

    def record(r: int) -> None:
        with torch.no_grad():
            loss = float(_loss(X, x_all, y_all))
            h = x_te
            for j in range(0, len(X) - 2, 2):
                h = torch.relu(h @ X[j].T + X[j + 1])
            acc = float(((h @ X[-2].T + X[-1]).argmax(1) == y_te).float().mean())
        rows.append({"round": r, "loss": loss, "test_acc": acc,
                     "bytes": comm.counts().total_bytes - start_bytes, "method": method.name})

    record(0)
    for r in range(setup.rounds):
        lr = method.lr * (1 - r / setup.rounds)
        picked = np.random.default_rng([seed, 7, r]).choice(setup.clients, setup.sampled, replace=False)
        dx = [z.clone() for z in zeros]
        dc = [z.clone() for z in zeros]
        for i in sorted(int(p) for p in picked if p % comm.world_size == comm.rank):
            gen = torch.Generator().manual_seed(1_000_003 * seed + 1_009 * r + i)
            n_i = len(ys[i])

            def grad(z: list[torch.Tensor], k: int, i: int = i, gen: torch.Generator = gen,
                     n_i: int = n_i) -> list[torch.Tensor]:
                idx = torch.randint(n_i, (setup.batch,), generator=gen)
                leaves = [t.detach().requires_grad_(True) for t in z]
                return list(torch.autograd.grad(_loss(leaves, xs[i][idx], ys[i][idx]), leaves))

            x = [p.clone() for p in X]
            if method.algorithm == "scaffold":
                m = [z.clone() for z in zeros]
                corr = [c - ci for c, ci in zip(C, Ci[i], strict=True)]
                new_ci = [z.clone() for z in zeros]
                for k in range(setup.local_steps):
                    g = grad(x, k)
                    with torch.no_grad():
                        for xj, mj, gj, cj, nj in zip(x, m, g, corr, new_ci, strict=True):
                            mj.mul_(method.beta).add_(gj + cj)
                            xj.sub_(mj, alpha=lr)
                            nj.add_(gj, alpha=1 / setup.local_steps)
                # c_i+ = the mean local gradient of the round. SCAFFOLD's option II,
                # (x - y_i) / (K lr) - c + c_i, equals it for plain SGD but, with momentum, measures
                # the mean momentum instead: about 2.6 times the gradient for K = 5 steps from zero
                # with beta = 0.9 (1 / (1 - beta) = 10 only in the long run).
            elif method.algorithm == "adam":
                b1, b2 = ADAM_BETAS
                m = [z.clone() for z in zeros]
                v = [z.clone() for z in zeros]
                for k in range(setup.local_steps):
                    g = grad(x, k)
                    bc1, bc2 = 1 - b1 ** (k + 1), 1 - b2 ** (k + 1)
                    with torch.no_grad():
                        for xj, mj, vj, gj in zip(x, m, v, g, strict=True):
                            mj.mul_(b1).add_(gj, alpha=1 - b1)
                            vj.mul_(b2).addcmul_(gj, gj, value=1 - b2)
                            xj.sub_((mj / bc1) / ((vj / bc2).sqrt() + ADAM_EPS), alpha=lr)
                new_ci = Ci[i]
            elif method.algorithm == "fedmuon":
                m = [c.clone() for c in Ci[i]]  # start from the last local momentum (= C_i)
                shift = [ci - c for ci, c in zip(Ci[i], C, strict=True)]
                local_lmo_steps(x, m, grad, setup.local_steps, method.alpha, lr, shift=shift,
                                ns_steps=method.ns_steps)
                new_ci = m
            else:
                m = Mi[i] if method.carry else [z.clone() for z in zeros]
                local_lmo_steps(x, m, grad, setup.local_steps, method.alpha, lr,
                                ns_steps=method.ns_steps)
                new_ci = Ci[i]
            for j in range(len(X)):
                dx[j] += x[j] - X[j]
                dc[j] += new_ci[j] - Ci[i][j]
            Ci[i] = new_ci
        comm.all_reduce_sum(dx, kind="parameters")
        if uses_cv:
            comm.all_reduce_sum(dc, kind="other")
        for j in range(len(X)):
            X[j] = X[j] + dx[j] / setup.sampled       # the server averages the sampled clients
            if uses_cv:
                C[j] = C[j] + dc[j] / setup.clients   # 1/N: the unsampled clients' C_i are unchanged
        if (r + 1) % setup.eval_every == 0 or r + 1 == setup.rounds:
            record(r + 1)
    return pd.DataFrame(rows)
