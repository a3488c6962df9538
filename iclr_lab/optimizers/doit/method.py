"""DOIT, the method a user imports: the score, the state features, the acquisition and the controller.

DOIT (Dynamic Optimizer Interleaving Training) cuts training into cycles of ``cycle`` optimizer
steps. At the start of every cycle it compresses the current parameters into a short feature vector,
chooses one of a few candidate optimizers, trains ``cycle`` steps with it and scores the cycle's
loss sequence (``doit-eq-score``). The score, paired with the features, trains one Gaussian-process
surrogate per candidate (scikit-learn's :class:`~sklearn.gaussian_process.GaussianProcessRegressor`).
For the first ``n_ini`` cycles the candidate is drawn at random with weights that follow its last
score (``doit-eq-weights``); afterwards the candidate with the largest acquisition value
(``doit-eq-acq``) wins. A newly chosen optimizer starts from fresh state.

Importing this module imports torch; scikit-learn is imported when a surrogate is first fitted.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from torch import nn

from iclr_lab.core.nn import batch_indices
from iclr_lab.core.validation import check_array, check_choice, check_int, check_range, check_real, check_seed

if TYPE_CHECKING:
    import pandas as pd

    from iclr_lab.core.datasets import Split

__all__ = [
    "ACQUISITIONS",
    "DEFAULT_RATES",
    "DOIT",
    "OPTIMIZERS",
    "Cycle",
    "acquisition_values",
    "cross_entropy_closure",
    "exploration_coefficient",
    "feature_weights",
    "make_optimizer",
    "probe_fn",
    "score",
    "score_terms",
    "state_features",
    "train_with_doit",
]

#: The candidate optimizers of the paper, in the order the chapter lists them.
OPTIMIZERS: tuple[str, ...] = ("SGD", "SGDM", "Adagrad", "RMSprop", "Adam")
#: Learning rates used when ``candidates`` names optimizers without rates: the frozen rates of the
#: CPU-scale plan (the chapter tunes its own on one common grid instead).
DEFAULT_RATES: dict[str, float] = {"SGD": 0.1, "SGDM": 0.05, "Adagrad": 0.05, "RMSprop": 1e-3,
                                   "Adam": 1e-3}
#: ``"intended"``: the exploration weight halves every ``halving`` cycles (the paper's stated intent);
#: ``"literal"``: the formula as transcribed, whose weight grows towards 1 (``doit-eq-coef``).
ACQUISITIONS: tuple[str, ...] = ("intended", "literal")
Acquisition = Literal["intended", "literal"]

SGDM_MOMENTUM = 0.9
_EPS = 1e-12


def make_optimizer(name: str, params: Any, lr: float) -> torch.optim.Optimizer:
    """A fresh ``torch.optim`` optimizer for candidate ``name``, one of
    :data:`~iclr_lab.optimizers.doit.method.OPTIMIZERS`.

    ``SGDM`` is SGD with heavy-ball momentum 0.9; the others use PyTorch's defaults apart from the
    learning rate. Every call returns new, empty optimizer state: that is what a switch does.
    """
    check_choice("name", name, OPTIMIZERS)
    lr = check_range("lr", lr, 0.0, low_open=True)
    # foreach=True: the multi-tensor path, cheaper than the per-tensor loop on a small CPU model
    if name == "SGD":
        return torch.optim.SGD(params, lr=lr, foreach=True)
    if name == "SGDM":
        return torch.optim.SGD(params, lr=lr, momentum=SGDM_MOMENTUM, foreach=True)
    if name == "Adagrad":
        return torch.optim.Adagrad(params, lr=lr, foreach=True)
    if name == "RMSprop":
        return torch.optim.RMSprop(params, lr=lr, foreach=True)
    return torch.optim.Adam(params, lr=lr, foreach=True)


# ---------------------------------------------------------------------------------------------
# the score of one cycle
# ---------------------------------------------------------------------------------------------


def _rel_drop(a: float, b: float) -> float:
    """``(a - b) / max(a, b)``, 0 when both are 0 (the denominators assume positive losses)."""
    den = max(a, b)
    return 0.0 if den <= _EPS else (a - b) / den


def score_terms(l0: float, losses: Sequence[float], alpha: float = 0.1) -> dict[str, float]:
    """The parts of the cycle score ``doit-eq-score``: ``mu`` and ``sigma`` (mean and standard
    deviation of the step-wise relative drops ``doit-eq-drops``), ``upper`` and ``lower`` (the
    bound terms ``doit-eq-bounds``) and the score ``s`` itself.

    Args:
        l0: the reference loss at the start of the cycle, in ``[0, inf]``, or NaN.
        losses: ``l_1, ..., l_tau``, the losses after each step of the cycle (non-negative, or
            ``inf`` or NaN).
        alpha: the weight of the dispersion ``sigma``, in ``[0, inf)``.

    A non-finite loss (``inf`` or NaN: a diverged step) gives the worst score, ``s = -1``, and
    NaN terms. A negative loss, ``-inf`` included, is refused: the score divides by the larger of
    two losses.
    """
    l0 = check_real("l0", l0)
    if l0 < 0:  # NaN passes: it is a diverged step
        raise ValueError(f"l0 must be in [0, inf] (a loss; NaN marks a diverged step), got {l0!r}")
    check_range("alpha", alpha, 0.0)
    try:
        ls = [float(v) for v in losses]
    except (TypeError, ValueError):
        raise TypeError(f"losses must be a sequence of numbers, got {losses!r}") from None
    if not ls:
        raise ValueError("losses must hold at least one loss (the cycle's steps), got none")
    if any(v < 0 for v in ls):
        raise ValueError(f"losses must be non-negative (the score divides by the larger of two "
                         f"losses); got min {min(v for v in ls if v < 0):.4g}")
    if not all(math.isfinite(v) for v in [l0, *ls]):
        return {"mu": math.nan, "sigma": math.nan, "upper": math.nan, "lower": math.nan, "s": -1.0}
    tau = len(ls)
    prev = [l0, *ls[:-1]]
    drops = np.array([_rel_drop(a, b) for a, b in zip(prev, ls, strict=True)])
    mu, sigma = float(drops.mean()), float(drops.std())
    upper = _rel_drop(l0, max(ls)) / tau
    lower = _rel_drop(l0, min(ls)) / tau
    s = math.tanh((mu + upper + lower) / 3.0 + alpha * sigma)
    return {"mu": mu, "sigma": sigma, "upper": upper, "lower": lower, "s": s}


def score(l0: float, losses: Sequence[float], alpha: float = 0.1) -> float:
    """The score ``s`` in ``[-1, 1]`` of one cycle (``doit-eq-score``): positive when the loss
    fell, negative when it rose, 0 for a constant loss. See :func:`score_terms` for the parts."""
    return score_terms(l0, losses, alpha)["s"]


# ---------------------------------------------------------------------------------------------
# the surrogate's input: the state of selected layers, compressed
# ---------------------------------------------------------------------------------------------


def feature_weights(model: torch.nn.Module, last: int = 2) -> list[nn.Parameter]:
    """The weight matrices DOIT describes by default: the ``last`` parameters with two or more
    dimensions, in registration order (for an MLP: the classification head and the layer below)."""
    check_int("last", last, 1)
    mats = [p for p in model.parameters() if p.ndim >= 2]
    if not mats:
        raise ValueError("model has no weight matrix (no parameter with 2 or more dimensions)")
    return mats[-last:]


def state_features(weights: Sequence[torch.Tensor], k: int = 2) -> np.ndarray:
    """The layer-wise PCA summary of ``doit-eq-features``: for each weight matrix, the fractions of
    the variance of its (centred) rows explained by its top ``k`` principal components, then
    ``log ||W||_F``. Returns ``len(weights) * (k + 1)`` numbers.

    The spectrum does not depend on a basis, so features from different cycles stay comparable
    while the weights rotate during training.
    """
    check_int("k", k, 1)
    out: list[float] = []
    with torch.no_grad():
        for w in weights:
            m = w.detach().reshape(w.shape[0], -1).double()
            sv = torch.linalg.svdvals(m - m.mean(dim=0, keepdim=True))
            var = sv ** 2
            ratios = (var / var.sum().clamp_min(_EPS))[:k].tolist()
            out += ratios + [0.0] * (k - len(ratios))
            out.append(math.log(float(torch.linalg.norm(m)) + _EPS))
    return np.nan_to_num(np.asarray(out, dtype=float), nan=0.0, posinf=50.0, neginf=-50.0)


# ---------------------------------------------------------------------------------------------
# the acquisition
# ---------------------------------------------------------------------------------------------


def exploration_coefficient(cycle: int, halving: int = 10, omega_t: float = 0.0,
                            acquisition: str = "intended") -> float:
    """The weight ``c_i`` of the surrogate's standard deviation at cycle ``i`` (``doit-eq-coef``).

    ``"intended"``: ``(1 - omega_t) 2^(-floor(i / halving))``, exploration halves every ``halving``
    cycles. ``"literal"``: ``1 - 2^(-floor(i / halving)) omega_t``, the formula as transcribed,
    which grows from ``1 - omega_t`` towards 1 instead.
    """
    check_int("cycle", cycle, 0)
    check_int("halving", halving, 1)
    check_range("omega_t", omega_t, 0.0, 1.0)
    check_choice("acquisition", acquisition, ACQUISITIONS)
    half = 2.0 ** -(cycle // halving)
    return (1.0 - omega_t) * half if acquisition == "intended" else 1.0 - half * omega_t


def acquisition_values(mu: Sequence[float] | np.ndarray, sigma: Sequence[float] | np.ndarray,
                       coefficient: float) -> np.ndarray:
    """``e_j = sigmoid(mu_j + c sigma_j)`` for every candidate (``doit-eq-acq``); DOIT picks the
    largest. The sigmoid does not change the ranking; it only bounds ``e`` to (0, 1).

    ``mu`` and ``sigma`` are finite and of one shape, ``coefficient`` (the exploration weight
    ``c_i`` of :func:`exploration_coefficient`) is in ``[0, inf)``.
    """
    m = np.asarray(check_array("mu", mu), dtype=float)
    s = np.asarray(check_array("sigma", sigma), dtype=float)
    coefficient = check_range("coefficient", coefficient, 0.0)
    if m.shape != s.shape:
        raise ValueError(f"mu and sigma must have the same shape, got {m.shape} and {s.shape}")
    return 1.0 / (1.0 + np.exp(-(m + coefficient * s)))


# ---------------------------------------------------------------------------------------------
# the controller
# ---------------------------------------------------------------------------------------------


@dataclass
class Cycle:
    """What DOIT saw and did in one cycle (one row of :meth:`DOIT.history_frame`).

    ``weights`` are the cold-start sampling weights ``omega_r`` *before* the choice; ``mu``,
    ``sigma`` and ``acq`` (the surrogates' predictions and the acquisition values at ``features``,
    one per candidate) are NaN during the cold start, when no prediction is used.
    """

    index: int
    start_step: int
    choice: str
    phase: str
    switched: bool
    features: np.ndarray
    weights: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    acq: np.ndarray
    coefficient: float
    l0: float
    losses: list[float] = field(default_factory=list)
    score: float = math.nan


def _parse_candidates(candidates: Mapping[str, float] | Sequence[str] | None) -> dict[str, float]:
    if candidates is None:
        return dict(DEFAULT_RATES)
    if isinstance(candidates, str):
        raise TypeError("candidates must be a mapping name -> learning rate or a sequence of names, "
                        f"got the string {candidates!r}")
    if isinstance(candidates, Mapping):
        pairs = list(candidates.items())
    else:
        pairs = [(name, DEFAULT_RATES.get(name, math.nan)) for name in candidates]
    out: dict[str, float] = {}
    for name, lr in pairs:
        check_choice("candidate", name, OPTIMIZERS)
        if name in out:
            raise ValueError(f"candidates must not repeat a name; {name!r} appears twice")
        out[name] = check_range(f"learning rate of {name}", lr, 0.0, low_open=True)
    if not out:
        raise ValueError("candidates must name at least one optimizer")
    return out


class DOIT:
    """Dynamic Optimizer Interleaving Training: a controller that owns the optimizer.

    Replace ``opt.zero_grad(); loss = ...; loss.backward(); opt.step()`` by one call::

        ctl = DOIT(model, candidates={"SGDM": 0.05, "Adam": 1e-3}, cycle=10)
        for x, y in batches:
            ctl.step(lambda: F.cross_entropy(model(x), y))

    Every ``cycle`` steps the controller describes the state (:func:`state_features`), chooses a
    candidate (weighted random for the first ``n_ini`` cycles, ``doit-eq-weights``; then the largest
    acquisition value, ``doit-eq-acq``), and, after the cycle, scores it (``doit-eq-score``) and
    adds ``(features, score)`` to that candidate's Gaussian-process surrogate.

    Args:
        model: the network being trained.
        candidates: ``{name: learning rate}``, names from
            :data:`~iclr_lab.optimizers.doit.method.OPTIMIZERS`; a sequence of names takes
            :data:`~iclr_lab.optimizers.doit.method.DEFAULT_RATES`; ``None`` takes all five at
            those rates.
        cycle: ``tau``, optimizer steps per cycle.
        n_ini: cold-start cycles chosen by weighted random sampling.
        halving: the halving period ``n`` of the exploration weight, in cycles.
        alpha: weight of the dispersion term of the score.
        omega_t: transferability weight in [0, 1]; 0 when training from scratch.
        omega_min: floor of the cold-start sampling weights, in (0, 1].
        acquisition: ``"intended"`` (exploration halves) or ``"literal"`` (the transcribed
            formula), see :func:`exploration_coefficient`.
        keep_state_if_same: keep the optimizer (and its state) when a cycle picks the candidate
            that ran the previous cycle; any switch starts from fresh state.
        feature_params: the weight matrices the features describe (default:
            :func:`feature_weights`).
        pca_components: ``k`` of :func:`state_features`.
        probe: ``probe(model) -> float``, a loss on a fixed batch. If given, the score uses it
            before the cycle and after every step; otherwise it uses the training losses (the
            last loss of the previous cycle as ``l_0``).
        seed: seed of the sampling generator (separate from any data shuffling).
    """

    def __init__(self, model: torch.nn.Module, candidates: Mapping[str, float] | Sequence[str] | None = None,
                 cycle: int = 25, n_ini: int = 10, *, halving: int = 10, alpha: float = 0.1,
                 omega_t: float = 0.0, omega_min: float = 0.1, acquisition: str = "intended",
                 keep_state_if_same: bool = True,
                 feature_params: Sequence[torch.Tensor] | None = None, pca_components: int = 2,
                 probe: Callable[[torch.nn.Module], float] | None = None, seed: int = 0) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.rates = _parse_candidates(candidates)
        self.names: tuple[str, ...] = tuple(self.rates)
        self.cycle = check_int("cycle", cycle, 1)
        self.n_ini = check_int("n_ini", n_ini, 0)
        self.halving = check_int("halving", halving, 1)
        self.alpha = check_range("alpha", alpha, 0.0)
        self.omega_t = check_range("omega_t", omega_t, 0.0, 1.0)
        self.omega_min = check_range("omega_min", omega_min, 0.0, 1.0, low_open=True)
        self.acquisition: Acquisition = check_choice("acquisition", acquisition, ACQUISITIONS)
        self.keep_state_if_same = bool(keep_state_if_same)
        self.pca_components = check_int("pca_components", pca_components, 1)
        self.feature_params = (list(feature_params) if feature_params is not None
                               else feature_weights(model))
        if probe is not None and not callable(probe):
            raise TypeError("probe must be a callable probe(model) -> float or None")
        self.probe = probe
        self.seed = check_int("seed", seed, 0, 2**32 - 1)
        self.rng = np.random.default_rng(self.seed)
        k = len(self.names)
        self.weights = np.ones(k)  # omega_r: cold-start sampling weights
        self.history: list[Cycle] = []
        self.optimizer: torch.optim.Optimizer | None = None
        self.current: str | None = None
        self.steps = 0
        self._pos = 0  # steps done in the current cycle
        self._last_loss = math.nan
        self._data: list[list[tuple[np.ndarray, float]]] = [[] for _ in range(k)]
        self._gps: list[Any] = [None] * k
        self._fitted_n = [-1] * k
        self._scale: tuple[np.ndarray, np.ndarray] | None = None

    # -- the loop -------------------------------------------------------------------------------

    def step(self, loss_fn: Callable[[], torch.Tensor]) -> float:
        """One optimizer step: ``zero_grad``, ``loss = loss_fn()``, ``backward``, ``step``.

        At a cycle boundary the controller first chooses the optimizer (:meth:`begin_cycle`); after
        the cycle's last step it scores the cycle and updates the surrogate. Returns the loss.
        """
        if self._pos == 0:
            self.begin_cycle()
        opt = self.optimizer
        assert opt is not None
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
        return self.after_step(float(loss.detach()))

    def after_step(self, value: float, probe_loss: float | None = None) -> float:
        """The bookkeeping of :meth:`step` after its optimizer step: count the step, record the
        cycle's loss (the probe's, or the training loss ``value`` without a probe) and, after the
        cycle's last step, score the cycle. A loop that steps the model itself (the chapter trains
        many runs at once) calls :meth:`begin_cycle` at a cycle boundary, steps
        ``current`` at its rate, then calls this; ``probe_loss``, if given, is the probe's loss
        already computed on the stepped model. Returns ``value``."""
        self.steps += 1
        self._pos += 1
        rec = self.history[-1]
        if math.isnan(rec.l0):  # first cycle without a probe: no earlier loss to compare with
            rec.l0 = value
        if self.probe is not None:
            rec.losses.append(float(self.probe(self.model)) if probe_loss is None else float(probe_loss))
        else:
            rec.losses.append(value)
        self._last_loss = value
        if self._pos == self.cycle:
            self._end_cycle()
        return value

    def begin_cycle(self) -> Cycle:
        """Start a cycle now: describe the state, choose the candidate, build its optimizer if this is
        a switch. :meth:`step` calls it; call it yourself only to inspect a choice before stepping."""
        if self._pos != 0:
            raise RuntimeError(f"a cycle is running ({self._pos} of {self.cycle} steps done)")
        if self.history and math.isnan(self.history[-1].score):
            return self.history[-1]  # begun but no step taken yet
        i = len(self.history)
        x = self.features()
        j, phase, mu, sigma, acq, coef = self._decide(i, x)
        name = self.names[j]
        switched = name != self.current
        if switched or not self.keep_state_if_same or self.optimizer is None:
            self.optimizer = self.new_optimizer(name)
        self.current = name
        l0 = float(self.probe(self.model)) if self.probe is not None else self._last_loss
        rec = Cycle(i, self.steps, name, phase, switched, x, self.weights.copy(), mu, sigma, acq,
                    coef, l0)
        self.history.append(rec)
        return rec

    def new_optimizer(self, name: str) -> torch.optim.Optimizer:
        """A fresh optimizer for candidate ``name`` over ``model.parameters()``."""
        check_choice("name", name, self.names)
        return make_optimizer(name, self.model.parameters(), self.rates[name])

    def features(self) -> np.ndarray:
        """The surrogate input for the current state (:func:`state_features`)."""
        return state_features(self.feature_params, self.pca_components)

    def _end_cycle(self) -> None:
        rec = self.history[-1]
        rec.score = score(rec.l0, rec.losses, self.alpha)
        j = self.names.index(rec.choice)
        self._data[j].append((rec.features, rec.score))
        self.weights[j] = max((rec.score + 1.0) / 2.0, self.omega_min)
        self._pos = 0

    # -- the decision ---------------------------------------------------------------------------

    def in_cold_start(self, cycle: int) -> bool:
        """Whether cycle ``cycle`` is chosen by weighted random sampling."""
        return cycle < self.n_ini

    def _decide(self, i: int, x: np.ndarray) -> tuple[int, str, np.ndarray, np.ndarray, np.ndarray, float]:
        k = len(self.names)
        nan = np.full(k, math.nan)
        if self.in_cold_start(i):
            j = int(self.rng.choice(k, p=self.weights / self.weights.sum()))
            return j, "cold start", nan, nan.copy(), nan.copy(), math.nan
        if self._scale is None:  # frozen at the end of the cold start, so GP inputs stay comparable
            self._scale = self._feature_scale()
        mu, sigma = self.predict(x)
        coef = exploration_coefficient(i, self.halving, self.omega_t, self.acquisition)
        acq = acquisition_values(mu, sigma, coef)
        return int(np.argmax(acq)), "acquisition", mu, sigma, acq, coef

    def _feature_scale(self) -> tuple[np.ndarray, np.ndarray]:
        feats = np.array([c.features for c in self.history] or [self.features()])
        sd = feats.std(axis=0)
        return feats.mean(axis=0), np.where(sd > 1e-8, sd, 1.0)

    def _scaled(self, x: np.ndarray) -> np.ndarray:
        mean, sd = self._scale if self._scale is not None else self._feature_scale()
        return np.atleast_2d((np.asarray(x, dtype=float) - mean) / sd)

    def surrogate(self, name: str) -> Any:
        """The fitted :class:`~sklearn.gaussian_process.GaussianProcessRegressor` of candidate
        ``name`` (unfitted, i.e. the prior, while it has no data)."""
        j = self.names.index(check_choice("name", name, self.names))
        self._fit(j)
        return self._gps[j]

    def _fit(self, j: int) -> None:
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import Matern, WhiteKernel

        n = len(self._data[j])
        frozen = self._scale is not None
        if self._gps[j] is not None and frozen and self._fitted_n[j] == n:
            return
        # Matern-5/2 plus white noise; bounded hyper-parameters, because maximum likelihood on a
        # handful of points otherwise drives the length scale to an extreme. Inputs are standardised
        # (frozen scale) and targets normalised by the regressor. A refit starts from the previous
        # fit's hyper-parameters: one more point moves the optimum little, and this saves time.
        previous = self._gps[j]
        kernel = (previous.kernel_ if previous is not None and hasattr(previous, "kernel_")
                  else Matern(length_scale=1.0, length_scale_bounds=(0.1, 10.0), nu=2.5)
                  + WhiteKernel(noise_level=0.1, noise_level_bounds=(1e-3, 1.0)))
        gp = GaussianProcessRegressor(kernel=kernel, normalize_y=True, n_restarts_optimizer=0,
                                      random_state=0)
        if n:
            xs = np.vstack([self._scaled(x) for x, _ in self._data[j]])
            ys = np.array([s for _, s in self._data[j]])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # hyper-parameters at a bound are expected here
                gp.fit(xs, ys)
        self._gps[j] = gp
        self._fitted_n[j] = n if frozen else -1

    def predict(self, x: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every candidate's surrogate mean ``mu_j`` and standard deviation ``sigma_j`` of the score
        at features ``x`` (default: the current state). A candidate without data returns the GP
        prior (mean 0, standard deviation about 1), so it looks worth exploring."""
        x = self.features() if x is None else np.asarray(x, dtype=float)
        xs = self._scaled(x)
        mu, sd = np.empty(len(self.names)), np.empty(len(self.names))
        for j in range(len(self.names)):
            self._fit(j)
            m, s = self._gps[j].predict(xs, return_std=True)
            mu[j], sd[j] = float(np.ravel(m)[0]), float(np.ravel(s)[0])
        return mu, sd

    def history_frame(self) -> pd.DataFrame:
        """One row per cycle: ``cycle``, ``start_step``, ``choice``, ``phase``, ``switched``,
        ``coefficient``, ``l0``, ``final_loss``, ``score``, and per candidate ``mu[name]``,
        ``sigma[name]``, ``acq[name]`` and ``weight[name]`` (the sampling weight before the choice)."""
        import pandas as pd

        rows = []
        for c in self.history:
            row: dict[str, Any] = {"cycle": c.index, "start_step": c.start_step, "choice": c.choice,
                                   "phase": c.phase, "switched": c.switched,
                                   "coefficient": c.coefficient, "l0": c.l0,
                                   "final_loss": c.losses[-1] if c.losses else math.nan,
                                   "score": c.score}
            for j, n in enumerate(self.names):
                row.update({f"mu[{n}]": c.mu[j], f"sigma[{n}]": c.sigma[j], f"acq[{n}]": c.acq[j],
                            f"weight[{n}]": c.weights[j]})
            rows.append(row)
        return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# a ready-made training loop on a classification split
