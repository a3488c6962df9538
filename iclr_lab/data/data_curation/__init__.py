"""When less data is more: exact test-error curves for curated data.

Reproduces Dohmatob, Pezeshki and Askari-Hemmat, "Why Less is More (Sometimes): A Theory of Data
Curation" (ICLR 2026, arXiv 2511.03492). The chapter is ``book/data/data_curation.md``. The package
splits in two:

* :mod:`~iclr_lab.data.data_curation.model`: what a user imports: the teacher-student model
  (:class:`Geometry`, :func:`sample`), the curation rules (:func:`keep_mask`), curated ridge
  (:func:`ridge`), the closed-form test error (:func:`theory_error`, :func:`limit_error`), Monte
  Carlo (:func:`simulate`) and self-training (:func:`self_train`);
* :mod:`~iclr_lab.data.data_curation.experiments`: the chapter's :func:`reproduce`, its claims,
  charts and explorer.
"""

from iclr_lab.data.data_curation.experiments import (
    COLLAPSE,
    COLORS,
    SELF,
    SIZES,
    STRONG,
    STRONG_GEN,
    WEAK,
    charts,
    explorer,
    numbers,
    phase_chart,
    phase_table,
    reproduce,
)
from iclr_lab.data.data_curation.model import (
    RULES,
    Geometry,
    Moments,
    angle_error,
    keep_mask,
    kept_moments,
    limit_error,
    ridge,
    sample,
    self_train,
    simulate,
    theory_error,
    threshold,
)

__all__ = ["COLLAPSE", "COLORS", "RULES", "SELF", "SIZES", "STRONG", "STRONG_GEN", "WEAK", "Geometry",
           "Moments", "angle_error", "charts", "explorer", "keep_mask", "kept_moments", "limit_error",
           "numbers", "phase_chart", "phase_table", "reproduce", "ridge", "sample", "self_train",
           "simulate", "theory_error", "threshold"]
