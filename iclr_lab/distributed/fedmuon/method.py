"""FedMuon's building blocks: Newton-Schulz orthogonalisation, the linear minimisation oracle, the
client's local LMO steps, and the convex toy of the paper's Theorem 1.

Everything here is plain torch on lists of tensors, so the same functions serve the two-client
matrix toy and the federated MLP of :mod:`~iclr_lab.distributed.fedmuon.training`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed

__all__ = ["KELLER", "NORMS", "local_lmo_steps", "lmo", "newton_schulz", "toy_matrix", "toy_run"]

#: The quintic coefficients (a, b, c) of Keller Jordan's Muon and of ``torch.optim.Muon``.
KELLER: tuple[float, float, float] = (3.4445, -4.7750, 2.0315)
#: The norms whose unit ball the LMO searches (spectral as in Muon, Frobenius, and sign for l-infinity).
NORMS: tuple[str, ...] = ("spectral", "frobenius", "sign")


def _check_tensor(name: str, value: Any, ndim: int | Sequence[int] | None = None) -> torch.Tensor:
    """``value`` if it is a non-empty, finite ``torch.Tensor`` (of ``ndim`` dimensions), else an
    error naming ``name``."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    out: torch.Tensor = check_array(name, value, ndim=ndim)
    return out


def _check_coefficients(coefficients: Any) -> tuple[float, float, float]:
    """The quintic's ``(a, b, c)``: three finite numbers."""
    try:
        triple = tuple(coefficients)
    except TypeError:
        raise TypeError(f"coefficients must be a triple (a, b, c), got {coefficients!r}") from None
    if len(triple) != 3:
        raise ValueError(f"coefficients must be a triple (a, b, c), got {coefficients!r}")
    a, b, c = (check_range(f"coefficients[{i}]", v) for i, v in enumerate(triple))
    return a, b, c


def newton_schulz(G: torch.Tensor, steps: int = 5, *, eps: float = 1e-7,
                  coefficients: tuple[float, float, float] = KELLER) -> torch.Tensor:
    """The quintic Newton-Schulz map ``NS_T(G)`` of equation ``fedmuon-eq-ns``, in ``G``'s dtype.

    ``G`` is first divided by ``||G||_F + eps`` (so every singular value is at most 1), then
    ``steps`` times ``X <- a X + (b A + c A^2) X`` with ``A = X X^T``. A tall matrix is transposed so
    that ``A`` is the smaller Gram matrix. ``steps=0`` returns ``G / (||G||_F + eps)``. With the
    default (Keller) coefficients the singular values of the output lie near 1 but do not converge
    to it: the map approximates ``U V^T``, i.e. minus the spectral LMO (``fedmuon-eq-lmo``).
    Unlike ``torch.optim.Muon``, which always computes in bfloat16, this computes in the input dtype.

    Args:
        G: a 2-D tensor, non-empty and finite.
        steps: number of iterations T (>= 0).
        eps: added to the Frobenius norm, in (0, inf), so that ``G = 0`` maps to 0.
        coefficients: the quintic's ``(a, b, c)``, three finite numbers.

    Raises:
        TypeError, ValueError: an argument outside the ranges above, naming it.
    """
    G = _check_tensor("G", G, ndim=2)
    steps = check_int("steps", steps, 0)
    eps = check_range("eps", eps, 0, low_open=True)
    _check_coefficients(coefficients)
    return _newton_schulz(G, steps, eps, coefficients)


def _newton_schulz(G: torch.Tensor, steps: int, eps: float,
                   coefficients: tuple[float, float, float]) -> torch.Tensor:
    """:func:`newton_schulz` without the checks, for the training loops: their iterates may
    legitimately turn non-finite (a diverging step size), which the tuner then scores as such."""
    a, b, c = coefficients
    tall = G.shape[0] > G.shape[1]
    X = G.mT if tall else G
    X = X / (torch.linalg.matrix_norm(X) + eps)
    for _ in range(steps):
        A = X @ X.mT
        B = torch.addmm(A, A, A, beta=b, alpha=c)  # b A + c A^2, fused
        X = torch.addmm(X, B, X, beta=a)           # a X + B X, fused
    return X.mT if tall else X


