"""The VRAdam and VRMomentum optimizers (Vaidhyanathan, Schorling, Ares & Osborne, ICLR 2026).

The chapter is ``book/optimizers/vradam.md``; equations are cited by their label there.

* :class:`VRAdam`: AdamW whose learning rate is multiplied by a *global* gate that shrinks when the
  velocity (the first-moment buffer) is large (``vradam-eq-velocity``, ``vradam-eq-gate``,
  ``vradam-eq-update``). It subclasses :class:`torch.optim.AdamW`: ``lr`` stores the maximal rate
  ``alpha0``, so LR schedulers, state dicts and hooks work as for AdamW, and every step performs
  PyTorch's own Adam arithmetic with the gated rate (see :meth:`VRAdam.step` for the two ways it
  does so; both are checked to equal ``torch.optim.AdamW`` bit for bit when the gate is off).
* :class:`VRMomentum`: the same gate on EMA momentum without a second moment
  (``vradam-eq-vrmomentum``); the variant analysed by the paper's Theorem 4.1.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Literal, NamedTuple

import torch

from iclr_lab.core.validation import check_choice, check_range

__all__ = ["VRAdam", "VRMomentum", "gate"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)
#: dtypes of the blocked CPU step (complex ones run on their ``view_as_real`` twins).
_BLOCKED_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
#: elements per view of the blocked CPU step and of the CPU gate: three or four such views of
#: float32 (512 KiB each) stay in a 2 MiB L2 cache while every operation of the step runs over them.
_CPU_CHUNK = 1 << 17
#: elements per view of the gate on other devices (only to bound the temporary).
_DEVICE_CHUNK = 1 << 24

#: what a step does when a gradient holds a NaN or infinite entry (the ``nonfinite`` option)
_NONFINITE: tuple[str, ...] = ("propagate", "skip", "raise")

#: defaults of the VRAdam-only keys, also used for state dicts and pickles that lack them.
_VRADAM_KEYS: dict[str, Any] = {"beta3": 1.0, "lr_cutoff": 19.0, "normgrad": False,
                                "nonfinite": "propagate"}
_PUBLIC_ATTRIBUTES = ("last_sq_norm", "last_lr_ratio", "last_lr_ratios", "skipped_steps")


def gate(sq_norm: float, beta3: float, lr_cutoff: float) -> float:
    """The learning-rate ratio ``eta_t / alpha0 = 1 / (1 + min(beta3 * P_t, alpha1))`` (``vradam-eq-gate``).

    ``sq_norm`` is ``P_t``, the squared velocity norm summed over all parameters. The ratio lies in
    ``[1 / (1 + lr_cutoff), 1]``; it is exactly 1 when ``beta3 = 0`` or ``lr_cutoff = 0`` (whatever
    ``P_t`` is, even infinite), so both switch the gate off.

    Args:
        sq_norm: ``P_t``, in ``[0, inf]`` (an overflowed ``P_t = inf`` gives the floor of the gate).
        beta3: the velocity penalty, in ``[0, inf)``.
        lr_cutoff: the cap ``alpha1``, in ``[0, inf]``.

    Raises:
        ValueError: an argument is NaN or outside its range (NaN has no gate: see ``nonfinite`` of
            :class:`VRAdam` for what the optimizers do with a NaN gradient).
    """
    return _gate(check_range("sq_norm", sq_norm, 0, math.inf, high_open=False),
                 check_range("beta3", beta3, 0, math.inf, high_open=True),
                 check_range("lr_cutoff", lr_cutoff, 0, math.inf, high_open=False))


def _gate(sq_norm: float, beta3: float, lr_cutoff: float) -> float:
    """:func:`gate` without the argument checks, for the optimizers' steps (their options were
    checked when set; a NaN ``P_t`` from a NaN gradient gives a NaN ratio, see ``nonfinite``)."""
    if beta3 == 0.0 or lr_cutoff == 0.0:
        return 1.0
    return 1.0 / (1.0 + min(beta3 * sq_norm, lr_cutoff))


# ---------------------------------------------------------------------------------------------
# P_t, chunk by chunk
# ---------------------------------------------------------------------------------------------

def _real(t: torch.Tensor) -> torch.Tensor:
    """``t``, or its ``view_as_real`` twin when complex (what every computation here runs on)."""
    return torch.view_as_real(t) if t.is_complex() else t


def _chunk_size(t: torch.Tensor) -> int:
    return _CPU_CHUNK if t.device.type == "cpu" else _DEVICE_CHUNK


def _chunks(t: torch.Tensor, chunk: int) -> list[torch.Tensor]:
    """Flat views of ``_real(t)`` of at most ``chunk`` elements, cut at multiples of ``chunk``.

    A tensor that is not contiguous is its own single chunk. The blocked step and the gate both cut
    tensors with this function, so they take the norms of the same views.
    """
    r = _real(t)
    if not r.is_contiguous():
        return [r]
    flat = r.view(-1)
    return [flat] if flat.numel() <= chunk else list(flat.split(chunk))


def _sq_norms(views: list[torch.Tensor]) -> list[torch.Tensor]:
    """``||v||^2`` of every view, as a 0-d tensor: ``torch.dot(v, v)``.

    A BLAS dot product is both faster and more precise than ``torch.linalg.vector_norm`` in float32
    (relative error about 1e-7 against 1e-6 on a chunk of 2**17 elements). Half-precision views are
    widened to float32 first (a temporary of one chunk).
    """
    out = []
    for v in views:
        flat = v.reshape(-1)
        if flat.dtype in _LOW_PRECISION:
            flat = flat.float()
        out.append(torch.dot(flat, flat))
    return out


def _total(squares: list[torch.Tensor]) -> float:
    """The sum of the squared norms, in float64."""
    if not squares:
        return 0.0
    return float(torch.stack(squares).to(torch.float64).sum())


def _velocity_sq_norm(ms: list[torch.Tensor | None], gs: list[torch.Tensor], beta1: float, *,
                      maximize: bool = False) -> list[torch.Tensor]:
    """Squared norms of the chunks of the *next* velocity ``lerp(m, g, 1 - beta1)``, for ``P_t``.

    ``m`` is the current ``exp_avg`` (``None`` before the first step, i.e. zero) and ``g`` the
    gradient (negated for ``maximize``). Each chunk of the new velocity is computed with the very
    operation AdamW uses to update its buffer (``lerp``), into a temporary the size of one chunk,
    so ``P_t`` is the squared norm of exactly the values AdamW is about to store; no full-size
    temporary is allocated. Complex tensors are read through ``view_as_real``.
    """
    weight = 1.0 - beta1
    squares: list[torch.Tensor] = []
    for m, g in zip(ms, gs, strict=True):
        chunk = _chunk_size(g)
        g_chunks = _chunks(g, chunk)
        m_chunks = _chunks(m, chunk) if m is not None else [torch.zeros_like(c) for c in g_chunks]
        if len(m_chunks) != len(g_chunks):  # different layouts: take each tensor whole
            m_chunks = [_real(m) if m is not None else torch.zeros_like(_real(g))]
            g_chunks = [_real(g)]
        for mc, gc in zip(m_chunks, g_chunks, strict=True):
            squares += _sq_norms([torch.lerp(mc, gc.neg() if maximize else gc, weight)])
    return squares


# ---------------------------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------------------------

def _check_flag(name: str, value: Any, *, allow_none: bool = False) -> bool | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, bool):
        allowed = "True, False or None" if allow_none else "True or False"
        raise TypeError(f"{name} must be {allowed}, got {type(value).__name__} {value!r}")
    return value


def _check_betas(betas: Any) -> tuple[float, float]:
    try:
        pair = tuple(betas)
    except TypeError:
        raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}") from None
    if len(pair) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
    return (check_range("betas[0]", pair[0], 0, 1, high_open=True),
            check_range("betas[1]", pair[1], 0, 1, high_open=True))


def _check_rates(lr: Any, beta3: Any, lr_cutoff: Any, weight_decay: Any) -> tuple[float, ...]:
    """``lr``, ``beta3`` and ``weight_decay`` in ``[0, inf)``; ``lr_cutoff`` in ``[0, inf]``.

    ``beta3 = inf`` is rejected: with ``P_t = 0`` the gate would be ``inf * 0 = nan``.
    """
    return (check_range("lr", lr, 0, math.inf, high_open=True),
            check_range("beta3", beta3, 0, math.inf, high_open=True),
            check_range("lr_cutoff", lr_cutoff, 0, math.inf, high_open=False),
            check_range("weight_decay", weight_decay, 0, math.inf, high_open=True))


def _check_group(group: dict[str, Any], checks: dict[str, Callable[[Any], Any]]) -> None:
    """Validate the options a param group sets itself (the defaults were checked already)."""
    for key, check in checks.items():
        if key in group:
            check(group[key])


def _nonnegative(name: str) -> Callable[[Any], float]:
    """A check of ``value in [0, inf)`` naming ``name``."""
    return lambda value: check_range(name, value, 0, math.inf, high_open=True)


def _check_nonfinite(value: Any) -> str:
    return str(check_choice("nonfinite", value, _NONFINITE))


_GROUP_CHECKS: dict[str, Callable[[Any], Any]] = {
    "lr": _nonnegative("lr"),
    "beta3": _nonnegative("beta3"),
    "lr_cutoff": lambda v: check_range("lr_cutoff", v, 0, math.inf, high_open=False),
    "weight_decay": _nonnegative("weight_decay"),
    "maximize": lambda v: _check_flag("maximize", v),
    "foreach": lambda v: _check_flag("foreach", v, allow_none=True),
    "nonfinite": _check_nonfinite,
}
_VRADAM_GROUP_CHECKS = {**_GROUP_CHECKS,
                        "betas": _check_betas,
                        "eps": _nonnegative("eps"),
                        "amsgrad": lambda v: _check_flag("amsgrad", v),
                        "fused": lambda v: _check_flag("fused", v, allow_none=True),
                        "normgrad": lambda v: _check_flag("normgrad", v)}
_VRMOMENTUM_GROUP_CHECKS = {**_GROUP_CHECKS,
                            "beta": lambda v: check_range("beta", v, 0, 1, high_open=True)}


def _reject_sparse(name: str, param_groups: list[dict[str, Any]]) -> None:
    for group in param_groups:
        for p in group["params"]:
            if p.grad is not None and p.grad.is_sparse:
                raise RuntimeError(f"{name} does not support sparse gradients; use dense gradients "
                                   "(e.g. nn.Embedding(sparse=False)) or torch.optim.SparseAdam")


# The gate's record (``last_sq_norm``, ``last_lr_ratio``, ``last_lr_ratios``): plain attributes that
# ``copy.deepcopy`` and pickling must keep. ``torch.optim.Optimizer.__getstate__`` keeps only
# ``defaults``, ``state`` and ``param_groups``, so both classes add the record to it, and fill it in
# for pickles made without it.

def _reset_record(opt: torch.optim.Optimizer, *, only_missing: bool = False) -> None:
    fresh: dict[str, Any] = {"last_sq_norm": math.nan, "last_lr_ratio": 1.0,
                             "last_lr_ratios": [1.0] * len(opt.param_groups), "skipped_steps": 0}
    for key, value in fresh.items():
        if not only_missing or key not in opt.__dict__:
            setattr(opt, key, value)


def _record(opt: torch.optim.Optimizer, sq_norm: float, ratios: list[float]) -> None:
    opt.__dict__.update(last_sq_norm=sq_norm, last_lr_ratios=ratios, last_lr_ratio=ratios[0])


def _note_new_group(opt: torch.optim.Optimizer) -> None:
    """A group added after construction has had no step yet: its ratio is 1.0, as before any step."""
    if "last_lr_ratios" in opt.__dict__:
        opt.__dict__["last_lr_ratios"] = [*opt.__dict__["last_lr_ratios"], 1.0]


def _with_record(opt: torch.optim.Optimizer, state: dict[str, Any]) -> dict[str, Any]:
    return {**state, **{key: opt.__dict__[key] for key in _PUBLIC_ATTRIBUTES if key in opt.__dict__}}


# A NaN gradient entry makes P_t NaN, hence the gate and every group's rate NaN: unlike AdamW, whose
# arithmetic is element-wise, one bad entry reaches every parameter. The ``nonfinite`` option says
# what to do instead; it is checked on the gradients before anything changes, because the blocked
# CPU step updates the moments before it knows P_t.

def _same_nonfinite(group: dict[str, Any], default: Any) -> None:
    """A param group may not set its own ``nonfinite``: the gate, and so the decision, is global."""
    if group.get("nonfinite", default) != default:
        raise ValueError(f"nonfinite must be the same for every param group (the gate, and so the "
                         f"decision to skip a step, is global): got {group['nonfinite']!r} for a group "
                         f"of an optimizer built with {default!r}")


def _nonfinite_mode(opt: torch.optim.Optimizer) -> str:
    """The strictest ``nonfinite`` of the param groups (they agree unless edited by hand)."""
    modes = [group.get("nonfinite", "propagate") for group in opt.param_groups]
    return max(modes, key=_NONFINITE.index, default="propagate")


def _grads_finite(opt: torch.optim.Optimizer) -> bool:
    return all(bool(torch.isfinite(p.grad).all()) for group in opt.param_groups
               for p in group["params"] if p.grad is not None)


def _refuse_step(opt: torch.optim.Optimizer, mode: str) -> None:
    """Raise (``"raise"``), or warn and record a skipped step (``"skip"``): the rate was 0."""
    name = type(opt).__name__
    if mode == "raise":
        raise FloatingPointError(f"{name}.step: a gradient holds NaN or infinite entries; nothing "
                                 "was changed (nonfinite='raise')")
    warnings.warn(f"{name}.step skipped: a gradient holds NaN or infinite entries, so the global "
                  "gate is undefined; parameters and state are unchanged (nonfinite='skip')",
                  RuntimeWarning, stacklevel=3)
    skipped = int(opt.__dict__.get("skipped_steps", 0)) + 1
    _record(opt, math.nan, [0.0] * len(opt.param_groups))
    opt.__dict__["skipped_steps"] = skipped


# ---------------------------------------------------------------------------------------------
# VRAdam
# ---------------------------------------------------------------------------------------------

class VRAdam(torch.optim.AdamW):
    r"""Velocity-Regularized Adam: AdamW with the global velocity gate (``vradam-eq-gate``).

    At step ``t``, with ``v_t = beta1 v_{t-1} + (1 - beta1) g_t`` the (raw, not bias-corrected)
    first moment (``vradam-eq-velocity``) and ``P_t = sum over all parameters of ||v_t||^2``, the step uses

        eta_t = lr / (1 + min(beta3 * P_t, lr_cutoff))

    in place of AdamW's ``lr``, for both the Adam step and the decoupled weight decay (``vradam-eq-update``).
    Everything else is :class:`torch.optim.AdamW`, with the same positional arguments, so
    ``VRAdam(params)`` with ``beta3=0`` (or ``lr_cutoff=0``) *is* ``AdamW(params)``, bit for bit.

    Implementation choices (see the chapter's "Implementation choice" box):

    * ``P_t`` is summed over **all** param groups (the official code sums per group; with one group
      the two agree). ``beta3`` and ``lr_cutoff`` are per-group keys applied to the global ``P_t``.
    * ``P_t`` is the squared norm of the buffer AdamW stores, computed from the same ``lerp``.
    * ``lr`` stores the maximal rate ``alpha0``, so LR schedulers scale ``alpha0`` and the gate acts on
      top of the schedule.
    * ``normgrad=True`` reproduces the option of the original code: ``P_t = sum ||g_t||^2`` (the raw
      minibatch gradient) instead of the velocity.
    * Complex parameters are treated as their ``torch.view_as_real`` twins, as AdamW treats them.

    Defaults, and where they come from:

    * ``lr=1e-3``, ``betas=(0.9, 0.999)``, ``eps=1e-8``: :class:`torch.optim.AdamW`'s, and the
      authors' (both of their files, and their sweeps). ``amsgrad=False``, ``maximize=False``: AdamW's.
    * ``weight_decay=0.01``: AdamW's default (and the authors' README example), so that VRAdam is a
      drop-in replacement for ``torch.optim.AdamW``. The authors' current class (``vradam.py``)
      defaults to ``1e-5``, their older ``VRADAM.py`` to 0.
    * ``beta3=1``: both of the authors' files (a reviewer reports ``beta3 = 1`` in all of the
      paper's experiments).
    * ``lr_cutoff=19`` (smallest rate ``lr / 20``): the authors' older ``VRADAM.py``, and the value
      the chapter uses throughout. Their current ``vradam.py`` uses 10. The paper's text (as the
      chapter's spec records it) gives no default: it defines ``alpha1`` through the smallest rate
      ``alpha0 / (1 + alpha1)``.
    * ``normgrad=False``: the paper (the velocity) and ``vradam.py``; ``VRADAM.py`` used True.
    * ``foreach=None``: on CPU, float32/float64 (and complex) parameters take the blocked foreach
      step (:meth:`step`); elsewhere AdamW chooses, as it does for itself.
    * ``nonfinite="propagate"``: like every ``torch.optim`` optimizer, VRAdam does not inspect the
      gradients, and the paper's and the authors' code have no such check (see below).

    NaN and infinite gradients. The gate couples all parameters: a single NaN gradient entry makes
    ``P_t`` NaN, hence ``eta_t`` NaN, and the step turns **every** parameter NaN (AdamW, whose
    arithmetic is element-wise, corrupts only the entries the NaN touches; the next forward pass
    usually spreads it from there). What a step does when any gradient holds a NaN or infinite
    entry is the option ``nonfinite``:

    * ``"propagate"`` (default): take the step anyway, as above. For finite gradients nothing is
      checked and the step is bit for bit the one without the option.
    * ``"skip"``: skip the whole step, as ``torch.amp.GradScaler`` skips a step whose gradients
      overflowed: parameters, moments and step counts stay as they were, a ``RuntimeWarning`` says
      so, ``skipped_steps`` counts it, and the record shows ``last_sq_norm = nan`` and a rate ratio
      of 0. Use it when an occasional bad batch (mixed precision, a loss spike) should not end the run.
    * ``"raise"``: raise ``FloatingPointError`` before anything changes (for debugging).

    With ``"skip"`` or ``"raise"`` every step first checks that all gradients are finite (one pass
    over them and one device synchronisation). An infinite ``P_t`` from finite gradients (an
    overflowed sum) is not a bad gradient: the gate is then at its floor ``1 / (1 + lr_cutoff)``.
    The option is optimizer-wide: a param group may not set a different value.

    Args:
        params: parameters or param groups, as for any ``torch.optim`` optimizer.
        lr: maximal learning rate ``alpha0`` (>= 0).
        betas: ``(beta1, beta2)``, each in [0, 1).
        eps: AdamW's epsilon (>= 0), added after the square root.
        weight_decay: decoupled weight decay (>= 0), multiplied by the gated rate.
        amsgrad: AdamW's AMSGrad variant.
        beta3: velocity penalty (>= 0, finite); ``beta3 = 0`` is exactly AdamW.
        lr_cutoff: cap ``alpha1`` on the penalty (>= 0, ``inf`` allowed); the smallest rate is
            ``lr / (1 + lr_cutoff)``; ``lr_cutoff = 0`` is exactly AdamW.
        normgrad: penalise ``||g_t||^2`` instead of ``||v_t||^2`` (original-code variant).
        maximize: maximise the objective, as in AdamW.
        foreach: ``False`` runs AdamW's for-loop step; ``None`` or ``True`` the blocked step on CPU.
        fused: run AdamW's fused kernel (the gate is computed first, as for ``foreach=False``).
        nonfinite: ``"propagate"``, ``"skip"`` or ``"raise"``: what a step does when a gradient
            holds a NaN or infinite entry (see above).

    Attributes:
        last_sq_norm: ``P_t`` of the last step (``nan`` before the first step, and for a skipped one).
        last_lr_ratio: ``eta_t / lr`` of the first param group at the last step (1.0 before; 0.0
            for a skipped step).
        last_lr_ratios: the same ratio for every param group (1.0 for a group added since).
        skipped_steps: steps skipped for non-finite gradients (``nonfinite="skip"``).
    """

    last_sq_norm: float
    last_lr_ratio: float
    last_lr_ratios: list[float]
    skipped_steps: int

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        beta3: float = _VRADAM_KEYS["beta3"],
        lr_cutoff: float = _VRADAM_KEYS["lr_cutoff"],
        normgrad: bool = False,
        maximize: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
        nonfinite: Literal["propagate", "skip", "raise"] = "propagate",
    ) -> None:
        lr, beta3, lr_cutoff, weight_decay = _check_rates(lr, beta3, lr_cutoff, weight_decay)
        b1, b2 = _check_betas(betas)
        eps = check_range("eps", eps, 0, math.inf, high_open=True)
        for name, flag in (("amsgrad", amsgrad), ("normgrad", normgrad), ("maximize", maximize)):
            _check_flag(name, flag)
        _check_flag("foreach", foreach, allow_none=True)
        _check_flag("fused", fused, allow_none=True)
        _check_nonfinite(nonfinite)
        if foreach and fused:
            raise ValueError("foreach and fused cannot both be True")
        # read by add_param_group while torch.optim.Optimizer.__init__ adds the groups
        self._vr_defaults = {"beta3": beta3, "lr_cutoff": lr_cutoff, "normgrad": normgrad,
                             "nonfinite": nonfinite}
        super().__init__(params, lr=lr, betas=(b1, b2), eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, foreach=foreach, fused=fused)
        self.defaults.update(self.__dict__.pop("_vr_defaults"))
        # The gate reads the gradients, so a GradScaler must unscale them before step().
        self._step_supports_amp_scaling = False
        _reset_record(self)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a param group (as :meth:`torch.optim.Optimizer.add_param_group`), checking its options."""
        if isinstance(param_group, dict):
            _check_group(param_group, _VRADAM_GROUP_CHECKS)
            extra = self.__dict__.get("_vr_defaults") or {k: self.defaults[k] for k in _VRADAM_KEYS}
            _same_nonfinite(param_group, extra["nonfinite"])
            for key, value in extra.items():
                param_group.setdefault(key, value)
        super().add_param_group(param_group)
        _note_new_group(self)

    def __getstate__(self) -> dict[str, Any]:
        return _with_record(self, super().__getstate__())

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        # A state dict (or pickle) without the VRAdam keys gets this optimizer's own defaults.
        own = {key: self.defaults.setdefault(key, default) for key, default in _VRADAM_KEYS.items()}
        for group in self.param_groups:
            for key, value in own.items():
                group.setdefault(key, value)
        _reset_record(self, only_missing=True)

    @torch.no_grad()
    def velocity_sq_norm(self) -> float:
        """``P_t`` (``vradam-eq-gate``) for the gradients now in ``.grad``, without changing any state.

        For each parameter with a gradient this is ``||beta1 m + (1 - beta1) g||^2`` where ``m`` is
        the current ``exp_avg`` (zero before the first step), i.e. the buffer AdamW is about to
        write; with ``normgrad`` it is ``||g||^2``. Summed over all param groups, in float64.
        """
        _reject_sparse("VRAdam", self.param_groups)
        squares: list[torch.Tensor] = []
        for group in self.param_groups:
            with_grad = [p for p in group["params"] if p.grad is not None]
            grads = [p.grad for p in with_grad if p.grad is not None]
            if group["normgrad"]:
                for g in grads:
                    squares += _sq_norms(_chunks(g, _chunk_size(g)))
            else:
                ms = [self.state[p].get("exp_avg") if p in self.state else None for p in with_grad]
                squares += _velocity_sq_norm(ms, grads, group["betas"][0], maximize=group["maximize"])
        return _total(squares)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One VRAdam step: compute the gate (``vradam-eq-gate``), then take AdamW's step with it.

        On CPU (float32/float64 parameters, ``foreach`` not False) the step runs PyTorch's foreach
        Adam operations in cache-sized blocks, moments first, so that ``P_t`` is read from the new
        buffer while it is in cache, then the parameter update with the gated rate: the same
        operations on the same values as ``torch.optim.AdamW(foreach=True)``. Otherwise ``P_t`` is
        computed first (:meth:`velocity_sq_norm`) and :meth:`torch.optim.AdamW.step` runs with
        ``group["lr"]`` set to ``eta_t`` and then restored. With ``nonfinite`` ``"skip"`` or
        ``"raise"``, a gradient with a NaN or infinite entry stops the step before any of this.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        _reject_sparse("VRAdam", self.param_groups)
        mode = _nonfinite_mode(self)
        if mode != "propagate" and not _grads_finite(self):
            _refuse_step(self, mode)
            return loss
        done = _blocked_adamw_step(self) if _blocked_step_allowed(self) else None
        if done is not None:
            sq_norm, ratios = done
        else:
            sq_norm = self.velocity_sq_norm()
            ratios = [_gate(sq_norm, group["beta3"], group["lr_cutoff"]) for group in self.param_groups]
            alphas = [group["lr"] for group in self.param_groups]
            try:
                for group, alpha0, ratio in zip(self.param_groups, alphas, ratios, strict=True):
                    group["lr"] = alpha0 * ratio
                _adamw_step(self)
            finally:
                for group, alpha0 in zip(self.param_groups, alphas, strict=True):
                    group["lr"] = alpha0
        _record(self, sq_norm, ratios)
        return loss


