"""Every optimizer the package exports behaves like a ``torch.optim`` citizen (issue 6).

The suite is parametrized over every :class:`torch.optim.Optimizer` subclass named in the
``__all__`` of a part of the package (``iclr_lab.optimizers``, and ``iclr_lab.distributed`` and the
others once they exist), so a chapter's optimizer joins it by being exported from its part. It checks,
in the spirit of PyTorch's own ``OptimizerInfo`` tests, and bit for bit wherever PyTorch's optimizers
are bit-exact:

* a complex parameter behaves exactly like its ``torch.view_as_real`` twin;
* ``copy.deepcopy`` and pickling keep every public attribute, and the copy continues identically;
* the state dict round-trips into an optimizer built with other options, and training continues
  identically; options the class adds to torch's, missing from a state dict, take the optimizer's
  own defaults;
* ``foreach=True`` equals ``foreach=False`` where the option exists;
* LR schedulers move the rate the optimizer uses (and the gate, if any, acts on top of it);
* step hooks fire once per step, and a closure's loss is returned;
* zero gradients and parameters without gradients are handled;
* a param group added later trains like a group present from the start, and per-group public
  attributes follow the number of groups at once;
* ``torch.save`` / ``torch.load(weights_only=True)`` round-trip the state dict;
* every bad argument (in the constructor or in a param group) raises an error naming it; an infinite
  value is either rejected or has a defined, finite limit.

An optimizer needs no registration: a class without an entry in ``CONFIGS`` runs with its defaults
(plus ``lr``), and the argument checks are derived from its constructor's signature.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import io
import math
import pickle
import pkgutil
import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import iclr_lab

torch.set_num_threads(1)


# --- discovery ------------------------------------------------------------------------------------

def exported_optimizers() -> dict[str, type[torch.optim.Optimizer]]:
    """``{qualified name: class}`` for every Optimizer subclass in a part's ``__all__``.

    Parts are the subpackages of :mod:`iclr_lab` other than ``core``; a part that does not exist
    yet is simply not found. Names are read with ``getattr`` so lazily exported optimizers count; a
    name whose chapter module does not exist yet (a lazy export planned ahead) is skipped, while any
    other import error surfaces.
    """
    found: dict[str, type[torch.optim.Optimizer]] = {}
    for info in sorted(pkgutil.iter_modules(iclr_lab.__path__, "iclr_lab."), key=lambda i: i.name):
        if not info.ispkg or info.name == "iclr_lab.core":
            continue
        part = importlib.import_module(info.name)
        for name in getattr(part, "__all__", ()):
            try:
                obj = getattr(part, name)
            except ModuleNotFoundError as err:
                if (err.name or "").startswith("iclr_lab."):
                    continue
                raise
            if inspect.isclass(obj) and issubclass(obj, torch.optim.Optimizer):
                found.setdefault(f"{obj.__module__}.{obj.__qualname__}", obj)
    return found


OPTIMIZERS = exported_optimizers()

#: Constructor keywords per class name; the first entry is the main configuration. They switch on
#: what makes the optimizer differ from its torch base (here: a gate that is active but not saturated
#: on the test problem, and the less common options), so that every check below can fail.
CONFIGS: dict[str, list[dict[str, Any]]] = {
    "VRAdam": [
        {"lr": 1e-2, "betas": (0.8, 0.99), "weight_decay": 0.05, "beta3": 0.5, "lr_cutoff": 10.0},
        {"lr": 1e-2, "beta3": 0.2, "lr_cutoff": 10.0, "normgrad": True, "amsgrad": True,
         "maximize": True},
    ],
    "VRMomentum": [
        {"lr": 0.05, "beta": 0.8, "beta3": 0.5, "lr_cutoff": 10.0, "weight_decay": 0.05},
        {"lr": 0.05, "beta3": 0.5, "lr_cutoff": math.inf, "maximize": True},
    ],
    # no weight decay: torch's own Adam with coupled decay is not exact on complex parameters
    "DESLOC": [
        {"lr": 1e-2, "clip": 0.01, "sync_periods": (2, 3, 4)},
        {"lr": 1e-2, "clip": 0.01, "sync_periods": (2, math.inf, math.inf), "reset_states": True,
         "amsgrad": True, "maximize": True},
    ],
}
DEFAULT_CONFIG: dict[str, Any] = {"lr": 1e-2}

#: Arguments that must be rejected beyond the ones derived from the signature (NaN, wrong types).
EXTRA_BAD_ARGUMENTS: dict[str, list[tuple[str, Any]]] = {
    "VRAdam": [("lr", -1e-3), ("lr", math.inf), ("betas", (1.0, 0.999)), ("betas", (0.9, -0.1)),
               ("betas", (0.9,)), ("eps", -1e-8), ("weight_decay", -0.1), ("beta3", -1.0),
               ("beta3", math.inf), ("lr_cutoff", -1.0)],
    "VRMomentum": [("lr", -1e-3), ("lr", math.inf), ("beta", 1.0), ("beta", -0.1),
                   ("weight_decay", -0.1), ("beta3", -1.0), ("beta3", math.inf), ("lr_cutoff", -1.0)],
}


def _cases(with_configs: bool = True) -> list[Any]:
    cases = []
    for cls in OPTIMIZERS.values():
        configs = CONFIGS.get(cls.__name__, [DEFAULT_CONFIG]) if with_configs else [None]
        for i, config in enumerate(configs):
            ident = cls.__name__ if not with_configs else f"{cls.__name__}-{i}"
            cases.append(pytest.param(cls, config, id=ident))
    return cases


CASES = _cases()
CLASSES = [pytest.param(cls, id=cls.__name__) for cls in OPTIMIZERS.values()]


def test_discovery_finds_the_package_optimizers():
    names = {cls.__name__ for cls in OPTIMIZERS.values()}
    assert {"VRAdam", "VRMomentum"} <= names
    for cls in OPTIMIZERS.values():
        assert cls.__name__ in CONFIGS or "lr" in inspect.signature(cls).parameters


# --- the test problem -----------------------------------------------------------------------------

#: The first tensor is cut into two views by VRAdam's blocked CPU step (> 2**17 elements).
SHAPES = [(140_000,), (17, 5), (5,)]


def _leaf(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().requires_grad_(True)


def _params(dtype: torch.dtype = torch.float32, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [_leaf(torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)) for shape in SHAPES]


def _clone(params: list[torch.Tensor]) -> list[torch.Tensor]:
    return [_leaf(p) for p in params]


def _noise(shape: torch.Size, dtype: torch.dtype, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        real = torch.randn((*shape, 2), generator=gen, dtype=torch.float64).to(dtype.to_real())
        return torch.view_as_complex(real)
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)


def _grads(params: list[torch.Tensor], t: int, scale: float = 1e-2) -> list[torch.Tensor]:
    """Deterministic gradients of step ``t`` that depend on the parameters (so errors propagate)."""
    return [scale * (0.5 * p.detach() + _noise(p.shape, p.dtype, 1000 * t + i))
            for i, p in enumerate(params)]


GradFn = Callable[[list[torch.Tensor], int], list[torch.Tensor | None]]


def _train(opt: torch.optim.Optimizer, params: list[torch.Tensor], steps: int, start: int = 0,
           grad_fn: GradFn = _grads) -> None:
    for t in range(start, start + steps):
        for p, g in zip(params, grad_fn(params, t), strict=True):
            p.grad = g
        opt.step()


def _params_of(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for group in opt.param_groups for p in group["params"]]


def _same(a: Any, b: Any) -> bool:
    """Exact equality of nested values (NaN equals NaN; tensors bit for bit)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def _assert_params_equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    for p, q in zip(a, b, strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=0, equal_nan=True)


