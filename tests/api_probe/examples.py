"""Valid arguments for the required parameters of the public callables that the probe calls.

``EXAMPLES[public path]`` is a function returning keyword arguments: a value for every required
parameter, and optionally smaller values for others, so that the probe's calls stay quick. Each part
of the package (or chapter) has its own module (``examples_<part>.py``, with its ``EXAMPLES`` and
its allow-list ``ALLOW``); this module merges their ``EXAMPLES``. Build torch objects inside the
functions, so that a table is cheap to import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: one module per part, or per chapter where two people work on one part at once
PARTS = tuple(sorted(p.stem.removeprefix("examples_") for p in Path(__file__).parent.glob(
    "examples_*.py")))

EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {}
for _part in PARTS:
    EXAMPLES.update(importlib.import_module(f"api_probe.examples_{_part}").EXAMPLES)
