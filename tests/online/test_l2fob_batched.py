"""The fast paths of the L2FOB chapter equal the paths they replace, bit for bit: a simulation that
drops the copies whose runs have ended equals one that keeps them (and each copy equals its own
run), for every bidder and every kind of feedback; the stored fluid LP equals a fresh solve."""

from __future__ import annotations

import numpy as np
import pytest

from iclr_lab.online.l2fob import (
    L2FOB,
    FirstPriceAuction,
    PrimalDual,
    SecondPriceAuction,
    fluid_optimum,
)
from iclr_lab.online.l2fob.bidding import _solve_fluid
from iclr_lab.online.l2fob.experiments import _simulate, _streams

HORIZONS = np.array([25, 60, 100, 25, 100, 60])


def _bank(kind: int, rows: np.ndarray) -> L2FOB | PrimalDual:
    """Bank ``kind`` with the copies ``rows`` of its parameter grid."""
    K = HORIZONS.size
    if kind == 0:
        rules = np.array(["lookahead", "signed"] * (K // 2))
        return L2FOB(rho=0.02, gamma=np.linspace(1.2, 2.5, K)[rows],
                     eta_gamma=np.geomspace(0.1, 30, K)[rows],
                     c_conf=np.array([0.0, 0.05, 0.2, 0.05, 0.0, 1.0])[rows],
                     queue=rules[rows].tolist())
    if kind == 1:
        return L2FOB(rho=0.02, eta_gamma=np.full(K, 0.6)[rows], mode="meanfield")
    return PrimalDual(rho=0.02, step=np.geomspace(0.01, 1.0, K)[rows],
                      roi=np.array([True, False] * (K // 2))[rows].tolist())


AUCTIONS = [FirstPriceAuction(), SecondPriceAuction(feedback="partial"),
            FirstPriceAuction(feedback="partial")]  # full, right-censored, current status


@pytest.mark.parametrize("env", AUCTIONS, ids=["full", "right-censored", "current-status"])
@pytest.mark.parametrize("bank", range(3), ids=["l2fob", "meanfield", "primal-dual"])
def test_dropping_ended_runs_changes_nothing(env, bank: int) -> None:
    every = np.arange(HORIZONS.size)
    v, d = _streams(env, int(HORIZONS.max()), list(every))
    fast = _simulate(_bank(bank, every), env, v, d, HORIZONS, 7, "x")
    slow = _simulate(_bank(bank, every), env, v, d, HORIZONS, 7, "x", compact=False)
    assert fast.keys() == slow.keys()
    for key in fast:
        np.testing.assert_array_equal(fast[key], slow[key], err_msg=key)
    # and each copy is its own run: the bank of one, for its own horizon
    for k, T in enumerate(HORIZONS):
        one = _simulate(_bank(bank, every[k:k + 1]), env, v[:T, [k]], d[:T, [k]], np.array([T]),
                        2, "x")
        for key in ("reward", "spend", "peak", "wins", "median_win_bid"):
            np.testing.assert_array_equal(fast[key][k], one[key][0], err_msg=f"{key}[{k}]")


def test_the_stored_fluid_lp_is_a_fresh_solve_and_a_copy() -> None:
    env = SecondPriceAuction()
    first = fluid_optimum(env, 0.01, 2.0, value_bins=30)
    first.policy[:] = -1.0  # a caller that writes into its result does not change the next one
    again = fluid_optimum(SecondPriceAuction(), 0.01, 2.0, value_bins=30)
    fresh = _solve_fluid(env, 0.01, 2.0, 30)
    assert again.nu == fresh.nu and again.dual_roi == fresh.dual_roi
    np.testing.assert_array_equal(again.policy, fresh.policy)
    assert fluid_optimum(env, 0.01, 2.5, value_bins=30).nu != again.nu  # the key holds gamma