def _public(opt: torch.optim.Optimizer) -> dict[str, Any]:
    """Public attributes other than the state and the param groups (compared via state_dict).

    ``torch.optim.Optimizer.__setstate__`` adds ``differentiable=False`` to ``defaults`` when it is
    missing, so a copy may carry that one extra key; it is dropped here.
    """
    out = {k: v for k, v in vars(opt).items() if not k.startswith("_") and k not in ("state", "param_groups")}
    if out.get("defaults", {}).get("differentiable", None) is False:
        out["defaults"] = {k: v for k, v in out["defaults"].items() if k != "differentiable"}
    return out


def _assert_same_public(a: torch.optim.Optimizer, b: torch.optim.Optimizer) -> None:
    pa, pb = _public(a), _public(b)
    assert pa.keys() == pb.keys(), f"attributes lost or added: {set(pa) ^ set(pb)}"
    for key in pa:
        assert _same(pa[key], pb[key]), f"{key}: {pa[key]!r} != {pb[key]!r}"
    assert _same(a.state_dict(), b.state_dict())


# --- the checks -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("cls", "config"), CASES)
def test_gate_is_active_but_not_saturated_in_the_config(cls, config):
    """The configurations exercise the gate, so the comparisons below can detect a wrong gate."""
    params = _params()
    opt = cls(params, **config)
    if not hasattr(opt, "last_lr_ratio"):
        pytest.skip("no gate")
    ratios = []
    for t in range(6):
        _train(opt, params, 1, start=t)
        ratios.append(opt.last_lr_ratio)
    floor = 1.0 / (1.0 + opt.param_groups[0]["lr_cutoff"])
    assert all(floor + 0.01 < r < 0.99 for r in ratios), ratios


