"""Data curation and distillation: one module per chapter (see the registry in iclr_lab.core)."""
