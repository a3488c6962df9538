"""The per-step adapter of ``TinyDiffusion`` (``adapter="per_step"``, Experiment B of the chapter).

Step ``t``'s mean is the pretrained mean plus ``PER_STEP_BOUND * tanh(u_t)`` and nothing else;
the estimators' per-sample gradients match hand-written autograd; DDPO and RLR with LR in place of
ZO are unbiased against full backprop (and truncated backprop is not); the ZO terms perturb only
the step's own slice.
"""

from __future__ import annotations

import pytest
import torch

from iclr_lab.generative import rlr
from iclr_lab.generative.rlr import estimators

torch.set_num_threads(1)

T = 8


@pytest.fixture(scope="module")
def shared() -> rlr.TinyDiffusion:
    m = rlr.TinyDiffusion(steps=T, hidden=16, seed=0)
    rlr.pretrain(m, steps=150, batch_size=128, seed=0)
    return m


@pytest.fixture(scope="module")
def model(shared: rlr.TinyDiffusion) -> rlr.TinyDiffusion:
    return shared.with_adapter("per_step")


def _phi(seed: int, scale: float = 0.5) -> torch.Tensor:
    return scale * torch.randn(2 * T, generator=torch.Generator().manual_seed(seed))


def test_with_adapter_shares_the_trunk_and_leaves_the_original(shared, model):
    assert model.adapter == "per_step" and shared.adapter == "shared"
    assert model.adapter_size == 2 * T and shared.adapter_size == 2 * 16 + 2
    assert model.l1.weight is shared.l1.weight and model.head.bias is shared.head.bias
    assert model.eps_coef is shared.eps_coef
    with pytest.raises(ValueError, match="adapter"):
        shared.with_adapter("lora")
    with pytest.raises(ValueError, match="adapter"):
        rlr.TinyDiffusion(adapter="both")
    with pytest.raises(ValueError, match="shared"):
        model.adapter_pre(torch.zeros(3, 16), model.zero_adapter())


def test_zero_adapter_is_the_pretrained_mean_exactly(shared, model):
    x = torch.randn(50, 2, generator=torch.Generator().manual_seed(1))
    tt = torch.randint(1, T + 1, (50,), generator=torch.Generator().manual_seed(2))
    for t in (1, 4, T):
        assert torch.equal(model.mean(x, t, model.zero_adapter()), shared.mean(x, t))
        assert torch.equal(model.mean(x, t), shared.mean(x, t))
    assert torch.equal(model.mean(x, tt, torch.zeros(50, 2 * T)), shared.mean(x, tt))
    gen_a, gen_b = (torch.Generator().manual_seed(3) for _ in range(2))
    assert torch.equal(model.sample(64, gen_a, model.zero_adapter()), shared.sample(64, gen_b))


def test_step_t_moves_by_the_bounded_drift_of_u_t_only(shared, model):
    x = torch.randn(40, 2, generator=torch.Generator().manual_seed(4))
    phi = _phi(5, scale=3.0)
    for t in range(1, T + 1):
        shift = model.mean(x, t, phi) - shared.mean(x, t)
        want = rlr.PER_STEP_BOUND * torch.tanh(phi.view(T, 2)[t - 1])
        torch.testing.assert_close(shift, want.expand(40, 2), rtol=0, atol=1e-6)
        assert float(shift.abs().max()) <= rlr.PER_STEP_BOUND + 1e-6
        other = phi.clone().view(T, 2)
        other[torch.arange(T) != t - 1] += 10.0  # every other step's drift changes
        assert torch.equal(model.mean(x, t, other.reshape(-1)), model.mean(x, t, phi))
    # eps is the noise prediction of the same mean, and per-row adapters and steps agree with one
    tt = torch.randint(1, T + 1, (40,), generator=torch.Generator().manual_seed(6))
    mu = model.mean(x, tt, phi.expand(40, -1))
    torch.testing.assert_close(mu, model._mean(x, tt, model.eps(x, tt, phi)), rtol=0, atol=1e-5)
    torch.testing.assert_close(mu, torch.stack([model.mean(x[i:i + 1], int(tt[i]), phi)[0]
                                                for i in range(40)]), rtol=0, atol=1e-6)


