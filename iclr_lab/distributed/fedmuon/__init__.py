"""FedMuon: Federated Learning with Bias-corrected LMO-based Optimization (Takezawa et al., ICLR 2026).

The chapter is ``book/distributed/fedmuon.md``. The package splits in three:

* :mod:`~iclr_lab.distributed.fedmuon.method`: what an engineer imports: the Newton-Schulz
  orthogonalisation :func:`~iclr_lab.distributed.fedmuon.method.newton_schulz`, the linear
  minimisation oracle :func:`~iclr_lab.distributed.fedmuon.method.lmo`, the client's local steps
  :func:`~iclr_lab.distributed.fedmuon.method.local_lmo_steps`, and the convex toy of Theorem 1;
* :mod:`~iclr_lab.distributed.fedmuon.training`: federated training with client sampling, written
  once against the collective interface
  (:func:`~iclr_lab.distributed.fedmuon.training.train_clients`);
* :mod:`~iclr_lab.distributed.fedmuon.stacked`: the same training and toy runs for many methods
  and clients at once in stacked tensors, equal to the serial ones bit for bit (what
  ``reproduce`` runs);
* :mod:`~iclr_lab.distributed.fedmuon.experiments`: the chapter's
  :func:`~iclr_lab.distributed.fedmuon.experiments.reproduce`,
  :func:`~iclr_lab.distributed.fedmuon.experiments.launch` (what ``iclr-lab launch fedmuon`` runs),
  claims, charts and explorer.
"""

from iclr_lab.distributed.fedmuon.experiments import (
    COLORS,
    FEDMUON,
    charts,
    explorer,
    launch,
    methods,
    ns_map,
    ns_map_chart,
    numbers,
    reproduce,
)
from iclr_lab.distributed.fedmuon.method import (
    KELLER,
    NORMS,
    lmo,
    local_lmo_steps,
    newton_schulz,
    toy_matrix,
    toy_run,
)
from iclr_lab.distributed.fedmuon.training import (
    ALGORITHMS,
    FedMethod,
    FedSetup,
    client_shards,
    model_bytes,
    train_clients,
)

__all__ = [
    "ALGORITHMS",
    "COLORS",
    "FEDMUON",
    "KELLER",
    "NORMS",
    "FedMethod",
    "FedSetup",
    "charts",
    "client_shards",
    "explorer",
    "launch",
    "lmo",
    "local_lmo_steps",
    "methods",
    "model_bytes",
    "newton_schulz",
    "ns_map",
    "ns_map_chart",
    "numbers",
    "reproduce",
    "toy_matrix",
    "toy_run",
    "train_clients",
]