@pytest.mark.parametrize(("cls", "config"), CASES)
def test_complex_parameter_equals_its_view_as_real_twin(cls, config):
    gen = torch.Generator().manual_seed(3)
    zs = [_leaf(torch.randn(70_000, generator=gen, dtype=torch.complex64)),
          _leaf(torch.randn(3, 4, generator=gen, dtype=torch.complex64)),
          _leaf(torch.randn(6, generator=gen))]
    twins = [_leaf(torch.view_as_real(zs[0].detach())), _leaf(torch.view_as_real(zs[1].detach())),
             _leaf(zs[2])]

    def twin_grads(params: list[torch.Tensor], t: int) -> list[torch.Tensor | None]:
        as_complex = [torch.view_as_complex(params[0].detach()), torch.view_as_complex(params[1].detach()),
                      params[2].detach()]
        g = _grads(as_complex, t)
        return [torch.view_as_real(g[0]), torch.view_as_real(g[1]), g[2]]

    opt_c, opt_r = cls(zs, **config), cls(twins, **config)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. "Casting complex values to real discards ..."
        for t in range(5):
            _train(opt_c, zs, 1, start=t)
            _train(opt_r, twins, 1, start=t, grad_fn=twin_grads)
            for key, value in _public(opt_c).items():
                if key != "defaults":
                    assert _same(value, getattr(opt_r, key)), f"step {t}: {key} differs"
    _assert_params_equal([torch.view_as_real(zs[0]), torch.view_as_real(zs[1]), zs[2]], twins)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize(("cls", "config"), CASES)
def test_copies_keep_every_public_attribute_and_continue_identically(cls, config, how):
    params = _params()
    opt = cls(params, **config)
    _train(opt, params, 3)
    clone = copy.deepcopy(opt) if how == "deepcopy" else pickle.loads(pickle.dumps(opt))
    _assert_same_public(opt, clone)
    _train(opt, params, 3, start=3)
    _train(clone, _params_of(clone), 3, start=3)
    _assert_params_equal(params, _params_of(clone))
    _assert_same_public(opt, clone)


@pytest.mark.parametrize(("cls", "config"), CASES)
def test_state_dict_round_trip_then_identical_continuation(cls, config):
    params = _params()
    opt = cls(params, **config)
    _train(opt, params, 4)
    twins = _clone(params)
    other = cls(twins)  # built with the defaults: every option must come from the state dict
    other.load_state_dict(copy.deepcopy(opt.state_dict()))
    assert _same(opt.state_dict(), other.state_dict())
    for t in range(4, 8):
        _train(opt, params, 1, start=t)
        _train(other, twins, 1, start=t)
        for key in ("last_sq_norm", "last_lr_ratio", "last_lr_ratios"):
            if hasattr(opt, key):
                assert _same(getattr(opt, key), getattr(other, key))
    _assert_params_equal(params, twins)
    assert _same(opt.state_dict(), other.state_dict())


def _torch_base(cls: type) -> type:
    return next(b for b in cls.__mro__[1:] if b.__module__.startswith("torch.optim"))