def _adamw_step(opt: torch.optim.AdamW) -> None:
    """Call ``torch.optim.AdamW.step`` without firing the optimizer step hooks a second time.

    ``torch.optim.Optimizer`` wraps each class's ``step`` once with a hook runner; VRAdam's own
    ``step`` is wrapped already, so the inner AdamW call goes to the unwrapped function.
    """
    step = torch.optim.AdamW.step
    if getattr(step, "hooked", False):
        step = step.__wrapped__  # type: ignore[attr-defined]
    step(opt)


def _is_compiling() -> bool:
    check = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(check()) if check is not None else False


def _blocked_step_allowed(opt: VRAdam) -> bool:
    """Whether the options allow :func:`_blocked_adamw_step` (which then checks the tensors)."""
    if _is_compiling() or getattr(opt, "grad_scale", None) is not None \
            or getattr(opt, "found_inf", None) is not None:
        return False
    for group in opt.param_groups:
        if group["foreach"] is False or group.get("fused") or group.get("capturable") \
                or group.get("differentiable") or not group.get("decoupled_weight_decay", True):
            return False
        if not all(isinstance(x, float | int) for x in (group["lr"], *group["betas"])):
            return False
    return True


class _Layout(NamedTuple):
    """How one param group's tensors are cut into blocks, kept while its tensors stay the same."""

    tensors: list[list[torch.Tensor]]  # params, exp_avgs, exp_avg_sqs(, max): held, so ids stay unique
    key: tuple[int, ...]  # their ids and data pointers
    split: list[tuple[bool, bool]]  # per parameter: (complex, cut into several chunks)
    owners: list[list[int]]  # per block: the parameter each view belongs to
    pieces: list[list[int]]  # per block: which chunk of that parameter each view is
    views: list[list[list[torch.Tensor]]]  # per block: views of params, exp_avgs, exp_avg_sqs(, max)


