"""The stacked runs of the DNT chapter equal the serial ``train_lm`` runs (book/optimizers/dnt.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr_lab.optimizers.dnt import GPTConfig, Placement, train_lm
from iclr_lab.optimizers.dnt.experiments import ABLATIONS
from iclr_lab.optimizers.dnt.stacked import Spec, train_many

torch.set_num_threads(1)

CFG = GPTConfig(vocab=64, context=8, d_model=16, n_heads=2, d_ff=32)
KW = {"steps": 10, "batch_size": 4, "config": CFG, "val_sequences": 16}
SPECS = [
    Spec("pre", "adamw", 1e-2, 0),
    Spec("dnt", "msgdw", 0.6, 1, stats_at=5),
    Spec(ABLATIONS["InputNorm"], "msgdw", 0.1, 2, clip=1.0),
    Spec(ABLATIONS["PreNorm"], "adamw", 3e-2, 1, stats_at=5, stop_at=5),
    Spec(ABLATIONS["MidNorm"], "adamw", 1e-2, 2, clip=0.5),
]


def _serial(spec: Spec):
    return train_lm(spec.norm, spec.optimizer, spec.lr, seed=spec.seed, clip=spec.clip,
                    eval_every=KW["steps"], stats_at=spec.stats_at, stop_at=spec.stop_at, **KW)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_stacked_runs_equal_the_serial_runs(dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # the serial models are built (and initialised) in dtype too
    try:
        stacked = train_many(SPECS, dtype=dtype, **KW)
        serial = [_serial(s) for s in SPECS]
    finally:
        torch.set_default_dtype(old)
    tol = 1e-9 if dtype == torch.float64 else 2e-4
    for spec, a, b in zip(SPECS, stacked, serial, strict=True):
        assert len(a.train_losses) == len(b.train_losses), spec
        np.testing.assert_allclose(a.train_losses, b.train_losses, rtol=tol, err_msg=str(spec))
        np.testing.assert_allclose(a.grad_norms, b.grad_norms, rtol=tol * 10, err_msg=str(spec))
        assert a.final_val_loss == pytest.approx(b.final_val_loss, rel=tol)
        for name in b.weight_norms:
            assert a.weight_norms[name] == pytest.approx(b.weight_norms[name], rel=tol * 10)
        assert (a.stats is None) == (b.stats is None)
        if b.stats is not None:
            np.testing.assert_allclose(a.stats.per_tensor.grad_rms, b.stats.per_tensor.grad_rms,
                                       rtol=tol * 10)


def test_a_diverging_run_leaves_the_stack_and_the_others_are_unaffected():
    specs = [Spec("pre", "msgdw", 1e4, 0), Spec("dnt", "adamw", 1e-2, 1)]
    both = train_many(specs, **KW)
    alone = train_many(specs[1:], **KW)
    assert both[0].diverged and math.isinf(both[0].final_val_loss)
    assert len(both[0].train_losses) < KW["steps"]
    np.testing.assert_array_equal(both[1].train_losses, alone[0].train_losses)


def test_the_leave_one_out_placements_each_drop_one_norm_of_dnt():
    dnt = Placement(input_norm=True, ffn_prenorm=False, qk_norm=True, mid_norm=True)
    for name, p in ABLATIONS.items():
        changed = [f for f in ("input_norm", "attn_prenorm", "qk_norm", "mid_norm")
                   if getattr(p, f) != getattr(dnt, f)]
        assert len(changed) == 1, name


def test_chunking_the_vocabulary_projection_changes_no_bit(monkeypatch):
    from iclr_lab.optimizers.dnt import stacked

    specs = SPECS + [Spec("dnt", "msgdw", 0.3, s) for s in range(4)]  # 9 models: chunks 4, 4, 1
    chunked = train_many(specs, **KW)
    monkeypatch.setattr(stacked, "_CHUNK", len(specs))
    whole = train_many(specs, **KW)
    for a, b in zip(chunked, whole, strict=True):
        assert np.array_equal(a.train_losses, b.train_losses)
        assert a.final_val_loss == b.final_val_loss
        for (n, p), q in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
            assert torch.equal(p, q), n


def test_which_models_share_a_stack_changes_no_bit():
    """The chapter trains the standard models and DNT's family in separate stacks
    (``experiments._Runs.train``); that is a pure speed-up only if a model's numbers do not depend
    on its stack-mates, whose norms it computes and discards (``torch.where`` in ``stacked._norm``).
    (A stack of one model is the exception: its gradient norm is reduced by another kernel and can
    differ in the last bit, which moves a clipped run by rounding.)"""
    specs = SPECS + [Spec("pre", "msgdw", 0.1, 1, clip=1.0)]
    together = train_many(specs, **KW)
    apart = {}
    for standard in (True, False):
        family = [s for s in specs if (s.norm == "pre") == standard]
        apart.update(zip(family, train_many(family, **KW), strict=True))
    for spec, a in zip(specs, together, strict=True):
        b = apart[spec]
        assert np.array_equal(a.train_losses, b.train_losses), spec
        assert np.array_equal(a.grad_norms, b.grad_norms), spec
        assert a.final_val_loss == b.final_val_loss, spec
        for (n, p), q in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
            assert torch.equal(p, q), n