# ---------------------------------------------------------------------------------------------


def _check_batch(x: Any, y: Any) -> None:
    """``x``: a finite tensor of ``n >= 1`` examples (2 or more dimensions); ``y``: their ``n``
    integer class labels."""
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    check_array("x", x)
    if x.ndim < 2:
        raise ValueError(f"x must have a batch dimension and a feature dimension (2 or more "
                         f"dimensions), got shape {tuple(x.shape)}")
    check_array("y", y, shape=(x.shape[0],))
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
        raise TypeError(f"y must be an integer tensor of class labels, got dtype {y.dtype}")


def cross_entropy_closure(model: torch.nn.Module, x: torch.Tensor,
                          y: torch.Tensor) -> Callable[[], torch.Tensor]:
    """``loss_fn`` for :meth:`DOIT.step`: the cross-entropy of ``model`` on the batch ``(x, y)``.

    ``x`` is a finite, non-empty tensor of examples (batch first), ``y`` the integer class labels,
    one per example.
    """
    _check_batch(x, y)
    return lambda: nn.functional.cross_entropy(model(x), y)


def probe_fn(x: torch.Tensor, y: torch.Tensor) -> Callable[[torch.nn.Module], float]:
    """``probe(model)``: the mean cross-entropy of ``model`` on the fixed batch ``(x, y)`` (checked
    as by :func:`cross_entropy_closure`)."""
    _check_batch(x, y)

    def probe(model: torch.nn.Module) -> float:
        with torch.no_grad():
            return float(nn.functional.cross_entropy(model(x), y))

    return probe