@pytest.mark.parametrize(("cls", "config"), CASES)
def test_state_dict_without_the_class_own_options_takes_its_own_defaults(cls, config):
    """Keys that a state dict from torch's base class (or an older version) lacks are filled in
    from the optimizer being loaded into, never from constants."""
    params = _params()
    opt = cls(params, **config)
    _train(opt, params, 2)
    base = _torch_base(cls)
    base_keys = set() if base is torch.optim.Optimizer else set(base([_leaf(torch.zeros(1))]).defaults)
    own_keys = sorted(set(opt.defaults) - base_keys - {"lr"})
    assert own_keys or base is not torch.optim.Optimizer
    for key in own_keys:
        saved = copy.deepcopy(opt.state_dict())
        for group in saved["param_groups"]:
            del group[key]
        twins = _clone(params)
        target = cls(twins, **config)
        target.load_state_dict(saved)
        for group in target.param_groups:
            assert _same(group[key], target.defaults[key]), f"{key}: {group[key]!r}"
        _train(target, twins, 1, start=2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("cls", "config"), CASES)
def test_foreach_equals_the_for_loop(cls, config, dtype):
    if "foreach" not in inspect.signature(cls).parameters:
        pytest.skip("no foreach option")
    runs = []
    for foreach in (True, False):
        params = _params(dtype)
        opt = cls(params, **config, foreach=foreach)
        _train(opt, params, 6)
        runs.append((params, opt))
    (pa, oa), (pb, ob) = runs
    _assert_params_equal(pa, pb)
    for key in ("last_sq_norm", "last_lr_ratios"):
        if hasattr(oa, key):
            assert _same(getattr(oa, key), getattr(ob, key))


@pytest.mark.parametrize(("cls", "config"), CASES)
def test_lr_scheduler_moves_the_rate_the_gate_scales(cls, config):
    """A scheduler's ``lr`` is the rate the step uses (gate on top), and it is not overwritten."""
    def run(mode: str) -> list[torch.Tensor]:
        params = _params()
        opt = cls(params, **config)
        lr0 = opt.param_groups[0]["lr"]
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5) if mode == "sched" else None
        for t in range(5):
            if mode == "manual":
                for group in opt.param_groups:
                    group["lr"] = lr0 * 0.5**t
            _train(opt, params, 1, start=t)
            if sched is not None:
                assert opt.param_groups[0]["lr"] == pytest.approx(lr0 * 0.5**t, rel=1e-12)
                sched.step()
                assert opt.param_groups[0]["lr"] == sched.get_last_lr()[0]
        return params

    scheduled, manual, constant = run("sched"), run("manual"), run("constant")
    _assert_params_equal(scheduled, manual)
    assert any(not torch.equal(a, b) for a, b in zip(scheduled, constant, strict=True))


@pytest.mark.parametrize(("cls", "config"), CASES)
def test_step_hooks_fire_once_and_the_closure_loss_is_returned(cls, config):
    params = _params()
    opt = cls(params, **config)
    calls: list[str] = []
    opt.register_step_pre_hook(lambda *_: calls.append("pre"))
    opt.register_step_post_hook(lambda *_: calls.append("post"))

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = sum((p.float() ** 2).sum() for p in params)
        assert isinstance(loss, torch.Tensor)
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert isinstance(loss, torch.Tensor) and torch.isfinite(loss)
    assert calls == ["pre", "post"]
    opt.step(closure)
    assert calls == ["pre", "post"] * 2


@pytest.mark.parametrize(("cls", "config"), CASES)
def test_zero_gradients_and_parameters_without_gradients(cls, config):
    params = _params()
    frozen = params[1].detach().clone()
    opt = cls(params, **config)

    def grads(ps: list[torch.Tensor], t: int) -> list[torch.Tensor | None]:
        g: list[torch.Tensor | None] = list(_grads(ps, t))
        g[1] = None
        if t == 0:  # every gradient is zero at the first step: P_t = 0
            g[0] = torch.zeros_like(ps[0])
            g[2] = torch.zeros_like(ps[2])
        else:
            g[2] = torch.zeros_like(ps[2])
        return g

    _train(opt, params, 4, grad_fn=grads)
    assert torch.equal(params[1].detach(), frozen)
    assert len(opt.state.get(params[1], {})) == 0
    assert all(torch.isfinite(p).all() for p in params)
    for key in ("last_sq_norm", "last_lr_ratio"):
        if hasattr(opt, key):
            assert math.isfinite(getattr(opt, key))


