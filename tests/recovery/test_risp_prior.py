"""Tests for the RISP chapter's learned prior: the shipped gradient-step denoiser, its score, its
Lipschitz estimate, its training script, and RED/RISP running with it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from iclr_lab.core.datasets import image
from iclr_lab.recovery.risp import (
    DenoiserConfig,
    LearnedPrior,
    load_denoiser,
    make_problem,
    psnr,
    red,
    risp,
)
from iclr_lab.recovery.risp.prior import FORMAT, WEIGHTS, build_network, gs_denoise, gs_grad
from iclr_lab.recovery.risp.train_prior import (
    HELD_OUT,
    TRAIN_IMAGES,
    TrainConfig,
    main,
    patches,
    pyramid,
    train,
)


@pytest.fixture(scope="module")
def prior64() -> LearnedPrior:
    return LearnedPrior.load(dtype="float64")


# ------------------------------------------------------------------ the shipped weights


def test_shipped_weights_match_the_architecture_and_their_record() -> None:
    assert WEIGHTS.exists() and WEIGHTS.stat().st_size <= 5 * 2**20
    net, config = load_denoiser(config=DenoiserConfig())  # the code's default architecture
    assert config == DenoiserConfig()
    fresh = build_network(config)
    assert {k: v.shape for k, v in net.state_dict().items()} == \
        {k: v.shape for k, v in fresh.state_dict().items()}
    assert all(not q.requires_grad for q in net.parameters()) and not net.training
    record = json.loads(WEIGHTS.with_suffix(".json").read_text())
    assert record["format"] == FORMAT and record["denoiser"] == config.to_dict()
    assert record["parameters"] == sum(q.numel() for q in net.parameters())
    assert record["train"]["steps"] == record["history"]["step"][-1] == TrainConfig().steps
    assert record["command"] == "python -m iclr_lab.recovery.risp.train_prior"
    assert set(record["held_out"]) == {"camera", "astronaut"}
    ck = torch.load(WEIGHTS, weights_only=True)
    assert ck["format"] == FORMAT


def test_held_out_pictures_never_train() -> None:
    assert not set(HELD_OUT) & set(TRAIN_IMAGES)
    assert "cat" not in TRAIN_IMAGES  # cat is chelsea under another name


def test_the_denoiser_denoises_a_held_out_picture() -> None:
    prior = LearnedPrior.load()
    truth = image("astronaut", size=128)  # never seen in training
    noisy = truth + prior.sigma * np.random.default_rng(0).standard_normal(truth.shape)
    gain = psnr(prior.denoise(noisy), truth) - psnr(noisy, truth)
    assert gain >= 1.5, f"the GS denoiser gains only {gain:.2f} dB on astronaut"


# ------------------------------------------------------------------ the score is a gradient


def test_grad_is_the_gradient_of_value(prior64: LearnedPrior) -> None:
    rng = np.random.default_rng(1)
    x = image("moon", size=24) + 0.05 * rng.standard_normal((24, 24))
    for _ in range(3):
        d = rng.standard_normal(x.shape)
        h = 1e-5
        fd = (prior64.value(x + h * d) - prior64.value(x - h * d)) / (2 * h)
        assert float(np.vdot(prior64.grad(x), d)) == pytest.approx(fd, rel=1e-6)


def test_value_after_grad_is_the_value_there() -> None:
    # grad keeps g at its point for the recorder's next call; another point is computed afresh
    a, b = LearnedPrior.load(), LearnedPrior.load()
    x = image("camera", size=24)
    y = x + 0.01
    a.grad(x)
    assert a.value(x) == b.value(x)
    assert a.value(y) == b.value(y) != a.value(x)
    x[0, 0] += 0.5  # the caller changes its array in place: the kept copy does not follow it
    assert a.value(x) == b.value(x)


def test_float32_grad_agrees_with_float64(prior64: LearnedPrior) -> None:
    x = image("coins", size=32)
    g32, g64 = LearnedPrior.load().grad(x), prior64.grad(x)
    assert np.linalg.norm(g32 - g64) <= 1e-4 * np.linalg.norm(g64)


def test_denoiser_is_one_gradient_step_on_the_potential(prior64: LearnedPrior) -> None:
    x = torch.from_numpy(image("clock", size=20))[None, None]
    net = prior64.net
    g, r = gs_grad(net, x)
    # D = x - grad g_N with g_N = 1/2 ||R||^2, and the prior is that potential over sigma^2
    assert torch.allclose(gs_denoise(net, x), x - g)
    assert prior64.value(x[0, 0].numpy()) == pytest.approx(0.5 * float(r.square().sum()) / prior64.sigma**2)
    assert np.allclose(prior64.denoise(x[0, 0].numpy()), (x - g)[0, 0].numpy())


def test_hessian_vector_product_and_lipschitz_estimate(prior64: LearnedPrior) -> None:
    rng = np.random.default_rng(2)
    x = image("moon", size=16) + 0.05 * rng.standard_normal((16, 16))
    v = rng.standard_normal(x.shape)
    h = 1e-5
    fd = (prior64.grad(x + h * v) - prior64.grad(x - h * v)) / (2 * h)
    hv = prior64.hessian_vector(x, v)
    assert np.linalg.norm(hv - fd) <= 1e-5 * np.linalg.norm(hv)
    est = prior64.estimate_lipschitz(x, iters=60)
    # the power iteration's value is a Rayleigh-type lower estimate of ||Hess||: no random direction beats it
    for _ in range(10):
        u = rng.standard_normal(x.shape)
        assert np.linalg.norm(prior64.hessian_vector(x, u)) <= est * np.linalg.norm(u) * (1 + 1e-6)
    with pytest.raises(ValueError, match="lipschitz_estimate"):
        _ = prior64.lipschitz
    assert prior64.with_lipschitz(3.0).lipschitz == 3.0


# ------------------------------------------------------------------ the solvers run unchanged


def test_make_problem_estimates_the_step_and_red_descends() -> None:
    p = make_problem(24, seed=1, prior=LearnedPrior.load(dtype="float64"))
    assert isinstance(p.prior, LearnedPrior)
    local = p.prior.estimate_lipschitz(p.start())
    assert p.prior.lipschitz == pytest.approx(2.0 * local)
    assert p.lipschitz == pytest.approx(p.lam + p.prior.lipschitz)
    tr = red(p, iters=40)
    assert np.all(np.diff(tr.value) <= 1e-9 * abs(tr.value[0]))  # the descent lemma holds at 1/L
    # theta = 1 is still RED exactly, whatever the prior
    assert np.array_equal(risp(p, theta=1.0, iters=40).x, tr.x)
    fast = risp(p, theta=0.2, restart=100 * 24**2 / 128**2, iters=40)
    assert fast.grad_norm.min() < tr.grad_norm.min()


def test_learned_runs_equal_the_plain_path_bit_for_bit() -> None:
    # the solvers' shared work (F with grad F at a recorded iterate, the record's gradient reused
    # when there is no momentum) gives the bits of separate calls with the learned prior too
    from test_risp import _reference

    from iclr_lab.recovery.risp import nesterov_restart

    p = make_problem(16, seed=2, prior=LearnedPrior.load())
    for method, solver, kw in (("risp", risp, {"theta": 0.2, "restart": 0.02}),
                               ("nesterov", nesterov_restart, {})):
        tr, ref = solver(p, iters=25, **kw), _reference(p, method, 25, **kw)
        assert tr.restarts == ref["restarts"]
        for name in ("x", "value", "grad_norm", "psnr"):
            assert np.array_equal(getattr(tr, name), ref[name]), (method, name)


# ------------------------------------------------------------------ training


def test_training_is_deterministic(tmp_path) -> None:
    cfg = DenoiserConfig(channels=4, depth=3)
    tc = TrainConfig(steps=4, batch=2, patch=16, warmup=2, log_every=2)
    a, rec = train(cfg, tc)
    b, _ = train(cfg, tc)
    c, _ = train(cfg, TrainConfig(steps=4, batch=2, patch=16, warmup=2, log_every=2, seed=1))
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k])
    assert any(not torch.equal(v, c.state_dict()[k]) for k, v in a.state_dict().items())
    assert rec["history"]["step"] == [2.0, 4.0] and len(rec["history"]["loss"]) == 2


def test_patches_are_seeded_and_in_range() -> None:
    levels = [np.linspace(0, 1, 40 * 50).reshape(40, 50)]
    a = patches(levels, 5, 16, np.random.default_rng(3))
    b = patches(levels, 5, 16, np.random.default_rng(3))
    assert a.shape == (5, 1, 16, 16) and a.dtype == np.float32
    assert np.array_equal(a, b) and a.min() >= 0 and a.max() <= 1


def test_command_line_writes_weights_and_record(tmp_path, capsys) -> None:
    out = tmp_path / "gs.pt"
    assert main(["--steps", "2", "--batch", "2", "--patch", "16", "--channels", "4", "--depth", "2",
                 "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    net, cfg = load_denoiser(out)
    assert cfg == DenoiserConfig(channels=4, depth=2)
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["train"]["steps"] == 2 and record["cpu_seconds"] > 0
    prior = LearnedPrior.load(out)
    assert prior.grad(np.zeros((8, 8))).shape == (8, 8)


# ------------------------------------------------------------------ bad arguments


def test_bad_arguments_name_the_parameter(tmp_path) -> None:
    with pytest.raises(ValueError, match="channels"):
        DenoiserConfig(channels=0)
    with pytest.raises(ValueError, match="depth"):
        DenoiserConfig(depth=1)
    with pytest.raises(ValueError, match="sigma"):
        DenoiserConfig(sigma=1.5)
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=-1)
    with pytest.raises(ValueError, match="patch"):
        TrainConfig(patch=4)
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(lr=0.0)
    with pytest.raises(ValueError, match="weight"):
        LearnedPrior.load(weight=0.0)
    with pytest.raises(ValueError, match="dtype"):
        LearnedPrior.load(dtype="float16")
    with pytest.raises(FileNotFoundError, match="path"):
        load_denoiser(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    torch.save({"weights": 1}, junk)
    with pytest.raises(ValueError, match="path"):
        load_denoiser(junk)
    with pytest.raises(ValueError, match="architecture"):
        load_denoiser(config=DenoiserConfig(channels=8))
    prior = LearnedPrior.load()
    with pytest.raises(ValueError, match="x"):
        prior.grad(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="v"):
        prior.hessian_vector(np.zeros((8, 8)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="iters"):
        prior.estimate_lipschitz(np.zeros((8, 8)), iters=0)
    with pytest.raises(ValueError, match="value"):
        prior.with_lipschitz(-1.0)
    with pytest.raises(ValueError, match="x"):
        gs_grad(prior.net, torch.zeros(8, 8))
    with pytest.raises(ValueError, match="names"):
        pyramid(("camera",))
    with pytest.raises(TypeError, match="config"):
        build_network({"channels": 4})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="safety"):
        make_problem(16, prior=prior, safety=0.5)
    with pytest.raises(TypeError, match="prior"):
        make_problem(16, prior="learned")  # type: ignore[arg-type]


def test_empty_and_non_finite_batches_seeds_and_patch_sizes_are_refused() -> None:
    """Issue 24: gs_grad returned an empty or NaN gradient; patches gave numpy's own errors."""
    net = build_network(DenoiserConfig(channels=2, depth=2))
    with pytest.raises(ValueError, match=r"^x must be finite"):
        gs_grad(net, torch.full((1, 1, 8, 8), float("nan")))
    with pytest.raises(ValueError, match=r"^x must not be empty"):
        gs_denoise(net, torch.zeros(0, 1, 8, 8))
    rng = np.random.default_rng(0)
    levels = [np.zeros((8, 8))]
    with pytest.raises(ValueError, match=r"^count must be an integer in \[1, inf\]"):
        patches(levels, 0, 4, rng)
    with pytest.raises(TypeError, match=r"^side must be an integer"):
        patches(levels, 2, 1.5, rng)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^levels\[0\] must be at least side = 16"):
        patches(levels, 2, 16, rng)
    with pytest.raises(ValueError, match=r"^seed must be an integer in \[0, "):
        TrainConfig(seed=-1)
    prior = LearnedPrior(net, DenoiserConfig(channels=2, depth=2))
    with pytest.raises(TypeError, match=r"^seed must be an integer"):
        prior.estimate_lipschitz(np.zeros((8, 8)), seed=None)  # type: ignore[arg-type]


def test_the_shipped_denoiser_is_checked_against_its_recorded_hash(tmp_path):
    import json
    import shutil

    from iclr_lab.core.provenance import ShippedFileError, sha256
    from iclr_lab.recovery.risp import prior

    assert json.loads(prior.WEIGHTS.with_suffix(".json").read_text())["sha256"] == sha256(prior.WEIGHTS)
    copy = tmp_path / "gs_denoiser.pt"
    shutil.copyfile(prior.WEIGHTS, copy)
    shutil.copyfile(prior.WEIGHTS.with_suffix(".json"), copy.with_suffix(".json"))
    prior.load_denoiser(copy)  # an intact copy loads
    data = bytearray(copy.read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = bytes(64)
    copy.write_bytes(bytes(data))
    with pytest.raises(ShippedFileError, match="corrupt or changed"):
        prior.load_denoiser(copy)
    # without a record only what torch itself can see is caught (a flipped byte is not: hence the
    # hash); a truncated file is
    copy.with_suffix(".json").unlink()
    copy.write_bytes(prior.WEIGHTS.read_bytes()[:4000])
    with pytest.raises(ShippedFileError, match="truncated or corrupt"):
        prior.load_denoiser(copy)
