"""The batched paths of iclr_lab.online.utility_learning equal the runs they stand for, bit for bit:
one call with one agent per row equals one call per agent (Algorithm 1 and naive probing), and one
steering call with one horizon per row equals one call per horizon (the chapter's experiments run
the batched forms)."""

from __future__ import annotations

import numpy as np
import pytest

from iclr_lab.online.utility_learning import (
    BestResponse,
    Hedge,
    RegretMatching,
    naive_probing,
    optimal_cep,
    pay_against,
    random_game,
    random_prisoners_dilemma,
    random_utilities,
)
from iclr_lab.online.utility_learning.steering import STEER_RULES, _steer

#: neighbours that differ only in their head start share one learner bank (warmed up row by row)
AGENTS = [Hedge(), Hedge(head_start=30), RegretMatching(head_start=5), RegretMatching(),
          BestResponse()]


def _utilities(rows: int) -> np.ndarray:
    return np.stack([random_utilities(4, np.random.default_rng([k, 1])) for k in range(rows)])


def test_pay_against_with_one_agent_per_row_equals_one_call_per_agent() -> None:
    u, T = _utilities(3), np.array([150, 400, 900])
    marks = [10, 100, 500]
    batch = pay_against(np.tile(u, (len(AGENTS), 1)), [a for a in AGENTS for _ in T],
                        np.tile(T, len(AGENTS)), checkpoints=marks)
    for c, agent in enumerate(AGENTS):
        one = pay_against(u, agent, T, checkpoints=marks)
        rows = slice(c * len(T), (c + 1) * len(T))
        for name in ("estimate", "error", "principal_regret", "agent_regret", "trace",
                     "strategies"):
            np.testing.assert_array_equal(getattr(batch, name)[rows], getattr(one, name), name)


def test_naive_probing_with_one_agent_per_row_equals_one_call_per_agent() -> None:
    u = _utilities(2)
    T, probes, designs = [240, 600], [4, 6], ["pairwise", "flip"]
    batch = naive_probing(np.tile(u, (len(AGENTS), 1)), [a for a in AGENTS for _ in T],
                          T * len(AGENTS), probes=probes * len(AGENTS),
                          design=designs * len(AGENTS))
    for c, agent in enumerate(AGENTS):
        one = naive_probing(u, agent, T, probes=probes, design=designs)
        np.testing.assert_array_equal(batch[2 * c:2 * c + 2], one)


def test_one_agent_per_row_is_checked() -> None:
    with pytest.raises(ValueError, match="agent"):
        pay_against(_utilities(3), [Hedge(), Hedge()], 100)
    with pytest.raises(TypeError, match="agent"):
        naive_probing(_utilities(2), [Hedge(), "Hedge"], 100)


@pytest.mark.parametrize("mixed", [False, True])
def test_steering_with_one_horizon_per_row_equals_one_call_per_horizon(mixed: bool) -> None:
    """Every rule, two horizons; ``mixed`` uses a game whose optimal CEP is mixed, so that the
    rows draw their recommendations every round (each horizon from its own generator)."""
    if mixed:
        game = random_game((2, 2), np.random.default_rng(30))
        assert optimal_cep(game, game.welfare()).mu.max() < 0.99
        games = [game]
    else:
        games = [random_prisoners_dilemma(np.random.default_rng([s, 3])) for s in range(2)]
    batch = [g for g in games for _ in STEER_RULES]
    rules = list(STEER_RULES) * len(games)
    objectives = np.stack([g.welfare() for g in batch])
    Ts = (300, 700)
    both = _steer(batch * 2, [Hedge(), Hedge()], np.concatenate([objectives] * 2),
                  np.repeat(Ts, len(batch)), rules * 2, 3, margin=0.05, record=True)
    B = len(batch)
    for i, T in enumerate(Ts):
        one = _steer(batch, [Hedge(), Hedge()], objectives, T, rules, 3, margin=0.05,
                     record=T == max(Ts))
        for name in ("F", "F_steer", "F_star", "learn_rounds", "eps_hat", "error", "obey"):
            np.testing.assert_array_equal(getattr(both, name)[i * B:(i + 1) * B],
                                          getattr(one, name), name)
    # the paths are those of the longest horizon, with its rows' indices in the batch
    last = one.paths.copy()
    last[:, 0] += B
    np.testing.assert_array_equal(both.paths, last)
