import numpy as np
import pytest

from iclr_lab.core import datasets


def test_digits_split_is_stratified_scaled_and_seeded():
    a = datasets.digits(seed=0)
    b = datasets.digits(seed=0)
    c = datasets.digits(seed=1)
    assert a.x_train.shape == (1437, 64) and a.x_test.shape == (360, 64)
    assert a.x_train.dtype == np.float32 and a.y_train.dtype == np.int64
    assert 0.0 <= a.x_train.min() and a.x_train.max() <= 1.0
    assert a.n_classes == 10 and a.n_features == 64
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.y_test, c.y_test)
    train_freq = np.bincount(a.y_train) / len(a.y_train)
    test_freq = np.bincount(a.y_test) / len(a.y_test)
    assert np.abs(train_freq - test_freq).max() < 0.01
    with pytest.raises(ValueError, match="test_size"):
        datasets.digits(test_size=1.5)


@pytest.mark.parametrize("name", datasets.BUNDLED_IMAGES)
def test_every_listed_image_ships_with_scikit_image(name):
    # requirements.txt has no pooch, so an image that needed a download would raise here
    img = datasets.image(name, size=16)
    assert img.shape == (16, 16)
    assert 0.0 <= img.min() and img.max() <= 1.0


def test_image_rejects_images_that_need_a_download():
    with pytest.raises(ValueError, match="name must be one of"):
        datasets.image("brain")


def test_generators_are_seeded_and_have_the_promised_structure():
    x, y = datasets.gaussian_mixture(200, 5, 3, seed=1)
    x2, y2 = datasets.gaussian_mixture(200, 5, 3, seed=1)
    np.testing.assert_array_equal(x, x2)
    assert x.shape == (200, 5) and set(np.unique(y)) == {0, 1, 2}

    a, w, b = datasets.sparse_regression(50, 100, 7, noise=0.0, seed=2)
    assert np.count_nonzero(w) == 7
    np.testing.assert_allclose(a @ w, b)

    m = datasets.low_rank((20, 15), 3, seed=0)
    assert np.linalg.matrix_rank(m) == 3
    assert np.isclose(np.linalg.norm(m), 1.0)
    t = datasets.low_rank((8, 6, 4), 2, seed=0)
    assert t.shape == (8, 6, 4)
    assert all(np.linalg.matrix_rank(t[:, :, k]) == 2 for k in range(4))
    with pytest.raises(ValueError, match="rank"):
        datasets.low_rank((4, 4), 5)
