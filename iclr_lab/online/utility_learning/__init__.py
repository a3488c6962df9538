"""Learning a game by paying the agents: utility learning of no-regret agents, and steering.

Reproduces Zhang, Lin, Chen & Sandholm, "Learning a Game by Paying the Agents" (ICLR 2026, arXiv
2503.01976). The chapter is ``book/online/utility_learning.md``. The package splits in two:

* :mod:`~iclr_lab.online.utility_learning.method`: what a user imports: the paying principal
  (:func:`pay_against`, Algorithm 1), :func:`learn_utilities` (Algorithm 2) and the naive probing
  baseline, with the games (:mod:`~iclr_lab.online.utility_learning.games`) and the no-regret
  agents (:mod:`~iclr_lab.online.utility_learning.agents`);
* :mod:`~iclr_lab.online.utility_learning.steering`: :func:`optimal_cep`,
  :func:`dominance_payments` and :func:`steer` (Algorithm 3);
* :mod:`~iclr_lab.online.utility_learning.experiments`: the chapter's :func:`reproduce`, its
  claims, charts and explorer.
"""

from iclr_lab.online.utility_learning.experiments import (
    SIZES,
    charts,
    explorer,
    numbers,
    random_utilities,
    reproduce,
    steering_paths_chart,
)
from iclr_lab.online.utility_learning.method import (
    SIGNALS,
    BestResponse,
    Hedge,
    LearnerBank,
    LearnResult,
    NormalFormGame,
    PaymentRun,
    RegretMatching,
    equivalence_error,
    learn_utilities,
    naive_probing,
    pay_against,
    payment_set_diameter,
    prisoners_dilemma,
    project_payments,
    random_game,
    random_prisoners_dilemma,
    single_agent,
    strategic_center,
)
from iclr_lab.online.utility_learning.steering import (
    STEER_RULES,
    CorrelatedEquilibrium,
    SteerResult,
    dominance_payments,
    optimal_cep,
    steer,
)

__all__ = [
    "SIGNALS",
    "SIZES",
    "STEER_RULES",
    "BestResponse",
    "CorrelatedEquilibrium",
    "Hedge",
    "LearnResult",
    "LearnerBank",
    "NormalFormGame",
    "PaymentRun",
    "RegretMatching",
    "SteerResult",
    "charts",
    "dominance_payments",
    "equivalence_error",
    "explorer",
    "learn_utilities",
    "naive_probing",
    "numbers",
    "optimal_cep",
    "pay_against",
    "payment_set_diameter",
    "prisoners_dilemma",
    "project_payments",
    "random_game",
    "random_prisoners_dilemma",
    "random_utilities",
    "reproduce",
    "single_agent",
    "steer",
    "steering_paths_chart",
    "strategic_center",
]
