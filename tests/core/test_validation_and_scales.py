import math
import sys

import numpy as np
import pytest

from iclr_lab.core.scales import pick, seed_everything
from iclr_lab.core.validation import check_choice, check_int, check_range


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
