"""The public-API suite (issue 24): bad numbers and arrays get a clear error that names the parameter.

See ``tests/api_probe/__init__.py`` for what is probed and what passes. Run this file as a script for
the counts (calls tried, clear errors, documented acceptances, allow-list entries), optionally for
the callables under some prefixes, with ``-v`` to list every failure::

    python tests/test_public_api.py [-v] [iclr_lab.recovery.risp ...]
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import api_probe  # noqa: E402
from api_probe.allow import ALLOW, RECORDS_REASON  # noqa: E402
from api_probe.examples import EXAMPLES  # noqa: E402

CALLABLES = api_probe.public_callables()


def _is_record(obj: object) -> bool:
    return inspect.isclass(obj) and dataclasses.is_dataclass(obj) and not hasattr(obj, "__post_init__")


PROBED = {name: fn for name, fn in CALLABLES.items() if not _is_record(fn)}


def run(name: str) -> list[api_probe.Outcome]:
    return api_probe.probe(name, PROBED[name], EXAMPLES, ALLOW)


@pytest.mark.parametrize("name", sorted(PROBED))
def test_bad_arguments_get_clear_errors(name: str) -> None:
    bad = [o for o in run(name) if o.kind in api_probe.FAILURES]
    assert not bad, "\n".join(map(str, bad))


def test_examples_and_allow_list_name_public_callables() -> None:
    """A stale example or allow-list entry (a renamed function) would silently probe nothing."""
    assert not set(EXAMPLES) - set(CALLABLES)
    assert not {key[0] for key in ALLOW} - set(CALLABLES)


def test_suite_probes_something() -> None:
    """The walk finds the package's public callables, and the annotation reader finds numbers."""
    assert len(CALLABLES) > 300
    sig = inspect.signature(CALLABLES["iclr_lab.core.validation.check_range"])
    assert api_probe.kind_of(sig.parameters["low"]) == "float"
    assert api_probe.stated_range("lr must be in [0, inf), got nan") == (0.0, float("inf"), False, True)


if __name__ == "__main__":
    counts: collections.Counter[str] = collections.Counter()
    failures: list[api_probe.Outcome] = []
    only = [a for a in sys.argv[1:] if not a.startswith("-")]
    for name in sorted(PROBED):
        if only and not any(name.startswith(prefix) for prefix in only):
            continue
        for o in run(name):
            counts[o.kind] += 1
            if o.kind in api_probe.FAILURES:
                failures.append(o)
    records = len(CALLABLES) - len(PROBED)
    print(f"public callables: {len(CALLABLES)} ({records} result records, not probed: {RECORDS_REASON})")
    print(f"calls tried: {sum(v for k, v in counts.items() if k != api_probe.DOCUMENTED)}")
    for kind, n in counts.most_common():
        print(f"  {kind}: {n}")
    print(f"allow-list entries: {len(ALLOW)}")
    if "-v" in sys.argv:
        print("\n".join(map(str, failures)))
