"""Number equations, theorems, exercises and figures per chapter (a local Sphinx extension).

Sphinx numbers every enumerable node (figures, tables, ``displaymath`` under ``math_numfig``, and
the ``exercise`` and ``proof`` nodes of sphinx-exercise and sphinx-proof) with one counter per
*section number*. The book's table of contents is not numbered, so every page shares the empty
section number and the counters run on across the book: the second exercise of one chapter would be
"Exercise 6". This extension runs after Sphinx has assigned those numbers and restarts each counter
on every page, keeping the order within the page. Cross-references ({numref}, {eq}, {prf:ref})
read the same table, so they agree with the labels.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment


def renumber_per_page(app: Sphinx, env: BuildEnvironment) -> list[str]:
    changed = []
    for docname, by_type in env.toc_fignumbers.items():
        for figtype, numbers in by_type.items():
            ordered = sorted(numbers, key=lambda node_id: numbers[node_id])
            fresh = {node_id: (i,) for i, node_id in enumerate(ordered, start=1)}
            if fresh != numbers:
                by_type[figtype] = fresh
                changed.append(docname)
    return sorted(set(changed))


def setup(app: Sphinx) -> dict[str, Any]:
    # Sphinx's own TocTreeCollector assigns the book-wide numbers on this event at priority 500.
    app.connect("env-get-updated", renumber_per_page, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
