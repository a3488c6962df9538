"""L2FOB: safe and optimal online bidding under a budget and an ROI target.

Reproduces "Towards Safe and Optimal Online Bidding: A Modular Look-ahead Lyapunov Framework"
(ICLR 2026, OpenReview ``AtbRCnvcrZ``). The chapter is ``book/online/l2fob.md``. The package splits
in two:

* :mod:`~iclr_lab.online.l2fob.bidding`: what a user imports: the auctions
  (:class:`FirstPriceAuction`, :class:`SecondPriceAuction`), the bidders (:class:`L2FOB`,
  :class:`PrimalDual`, :class:`WangDualDescent`), :func:`run` and the fluid LP
  :func:`fluid_optimum`;
* :mod:`~iclr_lab.online.l2fob.experiments`: the chapter's runs and :func:`reproduce`;
  :mod:`~iclr_lab.online.l2fob.claims` its claims, tables and the numbers of its prose;
  :mod:`~iclr_lab.online.l2fob.plots` its charts and explorer.
"""

from .bidding import (
    L2FOB,
    Auction,
    BiddingPolicy,
    CompetingBidOracle,
    Feedback,
    FirstPriceAuction,
    FluidOptimum,
    PrimalDual,
    SecondPriceAuction,
    ValueMoments,
    WangDualDescent,
    fluid_optimum,
    roi_violation,
    run,
    value_moments,
)
from .claims import numbers, tuned_steps
from .experiments import SETTINGS, SIZES, anatomy, reproduce, trajectories
from .plots import anatomy_chart, charts, explorer, trajectory_chart

__all__ = [
    "L2FOB",
    "SETTINGS",
    "SIZES",
    "Auction",
    "BiddingPolicy",
    "CompetingBidOracle",
    "Feedback",
    "FirstPriceAuction",
    "FluidOptimum",
    "PrimalDual",
    "SecondPriceAuction",
    "ValueMoments",
    "WangDualDescent",
    "anatomy",
    "anatomy_chart",
    "charts",
    "explorer",
    "fluid_optimum",
    "numbers",
    "reproduce",
    "roi_violation",
    "run",
    "trajectories",
    "trajectory_chart",
    "tuned_steps",
    "value_moments",
]
