"""The chapter's runs stacked: every sampled client of every method in one tensor pass.

:func:`~iclr_lab.distributed.fedmuon.training.train_clients` is one worker of one run, written
against the :class:`~iclr_lab.core.collective.Collective` interface. On one simulated worker a
64-64-64-10 MLP spends most of its time in per-call overhead (Python, autograd, one small matrix
product at a time), not in arithmetic. :func:`train_stacked` runs several methods on the same
problem and seed at once: row ``n = p * S + s`` of every stacked tensor is the local model of the
``s``-th sampled client (in sorted order) of method ``p``, the gradients are one autograd pass over
batched matrix products, and the Newton-Schulz map is batched (:func:`newton_schulz_stacked`).
:func:`toy_runs` does the same for the toy of Theorem 1 (every client of every run in one stack).

The results are the serial ones to float rounding (the tests check every table entry to a relative
1e-5, the byte counts exactly), and bit for bit where the CPU's batched and single-matrix BLAS
kernels round alike (they did on the machine this chapter was written on; on an AVX-512 AMD EPYC a
few entries differ by about 1e-7), because every operation does the same float arithmetic per
model as the serial code:

* ``bmm``/``baddbmm`` over the model dimension give each model what ``mm``/``addmm`` give it alone
  (for products with at least 400 multiply-adds, where PyTorch's CPU kernel runs one BLAS call per
  model; smaller Newton-Schulz products fall back to the serial function per model);
* norms, the log-softmax and the bias sums reduce each model's own rows, in the serial order;
* the element-wise updates with a scalar factor (``lerp_``, ``add_(alpha=lr)``) run on a block of
  models only where each model's tensor is a multiple of 64 entries, so that the vectorised loop
  splits every model exactly as it does alone; otherwise (the 10-entry output bias) model by model;
* the server sums the sampled clients in sorted order from zero, then divides, as the serial
  loop does;
* each client's mini-batches come from its own ``(seed, round, client)`` generator, drawn once and
  shared by every method (they do not depend on the method).

The communication is counted by a :class:`~iclr_lab.distributed.desloc.stacked.StackedCollective`
of one worker per method: each all-reduce is one round, and its payload is one method's share.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from iclr_lab.core.validation import check_int, check_range, check_seed
from iclr_lab.distributed.desloc.stacked import StackedCollective
from iclr_lab.distributed.fedmuon.method import (
    _TOY,
    KELLER,
    _check_coefficients,
    _check_tensor,
    _check_toy_run,
    _check_toy_sizes,
    _lmo,
    _newton_schulz,
)
from iclr_lab.distributed.fedmuon.training import (
    ADAM_BETAS,
    ADAM_EPS,
    FedMethod,
    FedSetup,
    _init,
    _loss,
    client_shards,
)

__all__ = ["lmo_stacked", "newton_schulz_stacked", "toy_runs", "train_stacked"]

#: entries per model below which (or off whose multiples) an element-wise update runs model by model
_ALIGN = 64


def newton_schulz_stacked(G: torch.Tensor, steps: int = 5, *, eps: float = 1e-7,
                          coefficients: tuple[float, float, float] = KELLER) -> torch.Tensor:
    """:func:`~iclr_lab.distributed.fedmuon.method.newton_schulz` of every matrix ``G[n]`` of a
    stack ``(models, rows, cols)``, each normalised by its own Frobenius norm; equal to the serial
    map model by model, bit for bit.

    Args:
        G: a non-empty, finite 3-D tensor.
        steps: number of iterations T (>= 0).
        eps: added to each Frobenius norm, in (0, inf).
        coefficients: the quintic's ``(a, b, c)``, three finite numbers.

    Raises:
        TypeError, ValueError: an argument outside the ranges above, naming it.
    """
    G = _check_tensor("G", G, ndim=3)
    steps = check_int("steps", steps, 0)
    eps = check_range("eps", eps, 0, low_open=True)
    _check_coefficients(coefficients)
    return _newton_schulz_stacked(G, steps, eps, coefficients)


def _newton_schulz_stacked(G: torch.Tensor, steps: int, eps: float,
                           coefficients: tuple[float, float, float]) -> torch.Tensor:
    """:func:`newton_schulz_stacked` without the checks, for the training loops (their iterates
    may turn non-finite: a diverging step size)."""
    m = min(G.shape[-2], G.shape[-1])
    if m ** 3 < 400:  # PyTorch's batched product takes a different kernel below 400 multiply-adds
        return torch.stack([_newton_schulz(g, steps, eps, coefficients) for g in G])
    a, b, c = coefficients
    tall = G.shape[-2] > G.shape[-1]
    X = G.mT if tall else G
    X = X / (torch.linalg.matrix_norm(X, keepdim=True) + eps)
    for _ in range(steps):
        A = torch.bmm(X, X.mT)
        B = torch.baddbmm(A, A, A, beta=b, alpha=c)
        X = torch.baddbmm(X, B, X, beta=a)
    return X.mT if tall else X


def lmo_stacked(G: torch.Tensor, ns_steps: int | None, eps: float = 1e-12) -> torch.Tensor:
    """The spectral :func:`~iclr_lab.distributed.fedmuon.method.lmo` of every model of a stack:
    ``G`` is ``(models, rows, cols)`` (a matrix per model) or ``(models, size)`` (a vector).

    Args:
        G: a non-empty, finite 2-D or 3-D tensor.
        ns_steps: Newton-Schulz iterations (an integer >= 0), or ``None`` (exact SVD).
        eps: in (0, inf), as in :func:`~iclr_lab.distributed.fedmuon.method.lmo`.

    Raises:
        TypeError, ValueError: an argument outside the ranges above, naming it.
    """
    G = _check_tensor("G", G, ndim=(2, 3))
    if ns_steps is not None:
        ns_steps = check_int("ns_steps", ns_steps, 0)
    eps = check_range("eps", eps, 0, low_open=True)
    return _lmo_stacked(G, ns_steps, eps)


def _lmo_stacked(G: torch.Tensor, ns_steps: int | None, eps: float = 1e-12) -> torch.Tensor:
    """:func:`lmo_stacked` without the checks, for the training loops."""
    if G.ndim == 2:
        return -G / torch.linalg.vector_norm(G, dim=-1, keepdim=True).clamp_min(eps)
    if ns_steps is not None:
        return -_newton_schulz_stacked(G, ns_steps, 1e-7, KELLER)
    if min(G.shape[-2:]) ** 3 < 400:
        return torch.stack([_lmo(g, "spectral", None, 1e-12) for g in G])
    U, S, Vh = torch.linalg.svd(G, full_matrices=False)
    # the serial threshold, per model: a Python float compared in S's dtype
    thr = torch.tensor([eps * max(float(s.max()), 1.0) for s in S], dtype=S.dtype)
    keep = (S > thr.unsqueeze(1)).to(G.dtype)
    return -torch.bmm(U * keep.unsqueeze(1), Vh)


def _padded(t: torch.Tensor) -> torch.Tensor:
    """A copy of the stack ``t`` whose rows are ``numel + 1`` entries apart, unless each row's
    size is a multiple of 64: the element-wise kernels then cannot merge the rows into one loop,
    and split each row exactly as they split the model alone (see :func:`_blocks`)."""
    per = t[0].numel()
    if per % _ALIGN == 0:
        return t.clone()
    out = t.new_empty(t.shape[0], per + 1)[:, :per].view(t.shape)
    return out.copy_(t)


def _blocks(per: int, S: int, *tensors: torch.Tensor) -> list[tuple[int, list[torch.Tensor]]]:
    """``(p, views)`` for method ``p``: its ``S`` rows of each tensor as one block when the
    element-wise kernels split every model there as they split it alone, else row by row.

    A kernel's vectorised loop runs over the merged contiguous dimensions and leaves the last
    ``size % (2 * vector width)`` entries to a scalar loop, whose rounding may differ. A block is
    safe when every model's rows start at a multiple of 64 entries of one contiguous loop, or when
    the output's rows (``tensors[0]``, from :func:`_padded`) cannot be merged, so that the loop
    restarts at every model."""
    P = tensors[0].shape[0] // S
    out0 = tensors[0]
    whole = (per % _ALIGN == 0 and all(t.is_contiguous() for t in tensors)) or (
        out0.shape[0] > 1 and out0.stride(0) != per and out0[0].is_contiguous())
    out: list[tuple[int, list[torch.Tensor]]] = []
    for p in range(P):
        if whole:
            out.append((p, [t[p * S:(p + 1) * S] for t in tensors]))
        else:
            out += [(p, [t[p * S + s] for t in tensors]) for s in range(S)]
    return out


def _lerp_(m: torch.Tensor, g: torch.Tensor, alphas: Sequence[float], S: int) -> None:
    for p, (mv, gv) in _blocks(m[0].numel(), S, m, g):
        mv.lerp_(gv, alphas[p])


def _axpy_(x: torch.Tensor, d: torch.Tensor, alphas: Sequence[float], S: int, *,
           sub: bool = False) -> None:
    """``x[p] += alphas[p] * d[p]`` (``-=`` with ``sub``) as ``add_``/``sub_(d, alpha=...)``."""
    for p, (xv, dv) in _blocks(x[0].numel(), S, x, d):
        if sub:
            xv.sub_(dv, alpha=alphas[p])
        else:
            xv.add_(dv, alpha=alphas[p])


@functools.lru_cache(maxsize=4)
def _problem(setup: FedSetup, seed: int) -> tuple[torch.Tensor, torch.Tensor, list[np.ndarray],
                                                  list[torch.Tensor], tuple[torch.Tensor, ...]]:
    """What every method of ``(setup, seed)`` shares: the clients' examples concatenated (``x``,
    labels), each round's sampled clients (sorted), each round's mini-batch rows
    ``(local_steps, sampled * batch)`` into the concatenation (each client's generator drawn as
    :func:`~iclr_lab.distributed.fedmuon.training.train_clients` draws it), and the evaluation
    tensors ``(x_train, y_train, x_test, y_test)``."""
    data = client_shards(setup, seed)
    xs = [torch.as_tensor(data.worker(i)[0]) for i in range(setup.clients)]
    ys = [torch.as_tensor(data.worker(i)[1]).long() for i in range(setup.clients)]
    offsets = np.cumsum([0] + [len(y) for y in ys])
    picks, batches = [], []
    for r in range(setup.rounds):
        picked = np.random.default_rng([seed, 7, r]).choice(setup.clients, setup.sampled,
                                                            replace=False)
        order = np.array(sorted(int(p) for p in picked))
        steps = []
        for i in order:
            gen = torch.Generator().manual_seed(1_000_003 * seed + 1_009 * r + int(i))
            steps.append(torch.stack([torch.randint(len(ys[i]), (setup.batch,), generator=gen)
                                      for _ in range(setup.local_steps)]) + int(offsets[i]))
        picks.append(order)
        batches.append(torch.stack(steps, dim=1).reshape(setup.local_steps, -1))
    evals = (torch.as_tensor(data.split.x_train), torch.as_tensor(data.split.y_train).long(),
             torch.as_tensor(data.split.x_test), torch.as_tensor(data.split.y_test).long())
    return torch.cat(xs), torch.cat(ys), picks, batches, evals


def _stacked_grads(z: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """The gradient of every model's mean cross-entropy on its own batch (``x``: ``(models, batch,
    64)``, ``y``: ``(models, batch)``): autograd through ``bmm``, which repeats each model's serial
    ``mm`` backward."""
    with torch.enable_grad():
        leaves = [t.detach().contiguous().requires_grad_(True) for t in z]
        h = x
        for j in range(0, len(leaves) - 2, 2):
            h = torch.relu(torch.matmul(h, leaves[j].mT) + leaves[j + 1].unsqueeze(1))
        logits = torch.matmul(h, leaves[-2].mT) + leaves[-1].unsqueeze(1)
        n, b = y.shape
        loss = torch.nn.functional.cross_entropy(logits.reshape(n * b, -1), y.reshape(-1),
                                                 reduction="none").view(n, b).mean(1).sum()
        # bmm's backward returns the weight gradients transposed; the serial ones are contiguous
        return [g.contiguous() for g in torch.autograd.grad(loss, leaves)]


@dataclass
class _Group:
    """The methods of one algorithm (and momentum rule), stacked: ``X``, ``C`` are ``(P, ...)``,
    ``Ci``, ``Mi`` ``(P, clients, ...)``."""

    methods: list[FedMethod]
    X: list[torch.Tensor]
    C: list[torch.Tensor]
    Ci: list[torch.Tensor]
    Mi: list[torch.Tensor]
    comm: StackedCollective
    rows: list[list[dict[str, object]]]


def train_stacked(methods: Sequence[FedMethod], setup: FedSetup, seed: int) -> list[pd.DataFrame]:
    """:func:`~iclr_lab.distributed.fedmuon.training.train_clients` of every method of ``methods``
    on ``setup`` and ``seed``, at once: the tables in the order of ``methods``, each equal bit for
    bit to ``run_simulated(lambda comm: train_clients(comm, method, setup, seed), 1)[0]``.

    Raises:
        TypeError, ValueError: ``methods`` empty or not FedMethods, ``setup`` not a
            :class:`~iclr_lab.distributed.fedmuon.training.FedSetup`, or ``seed`` not an integer
            in [0, 2**32 - 1].
    """
    for m in methods:
        if not isinstance(m, FedMethod):
            raise TypeError(f"methods must be FedMethods, got {type(m).__name__}")
    if not isinstance(setup, FedSetup):
        raise TypeError(f"setup must be a FedSetup, got {type(setup).__name__}")
    seed = check_seed(seed)
    if not methods:
        raise ValueError("methods must not be empty")
    x_cat, y_cat, picks, batches, (x_all, y_all, x_te, y_te) = _problem(setup, seed)
    S, N = setup.sampled, setup.clients
    init = _init(setup, seed)
    groups: dict[tuple[str, bool, int | None], _Group] = {}
    for m in methods:
        lmo_method = m.algorithm != "scaffold"
        key = (m.algorithm, m.carry and m.algorithm == "localmuon", m.ns_steps if lmo_method else None)
        if key not in groups:
            groups[key] = _Group([], [], [], [], [], StackedCollective(1, 1), [])
        groups[key].methods.append(m)
    for g in groups.values():
        P = len(g.methods)
        g.X = [p.expand(P, *p.shape).clone() for p in init]
        g.C = [torch.zeros_like(x) for x in g.X]
        g.Ci = [torch.zeros(P, N, *p.shape) for p in init]
        g.Mi = [torch.zeros(P, N, *p.shape) for p in init]
        g.comm = StackedCollective(1, P)
        g.rows = [[] for _ in range(P)]

    def record(g: _Group, r: int) -> None:
        total = g.comm.counts().total_bytes
        with torch.no_grad():
            for p, m in enumerate(g.methods):
                X = [t[p] for t in g.X]
                loss = float(_loss(X, x_all, y_all))
                h = x_te
                for j in range(0, len(X) - 2, 2):
                    h = torch.relu(h @ X[j].T + X[j + 1])
                acc = float(((h @ X[-2].T + X[-1]).argmax(1) == y_te).float().mean())
                g.rows[p].append({"round": r, "loss": loss, "test_acc": acc, "bytes": total,
                                  "method": m.name})

    for g in groups.values():
        record(g, 0)
    for r in range(setup.rounds):
        picked = torch.as_tensor(picks[r])
        xb = [x_cat[b].view(S, setup.batch, -1) for b in batches[r]]
        yb = [y_cat[b].view(S, setup.batch) for b in batches[r]]
        for g in groups.values():
            _round(g, r, setup, picked, xb, yb)
            if (r + 1) % setup.eval_every == 0 or r + 1 == setup.rounds:
                record(g, r + 1)
    by_name = {id(m): (g, p) for g in groups.values() for p, m in enumerate(g.methods)}
    out = []
    for m in methods:
        g, p = by_name[id(m)]
        out.append(pd.DataFrame(g.rows[p]))
    return out


def _round(g: _Group, r: int, setup: FedSetup, picked: torch.Tensor, xb: list[torch.Tensor],
           yb: list[torch.Tensor]) -> None:
    """One round of every method of ``g`` (the body of ``train_clients``'s round loop, stacked)."""
    P, S, K = len(g.methods), setup.sampled, setup.local_steps
    algorithm, carry = g.methods[0].algorithm, g.methods[0].carry
    lrs = [m.lr * (1 - r / setup.rounds) for m in g.methods]
    alphas = [m.alpha for m in g.methods]

    def flat(t: torch.Tensor) -> torch.Tensor:  # (P, S, ...) -> (P * S, ...)
        return t.reshape(P * S, *t.shape[2:])

    def rep(t: torch.Tensor) -> torch.Tensor:  # (P, ...) -> (P * S, ...), each method's S copies
        return flat(t.unsqueeze(1).expand(P, S, *t.shape[1:]))

    x = [_padded(rep(t)) for t in g.X]
    ci = [flat(t[:, picked]) for t in g.Ci]
    x_rep = [xk.repeat(P, 1, 1) for xk in xb] if P > 1 else xb
    y_rep = [yk.repeat(P, 1) for yk in yb] if P > 1 else yb
    with torch.no_grad():
        if algorithm == "scaffold":
            m = [_padded(torch.zeros_like(t)) for t in x]
            corr = [flat(c.unsqueeze(1) - t[:, picked]) for c, t in zip(g.C, g.Ci, strict=True)]
            new_ci = [_padded(torch.zeros_like(t)) for t in x]
            betas = [mm.beta for mm in g.methods]
            for k in range(K):
                grads = _stacked_grads(x, x_rep[k], y_rep[k])
                for xj, mj, gj, cj, nj in zip(x, m, grads, corr, new_ci, strict=True):
                    for p, (mv,) in _blocks(0, S, mj):
                        mv.mul_(betas[p])
                    mj.add_(gj + cj)
                    _axpy_(xj, mj, lrs, S, sub=True)
                    _axpy_(nj, gj, [1 / K] * P, S)
        elif algorithm == "adam":
            b1, b2 = ADAM_BETAS
            m = [_padded(torch.zeros_like(t)) for t in x]
            v = [_padded(torch.zeros_like(t)) for t in x]
            for k in range(K):
                grads = _stacked_grads(x, x_rep[k], y_rep[k])
                bc1, bc2 = 1 - b1 ** (k + 1), 1 - b2 ** (k + 1)
                for xj, mj, vj, gj in zip(x, m, v, grads, strict=True):
                    mj.mul_(b1)
                    _axpy_(mj, gj, [1 - b1] * P, S)
                    vj.mul_(b2)
                    for _, (vv, gv) in _blocks(vj[0].numel(), S, vj, gj):
                        vv.addcmul_(gv, gv, value=1 - b2)
                    _axpy_(xj, (mj / bc1) / ((vj / bc2).sqrt() + ADAM_EPS), lrs, S, sub=True)
            new_ci = ci
        else:
            if algorithm == "fedmuon":
                m = [_padded(t) for t in ci]  # start from the last local momentum (= C_i)
                shift = [t - rep(c) for t, c in zip(ci, g.C, strict=True)]
            else:
                m = [_padded(flat(mi[:, picked]) if carry else torch.zeros_like(xj))
                     for mi, xj in zip(g.Mi, x, strict=True)]
            for k in range(K):
                grads = _stacked_grads(x, x_rep[k], y_rep[k])
                for j, (xj, mj, gj) in enumerate(zip(x, m, grads, strict=True)):
                    _lerp_(mj, gj, alphas, S)
                    d = mj if algorithm != "fedmuon" else mj - shift[j]
                    _axpy_(xj, _lmo_stacked(d.contiguous(), g.methods[0].ns_steps), lrs, S)
            if algorithm == "fedmuon":
                new_ci = m
            else:
                new_ci = ci
                if carry:
                    for t, mj in zip(g.Mi, m, strict=True):
                        t[:, picked] = mj.reshape(P, S, *mj.shape[1:])
        dx, dc = [], []
        for j in range(len(g.X)):
            diff = (x[j] - rep(g.X[j])).reshape(P, S, *g.X[j].shape[1:])
            dci = (new_ci[j] - ci[j]).reshape(P, S, *g.X[j].shape[1:])
            sx, sc = torch.zeros_like(g.X[j]), torch.zeros_like(g.X[j])
            for s in range(S):  # the sampled clients in sorted order, as the serial loop adds them
                sx += diff[:, s]
                sc += dci[:, s]
            dx.append(sx)
            dc.append(sc)
            g.Ci[j][:, picked] = new_ci[j].reshape(P, S, *g.X[j].shape[1:])
        uses_cv = algorithm in ("fedmuon", "scaffold")
        g.comm.all_reduce_sum(dx, kind="parameters")
        if uses_cv:
            g.comm.all_reduce_sum(dc, kind="other")
        for j in range(len(g.X)):
            g.X[j] = g.X[j] + dx[j] / setup.sampled
            if uses_cv:
                g.C[j] = g.C[j] + dc[j] / setup.clients


ToyRun = tuple[str, float, int, "int | None"]


def toy_runs(runs: Sequence[ToyRun], A: torch.Tensor, *, rounds: int = 300, local_steps: int = 5,
             alpha: float = 0.5, lr0: float = 0.1) -> list[torch.Tensor]:
    """:func:`~iclr_lab.distributed.fedmuon.method.toy_run` of every ``(method, noise, seed,
    ns_steps)`` of ``runs`` on ``A``, at once (every client of every run is one row of a stack):
    the curves in the order of ``runs``, each equal bit for bit to
    ``toy_run(method, A, rounds=rounds, local_steps=local_steps, alpha=alpha, lr0=lr0,
    ns_steps=ns_steps, noise=noise, seed=seed)``.

    Args:
        runs: a non-empty sequence of ``(method, noise, seed, ns_steps)``, each entry in the range
            of :func:`~iclr_lab.distributed.fedmuon.method.toy_run`'s argument of that name.
        A: the toy's target, a non-empty, finite 2-D tensor.
        rounds: communication rounds (>= 1).
        local_steps: local steps per round (>= 1).
        alpha: the momentum's EMA weight, in (0, 1].
        lr0: the first round's step size, in (0, inf).

    Raises:
        TypeError, ValueError: an argument outside the ranges above, naming it (an entry of a run
            as ``runs[q] noise``).
    """
    if isinstance(runs, str) or not isinstance(runs, Sequence):
        raise TypeError(f"runs must be a sequence of (method, noise, seed, ns_steps), "
                        f"got {type(runs).__name__}")
    if not runs:
        raise ValueError("runs must not be empty")
    for q, run in enumerate(runs):
        if isinstance(run, str) or not isinstance(run, Sequence) or len(run) != 4:
            raise TypeError(f"runs[{q}] must be a tuple (method, noise, seed, ns_steps), got {run!r}")
        _check_toy_run(f"runs[{q}] ", *run)
    A = _check_tensor("A", A, ndim=2)
    rounds, local_steps, alpha, lr0 = _check_toy_sizes(rounds, local_steps, alpha, lr0)
    n, Q, K = len(_TOY), len(runs), local_steps
    rows = Q * n

    def per_row(values: Sequence[float]) -> torch.Tensor:
        return torch.tensor(values, dtype=A.dtype).view(-1, 1, 1)

    w = per_row([w for _ in runs for w, _ in _TOY])
    sA = torch.stack([s * A for _ in runs for _, s in _TOY])
    fm = torch.tensor([m == "fedmuon" for m, *_ in runs for _ in _TOY])
    carry = torch.tensor([m == "localmuon_carry" for m, *_ in runs for _ in _TOY])
    noisy = [q for q, (_, noise, _, _) in enumerate(runs) if noise > 0]
    noise_rows = torch.tensor([q * n + i for q in noisy for i in range(n)], dtype=torch.long)
    noise_scale = per_row([runs[q][1] for q in noisy for _ in range(n)])
    # every noisy run's draws in toy_run's order (round, client, step), from its own generator
    draws = [torch.randn(rounds, n, K, *A.shape, generator=torch.Generator().manual_seed(int(runs[q][2])),
                         dtype=A.dtype) for q in noisy]
    by_ns: dict[int | None, torch.Tensor] = {}
    for q, (*_, ns) in enumerate(runs):
        by_ns.setdefault(ns, torch.empty(0, dtype=torch.long))
        by_ns[ns] = torch.cat([by_ns[ns], torch.arange(q * n, (q + 1) * n)])
    X = torch.zeros(Q, *A.shape, dtype=A.dtype)
    C = torch.zeros_like(X)
    Ci = torch.zeros(rows, *A.shape, dtype=A.dtype)
    Mi = torch.zeros_like(Ci)

    def full_norms(Z: torch.Tensor) -> list[float]:
        g = sum(wt * (Z - s * A) for wt, s in _TOY) / n
        return [float(torch.linalg.matrix_norm(gq)) for gq in g]  # type: ignore[union-attr]

    out = [[v] for v in full_norms(X)]
    for r in range(rounds):
        lr = lr0 / (r + 1) ** 0.5
        x = X.repeat_interleave(n, dim=0)
        m = Ci.clone()                         # FedMuon: the client's last momentum; LocalMuon: 0
        m[carry] = Mi[carry]
        shift = Ci - C.repeat_interleave(n, dim=0)  # 0 except for FedMuon
        for k in range(K):
            g = w * (x - sA)
            if noisy:
                z = torch.cat([d[r, :, k] for d in draws])
                g[noise_rows] = g[noise_rows] + noise_scale * z
            m.lerp_(g, alpha)
            d = m - shift
            step = torch.empty_like(d)
            for ns, idx in by_ns.items():
                step[idx] = _lmo_stacked(d[idx], ns)
            x.add_(step, alpha=lr)
        new_c = torch.where(fm.view(-1, 1, 1), m, Ci)
        Mi[carry] = m[carry]
        xs, cs, olds = x.view(Q, n, *A.shape), new_c.view(Q, n, *A.shape), Ci.view(Q, n, *A.shape)
        X = sum(xs[:, i] for i in range(n)) / n  # type: ignore[assignment]
        C = C + sum(cs[:, i] - olds[:, i] for i in range(n)) / n
        Ci = new_c
        for q, v in enumerate(full_norms(X)):
            out[q].append(v)
    return [torch.tensor(o, dtype=torch.float64) for o in out]
