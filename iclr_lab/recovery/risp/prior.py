"""A learned score prior for RISP: a small gradient-step denoiser, ``risp-eq-gs``.

The paper's priors are gradient-step (GS) denoisers (Hurault, Leclaire and Papadakis, ICLR 2022):
a network ``N`` defines the potential ``g_N(x) = 1/2 ||x - N(x)||^2`` and the denoiser is one
gradient step on it, ``D(x) = x - grad g_N(x)``. The score ``-grad g_N`` is then an exact gradient
field, so RED and RISP minimise a true objective. Here ``N(x) = x - R(x)`` with a small residual
CNN ``R`` (3x3 convolutions, SoftPlus activations, so ``grad g_N = J_R(x)^T R(x)`` is smooth), and
the prior of ``risp-eq-objective`` is Tweedie's scaling of the potential,
``g(x) = weight * g_N(x) / sigma^2``, where ``sigma`` is the noise level the network was trained at.

* :class:`DenoiserConfig` and :func:`build_network`: the architecture;
* :func:`load_denoiser`: the shipped weights (``gs_denoiser.pt``, made by
  ``python -m iclr_lab.recovery.risp.train_prior``) or any file that script wrote;
* :func:`gs_grad` and :func:`gs_denoise`: ``grad g_N`` and ``D`` on torch batches;
* :class:`LearnedPrior`: the prior with the interface of :class:`~iclr_lab.recovery.risp.method.CauchyPrior`
  (``value``, ``grad``, ``lipschitz``), so :func:`~iclr_lab.recovery.risp.method.red` and
  :func:`~iclr_lab.recovery.risp.method.risp` run unchanged with it.

torch is imported inside the functions: importing this module does not import it.
"""

from __future__ import annotations

import json
import math
import pathlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_seed

if TYPE_CHECKING:
    import torch

__all__ = ["FORMAT", "WEIGHTS", "DenoiserConfig", "LearnedPrior", "build_network", "gs_denoise",
           "gs_grad", "load_denoiser"]

FORMAT = "iclr_lab.recovery.risp.gs_denoiser/1"
#: The shipped weights and their record (config, training curve, code version).
WEIGHTS = pathlib.Path(__file__).with_name("gs_denoiser.pt")
DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class DenoiserConfig:
    """The architecture of the residual CNN ``R`` and the noise level it is trained for.

    Attributes:
        channels: feature maps of the hidden layers (>= 1).
        depth: number of 3x3 convolutions (>= 2); the receptive field is ``2 depth + 1`` pixels.
        sigma: the noise standard deviation of training, in (0, 1) for images in [0, 1].
    """

    channels: int = 16
    depth: int = 4
    sigma: float = 0.05

    def __post_init__(self) -> None:
        check_int("channels", self.channels, 1, 512)
        check_int("depth", self.depth, 2, 64)
        check_range("sigma", self.sigma, 0, 1, low_open=True, high_open=True)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (what the weights file records)."""
        return asdict(self)


def build_network(config: DenoiserConfig) -> torch.nn.Sequential:
    """The residual CNN ``R``: ``depth`` 3x3 convolutions (reflect padding, so no dark border is
    learned) with SoftPlus between them, one grey channel in and out. Weights are drawn from
    torch's global generator (seed it first)."""
    from torch import nn

    if not isinstance(config, DenoiserConfig):
        raise TypeError(f"config must be a DenoiserConfig, got {type(config).__name__}")
    layers: list[torch.nn.Module] = []
    width = [1] + [config.channels] * (config.depth - 1) + [1]
    for i, (a, b) in enumerate(zip(width[:-1], width[1:], strict=True)):
        layers.append(nn.Conv2d(a, b, 3, padding=1, padding_mode="reflect"))
        if i < config.depth - 1:
            # smooth activation: grad g_N = J_R^T R is then differentiable with a bounded-on-bounded-
            # sets Hessian, the paper's assumptions A2-A3 (a ReLU would make the score discontinuous)
            layers.append(nn.Softplus())
    return nn.Sequential(*layers)


