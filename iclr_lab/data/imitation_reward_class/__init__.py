"""Learning to answer from correct demonstrations: a low-cardinality reward class, where MLE fails.

Reproduces Joshi, Li, Bhandari, Kasiviswanathan, Ma & Srebro, "Learning to Answer from Correct
Demonstrations" (ICLR 2026, arXiv 2510.15464). The chapter is ``book/data/imitation_reward_class.md``.
The package splits in two:

* :mod:`~iclr_lab.data.imitation_reward_class.learners`: what a user imports: the reward classes
  (:func:`make_instance`), Algorithm 1 (:class:`RewardClassLearner`) and its online-to-batch
  policy, and maximum likelihood (:func:`mle_policy`);
* :mod:`~iclr_lab.data.imitation_reward_class.experiments`: the chapter's :func:`reproduce`, its
  claims, charts and explorer.
"""

from iclr_lab.data.imitation_reward_class.experiments import (
    SIZES,
    charts,
    explorer,
    mistakes_chart,
    numbers,
    reproduce,
    theorem4_ratio,
)
from iclr_lab.data.imitation_reward_class.learners import (
    INSTANCE_KINDS,
    Instance,
    RewardClassLearner,
    check_reward_class,
    make_instance,
    mle_policy,
    policy_value,
    run_online,
)

__all__ = [
    "INSTANCE_KINDS",
    "SIZES",
    "Instance",
    "RewardClassLearner",
    "charts",
    "check_reward_class",
    "explorer",
    "make_instance",
    "mistakes_chart",
    "mle_policy",
    "numbers",
    "policy_value",
    "reproduce",
    "run_online",
    "theorem4_ratio",
]