@pytest.mark.parametrize(("cls", "config"), CASES)
def test_param_group_added_later_trains_like_one_present_from_the_start(cls, config):
    first, second = _params(seed=1), _params(seed=2)[1:]
    first_b, second_b = _clone(first), _clone(second)
    late = cls([{"params": first}], **config)
    early = cls([{"params": first_b}, {"params": second_b, "lr": 0.02}], **config)

    def without_second(ps: list[torch.Tensor], t: int) -> list[torch.Tensor | None]:
        return [*_grads(ps[:3], t), *([None] * (len(ps) - 3))]

    _train(late, first, 3, grad_fn=without_second)
    _train(early, first_b + second_b, 3, grad_fn=without_second)
    per_group = {k for k, v in _public(late).items() if isinstance(v, list) and len(v) == 1}
    late.add_param_group({"params": second, "lr": 0.02})
    for key in per_group:
        assert len(getattr(late, key)) == len(late.param_groups), f"{key} after add_param_group"
    assert _same(late.param_groups[1], early.param_groups[1] | {"params": second})
    _train(late, first + second, 3, start=3)
    _train(early, first_b + second_b, 3, start=3)
    _assert_params_equal(first + second, first_b + second_b)
    for key in per_group:
        assert len(getattr(late, key)) == len(late.param_groups)


@pytest.mark.parametrize(("cls", "config"), CASES)
def test_torch_save_and_weights_only_load_round_trip(cls, config):
    params = _params()
    opt = cls(params, **config)
    _train(opt, params, 3)
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    twins = _clone(params)
    other = cls(twins)
    other.load_state_dict(loaded)
    _train(opt, params, 3, start=3)
    _train(other, twins, 3, start=3)
    _assert_params_equal(params, twins)


# --- bad arguments --------------------------------------------------------------------------------

def _probes(cls: type) -> list[tuple[str, Any]]:
    """Bad values derived from the constructor's signature, plus the class's own list."""
    probes: list[tuple[str, Any]] = []
    for name, param in inspect.signature(cls).parameters.items():
        default = param.default
        if default is inspect.Parameter.empty or name == "params":
            continue
        if isinstance(default, bool) or (default is None and name in ("foreach", "fused")):
            probes.append((name, "yes"))
        elif isinstance(default, int | float):
            probes += [(name, math.nan), (name, "fast")]
        elif isinstance(default, tuple) and all(isinstance(x, float) for x in default):
            probes += [(name, (math.nan, *default[1:])), (name, (*default[:-1], math.nan)),
                       (name, (*default, *default))]
    return probes + EXTRA_BAD_ARGUMENTS.get(cls.__name__, [])


def _names(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w]){re.escape(name)}(?![a-zA-Z0-9_])")


@pytest.mark.parametrize("cls", CLASSES)
def test_every_bad_argument_raises_an_error_naming_it(cls):
    failures = []
    for where in ("constructor", "param group"):
        for name, value in _probes(cls):
            params = _params()[1:]
            try:
                if where == "constructor":
                    cls(params, **{name: value})
                else:
                    cls([{"params": params, name: value}])
            except (ValueError, TypeError) as err:
                if not _names(name).search(str(err)):
                    failures.append(f"{where} {name}={value!r}: message {err!s} does not name it")
            else:
                failures.append(f"{where} {name}={value!r} accepted")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("cls", CLASSES)
def test_infinite_values_are_rejected_or_have_a_finite_limit(cls):
    """``inf`` for a float option either raises naming it, or training stays finite, including a
    first step with zero gradients (where ``inf * 0`` would be NaN)."""
    failures = []
    config = CONFIGS.get(cls.__name__, [DEFAULT_CONFIG])[0]
    for name, param in inspect.signature(cls).parameters.items():
        if isinstance(param.default, bool) or not isinstance(param.default, int | float):
            continue
        params = _params()
        try:
            opt = cls(params, **(config | {name: math.inf}))
        except (ValueError, TypeError) as err:
            if not _names(name).search(str(err)):
                failures.append(f"{name}=inf: message {err!s} does not name it")
            continue

        def grads(ps: list[torch.Tensor], t: int) -> list[torch.Tensor | None]:
            return [torch.zeros_like(p) for p in ps] if t == 0 else list(_grads(ps, t))

        _train(opt, params, 3, grad_fn=grads)
        if not all(torch.isfinite(p).all() for p in params):
            failures.append(f"{name}=inf accepted, and the parameters are no longer finite")
    assert not failures, "\n".join(failures)
