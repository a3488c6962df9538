import math

import pytest
import torch

from iclr_lab.core.nn import adam_update, warmup_cosine


def test_warmup_cosine_rises_linearly_then_decays_to_zero():
    peak, warmup, steps = 0.3, 10, 110
    assert warmup_cosine(1, peak, warmup, steps) == pytest.approx(peak / warmup)
    assert warmup_cosine(warmup, peak, warmup, steps) == pytest.approx(peak)
    assert warmup_cosine(warmup + 50, peak, warmup, steps) == pytest.approx(peak / 2), "half-way: cos = 0"
    assert warmup_cosine(steps, peak, warmup, steps) == pytest.approx(0.0, abs=1e-15)
    rates = [warmup_cosine(t, peak, warmup, steps) for t in range(warmup, steps + 1)]
    assert all(a >= b for a, b in zip(rates, rates[1:], strict=False)), "monotone after warm-up"
    assert warmup_cosine(35, peak, 10, 110) == pytest.approx(peak * 0.5 * (1 + math.cos(math.pi / 4)))


def test_adam_update_is_torch_adam_bit_for_bit() -> None:
    gen = torch.Generator().manual_seed(0)
    for dtype, lr, betas in ((torch.float64, 1e-2, (0.9, 0.999)), (torch.float32, 0.3, (0.5, 0.9))):
        p = torch.randn(4, 3, generator=gen, dtype=dtype)
        ref = p.clone().requires_grad_(True)
        opt = torch.optim.Adam([ref], lr=lr, betas=betas)
        m, v = torch.zeros_like(p), torch.zeros_like(p)
        for t in range(1, 21):
            g = torch.randn(4, 3, generator=gen, dtype=dtype)
            ref.grad = g.clone()
            opt.step()
            adam_update(p, g, m, v, t, lr=lr, betas=betas)
        assert torch.equal(p, ref.detach())


def test_warmup_cosine_is_validated_and_ends_at_zero_instead_of_repeating():
    assert warmup_cosine(0, 1.0, 10, 100) == 0.0
    assert warmup_cosine(100, 1.0, 10, 100) == 0.0
    assert warmup_cosine(150, 1.0, 10, 100) == 0.0  # was periodic: 0.5 past the end
    assert warmup_cosine(200, 1.0, 10, 100) == 0.0  # was 1.0 again
    assert warmup_cosine(50, 1.0, 50, 50) == 1.0 and warmup_cosine(51, 1.0, 50, 50) == 0.0
    assert warmup_cosine(0, 2.0, 0, 10) == 2.0
    for bad, match in [((-3, 1.0, 10, 100), "t"), ((5, 1.0, 101, 100), "warmup"),
                       ((5, 1.0, 10, 0), "steps"), ((5, -1.0, 10, 100), "peak"),
                       ((5, float("nan"), 10, 100), "peak"), ((1.5, 1.0, 10, 100), "t")]:
        with pytest.raises((ValueError, TypeError), match=match):
            warmup_cosine(*bad)
