"""The stacked digits runs of the VRAdam chapter equal the serial ones bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from iclr_lab.core.datasets import digits
from iclr_lab.optimizers.vradam import experiments as ex
from iclr_lab.optimizers.vradam.stacked import RateSpec, Spec, rate_many, train_many


@pytest.fixture(scope="module")
def data():  # noqa: ANN201
    return digits(seed=0)


def _serial(spec: Spec, steps: int, data, eval_every: int) -> tuple[pd.DataFrame, np.ndarray]:  # noqa: ANN001
    method = ex.VR_CAL if spec.vradam else ex.ADAMW
    return ex.train_digits(method, spec.lr, spec.seed, steps=steps, beta3=spec.beta3, data=data,
                           eval_every=eval_every)


def _check_close(stacked: list, specs: list[Spec], steps: int, data, eval_every: int) -> None:  # noqa: ANN001
    for spec, (log, ratios) in zip(specs, stacked, strict=True):
        ref_log, ref_ratios = _serial(spec, steps, data, eval_every)
        assert list(log.columns) == list(ref_log.columns), spec
        assert log.shape == ref_log.shape, spec
        # to float rounding: bit for bit where the CPU's batched and single-model kernels round
        # alike, which an AVX-512 AMD EPYC's do not (entries differ by ~1e-7 there), and 25 float32
        # steps amplify it (a train loss 1.1e-5 relative apart on an AMD EPYC with AVX2)
        for col in log.columns:
            np.testing.assert_allclose(log[col].to_numpy(dtype=float), ref_log[col].to_numpy(dtype=float),
                                       rtol=1e-4, atol=1e-7, equal_nan=True, err_msg=f"{spec} {col}")
        np.testing.assert_allclose(ratios, ref_ratios, rtol=1e-4, atol=1e-7, err_msg=str(spec))


def test_stacked_equals_serial(data) -> None:  # noqa: ANN001
    # VRAdam with an active gate (large beta3), VRAdam at beta3 = 1, AdamW; two seeds, mixed rates
    specs = [Spec(True, 1e-1, 0, beta3=500.0), Spec(True, 3e-2, 1, beta3=1.0),
             Spec(False, 1e-2, 0), Spec(False, 0.1 * 0.37, 1), Spec(True, 1e-3, 1, beta3=50.0)]
    steps, every = 25, 10
    out = train_many(specs, steps=steps, data=data, eval_every=every,
                     weight_decay=ex.WEIGHT_DECAY, lr_cutoff=ex.LR_CUTOFF)
    _check_close(out, specs, steps, data, every)
    assert any(r.min() < 0.5 for _, r in out)  # the gate did act


def test_stacked_divergence(data) -> None:  # noqa: ANN001
    # a huge rate diverges: that run stops (its log ends on the non-finite step), the others go on
    specs = [Spec(False, 1e6, 0), Spec(True, 1e-2, 0, beta3=1.0)]
    steps = 30
    out = train_many(specs, steps=steps, data=data, eval_every=10,
                     weight_decay=ex.WEIGHT_DECAY, lr_cutoff=ex.LR_CUTOFF)
    _check_close(out, specs, steps, data, 10)
    assert len(out[1][1]) == steps


def test_empty() -> None:
    assert train_many([], steps=3, data=None, weight_decay=0.0, lr_cutoff=1.0) == []  # type: ignore[arg-type]


def test_threads_do_not_matter(data) -> None:  # noqa: ANN001
    specs = [Spec(True, 3e-2, 2, beta3=100.0), Spec(False, 3e-2, 2)]
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = train_many(specs, steps=12, data=data, eval_every=6,
                         weight_decay=ex.WEIGHT_DECAY, lr_cutoff=ex.LR_CUTOFF)
    finally:
        torch.set_num_threads(old)
    _check_close(one, specs, 12, data, 6)
    assert math.isfinite(float(one[0][0].test_loss.iloc[-1]))


def test_rate_many_equals_rate_run(data) -> None:  # noqa: ANN001
    # Experiment C's runs: VRAdam with an active gate (two beta3), AdamW at alpha0 and at the floor
    specs = [RateSpec(True, ex.RATE_ALPHA0, 0, 37.0), RateSpec(False, ex.RATE_ALPHA0, 0),
             RateSpec(False, ex.RATE_ALPHA0 / 20, 1), RateSpec(True, ex.RATE_ALPHA0, 1, 500.0)]
    steps = 120
    out = rate_many(specs, steps=steps, data=data, penalty=ex.RATE_PENALTY, lr_cutoff=ex.LR_CUTOFF)
    for spec, got in zip(specs, out, strict=True):
        ref = ex.rate_run("VRAdam" if spec.vradam else "AdamW", spec.seed, steps=steps,
                          beta3=spec.beta3, alpha0=spec.alpha0, data=data)
        assert got.keys() == ref.keys()
        for key in ref:
            assert np.array_equal(got[key], ref[key], equal_nan=True), (spec, key)
    assert out[3]["ratio"].min() < 0.5  # the gate did act
    assert rate_many([], steps=3, data=data, penalty=0.0, lr_cutoff=1.0) == []
