"""The probe's allow-list: each entry is a call the probe would flag, and why it is right as it is.

``ALLOW[(public path, parameter, probe label)] = reason``; ``"*"`` stands for every parameter or
every label. The entries live beside each part's examples (``examples_<part>.py``); this module
merges them. Keep it short: a bad value should be refused, and an accepted one documented.
"""

from __future__ import annotations

import importlib

from api_probe.examples import PARTS

ALLOW: dict[tuple[str, str, str], str] = {}
for _part in PARTS:
    ALLOW.update(importlib.import_module(f"api_probe.examples_{_part}").ALLOW)

#: The one rule that is not an entry: a dataclass with no ``__post_init__`` is a record that the
#: package builds and returns (``IHTResult``, ``Trace``, ``CheckResult``), whose fields come from the
#: package's own code, so it checks nothing. A dataclass that a user fills in (a config, a setup)
#: has a ``__post_init__`` that validates it, and is probed.
RECORDS_REASON = ("a result record (a dataclass with no __post_init__): the package builds it from "
                  "its own values; it validates nothing by design")
