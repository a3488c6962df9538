"""Tests of the seeded synthetic languages (iclr_lab/core/languages.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iclr_lab.core.languages import ZipfLanguage, zipf_weights


def test_zipf_weights_follow_the_power_law():
    w = zipf_weights(100, 1.1)
    assert w.sum() == pytest.approx(1.0)
    assert np.all(np.diff(w) < 0)
    # p_k / p_0 = (k + 1)^-s
    assert w[9] / w[0] == pytest.approx(10.0**-1.1)
    assert np.allclose(zipf_weights(7, 0.0), 1 / 7)


def test_stationary_distribution_is_a_fixed_point_of_the_chain():
    lang = ZipfLanguage(vocab=50, exponent=1.3, copy_prob=0.7, seed=3)
    p = np.stack([lang.transition(a) for a in range(lang.vocab)])
    assert np.allclose(p.sum(axis=1), 1.0)
    assert np.allclose(lang.stationary @ p, lang.stationary, atol=1e-14)
    assert lang.stationary.sum() == pytest.approx(1.0)


def test_entropy_floor_matches_its_definition_and_the_empirical_loss():
    lang = ZipfLanguage(vocab=64, seed=1)
    p = np.stack([lang.transition(a) for a in range(lang.vocab)])
    h = -(p * np.log(p)).sum(axis=1)
    assert np.allclose(lang.conditional_entropies(), h, atol=1e-12)
    assert lang.entropy_floor() == pytest.approx(float(lang.stationary @ h), abs=1e-12)
    # the true model's mean negative log-likelihood on samples converges to the floor
    x = lang.sample(4000, 20, np.random.default_rng(0))
    nll = -np.log(p[x[:, :-1], x[:, 1:]])
    assert nll.mean() == pytest.approx(lang.entropy_floor(), abs=3 * nll.std() / math.sqrt(nll.size))


def test_floor_orders_the_limiting_cases():
    iid = ZipfLanguage(vocab=64, copy_prob=0.0)
    assert iid.entropy_floor() == pytest.approx(iid.unigram_entropy())
    assert np.allclose(iid.stationary, iid.zipf)
    lang = ZipfLanguage(vocab=64, copy_prob=0.5)
    assert 0 < lang.entropy_floor() < lang.unigram_entropy() < math.log(64)


def test_samples_follow_the_successor_rule_and_the_stationary_marginal():
    lang = ZipfLanguage(vocab=32, exponent=1.0, copy_prob=0.5, seed=2)
    x = lang.sample(20000, 6, np.random.default_rng(5))
    assert x.dtype == np.int64 and x.min() >= 0 and x.max() < 32
    follows = (x[:, 1:] == lang.successor[x[:, :-1]]).mean()
    # copies, plus Zipf draws that happen to land on the successor
    expected = 0.5 + 0.5 * float(lang.stationary @ lang.zipf[lang.successor])
    assert follows == pytest.approx(expected, abs=0.01)
    for t in (0, 5):  # every position has the stationary marginal
        freq = np.bincount(x[:, t], minlength=32) / len(x)
        assert np.abs(freq - lang.stationary).max() < 0.01


def test_same_seed_same_language_and_same_samples():
    a, b = ZipfLanguage(vocab=40, seed=7), ZipfLanguage(vocab=40, seed=7)
    assert np.array_equal(a.successor, b.successor)
    assert np.array_equal(a.sample(3, 9, np.random.default_rng(1)), b.sample(3, 9, np.random.default_rng(1)))
    assert not np.array_equal(a.successor, ZipfLanguage(vocab=40, seed=8).successor)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"vocab": 1}, "vocab"),
    ({"vocab": 2.5}, "vocab"),
    ({"exponent": -0.1}, "exponent"),
    ({"copy_prob": 1.0}, "copy_prob"),
    ({"copy_prob": -0.5}, "copy_prob"),
    ({"seed": -1}, "seed"),
])
def test_bad_arguments_name_the_parameter(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ZipfLanguage(**kwargs)


def test_bad_sampling_arguments_name_the_parameter():
    lang = ZipfLanguage(vocab=8)
    with pytest.raises(ValueError, match="n_sequences"):
        lang.sample(0, 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="length"):
        lang.sample(2, 0, np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        lang.sample(2, 4, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prev"):
        lang.transition(8)
    with pytest.raises(ValueError, match="exponent"):
        zipf_weights(8, 11.0)