def lmo(G: torch.Tensor, norm: str = "spectral", ns_steps: int | None = None,
        eps: float = 1e-12) -> torch.Tensor:
    """The linear minimisation oracle ``argmin_{||D|| <= 1} <G, D>`` of equation ``fedmuon-eq-lmo``.

    * ``"spectral"``: ``-U V^T`` from the thin SVD ``G = U S V^T`` (exact, ``ns_steps=None``) or
      ``-NS_T(G)`` with ``T = ns_steps`` Newton-Schulz iterations (:func:`newton_schulz`). A vector
      (a bias) has one singular value, so its spectral LMO is the Frobenius one.
    * ``"frobenius"``: ``-G / ||G||_F``.
    * ``"sign"``: ``-sign(G)`` (the l-infinity ball).

    ``G = 0`` returns 0 (every direction is a minimiser; 0 is the one that keeps a fixed point).

    Args:
        G: a non-empty, finite tensor; for the spectral norm a vector or a matrix.
        norm: one of :data:`~iclr_lab.distributed.fedmuon.method.NORMS`.
        ns_steps: Newton-Schulz iterations (an integer >= 0), or ``None`` (exact SVD).
        eps: in (0, inf): the smallest norm divided by, and the relative size below which a
            singular value is dropped.

    Raises:
        TypeError, ValueError: an argument outside the ranges above, naming it.
    """
    G = _check_tensor("G", G)
    check_choice("norm", norm, NORMS)
    if ns_steps is not None:
        ns_steps = check_int("ns_steps", ns_steps, 0)
    eps = check_range("eps", eps, 0, low_open=True)
    if norm == "spectral" and G.ndim > 2:
        raise ValueError(f"G must be a vector or a 2-D tensor, got shape {tuple(G.shape)}")
    return _lmo(G, norm, ns_steps, eps)


def _lmo(G: torch.Tensor, norm: str, ns_steps: int | None, eps: float) -> torch.Tensor:
    """:func:`lmo` without the checks, for the training loops (see :func:`_newton_schulz`)."""
    if norm == "sign":
        return -torch.sign(G)
    if norm == "frobenius" or G.ndim < 2:
        return -G / torch.linalg.vector_norm(G).clamp_min(eps)
    if G.ndim != 2:
        raise ValueError(f"G must be a vector or a 2-D tensor, got shape {tuple(G.shape)}")
    if ns_steps is not None:
        return -_newton_schulz(G, ns_steps, 1e-7, KELLER)
    U, S, Vh = torch.linalg.svd(G, full_matrices=False)
    # singular values at round-off level carry no direction: drop them, as the exact LMO of a
    # lower-rank matrix would (and so that G = 0 maps to 0)
    keep = (S > eps * max(float(S.max()), 1.0)).to(G.dtype)
    return -(U * keep) @ Vh


GradFn = Callable[[list[torch.Tensor], int], list[torch.Tensor]]