def train_with_doit(model: torch.nn.Module, data: Split, *, steps: int, batch_size: int = 64,
                    eval_every: int = 25, probe_size: int = 256, seed: int = 0,
                    **doit_kwargs: Any) -> tuple[DOIT, pd.DataFrame]:
    """Train ``model`` on ``data`` (cross-entropy, minibatches) with a :class:`DOIT` controller.

    The score uses a fixed probe batch of ``probe_size`` training examples (0: the training
    losses). ``doit_kwargs`` go to :class:`DOIT` (``candidates``, ``cycle``, ``n_ini``, ...), whose
    ``seed`` is ``seed`` too. ``steps``, ``batch_size`` and ``eval_every`` are at least 1,
    ``probe_size`` in ``[0, n_train]`` and ``seed`` in ``[0, 2**32 - 1]``. Returns the controller
    (its ``history`` holds every cycle) and a log with one row per evaluation: ``step``,
    ``train_loss``, ``test_loss``, ``test_acc``, ``optimizer`` (the one that ran the step).
    """
    import pandas as pd

    from iclr_lab.core.nn import evaluate
    from iclr_lab.core.progress import progress

    check_int("steps", steps, 1)
    check_int("batch_size", batch_size, 1)
    check_int("eval_every", eval_every, 1)
    check_seed(seed)
    xtr, ytr = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    xte, yte = torch.from_numpy(data.x_test), torch.from_numpy(data.y_test)
    check_int("probe_size", probe_size, 0, len(ytr))
    probe = None
    if probe_size:
        pick = torch.from_numpy(np.random.default_rng([seed, 1]).choice(len(ytr), probe_size,
                                                                        replace=False))
        probe = probe_fn(xtr[pick], ytr[pick])
    ctl = DOIT(model, probe=probe, seed=seed, **doit_kwargs)
    rows = []
    for step, idx in enumerate(progress(batch_indices(len(ytr), steps, batch_size, seed),
                                        desc="DOIT", total=steps), start=1):
        loss = ctl.step(cross_entropy_closure(model, xtr[idx], ytr[idx]))
        if step % eval_every == 0 or step == steps or not math.isfinite(loss):
            test_loss, test_acc = evaluate(model, xte, yte)
            rows.append({"step": step, "train_loss": loss, "test_loss": test_loss,
                         "test_acc": test_acc, "optimizer": ctl.current})
        if not math.isfinite(loss):
            break
    return ctl, pd.DataFrame(rows)
