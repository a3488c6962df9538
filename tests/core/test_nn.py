import math

import pytest

from iclr_lab.core.nn import warmup_cosine


def test_warmup_cosine_rises_linearly_then_decays_to_zero():
    peak, warmup, steps = 0.3, 10, 110
    assert warmup_cosine(1, peak, warmup, steps) == pytest.approx(peak / warmup)
    assert warmup_cosine(warmup, peak, warmup, steps) == pytest.approx(peak)
    assert warmup_cosine(warmup + 50, peak, warmup, steps) == pytest.approx(peak / 2), "half-way: cos = 0"
    assert warmup_cosine(steps, peak, warmup, steps) == pytest.approx(0.0, abs=1e-15)
    rates = [warmup_cosine(t, peak, warmup, steps) for t in range(warmup, steps + 1)]
    assert all(a >= b for a, b in zip(rates, rates[1:], strict=False)), "monotone after warm-up"
    assert warmup_cosine(35, peak, 10, 110) == pytest.approx(peak * 0.5 * (1 + math.cos(math.pi / 4)))
