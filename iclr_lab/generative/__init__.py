"""Diffusion alignment: one module per chapter (see the registry in iclr_lab.core)."""