def _key(tensors: list[list[torch.Tensor]]) -> tuple[int, ...]:
    flat = [t for lst in tensors for t in lst]
    return (*map(id, flat), *[t.data_ptr() for t in flat])


def _layout(tensors: list[list[torch.Tensor]], key: tuple[int, ...]) -> _Layout | None:
    """Cut parallel lists (params, exp_avgs, exp_avg_sqs[, max_exp_avg_sqs]) into blocks of about
    ``_CPU_CHUNK`` elements; ``None`` if a tensor is not a contiguous CPU tensor of a blocked dtype."""
    for t in tensors[0]:
        if t.device.type != "cpu" or t.dtype not in _BLOCKED_DTYPES:
            return None
    if not all(t.is_contiguous() for lst in tensors for t in lst):
        return None
    split = [(p.is_complex(), _real(p).numel() > _CPU_CHUNK) for p in tensors[0]]
    layout = _Layout(tensors, key, split, [], [], [])
    filled = 0
    for i in range(len(tensors[0])):
        chunks = [_chunks(lst[i], _CPU_CHUNK) for lst in tensors]
        for j, piece in enumerate(chunks[0]):
            if filled == 0:
                layout.owners.append([])
                layout.pieces.append([])
                layout.views.append([[] for _ in tensors])
            layout.owners[-1].append(i)
            layout.pieces[-1].append(j)
            for acc, views in zip(layout.views[-1], chunks, strict=True):
                acc.append(views[j])
            filled += piece.numel()
            if filled >= _CPU_CHUNK:
                filled = 0
    return layout


