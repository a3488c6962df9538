import math
import sys

import numpy as np
import pytest

from iclr_lab.core.scales import pick, seed_everything
from iclr_lab.core.validation import check_array, check_choice, check_int, check_range


def test_check_range_messages_name_parameter_and_interval():
    assert check_range("lr", 0.1, 0) == 0.1
    with pytest.raises(ValueError, match=r"lr must be in \[0, inf\), got -1"):
        check_range("lr", -1, 0)
    with pytest.raises(ValueError, match=r"beta1 must be in \[0, 1\), got 1.0"):
        check_range("beta1", 1.0, 0, 1, high_open=True)
    with pytest.raises(ValueError, match="lam"):
        check_range("lam", math.nan, 0, 1)
    with pytest.raises(TypeError, match="lr must be a real number"):
        check_range("lr", "0.1", 0)
    with pytest.raises(TypeError):
        check_range("flag", True)


def test_check_array_names_parameter_and_shape():
    x = check_array("X", [[1.0, 2.0]], ndim=2)
    assert isinstance(x, np.ndarray) and x.shape == (1, 2)
    with pytest.raises(ValueError, match=r"X must be 2-dimensional, got shape \(2,\)"):
        check_array("X", [1.0, 2.0], ndim=2)
    with pytest.raises(ValueError, match=r"y must have shape \(n, 3\), got \(4, 2\)"):
        check_array("y", np.ones((4, 2)), shape=(None, 3))
    with pytest.raises(ValueError, match="y must not be empty"):
        check_array("y", np.empty((0, 3)))
    assert check_array("y", np.empty((0, 3)), nonempty=False).shape == (0, 3)
    with pytest.raises(ValueError, match="A must be finite, got 1 NaN"):
        check_array("A", [1.0, math.inf])
    with pytest.raises(TypeError, match="A must be a numeric array"):
        check_array("A", ["a", "b"])
    torch = pytest.importorskip("torch")
    t = torch.ones(2)
    assert check_array("w", t) is t
    with pytest.raises(ValueError, match="w must be finite"):
        check_array("w", torch.tensor([1.0, math.nan]))


def test_check_int_and_choice():
    assert check_int("steps", 3, 1) == 3
    with pytest.raises(ValueError, match=r"steps must be an integer in \[1, inf\]"):
        check_int("steps", 0, 1)
    with pytest.raises(TypeError, match="steps must be an integer"):
        check_int("steps", 2.5)
    with pytest.raises(ValueError, match="scale must be one of"):
        check_choice("scale", "huge", ("smoke", "book"))


def test_pick_requires_every_scale_and_a_known_scale():
    table = {"smoke": 1, "book": 2, "paper": 3}
    assert [pick(table, s) for s in ("smoke", "book", "paper")] == [1, 2, 3]
    with pytest.raises(ValueError, match="scale must be one of"):
        pick(table, "huge")
    with pytest.raises(ValueError, match="missing"):
        pick({"smoke": 1}, "smoke")


def test_seed_everything_is_reproducible_and_pins_torch_threads():
    import torch

    a = seed_everything(3).standard_normal(4)
    ta = torch.rand(3)
    b = seed_everything(3).standard_normal(4)
    tb = torch.rand(3)
    np.testing.assert_array_equal(a, b)
    assert torch.equal(ta, tb)
    assert torch.get_num_threads() == 1
    assert "torch" in sys.modules
    with pytest.raises(ValueError, match="seed"):
        seed_everything(-1)


def test_an_infinite_bound_is_open_unless_closed_explicitly():
    import math

    from iclr_lab.core.validation import check_range

    with pytest.raises(ValueError, match=r"lr must be in \[0, inf\), got inf"):
        check_range("lr", math.inf, 0)
    assert check_range("cap", math.inf, 0, high_open=False) == math.inf
    with pytest.raises(ValueError, match=r"x must be in \(-inf, 1\]"):
        check_range("x", -math.inf, high=1)


@pytest.mark.parametrize(("bad", "error"), [(None, TypeError), (-1, ValueError), (1.5, TypeError),
                                            ("0", TypeError), (2**32, ValueError), (True, TypeError)])
def test_seeds_are_validated_at_every_core_entry(bad, error):
    from iclr_lab.core import datasets, worker_data
    from iclr_lab.core.nn import batch_indices
    from iclr_lab.core.validation import check_seed

    calls = [lambda: check_seed(bad), lambda: datasets.gaussian_mixture(10, 2, 2, seed=bad),
             lambda: datasets.low_rank((4, 4), 1, seed=bad), lambda: datasets.digits(seed=bad),
             lambda: worker_data.shard_iid([0, 1, 0, 1], 2, seed=bad),
             lambda: batch_indices(10, 2, 5, bad), lambda: seed_everything(bad)]
    for call in calls:
        with pytest.raises(error, match="seed"):
            call()


def test_a_valid_seed_is_returned_as_an_int():
    import numpy as np

    from iclr_lab.core.validation import SEED_MAX, check_seed

    assert check_seed(np.int64(7)) == 7 and type(check_seed(np.int64(7))) is int
    assert check_seed(SEED_MAX) == SEED_MAX


def test_one_thread_pins_blas_and_torch_and_restores_them():
    import subprocess
    import textwrap

    from threadpoolctl import threadpool_info

    from iclr_lab.core.scales import one_thread

    torch = pytest.importorskip("torch")
    torch.set_num_threads(2)
    with one_thread():
        assert torch.get_num_threads() == 1
        assert all(p["num_threads"] == 1 for p in threadpool_info())
    assert torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="threads"):
        with one_thread(0):
            pass
    # a chapter that imports torch inside the block gets one thread too, and the variable is restored
    code = textwrap.dedent("""
        import os, sys
        os.environ["OMP_NUM_THREADS"] = "3"
        from iclr_lab.core.scales import one_thread
        with one_thread():
            import torch
            n = torch.get_num_threads()
        print(n, os.environ["OMP_NUM_THREADS"])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "3"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), None])
def test_check_arrays_cheap_finiteness_test_decides_as_isfinite_does(bad):
    """check_array tries a tensor's finiteness with sum(x * 0) first (cheaper than isfinite); it
    must accept and refuse exactly what an isfinite pass does, with the same message."""
    import torch

    from iclr_lab.core.validation import _all_finite

    x = torch.tensor([[1.0, -2.0, 3e38], [3e38, 0.0, -0.0]], requires_grad=True)
    y = x.detach().clone()
    if bad is not None:
        y[1, 1] = bad
    assert _all_finite(y) == bool(torch.isfinite(y).all())
    if bad is None:
        assert check_array("x", y) is y and check_array("x", x) is x
    else:
        with pytest.raises(ValueError, match="x must be finite, got 1 NaN or infinite entries of 6"):
            check_array("x", y)