def test_full_backprop_per_sample_gradients_match_a_hand_written_loop(model):
    n, phi = 12, _phi(7)
    reward = rlr.target_reward((-2.0, 0.0))
    got = rlr.estimate_gradient("full_bp", model, reward, n, phi=phi,
                                gen=torch.Generator().manual_seed(8))
    gen = torch.Generator().manual_seed(8)
    xT = torch.randn(n, 2, generator=gen)
    noise = {t: torch.randn(n, 2, generator=gen) for t in range(T, 0, -1)}
    for i in range(n):
        p = phi.clone().requires_grad_(True)
        x = xT[i:i + 1]
        for t in range(T, 0, -1):
            trunk = model._mean(x, t, model.head(model.features(x, t)))
            x = trunk + 0.3 * torch.tanh(p.view(T, 2)[t - 1]) + model.sigmas[t - 1] * noise[t][i:i + 1]
        reward(x).sum().backward()
        torch.testing.assert_close(got[i], p.grad, rtol=1e-5, atol=1e-6)


def test_closed_form_is_the_half_order_term_with_h1(model):
    reward = rlr.target_reward((-2.0, 0.0))
    for step in (1, 3, T):
        terms = rlr.step_terms(model, reward, 64, step, phi=_phi(9), h=1,
                               gen=torch.Generator().manual_seed(step))
        scale = float(terms["closed_form"].abs().max())
        assert float((terms["ho"] - terms["closed_form"]).abs().max()) <= 1e-5 * scale
        assert float((terms["lr"] - terms["closed_form"]).abs().max()) <= 1e-5 * scale
        others = torch.ones(T, 2, dtype=torch.bool)
        others[step - 1] = False
        assert not bool(terms["closed_form"].view(-1, T, 2)[:, others].any())


def test_ddpo_and_rlr_are_unbiased_and_truncation_is_not(model):
    """z = ||mean - g*|| / SE (SE includes g*'s own) at a non-zero adapter, fixed seed."""
    reward = rlr.target_reward((-2.0, 0.0))
    phi = _phi(10)
    gen = torch.Generator().manual_seed(11)
    ref = rlr.estimate_gradient("full_bp", model, reward, 20_000, phi=phi, gen=gen)
    g_star, ref_var = ref.mean(0), float(ref.var(0).sum()) / len(ref)

    def z(G: torch.Tensor) -> float:
        se = (float(G.var(0).sum()) / len(G) + ref_var) ** 0.5
        return float((G.mean(0) - g_star).norm()) / se

    n = 20_000
    assert z(rlr.estimate_gradient("ddpo", model, reward, n, phi=phi, gen=gen)) <= 3.0
    assert z(rlr.estimate_gradient("rlr", model, reward, n, phi=phi, gen=gen, h=2)) <= 3.0
    assert z(rlr.estimate_gradient("truncated", model, reward, 4096, phi=phi, gen=gen, K=1)) > 10.0


def test_zo_perturbs_only_the_steps_own_slice(model, monkeypatch):
    seen = {}
    real = model.trajectory

    def spy(n, gen, phi=None, perturb=None, features=False):
        seen["perturb"] = perturb
        return real(n, gen, phi, perturb=perturb, features=features)

    monkeypatch.setattr(model, "trajectory", spy)
    reward = rlr.target_reward((-2.0, 0.0))
    g = rlr.estimate_gradient("rlr", model, reward, 32, phi=_phi(12), h=2, zo=True,
                              gen=torch.Generator().manual_seed(13))
    assert g.shape == (32, 2 * T)
    p = seen["perturb"].view(T + 1, 32, T, 2)
    assert not bool(p[0].any())
    for t in range(1, T + 1):
        mask = torch.ones(T, dtype=torch.bool)
        mask[t - 1] = False
        assert not bool(p[t][:, mask].any())        # nothing outside u_t
    assert bool(p[T][:, T - 1].any())               # and u_T itself is perturbed at step T
    assert torch.equal(estimators._own_slices(3)[2], torch.tensor([0.0, 0.0, 1.0, 1.0, 0.0, 0.0]))


def test_finetune_runs_with_the_per_step_adapter(model):
    reward = rlr.target_reward((-2.0, 0.0))
    log, _ = rlr.finetune("truncated", model, reward, steps=3, batch_size=8, lr=[0.1, 0.3],
                          eval_every=3, eval_samples=64, K=1)
    assert set(log.step) == {0, 3} and len(log) == 4
