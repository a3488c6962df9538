"""Regression tests of the VRAdam / VRMomentum classes for issue 6 (defects 1-7) and the fast CPU step.

The generic torch.optim contract is in ``test_conformance.py``; these tests pin each defect of the
issue with the scenario it was reported with, and check the blocked CPU step against AdamW.
"""

from __future__ import annotations

import copy
import inspect
import math
import pickle
import warnings

import pytest
import torch

from iclr_lab.optimizers import VRAdam, VRMomentum
from iclr_lab.optimizers.vradam import optimizer as vro

torch.set_num_threads(1)

CLASSES = [VRAdam, VRMomentum]
BIG = vro._CPU_CHUNK + 1000  # a tensor the blocked step cuts into two views


def _leaf(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().requires_grad_(True)


def _params(dtype: torch.dtype = torch.float32, shapes=((BIG,), (33, 7), (7,)), seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return [_leaf(torch.randn(s, generator=gen, dtype=torch.float64).to(dtype)) for s in shapes]


def _grads(params, t: int, scale: float = 1e-2):
    out = []
    for i, p in enumerate(params):
        gen = torch.Generator().manual_seed(100 * t + i)
        out.append(scale * (0.5 * p.detach() + torch.randn(p.shape, generator=gen,
                                                          dtype=torch.float64).to(p.dtype)))
    return out


def _train(opt, params, steps, start=0, sign=1.0):
    for t in range(start, start + steps):
        for p, g in zip(params, _grads(params, t), strict=True):
            p.grad = sign * g
        opt.step()


def _equal(a, b) -> bool:
    return all(torch.equal(p.detach(), q.detach()) for p, q in zip(a, b, strict=True))


# --- defect 1: complex parameters --------------------------------------------------------------

@pytest.mark.parametrize("cls", CLASSES)
def test_defect1_complex_gate_is_the_norm_of_the_complex_velocity(cls):
    """The issue's example: from the second step on, P_t ignored the imaginary parts."""
    torch.manual_seed(0)
    z = torch.randn(8, dtype=torch.complex64, requires_grad=True)
    opt = cls([z])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Casting complex values to real discards the imaginary part"
        for _ in range(2):
            z.grad = torch.randn(8, dtype=torch.complex64)
            opt.step()
    buffer = opt.state[z]["exp_avg" if cls is VRAdam else "velocity"]
    assert opt.last_sq_norm == pytest.approx(float((buffer.abs() ** 2).sum()), rel=1e-6)


# --- defect 2: copies keep the gate's record ----------------------------------------------------

@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize("cls", CLASSES)
def test_defect2_copies_keep_the_gate_record(cls, how):
    params = _params(shapes=((20,), (3,)))
    opt = cls([{"params": params[:1]}, {"params": params[1:], "lr_cutoff": 0.5}], beta3=1e5)
    _train(opt, params, 2)
    clone = copy.deepcopy(opt) if how == "deepcopy" else pickle.loads(pickle.dumps(opt))
    assert clone.last_sq_norm == opt.last_sq_norm
    assert clone.last_lr_ratio == opt.last_lr_ratio
    assert clone.last_lr_ratios == opt.last_lr_ratios
    assert opt.last_lr_ratios[0] != opt.last_lr_ratios[1]  # the record is not the fresh default


# --- defect 3: a state dict without the VRAdam keys ------------------------------------------

def test_defect3_loading_an_adamw_state_dict_keeps_the_constructor_options():
    params, twins = _params(), _params()
    adamw = torch.optim.AdamW(params, lr=1e-2)
    _train(adamw, params, 3)
    opt = VRAdam(twins, lr=1e-2, beta3=0.0, lr_cutoff=5)
    opt.load_state_dict(copy.deepcopy(adamw.state_dict()))  # torch shares the tensors otherwise
    for twin, p in zip(twins, params, strict=True):
        with torch.no_grad():
            twin.copy_(p)
    assert opt.param_groups[0]["beta3"] == 0.0 and opt.param_groups[0]["lr_cutoff"] == 5.0
    _train(adamw, params, 3, start=3)
    _train(opt, twins, 3, start=3)
    assert _equal(params, twins)  # the gate stayed off: VRAdam continued as AdamW
    assert opt.last_lr_ratio == 1.0


def test_defect3_unpickling_an_old_pickle_uses_the_pickled_defaults():
    opt = VRAdam(_params(shapes=((4,),)), beta3=3.0, lr_cutoff=7.0, normgrad=True)
    state = opt.__getstate__()
    for group in state["param_groups"]:
        for key in ("beta3", "lr_cutoff", "normgrad"):
            del group[key]
    for key in ("last_sq_norm", "last_lr_ratio", "last_lr_ratios"):
        del state[key]
    old = VRAdam.__new__(VRAdam)
    old.__setstate__(state)
    assert {k: old.param_groups[0][k] for k in ("beta3", "lr_cutoff", "normgrad")} == \
        {"beta3": 3.0, "lr_cutoff": 7.0, "normgrad": True}
    assert math.isnan(old.last_sq_norm) and old.last_lr_ratios == [1.0]


# --- defect 4: beta3 = inf ----------------------------------------------------------------------

@pytest.mark.parametrize("cls", CLASSES)
def test_defect4_infinite_beta3_is_rejected_everywhere(cls):
    params = _params(shapes=((4,), (3,)))
    with pytest.raises(ValueError, match=r"beta3 must be in \[0, inf\), got inf"):
        cls(params, beta3=math.inf)
    with pytest.raises(ValueError, match="beta3"):
        cls([{"params": params, "beta3": math.inf}])
    opt = cls(params[:1])
    with pytest.raises(ValueError, match="beta3"):
        opt.add_param_group({"params": params[1:], "beta3": math.inf})
    assert vro.gate(math.inf, 0.0, 19.0) == 1.0  # beta3 = 0 is off even if P_t overflowed


def test_defect4_lr_cutoff_inf_is_still_allowed():
    params = _params(shapes=((4,),))
    opt = VRAdam(params, beta3=1e9, lr_cutoff=math.inf)
    _train(opt, params, 2)
    assert 0 < opt.last_lr_ratio < 1e-2 and all(torch.isfinite(p).all() for p in params)


# --- defect 5: last_lr_ratios after add_param_group -------------------------------------------

@pytest.mark.parametrize("cls", CLASSES)
def test_defect5_last_lr_ratios_follow_add_param_group(cls):
    params = _params(shapes=((6,), (5,), (4,)))
    opt = cls(params[:1], beta3=100.0)
    _train(opt, params[:1], 2)
    opt.add_param_group({"params": params[1:2]})
    assert len(opt.last_lr_ratios) == 2 and opt.last_lr_ratios[1] == 1.0
    opt.add_param_group({"params": params[2:], "lr_cutoff": 1.0})
    assert len(opt.last_lr_ratios) == 3
    _train(opt, params, 1, start=2)
    assert len(opt.last_lr_ratios) == 3 and opt.last_lr_ratios[2] >= 0.5


# --- defect 6: arguments AdamW users expect ---------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_defect6_maximize_is_a_constructor_argument(dtype):
    up, down = _params(dtype), _params(dtype)
    opt_up = VRAdam(up, lr=1e-2, beta3=0.5, maximize=True)
    opt_down = VRAdam(down, lr=1e-2, beta3=0.5)
    _train(opt_up, up, 5)
    _train(opt_down, down, 5, sign=-1.0)  # minimising -f is maximising f
    assert _equal(up, down) and opt_up.last_lr_ratio == opt_down.last_lr_ratio < 0.99
    a, b = _params(dtype), _params(dtype)
    _train(torch.optim.AdamW(a, maximize=True), a, 5)
    _train(VRAdam(b, beta3=0.0, maximize=True), b, 5)
    assert _equal(a, b)


@pytest.mark.parametrize("cls", CLASSES)
def test_defect6_sparse_gradients_raise_a_clear_error(cls):
    emb = torch.nn.Embedding(10, 3, sparse=True)
    emb(torch.tensor([1, 2])).sum().backward()
    opt = cls(emb.parameters())
    with pytest.raises(RuntimeError, match=f"{cls.__name__} does not support sparse gradients"):
        opt.step()


@pytest.mark.parametrize("maximize", [False, True])
def test_defect6_vrmomentum_foreach_and_maximize(maximize):
    runs = []
    for foreach in (None, True, False):
        params = _params(torch.float64)
        opt = VRMomentum(params, lr=0.05, beta3=0.5, weight_decay=0.01, maximize=maximize,
                         foreach=foreach)
        _train(opt, params, 4)
        runs.append((params, opt.last_sq_norm))
    assert all(_equal(runs[0][0], p) and runs[0][1] == s for p, s in runs[1:])
    flipped = _params(torch.float64)
    opt = VRMomentum(flipped, lr=0.05, beta3=0.5, weight_decay=0.01, maximize=not maximize)
    _train(opt, flipped, 4, sign=-1.0)
    assert _equal(runs[0][0], flipped)


def test_defect6_vrmomentum_maximize_climbs():
    x = torch.zeros(3, requires_grad=True)
    opt = VRMomentum([x], lr=0.5, maximize=True)
    for _ in range(100):
        opt.zero_grad()
        (-(x - 1.0).pow(2).sum()).backward()  # maximum at x = 1
        opt.step()
    assert torch.allclose(x.detach(), torch.ones(3), atol=0.1)


# --- defect 7: defaults -------------------------------------------------------------------------

def test_defect7_shared_arguments_have_adamw_defaults_and_positions():
    ours = inspect.signature(VRAdam).parameters
    theirs = inspect.signature(torch.optim.AdamW).parameters
    positional = [n for n, p in theirs.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [n for n, p in ours.items() if p.kind is p.POSITIONAL_OR_KEYWORD] == positional
    for name in ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach", "fused"):
        assert ours[name].default == theirs[name].default, name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_defect7_vradam_with_beta3_0_is_adamw_with_all_defaults(dtype):
    a, b, c = _params(dtype), _params(dtype), _params(dtype)
    _train(torch.optim.AdamW(a), a, 20)
    _train(VRAdam(b, beta3=0), b, 20)
    _train(VRAdam(c, 1e-3, (0.9, 0.999), 1e-8, 1e-2, False, beta3=0), c, 20)  # AdamW's positions
    assert _equal(a, b) and _equal(a, c)


def test_defect7_docstring_says_where_each_default_comes_from():
    doc = inspect.getdoc(VRAdam) or ""
    for source in ("AdamW's default", "vradam.py", "VRADAM.py", "paper"):
        assert source in doc
    for name in ("weight_decay=0.01", "beta3=1", "lr_cutoff=19", "normgrad=False"):
        assert name in doc


# --- the blocked CPU step -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("options", [{}, {"amsgrad": True}, {"maximize": True, "weight_decay": 0.0}])
def test_blocked_step_is_adamw_bit_for_bit_when_the_gate_is_off(dtype, options):
    reference = _params(dtype)
    _train(torch.optim.AdamW(reference, lr=1e-2, **options), reference, 8)
    for foreach in (None, True, False):
        for off in ({"beta3": 0.0}, {"beta3": 5.0, "lr_cutoff": 0.0}):
            params = _params(dtype)
            _train(VRAdam(params, lr=1e-2, foreach=foreach, **options, **off), params, 8)
            assert _equal(reference, params), (foreach, off)


@pytest.mark.parametrize("options", [{}, {"amsgrad": True}, {"maximize": True, "weight_decay": 0.0}])
def test_normgrad_blocked_step_in_one_pass_is_the_loop_after_a_gate_pass(options):
    # with normgrad everywhere the blocked step takes the dots of g first and then one pass per
    # block; with the gate on it must still be AdamW's loop after a separate pass for P_t
    for normgrads in ((True, True), (True, False)):  # one pass; two phases (mixed groups)
        runs = []
        for foreach in (None, False):
            params = _params()
            groups = [{"params": params[:1], "normgrad": normgrads[0]},
                      {"params": params[1:], "normgrad": normgrads[1]}]
            opt = VRAdam(groups, lr=1e-2, beta3=2.0, foreach=foreach, **options)
            _train(opt, params, 6)
            runs.append((params, opt.last_sq_norm))
        (a, sq_a), (b, sq_b) = runs
        assert _equal(a, b) and sq_a == sq_b, normgrads


def test_blocked_step_is_the_default_on_cpu_and_foreach_false_is_adamws_loop(monkeypatch):
    calls = []
    original = vro._blocked_adamw_step

    def counted(opt):
        done = original(opt)
        calls.extend([1] if done is not None else [])
        return done

    monkeypatch.setattr(vro, "_blocked_adamw_step", counted)
    params = _params()
    _train(VRAdam(params), params, 1)
    _train(VRAdam(params, foreach=True), params, 1)
    assert len(calls) == 2
    _train(VRAdam(params, foreach=False), params, 1)
    _train(VRAdam(params, fused=True), params, 1)
    half = _params(torch.bfloat16)
    _train(VRAdam(half), half, 1)
    assert len(calls) == 2


def test_recorded_gate_is_the_norm_of_the_stored_velocity():
    params = _params()
    opt = VRAdam(params, lr=1e-2, beta3=0.5, lr_cutoff=10.0)
    for t in range(5):
        for p, g in zip(params, _grads(params, t), strict=True):
            p.grad = g
        before = opt.velocity_sq_norm()
        opt.step()
        stored = sum(float(opt.state[p]["exp_avg"].double().square().sum()) for p in params)
        assert opt.last_sq_norm == before  # the blocked step and the separate pass agree exactly
        assert opt.last_sq_norm == pytest.approx(stored, rel=1e-6)
        assert opt.last_lr_ratio == pytest.approx(1 / (1 + min(0.5 * stored, 10.0)), rel=1e-6)


def test_no_full_size_temporary(monkeypatch):
    """The blocked step's temporaries (denominator, negated gradient) are one block in size."""
    sizes = []
    for name in ("_foreach_sqrt", "_foreach_neg"):
        fn = getattr(torch, name)
        monkeypatch.setattr(torch, name, lambda ts, _fn=fn: sizes.append(sum(t.numel() for t in ts))
                            or _fn(ts))
    lerp = torch.lerp
    monkeypatch.setattr(torch, "lerp", lambda *a, **k: sizes.append(a[0].numel()) or lerp(*a, **k))
    params = _params(shapes=((3 * vro._CPU_CHUNK + 5,), (4,)))
    _train(VRAdam(params, maximize=True), params, 2)
    _train(VRAdam(params, foreach=False), params, 2)  # the separate gate pass
    assert sizes and max(sizes) <= vro._CPU_CHUNK + 5


def test_non_contiguous_and_half_precision_parameters_fall_back_and_match_adamw():
    base = torch.randn(40, 30)
    a, b = base.clone().t().requires_grad_(True), base.clone().t().requires_grad_(True)
    _train(torch.optim.AdamW([a], lr=1e-2), [a], 3)
    _train(VRAdam([b], lr=1e-2, beta3=0.0), [b], 3)
    assert not b.is_contiguous() and torch.equal(a, b)
    h, k = _params(torch.bfloat16), _params(torch.bfloat16)
    _train(torch.optim.AdamW(h, lr=1e-2), h, 3)
    opt = VRAdam(k, lr=1e-2, beta3=0.0)
    _train(opt, k, 3)
    assert _equal(h, k) and math.isfinite(opt.last_sq_norm) and opt.last_sq_norm > 0


# --- issue 24, item 8: a NaN gradient entry and the global gate -------------------------------

#: both VRAdam steps (the blocked CPU step, and AdamW's loop after a separate gate pass) and
#: VRMomentum's two; the gate is active (beta3 = 100) so that P_t matters
NONFINITE_CASES = [pytest.param(VRAdam, {}, id="VRAdam-blocked"),
                   pytest.param(VRAdam, {"foreach": False}, id="VRAdam-loop"),
                   pytest.param(VRMomentum, {}, id="VRMomentum-foreach"),
                   pytest.param(VRMomentum, {"foreach": False}, id="VRMomentum-loop")]
SMALL = ((6, 5), (5,), (4,))


def _bad_step(opt, params, t: int, value: float) -> None:
    """Step ``t``'s gradients with one entry of the last tensor set to ``value``."""
    grads = _grads(params, t)
    grads[-1][0] = value
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    opt.step()


def _state(opt) -> list[torch.Tensor]:
    return [v.clone() for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]


@pytest.mark.parametrize(("cls", "options"), NONFINITE_CASES)
def test_item8_default_lets_one_nan_entry_reach_every_parameter(cls, options):
    """What ``nonfinite="propagate"`` (the default) documents: P_t is NaN, so is every group's rate."""
    params = _params(shapes=SMALL)
    opt = cls(params, beta3=100.0, **options)
    _train(opt, params, 2)
    _bad_step(opt, params, 2, math.nan)
    assert math.isnan(opt.last_sq_norm) and math.isnan(opt.last_lr_ratio)
    assert all(torch.isnan(p).all() for p in params)


@pytest.mark.parametrize("value", [math.nan, math.inf])
@pytest.mark.parametrize(("cls", "options"), NONFINITE_CASES)
def test_item8_skip_leaves_parameters_and_state_unchanged_warns_and_continues(cls, options, value):
    params, twins = _params(shapes=SMALL), _params(shapes=SMALL)
    opt = cls(params, beta3=100.0, nonfinite="skip", **options)
    clean = cls(twins, beta3=100.0, nonfinite="skip", **options)
    _train(opt, params, 2)
    _train(clean, twins, 2)
    before, state = [p.detach().clone() for p in params], _state(opt)
    with pytest.warns(RuntimeWarning, match="skipped"):
        _bad_step(opt, params, 99, value)
    assert _equal(params, before)
    assert all(torch.equal(a, b) for a, b in zip(_state(opt), state, strict=True))
    assert opt.skipped_steps == 1 and math.isnan(opt.last_sq_norm) and opt.last_lr_ratios == [0.0]
    # the run goes on as if the bad batch had never come, bit for bit
    _train(opt, params, 3, start=2)
    _train(clean, twins, 3, start=2)
    assert _equal(params, twins) and opt.last_sq_norm == clean.last_sq_norm
    assert opt.skipped_steps == 1 and clean.skipped_steps == 0


@pytest.mark.parametrize(("cls", "options"), NONFINITE_CASES)
def test_item8_raise_changes_nothing(cls, options):
    params = _params(shapes=SMALL)
    opt = cls(params, beta3=100.0, nonfinite="raise", **options)
    _train(opt, params, 2)
    before, state, sq_norm = [p.detach().clone() for p in params], _state(opt), opt.last_sq_norm
    with pytest.raises(FloatingPointError, match="NaN or infinite"):
        _bad_step(opt, params, 2, math.nan)
    assert _equal(params, before) and opt.last_sq_norm == sq_norm
    assert all(torch.equal(a, b) for a, b in zip(_state(opt), state, strict=True))


@pytest.mark.parametrize("mode", ["skip", "raise"])
@pytest.mark.parametrize(("cls", "options"), NONFINITE_CASES)
def test_item8_the_check_changes_no_bit_for_finite_gradients(cls, options, mode):
    a, b = _params(), _params()  # with the two-view tensor of the blocked step
    default, checked = cls(a, beta3=1.0, **options), cls(b, beta3=1.0, nonfinite=mode, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _train(default, a, 4)
        _train(checked, b, 4)
    assert _equal(a, b) and default.last_lr_ratios == checked.last_lr_ratios
    assert checked.skipped_steps == 0


@pytest.mark.parametrize("cls", CLASSES)
def test_item8_nonfinite_is_checked_global_and_saved(cls):
    params = _params(shapes=((4,), (3,)))
    with pytest.raises(ValueError, match="nonfinite must be one of"):
        cls(params, nonfinite="ignore")
    with pytest.raises(ValueError, match="nonfinite must be the same for every param group"):
        cls([{"params": params[:1]}, {"params": params[1:], "nonfinite": "skip"}])
    opt = cls(params[:1], nonfinite="skip")
    with pytest.raises(ValueError, match="nonfinite must be the same"):
        opt.add_param_group({"params": params[1:], "nonfinite": "raise"})
    opt.add_param_group({"params": params[1:]})
    assert [g["nonfinite"] for g in opt.param_groups] == ["skip", "skip"]
    other = cls([{"params": [_leaf(params[0])]}, {"params": [_leaf(params[1])]}])  # built with "propagate"
    other.load_state_dict(copy.deepcopy(opt.state_dict()))  # the option travels in the state dict
    assert [g["nonfinite"] for g in other.param_groups] == ["skip", "skip"]
    clone = pickle.loads(pickle.dumps(opt))
    assert clone.skipped_steps == 0 and clone.defaults["nonfinite"] == "skip"
    assert inspect.signature(cls).parameters["nonfinite"].default == "propagate"


def test_item8_public_gate_refuses_nan_and_keeps_its_limits():
    with pytest.raises(ValueError, match=r"sq_norm must be in \[0, inf\], got nan"):
        vro.gate(math.nan, 1.0, 19.0)
    with pytest.raises(ValueError, match="lr_cutoff"):
        vro.gate(1.0, 1.0, -1.0)
    assert vro.gate(math.inf, 1.0, 19.0) == 1.0 / 20.0
    assert vro.gate(math.inf, 1.0, 0.0) == 1.0 and vro.gate(2.0, 0.5, math.inf) == 0.5
