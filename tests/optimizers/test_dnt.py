"""Behavioural tests of the DNT chapter's package (book/optimizers/dnt.md)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from iclr_lab.optimizers import dnt
from iclr_lab.optimizers.dnt import (
    GPTConfig,
    Placement,
    TinyGPT,
    decoupled_weight_decay,
    heavy_tail_stats,
    make_optimizer,
    train_lm,
)

torch.set_num_threads(1)

SMALL = GPTConfig(vocab=48, context=8, d_model=16, n_heads=4, n_layers=2, d_ff=32)


def _model(norm="dnt", config=SMALL, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    return TinyGPT(config, norm).to(dtype)


def _tokens(n=4, t=8, vocab=48, seed=1):
    return torch.randint(0, vocab, (n, t), generator=torch.Generator().manual_seed(seed))


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b).abs().max() / b.abs().max()).detach())


def _scale_rows(w: torch.Tensor, rows: slice, c: float) -> None:
    with torch.no_grad():
        w[rows] *= c


# --- the exact invariances (float64, epsilon negligible) ---------------------------------------

@pytest.mark.parametrize("c", [0.1, 10.0])
def test_midnorm_makes_the_model_invariant_to_rescaling_ffn_and_value_output_weights(c):
    config = GPTConfig(vocab=48, context=8, d_model=16, n_heads=4, d_ff=32, activation="relu",
                       norm_eps=1e-30)
    x = _tokens()
    for norm, invariant in (("dnt", True), ("pre", False)):
        model = _model(norm, config)
        before = model(x)
        d = config.d_model
        for block in model.blocks:
            with torch.no_grad():
                block.ffn.fc.weight *= c      # W_1 (ReLU is positively homogeneous)
                block.ffn.proj.weight *= c    # W_2
                block.attn.out.weight *= c    # W_o
            _scale_rows(block.attn.qkv.weight, slice(2 * d, 3 * d), c)  # W_v
        change = _rel(model(x), before)
        if invariant:
            assert change < 1e-5, change
        else:  # without MidNorm the same rescaling changes the output: the test can fail
            assert change > 1e-2, change


@pytest.mark.parametrize("c", [0.1, 10.0])
def test_midnorm_input_jacobian_is_scale_invariant_and_the_bare_branch_scales_like_c_squared(c):
    table = dnt.midnorm_invariance((c,))
    mid = table[table.layout == "mid"].iloc[0]
    none = table[table.layout == "none"].iloc[0]
    assert mid.output_change < 1e-5 and mid.jacobian_change < 1e-5
    assert none.jacobian_ratio == pytest.approx(c * c, rel=1e-9)


@pytest.mark.parametrize("part", [0, 1])  # W_q, W_k
@pytest.mark.parametrize("c", [0.1, 10.0])
def test_qk_norm_makes_the_logits_invariant_to_rescaling_wq_or_wk(part, c):
    config = GPTConfig(vocab=48, context=8, d_model=16, n_heads=4, d_ff=32, norm_eps=1e-30)
    x = _tokens()
    d = config.d_model
    for norm, invariant in (("dnt", True), ("pre", False)):
        model = _model(norm, config)
        before = model(x)
        for block in model.blocks:
            _scale_rows(block.attn.qkv.weight, slice(part * d, (part + 1) * d), c)
        change = _rel(model(x), before)
        assert (change < 1e-5) if invariant else (change > 1e-4), (norm, change)


def test_input_norm_pins_the_residual_stream_norm_whatever_the_embedding_scale():
    # epsilon negligible against the smallest mean square (about 1e-7 at scale 1e-2)
    config = GPTConfig(vocab=48, context=8, d_model=16, n_heads=4, d_ff=32, norm_eps=1e-30)
    for scale in (1e-2, 1.0, 1e2):
        model = _model("dnt", config)
        with torch.no_grad():
            model.embed.weight *= scale
            model.pos.weight *= scale
        x0 = model.residual_stream(_tokens())[0]
        rms = x0.norm(dim=-1) / math.sqrt(SMALL.d_model)
        assert torch.allclose(rms, torch.ones_like(rms), atol=1e-3)
        pre = _model("pre", config)
        with torch.no_grad():
            pre.embed.weight *= scale
        assert not torch.allclose(pre.residual_stream(_tokens())[0].norm(dim=-1) / 4,
                                  torch.ones(4, 8, dtype=torch.float64), atol=1e-1)


# --- faithfulness of the layout ----------------------------------------------------------------

def _order(model: TinyGPT) -> list[str]:
    seen: list[str] = []
    hooks = [m.register_forward_hook(lambda mod, i, o, n=name: seen.append(n))
             for name, m in model.named_modules()
             if isinstance(m, (torch.nn.RMSNorm, torch.nn.Linear)) and name.startswith(
                 ("input_norm", "blocks.0", "final_norm"))]
    model(_tokens())
    for h in hooks:
        h.remove()
    return seen


def test_layer_order_of_dnt_and_of_the_standard_model():
    assert _order(_model("dnt")) == [
        "input_norm", "blocks.0.attn_prenorm", "blocks.0.attn.qkv", "blocks.0.attn.q_norm",
        "blocks.0.attn.k_norm", "blocks.0.attn.out", "blocks.0.attn_midnorm", "blocks.0.ffn.fc",
        "blocks.0.ffn.proj", "blocks.0.ffn_midnorm", "final_norm"]
    assert _order(_model("pre")) == [
        "blocks.0.attn_prenorm", "blocks.0.attn.qkv", "blocks.0.attn.out", "blocks.0.ffn_prenorm",
        "blocks.0.ffn.fc", "blocks.0.ffn.proj", "final_norm"]


def test_dnt_with_its_own_norms_switched_off_is_the_standard_model():
    off = Placement(input_norm=False, ffn_prenorm=True, qk_norm=False, mid_norm=False)
    a, b = _model("pre"), _model(off)
    assert [n for n, _ in a.named_parameters()] == [n for n, _ in b.named_parameters()]
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert torch.equal(a(_tokens()), b(_tokens()))
    assert not torch.allclose(_model("dnt")(_tokens()), a(_tokens()))


def test_the_model_is_causal_and_ties_its_output_layer():
    model = _model("dnt")
    x = _tokens()
    y = x.clone()
    y[:, 5] = (y[:, 5] + 1) % SMALL.vocab
    out_x, out_y = model(x), model(y)
    assert torch.equal(out_x[:, :5], out_y[:, :5])
    assert not torch.allclose(out_x[:, 5:], out_y[:, 5:])
    assert sum(p.numel() for p in model.parameters()) == sum(
        p.numel() for p in model.parameters() if p is not model.embed.weight) + 48 * 16


# --- mSGDW -------------------------------------------------------------------------------------

def test_msgdw_is_torch_momentum_sgd_plus_a_decoupled_decay():
    model = _model("pre")
    ref = [p.detach().clone() for p in model.parameters()]
    names = [n for n, _ in model.named_parameters()]
    buf = [torch.zeros_like(p) for p in ref]
    opt = make_optimizer(model, "msgdw", 0.3)
    lr, wd, mu = 0.3, opt.param_groups[0]["decoupled_weight_decay"], 0.9
    for step in range(20):
        x = _tokens(seed=step)
        opt.zero_grad()
        model.loss(x).backward()
        grads = [p.grad.detach().clone() for p in model.parameters()]
        decoupled_weight_decay(opt)
        opt.step()
        for i, (p, g) in enumerate(zip(ref, grads, strict=True)):
            buf[i] = g.clone() if step == 0 else mu * buf[i] + g   # PyTorch convention
            decay = 0.0 if ref[i].ndim < 2 else wd                 # gains are not decayed
            ref[i] = (1 - lr * decay) * p - lr * buf[i]
    assert wd > 0
    for n, p, q in zip(names, model.parameters(), ref, strict=True):
        assert torch.allclose(p.detach(), q, atol=1e-7), n


# --- heavy-tail statistics ---------------------------------------------------------------------

def test_heavy_tail_stats_on_known_distributions():
    model = _model("pre", GPTConfig(vocab=48, context=8, d_model=64, n_heads=4, d_ff=256))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ffn.fc.weight"):      # Pareto tail with index 1.5, random signs
                u = torch.rand(p.shape, generator=gen, dtype=p.dtype)
                sign = torch.randint(0, 2, p.shape, generator=gen).to(p.dtype) * 2 - 1
                p.grad = sign * u ** (-1 / 1.5)
            else:                                   # Gaussian, scaled by 3
                p.grad = 3 * torch.randn(p.shape, generator=gen, dtype=p.dtype)
    stats = heavy_tail_stats(model)
    df = stats.per_tensor.set_index("tensor")
    gauss = df.loc["blocks.0.attn.W_q"]
    pareto = df.loc["blocks.0.ffn.W_1"]
    assert abs(gauss.excess_kurtosis) < 0.5 and pareto.excess_kurtosis > 50
    assert gauss.hill > 3 and pareto.hill == pytest.approx(1.5, rel=0.25)
    assert gauss.grad_rms == pytest.approx(3, rel=0.05)
    assert stats.rms_spread == pytest.approx(df.grad_rms.max() / df.grad_rms.min())
    assert stats.ratio_spread == pytest.approx(df.grad_over_weight.max() / df.grad_over_weight.min())
    assert "embedding" not in df.index and len(df) == 2 * 6   # W_q, W_k, W_v, W_o, W_1, W_2


def test_heavy_tail_stats_needs_gradients():
    with pytest.raises(ValueError, match="backward"):
        heavy_tail_stats(_model())


# --- training ----------------------------------------------------------------------------------

def test_train_lm_learns_is_deterministic_and_seeds_matter():
    kw = {"steps": 30, "batch_size": 8, "config": SMALL, "eval_every": 10, "val_sequences": 16,
          "stats_at": 10}
    a = train_lm("dnt", "adamw", 1e-2, seed=0, **kw)
    b = train_lm("dnt", "adamw", 1e-2, seed=0, **kw)
    c = train_lm("dnt", "adamw", 1e-2, seed=1, **kw)
    pd.testing.assert_frame_equal(a.log, b.log)
    assert not a.log.equals(c.log)
    assert a.log.val_loss.iloc[-1] < math.log(SMALL.vocab) - 0.3
    assert a.stats is not None and a.histograms is not None
    assert np.allclose(a.histograms.groupby("tensor").fraction.sum(), 1.0)


def test_stop_at_repeats_the_first_steps_of_the_full_run():
    kw = {"steps": 20, "batch_size": 4, "config": SMALL, "val_sequences": 8, "seed": 3}
    full = train_lm("dnt", "msgdw", 0.3, **kw)
    part = train_lm("dnt", "msgdw", 0.3, stop_at=8, stats_at=8, **kw)
    np.testing.assert_array_equal(part.train_losses, full.train_losses[:8])
    assert len(part.train_losses) == 8 and part.stats is not None
    assert part.model is not None and set(part.weight_norms) >= {"embedding", "blocks.0.ffn.W_2"}
    pooled = part.histograms[part.histograms.tensor == dnt.POOLED]
    assert len(pooled) == 40 and pooled.fraction.sum() == pytest.approx(1.0)


def test_training_that_diverges_is_reported_not_hidden():
    run = train_lm("pre", "msgdw", 1e4, steps=20, batch_size=4, config=SMALL, val_sequences=8)
    assert run.diverged and run.final_val_loss == math.inf


def test_clipping_bounds_the_step():
    kw = {"steps": 5, "batch_size": 4, "config": SMALL, "val_sequences": 8}
    run = train_lm("pre", "msgdw", 0.1, clip=1e-3, **kw)
    assert run.grad_norms.max() > 1e-3  # norms are recorded before clipping


# --- bad arguments -----------------------------------------------------------------------------

@pytest.mark.parametrize(("make", "match"), [
    (lambda: TinyGPT(SMALL, norm="post"), "norm"),
    (lambda: GPTConfig(d_model=30, n_heads=4), "d_model must be divisible by n_heads"),
    (lambda: GPTConfig(n_layers=0), "n_layers"),
    (lambda: GPTConfig(activation="tanh"), "activation"),
    (lambda: TinyGPT({"vocab": 8}), "config"),  # type: ignore[arg-type]
    (lambda: make_optimizer(_model(), "lion", 1e-3), "optimizer"),
    (lambda: make_optimizer(_model(), "adamw", 0.0), "lr"),
    (lambda: train_lm("dnt", "adamw", 1e-3, steps=0, config=SMALL), "steps"),
    (lambda: train_lm("dnt", "adamw", 1e-3, clip=0.0, config=SMALL), "clip"),
    (lambda: train_lm("dnt", "adamw", 1e-3, steps=5, stats_at=6, config=SMALL), "stats_at"),
    (lambda: train_lm("dnt", "sgd", 1e-3, config=SMALL), "optimizer"),
    (lambda: dnt.Recipe(momentum=1.0), "momentum"),
    (lambda: dnt.midnorm_invariance((0.0,)), "scales"),
    (lambda: dnt.jacobian_spectrum(scale_w1=-1.0), "scale_w1"),
    (lambda: dnt.subblock_jacobian(np.ones((4, 3)), np.ones((3, 4)), np.ones(3), "pre"), "layout"),
])
def test_bad_arguments_name_the_parameter(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_bad_tokens_are_rejected():
    model = _model()
    with pytest.raises(ValueError, match="context"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="integer tensor"):
        model(torch.zeros(1, 4))


def test_vocab_mismatch_is_rejected():
    from iclr_lab.core.languages import ZipfLanguage

    with pytest.raises(ValueError, match="vocab"):
        train_lm("dnt", "adamw", 1e-3, config=SMALL, language=ZipfLanguage(vocab=32))


# --- the explorer ------------------------------------------------------------------------------

def test_explorer_recomputes_and_midnorm_stays_put():
    w = dnt.explorer()
    first = w.result.data
    w.children[0].value = 10.0
    assert not w.result.data.equals(first)
    spec = dnt.jacobian_spectrum(10.0, 10.0)
    base = dnt.jacobian_spectrum(1.0, 1.0)
    label = dnt.LAYOUTS["mid"]
    np.testing.assert_allclose(spec[spec.layout == label].singular_value.max(),
                               base[base.layout == label].singular_value.max(), rtol=1e-4)


def test_edge_tie_measures_how_far_an_edge_optimum_beats_the_middle_rate():
    report = dnt.reproduce("smoke", 0)
    sweep = report.tables["sweep"]
    cell = sweep.cell.iloc[0]
    rows = sweep.cell == cell
    middle = float(sweep[rows & (sweep.grid_point == 1)].val_loss.iloc[0])
    # make this cell's top rate the best by 0.5 nats, and every other cell's middle rate the best
    sweep.loc[rows & (sweep.grid_point == 2), "val_loss"] = middle - 0.5
    for c, s in sweep.groupby("cell"):
        if c != cell:
            sweep.loc[s.index[s.grid_point == 1], "val_loss"] = s.val_loss.min() - 1.0
    sweep["best"] = sweep.val_loss == sweep.groupby("cell").val_loss.transform("min")
    assert dnt.numbers(report)["edge_tie_max"] == pytest.approx(0.5)
    sweep.loc[rows & (sweep.grid_point == 1), "val_loss"] = sweep[rows].val_loss.min() - 1.0
    sweep["best"] = sweep.val_loss == sweep.groupby("cell").val_loss.transform("min")
    assert dnt.numbers(report)["edge_tie_max"] == 0.0  # every optimum interior


def test_block_counts_leave_undefined_blocks_out_of_the_ablation_failures(monkeypatch):
    from types import SimpleNamespace

    from iclr_lab.core import stability
    from iclr_lab.optimizers.dnt import experiments

    def entry(measured, passed, control=None, control_passed=None):
        return {"measured": measured, "passed": passed, "control_measured": control,
                "control_passed": control_passed}

    # block 0: defined, DNT passes; block 1: defined, the network without InputNorm diverged;
    # block 2: undefined (no ratio anywhere), every control counted as failing by the core
    claims = {"dnt_closes_gap": [entry(0.3, True), entry(0.9, False), entry(None, False)],
              "dnt_msgdw_matches_adamw": [entry(0.1, False, 0.0, True), entry(0.1, False, 0.2, False),
                                          entry(0.1, False, 0.3, False)]}
    for key, b0, b1 in (("input_norm", (1.5, False), (None, False)), ("prenorm", (0.1, True), (1.2, False)),
                        ("qk_norm", (0.1, True), (0.2, True)), ("mid_norm", (-1.0, True), (0.3, True))):
        claims[f"closes_gap_needs_{key}"] = [entry(0.3, True, *b0), entry(0.9, False, *b1),
                                             entry(None, False, None, False)]
    table = {"scale": "book", "blocks": 3, "claims": claims}
    monkeypatch.setattr(stability, "load", lambda slug, directory=None: table)
    out = experiments._block_counts(SimpleNamespace(slug="dnt", scale="book"))  # type: ignore[arg-type]
    assert (out["blocks_defined"], out["blocks_undefined"], out["dnt_pass_blocks"]) == (2, 1, 1)
    assert out["dnt_ratio_missing"] == 1 and out["clip_closes_blocks"] == 1
    assert (out["abl_input_norm_fails_defined"], out["abl_input_norm_diverged"]) == (2, 1)
    assert out["abl_input_norm_fails_at_dnt_pass"] == 1
    assert out["abl_prenorm_fails_defined"] == 1 and out["abl_prenorm_fails_at_dnt_pass"] == 0
    assert out["abl_qk_norm_fails_defined"] == 0 and out["abl_mid_norm_fails_defined"] == 0
    other = experiments._block_counts(SimpleNamespace(slug="dnt", scale="smoke"))  # type: ignore[arg-type]
    assert np.isnan(other["blocks_defined"])