def _check_batch(x: torch.Tensor) -> None:
    """A batch for the network: a non-empty, finite float tensor of shape ``(batch, 1, h, w)``."""
    import torch

    if not isinstance(x, torch.Tensor) or x.ndim != 4 or x.shape[1] != 1:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a tensor of shape (batch, 1, h, w), got {got}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got {x.dtype}")
    check_array("x", x.detach())  # non-empty and finite


def gs_grad(net: torch.nn.Module, x: torch.Tensor, *, create_graph: bool = False
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """``grad g_N(x) = J_R(x)^T R(x)`` for ``g_N = 1/2 ||R(x)||^2`` (per image of the batch), and
    ``R(x)``. ``create_graph=True`` keeps the graph for training through it (double backprop).

    ``x`` is a non-empty, finite float tensor of shape ``(batch, 1, h, w)``."""
    _check_batch(x)
    return _gs_grad(net, x, create_graph=create_graph)


def _gs_grad(net: torch.nn.Module, x: torch.Tensor, *, create_graph: bool = False
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`gs_grad` without the checks, for :class:`LearnedPrior`, whose images are checked
    by ``_to_batch`` (an iterate that blew up gives a NaN gradient, as with the Cauchy prior)."""
    import torch

    with torch.enable_grad():
        xr = x if (create_graph and x.requires_grad) else x.detach().requires_grad_(True)
        r = net(xr)
        (g,) = torch.autograd.grad(r, xr, grad_outputs=r, create_graph=create_graph)
    return (g, r) if create_graph else (g.detach(), r.detach())


def gs_denoise(net: torch.nn.Module, x: torch.Tensor, *, create_graph: bool = False) -> torch.Tensor:
    """The gradient-step denoiser ``D(x) = x - grad g_N(x)`` (``risp-eq-gs``); ``x`` as in
    :func:`gs_grad`."""
    g, _ = gs_grad(net, x, create_graph=create_graph)
    return x - g


def load_denoiser(path: str | pathlib.Path | None = None, *, config: DenoiserConfig | None = None
                  ) -> tuple[torch.nn.Sequential, DenoiserConfig]:
    """Load a trained ``R`` in evaluation mode, with its parameters frozen.

    Args:
        path: a weights file written by :mod:`~iclr_lab.recovery.risp.train_prior`; default the
            shipped ``gs_denoiser.pt`` beside this module.
        config: if given, the architecture the file must hold.

    Returns:
        ``(network, config)``, the network in float32.

    Raises:
        FileNotFoundError: no such file.
        iclr_lab.core.provenance.ShippedFileError: the file differs from the sha256 in its record
            (the shipped file must have one), is truncated or corrupt, or holds non-finite weights.
        ValueError: the file is not a GS-denoiser checkpoint, or its architecture differs from
            ``config`` or from the tensors it holds.
    """

    from iclr_lab.core.provenance import ShippedFileError, load_torch

    p = WEIGHTS if path is None else pathlib.Path(path)
    if not p.exists():
        raise FileNotFoundError(f"path: {p} does not exist; make it with "
                                "python -m iclr_lab.recovery.risp.train_prior")
    # the record beside the weights (written with them) holds their sha256; the shipped one must
    record = p.with_suffix(".json")
    expected = json.loads(record.read_text()).get("sha256") if record.exists() else None
    if path is None and expected is None:
        raise ShippedFileError(f"{record}: the shipped denoiser's record holds no sha256")
    ck = load_torch(p, expected_sha256=expected,
                    remake="reinstall the package, or retrain with "
                           "python -m iclr_lab.recovery.risp.train_prior")
    if not isinstance(ck, dict) or ck.get("format") != FORMAT or "state_dict" not in ck:
        raise ValueError(f"path: {p} is not a {FORMAT} checkpoint")
    try:
        saved = DenoiserConfig(**ck["config"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"path: {p} records an invalid architecture {ck.get('config')}") from err
    if config is not None and saved != config:
        raise ValueError(f"path: {p} holds architecture {saved}, expected {config}")
    net = build_network(saved)
    own, state = net.state_dict(), ck["state_dict"]
    if set(own) != set(state) or any(own[k].shape != state[k].shape for k in own):
        raise ValueError(f"path: {p} does not match the architecture it records ({saved})")
    net.load_state_dict(state)
    net.eval()
    for q in net.parameters():
        q.requires_grad_(False)
    return net, saved


def _to_batch(x: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    import torch

    if not isinstance(x, np.ndarray) or x.ndim != 2:
        got = getattr(x, "shape", type(x).__name__)
        raise ValueError(f"x must be a 2-D image (h, w), got {got}")
    return torch.from_numpy(np.ascontiguousarray(x)).to(dtype)[None, None]


@dataclass(frozen=True)
class LearnedPrior:
    """The learned prior ``g(x) = weight * 1/2 ||R(x)||^2 / sigma^2`` (``risp-eq-learned``).

    ``1/2 ||R||^2 = g_N`` is the potential of the gradient-step denoiser ``D = Id - grad g_N``;
    dividing by ``sigma^2`` is Tweedie's scaling, under which ``-grad g`` is the network's estimate
    of the score of the noisy image density (``D(x) - x = sigma^2 * score``). Same interface as
    :class:`~iclr_lab.recovery.risp.method.CauchyPrior`.

    Build it with :meth:`load`. ``grad g`` is Lipschitz on bounded sets but its constant has no
    closed form: :meth:`estimate_lipschitz` estimates the Hessian's spectral norm at a point by
    power iteration, and :func:`~iclr_lab.recovery.risp.method.make_problem` stores that estimate,
    times a safety factor, at the start point. :attr:`lipschitz` raises until one is set.

    Attributes:
        net: the residual CNN ``R`` (frozen).
        config: its architecture and training noise level ``sigma``.
        weight: the prior's weight (> 0); 1 is Tweedie's scaling.
        dtype: ``"float32"`` (fast; the default) or ``"float64"`` for the network's arithmetic.
            Inputs and outputs are float64 numpy arrays either way.
        lipschitz_estimate: the constant used for the step, or ``None`` before estimation.
    """

    net: Any = field(repr=False)
    config: DenoiserConfig
    weight: float = 1.0
    dtype: str = "float32"
    lipschitz_estimate: float | None = None
    # g at the point of the last grad call: the solvers' recorders ask for F(x) right after
    # grad F(x), and the gradient's forward pass has already computed R(x)
    _last: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.config, DenoiserConfig):
            raise TypeError(f"config must be a DenoiserConfig, got {type(self.config).__name__}")
        check_range("weight", self.weight, 0, low_open=True)
        check_choice("dtype", self.dtype, DTYPES)
        if self.lipschitz_estimate is not None:
            check_range("lipschitz_estimate", self.lipschitz_estimate, 0, low_open=True)
        import copy

        import torch

        want = getattr(torch, self.dtype)
        if any(q.dtype != want for q in self.net.parameters()):
            # a copy: the caller's network keeps its dtype (two priors may share one network)
            object.__setattr__(self, "net", copy.deepcopy(self.net).to(want))

    @classmethod
    def load(cls, path: str | pathlib.Path | None = None, *, weight: float = 1.0,
             dtype: str = "float32") -> LearnedPrior:
        """The prior of the shipped weights (or of ``path``); see :func:`load_denoiser`."""
        net, config = load_denoiser(path)
        return cls(net, config, weight, dtype)

    @property
    def sigma(self) -> float:
        """The training noise level of the denoiser."""
        return self.config.sigma

    @property
    def scale(self) -> float:
        """``weight / sigma^2``, the factor between ``g`` and the GS potential ``g_N``."""
        return self.weight / self.config.sigma**2

    @property
    def lipschitz(self) -> float:
        """The Lipschitz constant used for ``grad g`` (an estimate; see :meth:`estimate_lipschitz`)."""
        if self.lipschitz_estimate is None:
            raise ValueError("lipschitz_estimate is not set: use make_problem(..., prior=...) or "
                             "prior.with_lipschitz(prior.estimate_lipschitz(x))")
        return self.lipschitz_estimate

    def with_lipschitz(self, value: float) -> LearnedPrior:
        """The same prior with ``lipschitz_estimate = value``."""
        return replace(self, lipschitz_estimate=check_range("value", value, 0, low_open=True))

    def _torch_dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.dtype)

    def _value_of(self, r: torch.Tensor) -> float:
        return 0.5 * self.scale * float(r.double().square().sum())

    def value(self, x: np.ndarray) -> float:
        """``g(x)``."""
        import torch

        last = self._last
        if "x" in last and last["x"].shape == np.shape(x) and np.array_equal(last["x"], x):
            return float(last["value"])
        with torch.no_grad():
            r = self.net(_to_batch(x, self._torch_dtype()))
        return self._value_of(r)

    def grad(self, x: np.ndarray) -> np.ndarray:
        """``grad g(x) = -S(x)``, minus the score: ``scale * J_R(x)^T R(x)``."""
        g, r = _gs_grad(self.net, _to_batch(x, self._torch_dtype()))
        self._last.update(x=np.array(x, dtype=np.float64), value=self._value_of(r))
        return self.scale * g[0, 0].double().numpy()

    def denoise(self, x: np.ndarray) -> np.ndarray:
        """The GS denoiser ``D(x) = x - grad g_N(x)`` at the training noise level (``risp-eq-gs``)."""
        return x - self.grad(x) / self.scale

    def hessian_vector(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``Hess g(x) v``, by differentiating ``grad g`` once more (double backprop)."""
        import torch

        if not isinstance(v, np.ndarray) or v.shape != getattr(x, "shape", None):
            raise ValueError(f"v must be an array of the shape of x, {getattr(x, 'shape', None)}")
        xt = _to_batch(x, self._torch_dtype()).requires_grad_(True)
        with torch.enable_grad():
            g, _ = _gs_grad(self.net, xt, create_graph=True)
            (hv,) = torch.autograd.grad(g, xt, grad_outputs=_to_batch(v, self._torch_dtype()))
        return self.scale * hv[0, 0].double().numpy()

    def _hessian_at(self, x: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """``v -> Hess g(x) v``, the same numbers as :meth:`hessian_vector` at this ``x``, with the
        graph of ``grad g`` at ``x`` built once and kept for every ``v`` (the power iteration asks
        for thirty products at one point; only the second backward pass depends on ``v``)."""
        import torch

        xt = _to_batch(x, self._torch_dtype()).requires_grad_(True)
        with torch.enable_grad():
            g, _ = _gs_grad(self.net, xt, create_graph=True)

        def times(v: np.ndarray) -> np.ndarray:
            with torch.enable_grad():
                (hv,) = torch.autograd.grad(g, xt, grad_outputs=_to_batch(v, self._torch_dtype()),
                                            retain_graph=True)
            return self.scale * hv[0, 0].double().numpy()

        return times

    def estimate_lipschitz(self, x: np.ndarray, *, iters: int = 30, seed: int = 0) -> float:
        """The spectral norm of ``Hess g(x)`` (its largest eigenvalue in absolute value: ``g`` is
        not convex), by power iteration from a seeded random start. This is a **local** estimate
        of the Lipschitz constant of ``grad g`` near ``x``, not a bound. ``iters >= 1``; ``seed``
        an integer in ``[0, 2**32 - 1]``."""
        n = check_int("iters", iters, 1)
        v = np.random.default_rng(check_seed(seed)).standard_normal(np.shape(x))
        v /= np.linalg.norm(v)
        hessian_times = self._hessian_at(x)
        est = 0.0
        for _ in range(n):
            hv = hessian_times(v)
            est = float(np.linalg.norm(hv))
            if est == 0.0 or not math.isfinite(est):
                break
            v = hv / est
        return est