def local_lmo_steps(x: list[torch.Tensor], m: list[torch.Tensor], grad_fn: GradFn, steps: int,
                    alpha: float, lr: float, *, shift: Sequence[torch.Tensor] | None = None,
                    ns_steps: int | None = 5) -> None:
    """``steps`` local steps of equation ``fedmuon-eq-local`` on the tensors ``x``, in place.

    Each step: ``m <- (1 - alpha) m + alpha g`` with ``g = grad_fn(x, k)``, then
    ``x <- x + lr * lmo(m - shift)``. ``shift = C_i - C`` (client minus server control variate)
    gives FedMuon; ``shift=None`` gives LocalMuon. The spectral LMO is used for matrices and the
    Euclidean one for vectors (:func:`lmo`), with ``ns_steps`` Newton-Schulz iterations
    (``None``: exact SVD).

    Args:
        x: the iterate, a list of tensors (updated in place).
        m: the momenta, one tensor per entry of ``x`` and of its shape (updated in place).
        grad_fn: ``grad_fn(x, k)``, the gradients at local step ``k``, one per entry of ``x``.
        steps: local steps (>= 1).
        alpha: the momentum's EMA weight, in (0, 1].
        lr: the step size, in (0, inf).
        shift: ``None`` or one tensor per entry of ``x``.
        ns_steps: Newton-Schulz iterations (an integer >= 0), or ``None`` (exact SVD).

    Raises:
        TypeError, ValueError: an argument outside the ranges above, naming it.
    """
    _check_tensor_list("x", x)
    _check_tensor_list("m", m, like=x)
    if shift is not None:
        _check_tensor_list("shift", shift, like=x)
    if not callable(grad_fn):
        raise TypeError(f"grad_fn must be callable, got {type(grad_fn).__name__}")
    steps = check_int("steps", steps, 1)
    alpha = check_range("alpha", alpha, 0, 1, low_open=True)
    lr = check_range("lr", lr, 0, low_open=True)
    if ns_steps is not None:
        ns_steps = check_int("ns_steps", ns_steps, 0)
    for k in range(steps):
        grads = grad_fn(x, k)
        with torch.no_grad():
            for j, (xj, mj, gj) in enumerate(zip(x, m, grads, strict=True)):
                mj.lerp_(gj, alpha)
                d = mj if shift is None else mj - shift[j]
                xj.add_(_lmo(d, "spectral", ns_steps, 1e-12), alpha=lr)


def _check_tensor_list(name: str, value: Any, like: Sequence[torch.Tensor] | None = None) -> None:
    """A sequence of tensors (shaped as those of ``like``, when given), else an error naming
    ``name``. The entries' values are not read: an iterate may hold any number."""
    if isinstance(value, torch.Tensor) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of torch.Tensor, got {type(value).__name__}")
    for j, t in enumerate(value):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}[{j}] must be a torch.Tensor, got {type(t).__name__}")
    if like is not None:
        if len(value) != len(like):
            raise ValueError(f"{name} must hold one tensor per entry of x ({len(like)}), "
                             f"got {len(value)}")
        for j, (t, ref) in enumerate(zip(value, like, strict=True)):
            if t.shape != ref.shape:
                raise ValueError(f"{name}[{j}] must have the shape of x[{j}], "
                                 f"{tuple(ref.shape)}, got {tuple(t.shape)}")


# ---------------------------------------------------------------------------------------------
# the convex toy of Theorem 1
# ---------------------------------------------------------------------------------------------

