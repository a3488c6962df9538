"""AMD: Asynchronous Matching with Dynamic sampling for multimodal dataset distillation (ICLR 2026).

The chapter is ``book/data/amd.md``. The package splits in two:

* :mod:`~iclr_lab.data.amd.method`: the paired digits data, the dual encoder, expert trajectories,
  :func:`distill` (synchronous and asynchronous trajectory matching), SPM prototypes and
  :func:`retrieval_recall`: what a user imports;
* :mod:`~iclr_lab.data.amd.experiments`: the chapter's :func:`reproduce`, claims, charts and
  explorer.
"""

from iclr_lab.data.amd.experiments import (
    COLORS,
    CONFIGS,
    METRICS,
    charts,
    explorer,
    explorer_chart,
    image_grid,
    numbers,
    pairs_table,
    recall_vs_pairs,
    reproduce,
    summary,
)
from iclr_lab.data.amd.method import (
    LR_GRID,
    VOCAB,
    DistillResult,
    PairedDigits,
    Trajectories,
    async_ranges,
    contrastive_loss,
    distill,
    encode,
    evaluate_set,
    init_params,
    kmeans_prototypes,
    matching_loss,
    paired_digits,
    random_subset,
    retrieval_recall,
    stratified_subset,
    text_encoder,
    train_experts,
    train_on_set,
)

__all__ = [
    "COLORS",
    "CONFIGS",
    "LR_GRID",
    "METRICS",
    "VOCAB",
    "DistillResult",
    "PairedDigits",
    "Trajectories",
    "async_ranges",
    "charts",
    "contrastive_loss",
    "distill",
    "encode",
    "evaluate_set",
    "explorer",
    "explorer_chart",
    "image_grid",
    "init_params",
    "kmeans_prototypes",
    "matching_loss",
    "numbers",
    "paired_digits",
    "pairs_table",
    "random_subset",
    "recall_vs_pairs",
    "reproduce",
    "retrieval_recall",
    "stratified_subset",
    "summary",
    "text_encoder",
    "train_experts",
    "train_on_set",
]
