"""The sparse-ReLU-IHT chapter's fast paths give the reference path's numbers bit for bit: IMP's
written-out gradient and Adam step against autograd and ``torch.optim.Adam``, and IHT with its
cached activation patterns against patterns recomputed at every use (the products on the surviving
rows against the full products' rows to float64 rounding, on a CPU whose BLAS rounds them apart)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr_lab.core.nn import adam_update
from iclr_lab.recovery.sparse_relu_iht import SensingOperator, iht, planted_mlp
from iclr_lab.recovery.sparse_relu_iht.method import _mse_grads


def _problem(n: int, d: int, m: int, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    y = torch.randn(n, generator=gen, dtype=torch.float64)
    u = torch.randn(d, m, generator=gen, dtype=torch.float64)
    v = torch.randn(m, generator=gen, dtype=torch.float64)
    mask = (torch.rand(d, m, generator=gen) < 0.6).double()
    return X, y, u, v, mask


@pytest.mark.parametrize(("n", "d", "m"), [(50, 7, 3), (31, 5, 1), (200, 64, 20)])
def test_written_out_gradient_is_autograds(n: int, d: int, m: int) -> None:
    X, y, u, v, mask = _problem(n, d, m, seed=n)
    uu, vv = u.clone().requires_grad_(True), v.clone().requires_grad_(True)
    torch.mean((torch.relu(X @ (uu * mask)) @ vv - y) ** 2).backward()
    gu, gv = _mse_grads(X, y, u, v, mask)
    assert uu.grad is not None and vv.grad is not None
    assert torch.equal(gu, uu.grad) and torch.equal(gv, vv.grad)


@pytest.mark.parametrize("lr", [1e-3, 1e-1])
def test_imp_training_loop_is_torch_adam_on_autograd(lr: float) -> None:
    """Thirty steps of IMP's inner loop, written out, against ``torch.optim.Adam`` on autograd."""
    X, y, u, v, mask = _problem(80, 9, 4, seed=1)
    ref_u, ref_v = u.clone().requires_grad_(True), v.clone().requires_grad_(True)
    opt = torch.optim.Adam([ref_u, ref_v], lr=lr)
    moments = [torch.zeros_like(u), torch.zeros_like(u), torch.zeros_like(v), torch.zeros_like(v)]
    for t in range(1, 31):
        opt.zero_grad()
        torch.mean((torch.relu(X @ (ref_u * mask)) @ ref_v - y) ** 2).backward()
        opt.step()
        gu, gv = _mse_grads(X, y, u, v, mask)
        adam_update(u, gu, moments[0], moments[1], t, lr=lr)
        adam_update(v, gv, moments[2], moments[3], t, lr=lr)
    assert torch.equal(u, ref_u.detach()) and torch.equal(v, ref_v.detach())