def toy_matrix(dim: int = 8, seed: int = 0) -> torch.Tensor:
    """``A = U diag(linspace(1, 2, dim)) V^T`` with random orthogonal ``U, V`` (float64): the toy's
    target (``fedmuon-eq-toy``), with smallest singular value exactly 1.

    ``dim``: an integer >= 1; ``seed``: an integer in [0, 2**32 - 1]."""
    dim = check_int("dim", dim, 1)
    gen = torch.Generator().manual_seed(check_seed(seed))
    U, _ = torch.linalg.qr(torch.randn(dim, dim, generator=gen, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(dim, dim, generator=gen, dtype=torch.float64))
    return U @ torch.diag(torch.linspace(1.0, 2.0, dim, dtype=torch.float64)) @ V.T


#: the two clients of the toy: f_i(X) = (w_i / 2) ||X - s_i A||_F^2 (``fedmuon-eq-toy``)
_TOY = ((1.0, 1.0), (3.0, -1.0))
#: The methods :func:`toy_run` runs.
TOY_METHODS: tuple[str, ...] = ("localmuon", "localmuon_carry", "fedmuon")


def _check_toy_run(prefix: str, method: Any, noise: Any, seed: Any, ns_steps: Any) -> None:
    """The per-run arguments of the toy (``prefix`` names where they come from in the caller's
    arguments: ``""`` for :func:`toy_run`, ``"runs[3] "`` for ``toy_runs``)."""
    check_choice(f"{prefix}method", method, TOY_METHODS)
    check_range(f"{prefix}noise", noise, 0)
    check_seed(seed, f"{prefix}seed")
    if ns_steps is not None:
        check_int(f"{prefix}ns_steps", ns_steps, 0)


def _check_toy_sizes(rounds: Any, local_steps: Any, alpha: Any,
                     lr0: Any) -> tuple[int, int, float, float]:
    return (check_int("rounds", rounds, 1), check_int("local_steps", local_steps, 1),
            check_range("alpha", alpha, 0, 1, low_open=True), check_range("lr0", lr0, 0, low_open=True))


def toy_run(method: str, A: torch.Tensor, *, rounds: int = 300, local_steps: int = 5,
            alpha: float = 0.5, lr0: float = 0.1, ns_steps: int | None = None, noise: float = 0.0,
            seed: int = 0) -> torch.Tensor:
    """Run LocalMuon or FedMuon on the two-client toy of equation ``fedmuon-eq-toy``; return
    ``||grad f(X^r)||_F`` for ``r = 0..rounds`` (a float64 tensor of length ``rounds + 1``).

    Full participation, ``X^0 = 0``, step ``lr0 / sqrt(r + 1)`` in round ``r``, exact gradients plus
    Gaussian noise of standard deviation ``noise`` per entry. ``method`` is ``"localmuon"`` (momentum
    reset every round), ``"localmuon_carry"`` (momentum kept across rounds) or ``"fedmuon"``
    (``fedmuon-eq-local`` and ``fedmuon-eq-server``, control variates starting at 0).

    Args:
        method: ``"localmuon"``, ``"localmuon_carry"`` or ``"fedmuon"``.
        A: the toy's target, a non-empty, finite 2-D tensor (:func:`toy_matrix`).
        rounds: communication rounds (>= 1).
        local_steps: local steps per round (>= 1).
        alpha: the momentum's EMA weight, in (0, 1].
        lr0: the first round's step size, in (0, inf).
        ns_steps: Newton-Schulz iterations (an integer >= 0), or ``None`` (exact SVD).
        noise: the gradient noise's standard deviation, in [0, inf).
        seed: seeds the noise, an integer in [0, 2**32 - 1].

    Raises:
        TypeError, ValueError: an argument outside the ranges above, naming it.
    """
    _check_toy_run("", method, noise, seed, ns_steps)
    A = _check_tensor("A", A, ndim=2)
    rounds, local_steps, alpha, lr0 = _check_toy_sizes(rounds, local_steps, alpha, lr0)
    noise = float(noise)
    gen = torch.Generator().manual_seed(int(seed))
    n = len(_TOY)
    X = torch.zeros_like(A)
    C = torch.zeros_like(A)
    Ci = [torch.zeros_like(A) for _ in range(n)]
    Mi = [torch.zeros_like(A) for _ in range(n)]

    def full_grad(Z: torch.Tensor) -> torch.Tensor:
        return sum(w * (Z - s * A) for w, s in _TOY) / n  # type: ignore[return-value]

    out = [float(torch.linalg.matrix_norm(full_grad(X)))]
    for r in range(rounds):
        lr = lr0 / (r + 1) ** 0.5
        new_x, new_c = [], []
        for i, (w, s) in enumerate(_TOY):
            def grad(z: list[torch.Tensor], k: int, w: float = w, s: float = s) -> list[torch.Tensor]:
                g = w * (z[0] - s * A)
                if noise > 0:
                    g = g + noise * torch.randn(A.shape, generator=gen, dtype=A.dtype)
                return [g]
            x = [X.clone()]
            if method == "fedmuon":
                m = [Ci[i].clone()]  # the round starts from the client's last momentum
                local_lmo_steps(x, m, grad, local_steps, alpha, lr, shift=[Ci[i] - C], ns_steps=ns_steps)
                new_c.append(m[0])
            else:
                m = [Mi[i] if method == "localmuon_carry" else torch.zeros_like(A)]
                local_lmo_steps(x, m, grad, local_steps, alpha, lr, ns_steps=ns_steps)
            new_x.append(x[0])
        X = sum(new_x) / n  # type: ignore[assignment]
        if method == "fedmuon":
            C = C + sum(c - Ci[i] for i, c in enumerate(new_c)) / n
            Ci = new_c
        out.append(float(torch.linalg.matrix_norm(full_grad(X))))
    return torch.tensor(out, dtype=torch.float64)
