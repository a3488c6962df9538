"""Probe examples for ``iclr_lab.optimizers`` (see ``api_probe.examples``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {}

#: (public path, parameter or "*", probe label or "*") -> why the probe's finding is right as it is
ALLOW: dict[tuple[str, str, str], str] = {}