def _iht_reference(X: np.ndarray, y: np.ndarray, s: int, *, width: int, steps: int, refine: int,
                   update_patterns: bool, seed: int, generators: np.ndarray | None = None,
                   tol: float = 0.0) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """IHT's loop as it was before the support's columns carried over from step to step: ``A w - y``
    and ``A_S`` rebuilt from the operator at every use, and ``A_S`` column by column, each block's
    pattern recomputed for each of its columns. Returns the support, its values and every
    relative residual."""
    from iclr_lab.recovery.sparse_relu_iht.method import _normalised_step, _streaming_top_s

    op = SensingOperator(X, width, generators=generators, seed=seed)

    def columns(i: np.ndarray) -> np.ndarray:
        return np.stack([op.pattern(int(c) // op.d) * X[:, int(c) % op.d] for c in i], axis=1) \
            if i.size else np.zeros((len(y), 0))

    idx, vals, ny, out = np.zeros(0, dtype=np.int64), np.zeros(0), float(np.linalg.norm(y)), []
    for k in range(steps):
        r = columns(idx) @ vals - y
        if idx.size:
            g_S = columns(idx).T @ r
            mu = _normalised_step(g_S, columns(idx) @ g_S)
            idx, vals = _streaming_top_s(op, r, idx, vals, mu, s)
        else:
            idx0, g0 = _streaming_top_s(op, r, idx, vals, 1.0, s)
            mu = _normalised_step(g0, columns(idx0) @ g0)
            idx, vals = idx0, mu * g0
        A_S = columns(idx)
        res = A_S @ vals - y
        f = float(res @ res)
        out.append(np.sqrt(f) / ny)
        for _ in range(refine):
            g = A_S.T @ res
            gg, accepted = float(g @ g), False
            for _try in range(11):
                trial = vals - mu * g
                res_t = A_S @ trial - y
                if float(res_t @ res_t) <= f - 0.9 * mu * gg:
                    vals, res, f, accepted = trial, res_t, float(res_t @ res_t), True
                    break
                mu /= 2
            out.append(np.sqrt(f) / ny)
            if not accepted or gg == 0.0:
                break
        if update_patterns and k > 0:
            op.set_sparse_generators(idx, vals)
        if np.sqrt(f) / ny <= tol:
            break
    return idx, vals, out


@pytest.mark.parametrize(("fixed", "update", "tol"), [(True, False, 0.0), (False, True, 0.0),
                                                      (False, True, 1e-3), (False, False, 0.0)])
def test_iht_with_carried_over_columns_is_the_reference_loop(fixed: bool, update: bool,
                                                             tol: float) -> None:
    P = planted_mlp(300, 12, 4, 8, np.random.default_rng(5))
    gens = P.fused if fixed else None
    ref_idx, ref_vals, ref_res = _iht_reference(P.X, P.y, 8, width=4, steps=12, refine=4,
                                                update_patterns=update, seed=2, generators=gens,
                                                tol=tol)
    r = iht(P.X, P.y, 8, width=4, steps=12, refine=4, update_patterns=update, seed=2,
            generators=gens, tol=tol)
    keep = ref_vals != 0
    assert np.array_equal(r.idx, ref_idx[keep]) and np.array_equal(r.vals, ref_vals[keep])
    assert [h["residual"] for h in r.history[1:]] == ref_res


def test_columns_are_the_blocks_columns_exactly() -> None:
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 6))
    op = SensingOperator(X, 5, seed=4)
    idx = np.array([29, 0, 7, 8, 13, 6, 24])   # unsorted, several columns of one block
    A = np.hstack([op.block(j) for j in range(5)])
    assert np.array_equal(op.columns(idx), A[:, idx]) and op.columns(idx).flags["C_CONTIGUOUS"]
    assert op.columns(np.zeros(0, dtype=np.int64)).shape == (40, 0)


def _imp_reference(X: np.ndarray, y: np.ndarray, m: int, s: int, *, epochs: int, lr: float,
                   prune_fraction: float | None, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """IMP for one ``s`` as it was before its training dropped the pruned input rows: every
    product on the whole ``X``, Adam by :func:`iclr_lab.core.nn.adam_update`."""
    import math

    from iclr_lab.recovery.sparse_relu_iht.method import imp_rounds

    n, d = X.shape
    gen = torch.Generator().manual_seed(seed)
    u0 = (torch.rand(d, m, generator=gen, dtype=torch.float64) * 2 - 1) / math.sqrt(d)
    v0 = (torch.rand(m, generator=gen, dtype=torch.float64) * 2 - 1) / math.sqrt(m)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    mask = torch.ones(d, m, dtype=torch.float64)
    counts = imp_rounds(d * m, s, prune_fraction)
    for k in range(len(counts) + 1):
        u, v = u0 * mask, v0.clone()
        moments = [torch.zeros_like(u), torch.zeros_like(u), torch.zeros_like(v), torch.zeros_like(v)]
        for t in range(1, epochs + 1):
            gu, gv = _mse_grads(Xt, yt, u, v, mask)
            adam_update(u, gu, moments[0], moments[1], t, lr=lr)
            adam_update(v, gv, moments[2], moments[3], t, lr=lr)
        if k == len(counts):
            return u * mask, v
        mag = torch.where(mask > 0, (u * mask).abs(), torch.full_like(u, -1.0)).flatten()
        keep = torch.argsort(mag, descending=True, stable=True)[:counts[k]]
        mask = torch.zeros(d * m, dtype=torch.float64)
        mask[keep] = 1.0
        mask = mask.reshape(d, m)
    raise AssertionError("unreachable")


@pytest.mark.parametrize(("m", "s", "pf", "lr"), [(3, 2, 0.1, 1e-2), (4, 9, 0.1, 1e-1),
                                                  (5, 1, None, 1e-2), (2, 30, 0.1, 1e-3)])
def test_imp_on_the_surviving_rows_is_the_whole_matrix_loop(m: int, s: int, pf: float | None,
                                                             lr: float) -> None:
    from iclr_lab.recovery.sparse_relu_iht import imp_sweep

    P = planted_mlp(120, 16, m, min(s, 16 * m), np.random.default_rng(m))
    q = imp_sweep(P.X, P.y, m, [s], epochs=6, lr=lr, prune_fraction=pf, seed=m)[0]
    W, v = _imp_reference(P.X, P.y, m, s, epochs=6, lr=lr, prune_fraction=pf, seed=m)
    assert np.array_equal(q.W, W.numpy()) and np.array_equal(q.v, v.numpy())


def test_flat_adam_and_the_row_subsets_of_the_gradient_are_exact() -> None:
    from iclr_lab.recovery.sparse_relu_iht.method import _adam_flat

    X, y, u, v, mask = _problem(90, 12, 3, seed=4)
    rows = torch.tensor([0, 2, 3, 7, 8, 9, 10, 11])
    mask[[1, 4, 5, 6]] = 0.0   # the rows that no surviving weight reads
    gu, gv = _mse_grads(X, y, u * mask, v, mask)
    gr, gvr = _mse_grads(X[:, rows].contiguous(), y, (u * mask)[rows], v, mask[rows],
                         X.T.contiguous(), rows)
    # the products on the surviving rows are the full products' rows: bit for bit where the BLAS
    # rounds a row of a product the same whatever the other rows (MKL on the CPUs the chapter's
    # tables were made on), to float64 rounding elsewhere (an AMD EPYC with AVX2 differs in the last
    # bits)
    close = {"rtol": 1e-12, "atol": 1e-14}
    torch.testing.assert_close(gr, gu[rows], **close)
    torch.testing.assert_close(gvr, gv, **close)
    gr, _ = _mse_grads(X[:, rows].contiguous(), y, (u * mask)[rows], v, mask[rows],
                       X.T[rows].contiguous())
    torch.testing.assert_close(gr, gu[rows], **close)
    gr, _ = _mse_grads(X.T[rows].contiguous().T, y, (u * mask)[rows], v, mask[rows],
                       X.T[rows].contiguous())
    torch.testing.assert_close(gr, gu[rows], **close)
    a = [u.clone(), v.clone()] + [torch.zeros_like(u), torch.zeros_like(u), torch.zeros_like(v),
                                   torch.zeros_like(v)]
    flat = torch.cat([u.flatten(), v])
    moments = [torch.zeros_like(flat), torch.zeros_like(flat)]
    for t in range(1, 6):
        adam_update(a[0], gu, a[2], a[3], t, lr=0.05)
        adam_update(a[1], gv, a[4], a[5], t, lr=0.05)
        _adam_flat(flat, torch.cat([gu.flatten(), gv]), moments[0], moments[1], t, 0.05)
    k = u.numel()
    assert torch.equal(flat, torch.cat([a[0].flatten(), a[1]]))
    assert torch.equal(moments[0], torch.cat([a[2].flatten(), a[4]]))
    assert torch.equal(moments[1], torch.cat([a[3].flatten(), a[5]])) and k == 36
