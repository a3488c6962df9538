"""The table of the book's 19 chapters, and lazy access to their modules.

Each chapter is named by one slug everywhere (DESIGN.md section 1): module
``iclr_lab/<part>/<slug>.py``, chapter ``book/<part>/<slug>.md``, tests
``tests/<part>/test_<slug>.py``. A chapter is *available* when its module exists; nothing here
imports it until :func:`load` is called, which keeps ``import iclr_lab`` free of torch.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from iclr_lab.core.scales import check_scale
from iclr_lab.core.validation import check_choice, check_int

if TYPE_CHECKING:
    from iclr_lab.core.report import Report

__all__ = ["PARTS", "Chapter", "chapter", "chapters", "load", "reproduce"]

#: The book's parts in reading order, as folder name -> caption.
PARTS: dict[str, str] = {
    "optimizers": "Optimizers",
    "distributed": "Communication-efficient and asynchronous training",
    "online": "Online learning, auctions and games",
    "recovery": "Structured recovery",
    "data": "Data curation and distillation",
    "generative": "Diffusion alignment",
    "routing": "Neural vehicle routing",
}


@dataclass(frozen=True)
class Chapter:
    """One paper: where its code and chapter live, and how to cite it."""

    slug: str
    part: str
    short: str
    title: str
    arxiv: str | None
    openreview: str
    module_name: str

    @property
    def chapter_path(self) -> str:
        """The chapter's source, relative to the repository root."""
        return f"book/{self.part}/{self.slug}.md"

    @property
    def available(self) -> bool:
        """Whether the package implements this chapter yet."""
        try:
            return importlib.util.find_spec(self.module_name) is not None
        except ModuleNotFoundError:  # the part's package does not exist yet
            return False

    @property
    def url(self) -> str:
        if self.arxiv:
            return f"https://arxiv.org/abs/{self.arxiv}"
        return f"https://openreview.net/forum?id={self.openreview}"


def _ch(slug: str, part: str, short: str, title: str, arxiv: str | None, openreview: str,
        module: str | None = None) -> Chapter:
    return Chapter(slug, part, short, title, arxiv, openreview, module or f"iclr_lab.{part}.{slug}")


_CHAPTERS: tuple[Chapter, ...] = (
    _ch("vradam", "optimizers", "VRAdam",
        "A Physics-Inspired Optimizer: Velocity Regularized Adam", "2505.13196", "6BhduwrCp3"),
    _ch("doit", "optimizers", "DOIT",
        "Towards Dynamic Interleaving Optimizers", None, "AII8ADdDHt"),
    _ch("dnt", "optimizers", "DNT",
        "DNT: a Deeply Normalized Transformer that can be trained by Momentum SGD",
        "2507.17501", "62pn18XmAg"),
    _ch("desloc", "distributed", "DES-LOC",
        "DES-LOC: Desynced Low Communication Adaptive Optimizers for Training Foundation Models",
        "2505.22549", "6N2qFixxYZ"),
    _ch("mtdao", "distributed", "MT-DAO",
        "MT-DAO: Multi-Timescale Distributed Adaptive Optimizers with Local Updates",
        "2510.05361", "5yPP238v4c"),
    _ch("fedmuon", "distributed", "FedMuon",
        "FedMuon: Federated Learning with Bias-corrected LMO-based Optimization",
        "2509.26337", "9k7bvBVenZ"),
    _ch("ringleader", "distributed", "Ringleader ASGD",
        "Ringleader ASGD: The First Asynchronous SGD with Optimal Time Complexity under Data "
        "Heterogeneity", "2509.22860", "5wqTal0EuC"),
    _ch("l2fob", "online", "L2FOB",
        "Towards Safe and Optimal Online Bidding: A Modular Look-ahead Lyapunov Framework",
        None, "AtbRCnvcrZ"),
    _ch("discounted_oco", "online", "Discounted OCO (SOGD/DNP)",
        "Discounted Online Convex Optimization: Uniform Regret Across a Continuous Interval",
        "2505.19491", "65iFtHZ8Cu"),
    _ch("utility_learning", "online", "Learning utilities by paying agents",
        "Learning a Game by Paying the Agents", "2503.01976", ""),
    _ch("frank_wolfe_bregman", "recovery", "Frank–Wolfe with Bregman steps",
        "Fast Frank–Wolfe Algorithms with Adaptive Bregman Step-Size for Weakly Convex Functions",
        "2504.04330", "9asuGOncOi"),
    _ch("tubal_fgd", "recovery", "Low-tubal-rank FGD",
        "The Power of Small Initialization in Noisy Low-Tubal-Rank Tensor Recovery",
        "2603.02729", "6lobo2PXdl"),
    _ch("sparse_relu_iht", "recovery", "Sparse ReLU nets by IHT",
        "A Recovery Guarantee for Sparse Neural Networks", "2509.20323", "6UpstNltZ4"),
    _ch("risp", "recovery", "RISP",
        "Provably Accelerated Imaging with Restarted Inertia and Score-based Image Priors",
        "2510.07470", "8pQsiFyTQi"),
    _ch("data_curation", "data", "Data curation scaling laws",
        "Why Less is More (Sometimes): A Theory of Data Curation", "2511.03492", "8KcjEygedc"),
    _ch("amd", "data", "AMD distillation",
        "Asynchronous Matching with Dynamic Sampling for Multimodal Dataset Distillation",
        None, "7SgSMKM2KF"),
    _ch("imitation_reward_class", "data", "Imitation with a reward class",
        "Learning to Answer from Correct Demonstrations", "2510.15464", "69fIHgLjyH"),
    _ch("rlr", "generative", "RLR",
        "Half-order Fine-Tuning for Diffusion Model: A Recursive Likelihood Ratio Optimizer",
        "2502.00639", "AZ6lqcvHLX"),
    _ch("ccl_vrp", "routing", "CCL multi-task VRP",
        "Chain-of-Context Learning: Dynamic Constraint Understanding for Multi-Task VRPs",
        "2603.01667", "AhE6aSlz5g"),
)

_BY_SLUG = {c.slug: c for c in _CHAPTERS}


def chapters(*, available_only: bool = False) -> list[Chapter]:
    """All 19 chapters in book order, or only those the package implements."""
    return [c for c in _CHAPTERS if c.available or not available_only]


def chapter(slug: str) -> Chapter:
    """The :class:`Chapter` called ``slug``; ``ValueError`` lists the valid slugs otherwise."""
    check_choice("slug", slug, _BY_SLUG)
    return _BY_SLUG[slug]


def load(slug: str) -> ModuleType:
    """Import and return the chapter module for ``slug`` (this is where torch may get imported)."""
    ch = chapter(slug)
    if not ch.available:
        raise ValueError(f"chapter {slug!r} is planned but not implemented yet; "
                         f"available: {[c.slug for c in chapters(available_only=True)]}")
    return importlib.import_module(ch.module_name)


def reproduce(slug: str, scale: str = "book", seed: int = 0) -> Report:
    """Run chapter ``slug``'s experiment: ``load(slug).reproduce(scale=scale, seed=seed)``, on one
    thread (:func:`~iclr_lab.core.scales.one_thread`), as the book and the stability tables run
    it: faster for these small problems, and the same numbers."""
    from iclr_lab.core.scales import one_thread

    check_scale(scale)
    check_int("seed", seed, 0, 2**32 - 1)
    module = load(slug)
    with one_thread():
        return module.reproduce(scale=scale, seed=seed)
