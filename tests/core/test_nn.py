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
