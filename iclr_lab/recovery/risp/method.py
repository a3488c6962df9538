"""RED and RISP for imaging inverse problems: forward operators, a score prior, and the solvers.

The solvers are numpy (a learned prior runs its network in torch inside ``grad``). The objective
is ``F = f + g`` (``risp-eq-objective``) with the data term ``f(x) = (lam/2)||A x - y||^2`` and a
prior ``g`` seen only through its score ``S = -grad g``.

* :func:`make_operator` builds the forward operators (blur, inpainting, downsampling) with their
  adjoints;
* :class:`CauchyPrior` is the classical nonconvex stand-in for a score network (``risp-eq-prior``);
  :class:`~iclr_lab.recovery.risp.prior.LearnedPrior` is a small learned one (``risp-eq-learned``);
  any object with ``value``, ``grad`` and ``lipschitz`` (the :class:`Prior` protocol) will do;
* :func:`red` is the RED gradient method (``risp-eq-red``); :func:`risp` adds inertia and the
  restart rule (``risp-eq-risp``, ``risp-eq-restart``); :func:`nesterov_restart` is Nesterov's
  method with O'Donoghue and Candes's gradient restart, the strongest classical baseline.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed
from iclr_lab.recovery.risp.prior import LearnedPrior

__all__ = ["CauchyPrior", "Operator", "Prior", "Problem", "Trace", "make_operator", "make_problem",
           "nesterov_restart", "psnr", "red", "risp"]

OPERATORS = ("blur", "inpaint", "downsample")


# ----------------------------------------------------------------------------------------------
# Forward operators
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operator:
    """A linear forward operator ``A`` on images of ``shape``, with its adjoint.

    Attributes:
        kind: ``blur``, ``inpaint`` or ``downsample``.
        shape: the image shape ``(h, w)``.
        forward: ``x -> A x``.
        adjoint: ``r -> A^T r``.
        norm2: ``||A||^2`` (the largest eigenvalue of ``A^T A``), used for the step size.
        gram: ``x -> A^T A x`` in one pass where that is cheaper than the adjoint of the forward
            (the blur: one product with ``|H|^2`` between two FFTs instead of four FFTs);
            ``None`` otherwise.
        forward_gram: ``x -> (A x, A^T A x)``, the same arrays as ``forward`` and ``gram``, sharing
            their first transform (the blur); ``None`` otherwise.
    """

    kind: str
    shape: tuple[int, int]
    forward: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    adjoint: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    norm2: float
    gram: Callable[[np.ndarray], np.ndarray] | None = field(default=None, repr=False)
    forward_gram: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = field(
        default=None, repr=False)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        _check_image("x", x, self.shape)
        return self.forward(x)


def _check_image(name: str, x: np.ndarray, shape: tuple[int, int]) -> None:
    if not isinstance(x, np.ndarray) or x.shape != shape:
        got = getattr(x, "shape", type(x).__name__)
        raise ValueError(f"{name} must be an image of shape {shape} (the operator's), got {got}")


def _blur_conv(tfs: tuple[np.ndarray, ...], w: int) -> Callable[[np.ndarray], list[np.ndarray]]:
    """``x -> [np.fft.irfft2(tf * np.fft.rfft2(x), s=(h, w)) for tf in tfs]`` to the last bit,
    cheaper, with the forward transform of ``x`` taken once for all (the solvers apply ``A``,
    ``A^T A`` or both tens of thousands of times a chapter).

    The same pocketfft transforms run axis by axis (``r2c`` over both axes, then ``c2c`` back along
    the first and ``c2r`` along the last, each inverse scaled by ``1/n`` as numpy does; scipy's
    one-call ``irfft2`` would scale by ``1/(h w)`` once, the same bits only when ``h`` and ``w`` are
    powers of two), with the first product taken in place. For float64 images the transforms are
    called straight from scipy's pocketfft module, without scipy.fft's Python dispatch around them
    (a fifth of the operator's time at 128 x 128); that module is private, so it is used only if it
    reproduces the public route exactly on a probe image, and the public route runs otherwise."""
    import scipy.fft as sfft

    def spectra(spec: np.ndarray) -> list[np.ndarray]:
        rest = [spec * tf for tf in tfs[1:]]  # before the first product overwrites spec
        spec *= tfs[0]
        return [spec, *rest]

    def public(x: np.ndarray) -> list[np.ndarray]:
        return [sfft.irfft(sfft.ifft(s, axis=-2, overwrite_x=True), n=w, axis=-1, overwrite_x=True)
                for s in spectra(sfft.rfft2(x))]

    try:
        from scipy.fft._pocketfft import pypocketfft as pocket
    except ImportError:  # pragma: no cover - scipy moved its private module
        return public

    def direct(x: np.ndarray) -> list[np.ndarray]:
        if not (isinstance(x, np.ndarray) and x.dtype == np.float64 and x.ndim >= 2):
            return public(x)
        last = x.ndim - 1
        # (input, axes, forward, inorm (0: none, 2: 1/n), out, threads)
        spec = pocket.r2c(x, (last - 1, last), True, 0, None, 1)
        return [pocket.c2r(pocket.c2c(s, (last - 1,), False, 2, s, 1), (last,), w, False, 2, None, 1)
                for s in spectra(spec)]

    probe = np.random.default_rng(0).standard_normal((tfs[0].shape[0], w))
    try:
        same = all(np.array_equal(a, b) for a, b in zip(direct(probe), public(probe), strict=True))
    except (TypeError, ValueError):  # pragma: no cover - its signature changed
        same = False
    return direct if same else public


def make_operator(kind: str, shape: tuple[int, int], *, blur: float = 1.6, keep: float = 0.2,
                  factor: int = 2, seed: int = 0) -> Operator:
    """The forward operator ``A`` of ``risp-eq-model``.

    Args:
        kind: ``"blur"`` (periodic Gaussian blur of standard deviation ``blur`` pixels, applied by
            FFT), ``"inpaint"`` (keeps a random fraction ``keep`` of the pixels, drawn from
            ``seed``) or ``"downsample"`` (averages ``factor x factor`` blocks).
        shape: the image shape ``(h, w)``; both sides at least 4 (and divisible by ``factor`` for
            downsampling).
        blur: in ``(0, 20]``.
        keep: in ``(0, 1]``.
        factor: an integer in ``[1, min(h, w)]``.
        seed: an integer in ``[0, 2**32 - 1]``.

    Every argument is checked, whatever the ``kind`` (an argument the kind does not use is still
    refused when it is out of range, so that a typo never passes unnoticed).

    Raises:
        ValueError: an unknown ``kind`` or an argument out of range (the message names it).
        TypeError: an argument of the wrong type (a seed that is not an integer, ``None``
            included).
    """
    check_choice("kind", kind, OPERATORS)
    if not (isinstance(shape, tuple) and len(shape) == 2):
        raise ValueError(f"shape must be a pair (h, w), got {shape!r}")
    h, w = (check_int("shape[0]", shape[0], 4), check_int("shape[1]", shape[1], 4))
    s = check_range("blur", blur, 0, 20, low_open=True)
    p = check_range("keep", keep, 0, 1, low_open=True)
    f = check_int("factor", factor, 1, min(h, w))
    seed = check_seed(seed)
    if kind == "blur":
        fy, fx = np.fft.fftfreq(h)[:, None], np.fft.rfftfreq(w)[None, :]
        # transfer function of a periodic Gaussian kernel: real, in (0, 1], so ||A|| = 1
        tf = np.exp(-2.0 * math.pi**2 * s**2 * (fy**2 + fx**2))
        tf2 = tf * tf
        one, gram, both = _blur_conv((tf,), w), _blur_conv((tf2,), w), _blur_conv((tf, tf2), w)

        def conv(x: np.ndarray) -> np.ndarray:
            return one(x)[0]

        def gram_of(x: np.ndarray) -> np.ndarray:
            return gram(x)[0]

        def forward_gram(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            ax, atax = both(x)
            return ax, atax

        # symmetric kernel: A^T = A, and A^T A is the blur with transfer function tf^2
        return Operator(kind, (h, w), conv, conv, 1.0, gram=gram_of, forward_gram=forward_gram)
    if kind == "inpaint":
        mask = np.random.default_rng(seed).random((h, w)) < p

        def select(x: np.ndarray) -> np.ndarray:
            return np.where(mask, x, 0.0)

        return Operator(kind, (h, w), select, select, 1.0)
    if h % f or w % f:
        raise ValueError(f"factor must divide both sides of shape {shape}, got {f}")

    def down(x: np.ndarray) -> np.ndarray:
        return x.reshape(h // f, f, w // f, f).mean(axis=(1, 3))

    def up(r: np.ndarray) -> np.ndarray:
        return np.repeat(np.repeat(r, f, axis=0), f, axis=1) / f**2

    return Operator(kind, (h, w), down, up, 1.0 / f**2)


# ----------------------------------------------------------------------------------------------
# The prior
# ----------------------------------------------------------------------------------------------


def _grad2(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Periodic forward differences along the columns and the rows: ``np.roll(x, -1, axis) - x``.

    Written as slice differences into the result (the same subtractions of the same numbers, so
    the same bits as the roll): ``np.roll`` copies the whole image first, and the differences run
    twice per gradient in every solver's loop. The column differences run over the flattened
    image in one pass (``x[i, j+1] - x[i, j]`` for every pixel but the last of each row, whose
    wrong neighbour-across-rows value the periodic column then overwrites): the same subtraction
    for every pixel, without a strided loop over the rows."""
    u, v = np.empty(x.shape, x.dtype), np.empty(x.shape, x.dtype)  # C order: u.reshape(-1) is a view
    flat = x.reshape(-1)  # a copy only when x is not C-contiguous (it is read, never written)
    np.subtract(flat[1:], flat[:-1], out=u.reshape(-1)[:-1])
    np.subtract(x[:, :1], x[:, -1:], out=u[:, -1:])
    np.subtract(x[1:], x[:-1], out=v[:-1])
    np.subtract(x[:1], x[-1:], out=v[-1:])
    return u, v


def _grad2_adjoint(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The adjoint of :func:`_grad2`, ``(np.roll(u, 1, 1) - u) + (np.roll(v, 1, 0) - v)``, by slices
    as there (the column part over the flattened array, its first column then overwritten)."""
    a, b = np.empty(u.shape, u.dtype), np.empty(v.shape, v.dtype)
    flat = u.reshape(-1)
    np.subtract(flat[:-1], flat[1:], out=a.reshape(-1)[1:])
    np.subtract(u[:, -1:], u[:, :1], out=a[:, :1])
    np.subtract(v[:-1], v[1:], out=b[1:])
    np.subtract(v[-1:], v[:1], out=b[:1])
    a += b
    return a


class Prior(Protocol):
    """What the solvers need of a prior ``g``: its value, its gradient (minus the score) and a
    Lipschitz constant of the gradient (for the default step ``1/L``)."""

    @property
    def lipschitz(self) -> float:
        """A Lipschitz constant of ``grad g`` (or an estimate of one)."""
        ...

    def value(self, x: np.ndarray) -> float:
        """``g(x)``."""
        ...

    def grad(self, x: np.ndarray) -> np.ndarray:
        """``grad g(x) = -S(x)``."""
        ...


@dataclass(frozen=True)
class CauchyPrior:
    """The Cauchy (Lorentzian) penalty on image gradients, ``risp-eq-prior``.

    ``g(x) = (mu/2) sum_pixels log(1 + |D x|^2 / delta^2)``. A **classical stand-in** for a
    learned score network: its score ``-grad g`` is an exact gradient field, it is smooth with a
    Lipschitz Hessian, and it is nonconvex, so it meets the paper's assumptions exactly.
    """

    mu: float = 60.0
    delta: float = 0.05

    def __post_init__(self) -> None:
        check_range("mu", self.mu, 0, low_open=True)
        check_range("delta", self.delta, 0, low_open=True)

    @property
    def lipschitz(self) -> float:
        """A Lipschitz constant of ``grad g``: ``8 mu / delta^2`` (``||D||^2 <= 8``)."""
        return 8.0 * self.mu / self.delta**2

    def value(self, x: np.ndarray) -> float:
        """``g(x)``."""
        u, v = _grad2(x)
        return self._value(u * u, v * v)

    def grad(self, x: np.ndarray) -> np.ndarray:
        """``grad g(x) = -S(x)``, minus the score."""
        u, v = _grad2(x)
        return self._grad(u, v, u * u, v * v)

    def value_and_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """``(g(x), grad g(x))``, sharing the image differences (the recorders need both)."""
        u, v = _grad2(x)
        uu, vv = u * u, v * v
        return self._value(uu, vv), self._grad(u, v, uu, vv)

    def _value(self, uu: np.ndarray, vv: np.ndarray) -> float:
        t = uu + vv  # log1p((uu + vv) / delta^2), in one scratch array
        t /= self.delta**2
        return 0.5 * self.mu * float(np.log1p(t, out=t).sum())

    def _grad(self, u: np.ndarray, v: np.ndarray, uu: np.ndarray, vv: np.ndarray) -> np.ndarray:
        # mu / (delta^2 + uu + vv) and its products with u and v, in place: the callers' u, v, uu
        # and vv are their own scratch arrays (value_and_grad has used uu and vv by now)
        wgt = np.add(uu, self.delta**2, out=uu)
        wgt += vv
        np.divide(self.mu, wgt, out=wgt)
        u *= wgt
        v *= wgt
        return _grad2_adjoint(u, v)


# ----------------------------------------------------------------------------------------------
# The problem
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """``F(x) = (lam/2)||A x - y||^2 + g(x)`` (``risp-eq-objective``), with the ground truth for PSNR."""

    op: Operator
    y: np.ndarray = field(repr=False)
    lam: float
    prior: Prior
    truth: np.ndarray | None = field(default=None, repr=False)

    @property
    def lipschitz(self) -> float:
        """``L = lam ||A||^2 + L_g``, a Lipschitz constant of ``grad F`` (``L_g = 8 mu / delta^2``
        for the Cauchy prior; an estimate for a learned one)."""
        return self.lam * self.op.norm2 + self.prior.lipschitz

    def value(self, x: np.ndarray) -> float:
        """``F(x)``."""
        r = self.op.forward(x) - self.y
        return 0.5 * self.lam * float((r * r).sum()) + self.prior.value(x)

    def grad(self, x: np.ndarray) -> np.ndarray:
        """``grad F(x) = lam A^T (A x - y) - S(x)``, as ``lam (A^T A x - A^T y) - S(x)`` when the
        operator has a one-pass ``gram`` (the blur: half the FFTs; the same gradient up to
        rounding)."""
        g = self._fit_grad(x, None)
        g += self.prior.grad(x)
        return g

    def _fit_grad(self, x: np.ndarray, r: np.ndarray | None,
                  gram: np.ndarray | None = None) -> np.ndarray:
        """``lam A^T (A x - y)``; ``r = A x - y`` when it is known (used when there is no
        ``gram``), and ``gram = A^T A x`` when it is known."""
        if self.op.gram is not None:
            aty = self.__dict__.get("_aty")
            if aty is None:  # A^T y, once (a frozen dataclass: stored past __setattr__)
                aty = self.__dict__["_aty"] = self.op.adjoint(self.y)
            return self.lam * ((self.op.gram(x) if gram is None else gram) - aty)
        return self.lam * self.op.adjoint(self.op.forward(x) - self.y if r is None else r)

    def value_and_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """``(F(x), grad F(x))``, the same numbers as :meth:`value` and :meth:`grad`, with the
        residual ``A x - y`` (and the prior's own work, when it has a ``value_and_grad``) computed
        once: a recorded iteration needs both."""
        gram = None
        if self.op.forward_gram is not None and self.op.gram is not None:
            ax, gram = self.op.forward_gram(x)  # A x and A^T A x, one forward transform
            r = ax - self.y
        else:
            r = self.op.forward(x) - self.y
        both = getattr(self.prior, "value_and_grad", None)
        if both is not None:
            g_value, g_grad = both(x)
        else:  # grad first: a learned prior keeps g at the point of its last gradient
            g_grad = self.prior.grad(x)
            g_value = self.prior.value(x)
        value = 0.5 * self.lam * float((r * r).sum()) + g_value
        g = self._fit_grad(x, r, gram)  # the gradient grad() gives, to the bit
        g += g_grad
        return value, g

    def start(self) -> np.ndarray:
        """The starting point: the observation (upsampled by the adjoint for downsampling)."""
        if self.op.kind == "downsample":
            return self.op.adjoint(self.y) / self.op.norm2
        if self.op.kind == "inpaint":
            known = self.op.forward(np.ones(self.op.shape)) > 0
            return np.where(known, self.y, 0.5)
        return self.y.copy()


def psnr(x: np.ndarray, truth: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB for images in [0, 1] (peak 1; ``x`` is not clipped).

    ``x`` and ``truth`` are non-empty finite arrays of the same shape."""
    x = check_array("x", x)
    truth = check_array("truth", truth)
    if x.shape != truth.shape:
        raise ValueError(f"x must have the shape of truth, {truth.shape}, got {x.shape}")
    return _psnr(x, truth)


def _psnr(x: np.ndarray, truth: np.ndarray) -> float:
    """:func:`psnr` without the checks, for the solvers' records (an iterate that blew up to NaN is
    recorded as a NaN PSNR, not refused)."""
    d = x - truth
    mse = float(np.mean(np.square(d, out=d)))
    return math.inf if mse == 0 else -10.0 * math.log10(mse)


def make_problem(size: int = 128, *, kind: str = "blur", noise: float = 0.01, mu: float = 60.0,
                 delta: float = 0.05, image: str = "camera", seed: int = 0, prior: Prior | None = None,
                 safety: float = 2.0) -> Problem:
    """The chapter's test problem: a bundled scikit-image picture at ``size x size``, degraded by
    ``make_operator(kind, ...)`` plus Gaussian noise of standard deviation ``noise`` (drawn from
    ``seed``), with ``lam = 1 / noise^2``.

    Args:
        prior: the prior ``g``; default the Cauchy prior ``(mu, delta)``. A
            :class:`~iclr_lab.recovery.risp.prior.LearnedPrior` without a Lipschitz estimate gets
            one here: the spectral norm of its Hessian at the start point
            (:meth:`Problem.start`), times ``safety``.
        safety: the factor (>= 1) on that estimate, because the curvature of a learned prior
            changes along the iterates.
    """
    from iclr_lab.core.datasets import image as load_image

    check_int("size", size, 8, 1024)
    check_choice("kind", kind, OPERATORS)
    sigma = check_range("noise", noise, 0, 1, low_open=True)
    factor = check_range("safety", safety, 1)
    seed = check_seed(seed)
    if prior is None:
        prior = CauchyPrior(mu, delta)
    elif any(inspect.getattr_static(prior, a, None) is None for a in ("value", "grad", "lipschitz")):
        # getattr_static: reading lipschitz may raise before a learned prior has its estimate
        raise TypeError(f"prior must have value, grad and lipschitz (a Prior), got {type(prior).__name__}")
    truth = load_image(image, size=size)
    op = make_operator(kind, (size, size), seed=seed)
    rng = np.random.default_rng(seed)
    clean = op.forward(truth)
    y = clean + sigma * rng.standard_normal(clean.shape)
    problem = Problem(op, y, 1.0 / sigma**2, prior, truth)
    if isinstance(prior, LearnedPrior) and prior.lipschitz_estimate is None:
        local = prior.estimate_lipschitz(problem.start())
        problem = Problem(op, y, problem.lam, prior.with_lipschitz(factor * local), truth)
    return problem


# ----------------------------------------------------------------------------------------------
# Solvers
# ----------------------------------------------------------------------------------------------


@dataclass
class Trace:
    """What a solver run records, for iterations ``k = 0, ..., iters``.

    Attributes:
        x: the last iterate.
        value: ``F(x_k)``.
        grad_norm: ``||grad F(x_k)||``.
        psnr: ``PSNR(x_k)`` (NaN without a ground truth).
        restarts: the iterations after which the momentum was reset.
        snapshots: ``{k: x_k}`` for the iterations asked for.
        grad_evals: gradient evaluations used by the method itself (the recording above is extra).
    """

    x: np.ndarray
    value: np.ndarray
    grad_norm: np.ndarray
    psnr: np.ndarray
    restarts: list[int]
    snapshots: dict[int, np.ndarray]
    grad_evals: int


class _Recorder:
    """What a solver run records (:class:`Trace`): ``F``, ``||grad F||`` and PSNR at every iterate
    (or, with ``record=False``, at the end point only) and the iterates in ``keep``. With
    ``values=False`` it records ``||grad F||`` alone (``F`` and PSNR stay NaN), for runs whose
    callers read nothing else."""

    def __init__(self, problem: Problem, iters: int, keep: tuple[int, ...], record: bool,
                 values: bool = True) -> None:
        self.p, self.record, self.keep, self.values = problem, record, set(keep), values
        n = iters + 1 if record else 1
        self.value, self.gn, self.ps = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
        self.snaps: dict[int, np.ndarray] = {}

    def copy(self) -> _Recorder:
        """An independent recorder holding what this one has recorded (for a run that forks)."""
        new = _Recorder.__new__(_Recorder)
        new.p, new.record, new.keep, new.values = self.p, self.record, self.keep, self.values
        new.value, new.gn, new.ps = self.value.copy(), self.gn.copy(), self.ps.copy()
        new.snaps = dict(self.snaps)
        return new

    def __call__(self, k: int, x: np.ndarray) -> np.ndarray | None:
        """Record iterate ``k``; returns ``grad F(x)`` when the record computed it (``None`` when
        not recording), so that a solver stepping from ``x`` itself need not compute it again."""
        if k in self.keep:
            self.snaps[k] = x.copy()
        if not self.record:
            return None
        if not self.values:  # the gradient norm only (the same gradient as value_and_grad's)
            g = self.p.grad(x)
            self.gn[k] = float(np.linalg.norm(g))
            return g
        value, g = self.p.value_and_grad(x)
        self.value[k] = value
        self.gn[k] = float(np.linalg.norm(g))
        if self.p.truth is not None:
            self.ps[k] = _psnr(x, self.p.truth)
        return g

    def trace(self, x: np.ndarray, restarts: list[int], evals: int) -> Trace:
        if not self.record:  # only the end point
            value, g = self.p.value_and_grad(x)
            self.value[0] = value
            self.gn[0] = float(np.linalg.norm(g))
            self.ps[0] = _psnr(x, self.p.truth) if self.p.truth is not None else np.nan
        return Trace(x, self.value, self.gn, self.ps, restarts, self.snaps, evals)


def _check_common(problem: Problem, x0: np.ndarray | None, step: float | None,
                  iters: int) -> tuple[np.ndarray, float, int]:
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a Problem (see make_problem), got {type(problem).__name__}")
    x = problem.start() if x0 is None else np.asarray(
        check_array("x0", x0, nonempty=False, finite=False), dtype=np.float64)
    _check_image("x0", x, problem.op.shape)
    check_array("x0", x)  # finite
    eta = 1.0 / problem.lipschitz if step is None else check_range("step", step, 0, low_open=True)
    return x.copy(), eta, check_int("iters", iters, 0)


def red(problem: Problem, x0: np.ndarray | None = None, *, step: float | None = None,
        iters: int = 300, record: bool = True, keep: tuple[int, ...] = ()) -> Trace:
    """RED as a gradient method, ``risp-eq-red``: ``x_{k+1} = x_k - step (grad f(x_k) - S(x_k))``.

    Args:
        problem: the objective (``risp-eq-objective``).
        x0: the start (default: :meth:`Problem.start`), a finite image of the operator's shape.
        step: the step ``eta > 0`` (default ``1/L``).
        iters: number of iterations.
        record: record ``F``, ``||grad F||`` and PSNR at every iterate (one extra evaluation of
            ``F``; the gradient is the one the step uses).
        keep: iterations whose iterate is kept in ``Trace.snapshots``.
    """
    x, eta, n = _check_common(problem, x0, step, iters)
    rec = _Recorder(problem, n, keep, record)
    for k in range(n):
        g = rec(k, x)  # the step's gradient, when the record computed it
        if g is None:
            g = problem.grad(x)
        g *= eta  # x - eta g, in the gradient's own (fresh) array
        x = np.subtract(x, g, out=g)
    rec(n, x)
    return rec.trace(x, [], n)


def risp(problem: Problem, x0: np.ndarray | None = None, *, step: float | None = None,
         theta: float = 0.2, restart: float | None = 100.0, iters: int = 300, record: bool = True,
         keep: tuple[int, ...] = ()) -> Trace:
    """RISP-GM, ``risp-eq-risp`` with the restart rule ``risp-eq-restart``.

    Each iteration extrapolates ``z_k = x_k + (1 - theta)(x_k - x_{k-1})``, takes a RED step from
    ``z_k``, and adds ``||x_{k+1} - x_k||^2`` to the movement ``M`` since the last restart. When
    ``j M > restart`` (``j``: iterations since the last restart) the momentum is killed
    (``x_{k-1} := x_k``). ``theta = 1`` is RED exactly; ``restart=None`` is heavy ball with no
    restart.

    Args:
        theta: the damping ``theta`` in ``(0, 1]`` (momentum ``1 - theta``).
        restart: the threshold ``B^2 > 0`` on ``j M``, in summed squared pixel units; ``None``
            never restarts.

    The other arguments are as in :func:`red`.
    """
    x, eta, n = _check_common(problem, x0, step, iters)
    th = check_range("theta", theta, 0, 1, low_open=True)
    b2 = math.inf if restart is None else check_range("restart", restart, 0, low_open=True)
    rec = _Recorder(problem, n, keep, record)
    x_prev, j, moved, restarts = x, 0, 0.0, []
    for k in range(n):
        g = rec(k, x)
        z = x + (1.0 - th) * (x - x_prev)
        if g is None or (j > 0 and th < 1.0):
            # with momentum z is not x; without (at the start, after a restart, or theta = 1) z is
            # x to the last bit, and the record's gradient at x is the step's
            g = problem.grad(z)
        x_new = z - eta * g
        j += 1
        moved += float(np.sum((x_new - x) ** 2))
        x_prev, x = x, x_new
        if j * moved > b2:  # Li and Lin's rule: too much movement for the epoch's length
            x_prev, j, moved = x, 0, 0.0
            restarts.append(k + 1)
    rec(n, x)
    return rec.trace(x, restarts, n)


def _risp_runs(problem: Problem, *, theta: float, restarts: tuple[float | None, ...], iters: int,
               values: bool = True, keep: tuple[int, ...] = ()) -> list[Trace]:
    """``[risp(problem, theta=theta, restart=b, iters=iters) for b in restarts]``, the same numbers
    with less work: the runs start alike and stay one run, iterate for iterate, until their restart
    rules first disagree (one threshold is crossed and another not); there the run forks, and each
    branch goes on exactly as :func:`risp` would. The steps are :func:`risp`'s, written out once
    per branch, so every trace is the separate run's to the last bit.

    ``values=False`` records only ``||grad F||`` (``value`` and ``psnr`` stay NaN): a caller that
    reads only the gradient norms skips ``g``'s value and the PSNR at every iterate (the gradient
    is the same). The start is :meth:`Problem.start` and the step ``1/L``, :func:`risp`'s defaults;
    ``keep`` is :func:`risp`'s, for every run.
    """
    x, eta, n = _check_common(problem, None, None, iters)
    th = check_range("theta", theta, 0, 1, low_open=True)
    b2s = [math.inf if b is None else check_range("restart", b, 0, low_open=True) for b in restarts]
    rec = _Recorder(problem, n, keep, True, values)
    # a branch: the runs it stands for, its recorder, x_k, x_{k-1}, j, M and the restarts so far
    branches: list[tuple[list[int], _Recorder, np.ndarray, np.ndarray, int, float, list[int]]]
    branches = [(list(range(len(b2s))), rec, x, x, 0, 0.0, [])]
    for k in range(n):
        grown = []
        for members, rec, x, x_prev, j, moved, done in branches:
            g = rec(k, x)
            z = x - x_prev  # z = x + (1 - theta)(x - x_prev), in one array
            z *= 1.0 - th
            z += x
            if g is None or (j > 0 and th < 1.0):
                g = problem.grad(z)
            g *= eta  # x_new = z - eta g, into z's array
            x_new = np.subtract(z, g, out=z)
            j += 1
            d = x_new - x
            moved += float(np.sum(np.square(d, out=d)))
            x_prev, x = x, x_new
            jm = j * moved
            fire = [i for i in members if jm > b2s[i]]
            stay = [i for i in members if not jm > b2s[i]]
            if stay:
                grown.append((stay, rec, x, x_prev, j, moved, done))
            if fire:  # these runs restart; a copy of the record when others go on without
                grown.append((fire, rec.copy() if stay else rec, x, x, 0, 0.0, [*done, k + 1]))
        branches = grown
    out: dict[int, Trace] = {}
    for members, rec, x, _, _, _, done in branches:
        rec(n, x)
        for i in members:  # runs that never parted: each its own copy of the same record
            out[i] = rec.copy().trace(x.copy(), list(done), n) if len(members) > 1 else rec.trace(x, done, n)
    return [out[i] for i in range(len(b2s))]


def nesterov_restart(problem: Problem, x0: np.ndarray | None = None, *, step: float | None = None,
                     iters: int = 300, record: bool = True, keep: tuple[int, ...] = ()) -> Trace:
    """Nesterov's accelerated gradient with O'Donoghue and Candes's gradient restart
    (``risp-eq-nesterov``), the baseline for RISP.

    ``z_k = x_k + j/(j+3) (x_k - x_{k-1})``, ``x_{k+1} = z_k - step grad F(z_k)``; the momentum is
    reset (``j := 0``, ``x_k := x_{k+1}`` as the previous point) whenever
    ``<grad F(z_k), x_{k+1} - x_k> > 0``, that is when the step goes uphill along the momentum.
    Arguments as in :func:`red`.
    """
    x, eta, n = _check_common(problem, x0, step, iters)
    rec = _Recorder(problem, n, keep, record)
    x_prev, j, restarts = x, 0, []
    for k in range(n):
        gx = rec(k, x)
        z = x - x_prev  # z = x + j/(j+3) (x - x_prev), in one array
        z *= j / (j + 3.0)
        z += x
        # j = 0 (the start, or just after a restart): x_prev is x, so z is x to the last bit and
        # the record's gradient at x is the step's
        g = gx if gx is not None and j == 0 else problem.grad(z)
        x_new = np.subtract(z, eta * g, out=z)
        if float(np.vdot(g, np.subtract(x_new, x))) > 0:
            x_prev, x, j = x_new, x_new, 0
            restarts.append(k + 1)
        else:
            x_prev, x, j = x, x_new, j + 1
    rec(n, x)
    return rec.trace(x, restarts, n)