def _grad_views(layout: _Layout, grads: list[torch.Tensor]) -> list[list[torch.Tensor]] | None:
    """The gradients cut as :func:`_chunks` cuts them, block by block; ``None`` if one is not
    contiguous."""
    chunks: list[Any] = []
    for g, (is_complex, several) in zip(grads, layout.split, strict=True):
        if not g.is_contiguous():
            return None
        flat = (torch.view_as_real(g) if is_complex else g).view(-1)
        chunks.append(flat.split(_CPU_CHUNK) if several else (flat,))
    return [[chunks[i][j] for i, j in zip(owners, pieces, strict=True)]
            for owners, pieces in zip(layout.owners, layout.pieces, strict=True)]


_ONE = torch.tensor(1.0)


@torch.no_grad()
def _blocked_adamw_step(opt: VRAdam) -> tuple[float, list[float]] | None:
    """The CPU step: ``torch.optim.AdamW(foreach=True)``'s operations, in blocks, gate in between.

    Phase 1, block by block: the moment updates of ``_multi_tensor_adam`` (``lerp_`` of ``exp_avg``,
    ``mul_`` and ``addcmul_`` of ``exp_avg_sq``), then the squared norm of the new ``exp_avg`` (or of
    the gradient, for ``normgrad``) while the block is still in cache. Then the gate. Phase 2, block
    by block: the decoupled weight decay and the parameter update (``sqrt``, ``div_``, ``add_``,
    ``addcdiv_``) with the gated rate. The operations are AdamW's, with the same scalars, on the
    same values (none of them mixes elements, so cutting tensors into views changes no bit); the
    order only moves the weight decay after the moments, which touch other tensors. Temporaries
    (the denominator, the negated gradient for ``maximize``) are one block in size. How tensors are
    cut is cached while they stay the same. Returns ``None``, having changed nothing but AdamW's
    lazy state initialisation, when a tensor does not qualify (not a contiguous float32/float64
    CPU tensor, or complex of those).
    """
    cache: dict[int, _Layout] = opt.__dict__.setdefault("_vr_layouts", {})
    plans = []
    for index, group in enumerate(opt.param_groups):
        params: list[torch.Tensor] = []
        grads: list[torch.Tensor] = []
        exp_avgs: list[torch.Tensor] = []
        exp_avg_sqs: list[torch.Tensor] = []
        max_exp_avg_sqs: list[torch.Tensor] = []
        steps: list[torch.Tensor] = []
        opt._init_group(group, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps)
        if not params:
            continue
        tensors = [params, exp_avgs, exp_avg_sqs] + ([max_exp_avg_sqs] if group["amsgrad"] else [])
        key = _key(tensors)
        layout = cache.pop(index, None)
        if layout is None or layout.key != key or not all(p.is_contiguous() for p in params):
            layout = _layout(tensors, key)
        grad_views = _grad_views(layout, grads) if layout is not None else None
        if layout is None or grad_views is None:
            return None
        cache[index] = layout
        plans.append((group, steps, layout, grad_views))

    squares: list[torch.Tensor] = []
    for group, steps, layout, grad_views in plans:
        torch._foreach_add_(steps, _ONE, alpha=1.0)
        beta1, beta2 = group["betas"]
        for (_p, m_, v_, *_), g_ in zip(layout.views, grad_views, strict=True):
            d_ = torch._foreach_neg(g_) if group["maximize"] else g_
            torch._foreach_lerp_(m_, d_, 1 - beta1)
            torch._foreach_mul_(v_, beta2)
            torch._foreach_addcmul_(v_, d_, d_, 1 - beta2)
            squares += [torch.dot(x, x) for x in (g_ if group["normgrad"] else m_)]
    sq_norm = _total(squares)
    ratios = [_gate(sq_norm, group["beta3"], group["lr_cutoff"]) for group in opt.param_groups]
    ratio_of = {id(group): ratio for group, ratio in zip(opt.param_groups, ratios, strict=True)}
    for group, steps, layout, _ in plans:
        lr = group["lr"] * ratio_of[id(group)]
        beta1, beta2 = group["betas"]
        weight_decay, eps = group["weight_decay"], group["eps"]
        counts = [s.item() for s in steps]
        step_size = [(lr / (1 - beta1 ** n)) * -1 for n in counts]
        bias_correction2_sqrt = [(1 - beta2 ** n) ** 0.5 for n in counts]
        for (p_, m_, v_, *max_v), owners in zip(layout.views, layout.owners, strict=True):
            if weight_decay != 0:
                torch._foreach_mul_(p_, 1 - lr * weight_decay)
            if max_v:
                torch._foreach_maximum_(max_v[0], v_)
            denom = torch._foreach_sqrt(max_v[0] if max_v else v_)
            torch._foreach_div_(denom, [bias_correction2_sqrt[i] for i in owners])
            torch._foreach_add_(denom, eps)
            torch._foreach_addcdiv_(p_, m_, denom, [step_size[i] for i in owners])
    return sq_norm, ratios


