"""Structured recovery and first-order methods: one module per chapter (see the registry in iclr_lab.core)."""