# ---------------------------------------------------------------------------------------------
# VRMomentum
# ---------------------------------------------------------------------------------------------

class VRMomentum(torch.optim.Optimizer):
    r"""Velocity-regularized EMA momentum (``vradam-eq-vrmomentum``): the variant analysed by
    Theorem 4.1 (``vradam-thm-stability``).

        v_t = beta v_{t-1} + (1 - beta) g_t,
        eta_t = lr / (1 + min(beta3 * sum ||v_t||^2, lr_cutoff)),
        theta_t = theta_{t-1} (1 - eta_t weight_decay) - eta_t v_t.

    With ``lr_cutoff = inf`` every step obeys ``||theta_t - theta_{t-1}|| <= lr / (2 sqrt(beta3))``
    (without weight decay), ``vradam-eq-stepbound``. ``beta3 = 0`` is plain EMA momentum.

    Defaults: ``beta = 0.9``, ``beta3 = 1`` and ``lr_cutoff = 19`` as for :class:`VRAdam`;
    ``weight_decay = 0`` because ``vradam-eq-vrmomentum`` has none; ``lr = 1e-2`` as in the
    package's first version (the theory fixes no rate); ``nonfinite = "propagate"``.

    As in :class:`VRAdam`, the gate is global, so one NaN gradient entry turns every parameter NaN;
    ``nonfinite`` says what a step does when a gradient holds a NaN or infinite entry:
    ``"propagate"`` (default: step anyway; finite gradients are not checked, and the step is bit
    for bit the one without the option), ``"skip"`` (leave parameters and velocities unchanged,
    warn with a ``RuntimeWarning`` and count the step in ``skipped_steps``) or ``"raise"`` (raise
    ``FloatingPointError`` before anything changes). It is optimizer-wide.

    Args:
        params: parameters or param groups.
        lr: maximal learning rate ``alpha0`` (>= 0).
        beta: EMA coefficient in [0, 1).
        beta3: velocity penalty (>= 0, finite).
        lr_cutoff: cap on the penalty (>= 0, ``inf`` allowed).
        weight_decay: decoupled weight decay (>= 0), multiplied by the gated rate.
        maximize: maximise the objective (the velocity averages ``-g``).
        foreach: ``False`` updates one tensor at a time; ``None`` or ``True`` uses foreach kernels.
            Both give the same numbers.
        nonfinite: ``"propagate"``, ``"skip"`` or ``"raise"`` (see above).

    Attributes:
        last_sq_norm: ``P_t`` of the last step (``nan`` before the first step, and for a skipped one).
        last_lr_ratio: ``eta_t / lr`` of the first param group at the last step (1.0 before; 0.0
            for a skipped step).
        last_lr_ratios: the same ratio for every param group (1.0 for a group added since).
        skipped_steps: steps skipped for non-finite gradients (``nonfinite="skip"``).
    """

    last_sq_norm: float
    last_lr_ratio: float
    last_lr_ratios: list[float]
    skipped_steps: int

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-2,
        beta: float = 0.9,
        beta3: float = 1.0,
        lr_cutoff: float = 19.0,
        weight_decay: float = 0.0,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        nonfinite: Literal["propagate", "skip", "raise"] = "propagate",
    ) -> None:
        lr, beta3, lr_cutoff, weight_decay = _check_rates(lr, beta3, lr_cutoff, weight_decay)
        beta = check_range("beta", beta, 0, 1, high_open=True)
        _check_flag("maximize", maximize)
        _check_flag("foreach", foreach, allow_none=True)
        _check_nonfinite(nonfinite)
        defaults = {"lr": lr, "beta": beta, "beta3": beta3, "lr_cutoff": lr_cutoff,
                    "weight_decay": weight_decay, "maximize": maximize, "foreach": foreach,
                    "nonfinite": nonfinite}
        super().__init__(params, defaults)
        _reset_record(self)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a param group (as :meth:`torch.optim.Optimizer.add_param_group`), checking its options."""
        if isinstance(param_group, dict):
            _check_group(param_group, _VRMOMENTUM_GROUP_CHECKS)
            _same_nonfinite(param_group, self.defaults["nonfinite"])
        super().add_param_group(param_group)
        _note_new_group(self)

    def __getstate__(self) -> dict[str, Any]:
        return _with_record(self, super().__getstate__())

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        # Options missing from a state dict (or an older pickle) take this optimizer's own defaults.
        self.defaults.setdefault("maximize", False)
        self.defaults.setdefault("foreach", None)
        self.defaults.setdefault("nonfinite", "propagate")
        own = {k: v for k, v in self.defaults.items() if k != "differentiable"}  # that one is torch's
        for group in self.param_groups:
            for key, value in own.items():
                group.setdefault(key, value)
        _reset_record(self, only_missing=True)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One VRMomentum step (``vradam-eq-vrmomentum``); with ``nonfinite`` ``"skip"`` or
        ``"raise"``, a gradient with a NaN or infinite entry stops it before anything changes."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        _reject_sparse("VRMomentum", self.param_groups)
        mode = _nonfinite_mode(self)
        if mode != "propagate" and not _grads_finite(self):
            _refuse_step(self, mode)
            return loss
        work: list[tuple[dict[str, Any], list[torch.Tensor], list[torch.Tensor]]] = []
        squares: list[torch.Tensor] = []
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            bufs = []
            for p in params:
                state = self.state[p]
                if "velocity" not in state:
                    state["velocity"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                bufs.append(_real(state["velocity"]))
            grads = [_real(p.grad) for p in params if p.grad is not None]
            if group["maximize"]:
                grads = list(torch._foreach_neg(grads))
            weight = 1.0 - group["beta"]
            if group["foreach"] is False:
                for buf, g in zip(bufs, grads, strict=True):
                    buf.lerp_(g, weight)
            else:
                torch._foreach_lerp_(bufs, grads, weight)
            squares += _sq_norms(bufs)
            work.append((group, [_real(p) for p in params], bufs))
        sq_norm = _total(squares)
        ratios = [_gate(sq_norm, group["beta3"], group["lr_cutoff"]) for group in self.param_groups]
        ratio_of = {id(group): ratio for group, ratio in zip(self.param_groups, ratios, strict=True)}
        for group, params, bufs in work:
            eta = group["lr"] * ratio_of[id(group)]
            if group["foreach"] is False:
                for p, buf in zip(params, bufs, strict=True):
                    if group["weight_decay"]:
                        p.mul_(1.0 - eta * group["weight_decay"])
                    p.add_(buf, alpha=-eta)
            else:
                if group["weight_decay"]:
                    torch._foreach_mul_(params, 1.0 - eta * group["weight_decay"])
                torch._foreach_add_(params, bufs, alpha=-eta)
        _record(self, sq_norm, ratios)
        return loss
