"""The ``iclr-api`` directive: the API reference of one book part, generated from the registry.

``.. iclr-api:: optimizers`` (inside ``{eval-rst}``) expands to an ``automodule`` for every chapter of
that part that the package implements, and for each module of a chapter subpackage
(``iclr_lab.optimizers.vradam.optimizer``, ...), so a new chapter appears in the reference the day
its module exists; a module of the part that is no chapter's (``iclr_lab.distributed.local_sync``)
is documented first, as what the part's chapters share. ``.. iclr-api:: core`` documents every module of ``iclr_lab.core``. Members are
the names in each module's ``__all__``; the docstrings are Google style (napoleon).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


def _modules(name: str) -> list[str]:
    """``name`` and, if it is a package, its submodules (not private ones), in a stable order."""
    module = importlib.import_module(name)
    names = [name]
    if hasattr(module, "__path__"):
        names += sorted(f"{name}.{m.name}" for m in pkgutil.iter_modules(module.__path__)
                        if not m.name.startswith("_"))
    return names


def api_rst(part: str, docs: set[str] | None = None) -> list[str]:
    """The reStructuredText that documents ``part`` ("core" or a book part of the registry).

    A chapter is linked when its page is part of this build (``docs``: the build's documents);
    a one-chapter build (``tools/build_book.py --only``) names the others without a link.
    """
    from iclr_lab.core.registry import PARTS, chapters

    lines: list[str] = []
    if part == "core":
        # the package re-exports its light names; they are documented once, in their own modules
        lines += [".. automodule:: iclr_lab.core", "   :no-members:", ""]
        for name in _modules("iclr_lab.core")[1:]:
            lines += [f".. automodule:: {name}", "   :members:", ""]
        return lines
    if part not in PARTS:
        raise ValueError(f"iclr-api: unknown part {part!r}; parts are {['core', *PARTS]}")
    available = [ch for ch in chapters(available_only=True) if ch.part == part]
    if available:
        # modules of the part that are no chapter's: the machinery its chapters share
        own = {ch.module_name for ch in chapters()}
        shared = [n for n in _modules(f"iclr_lab.{part}")[1:] if n not in own]
        if shared:
            # a title unique to the page: Sphinx labels section titles, and two parts now have one
            title = f"Shared by the chapters of this part (``iclr_lab.{part}``)"
            lines += [title, "-" * len(title), ""]
            for name in shared:
                lines += [f".. automodule:: {name}", "   :members:", ""]
    for ch in chapters(available_only=True):
        if ch.part != part:
            continue
        title = f"{ch.short} (``{ch.slug}``)"
        page = f"book/{ch.part}/{ch.slug}"
        link = f":doc:`/{page}`" if docs is None or page in docs else f"``{ch.chapter_path}``"
        lines += [title, "-" * len(title), "", f"Chapter: {link}.", ""]
        names = _modules(ch.module_name)
        for i, name in enumerate(names):
            # a subpackage's own page shows its docstring; its modules hold the members
            members = [] if (i == 0 and len(names) > 1) else ["   :members:"]
            lines += [f".. automodule:: {name}", *members, ""]
    return lines


class IclrApi(SphinxDirective):
    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        part = self.arguments[0].strip()
        container = nodes.container()
        source = self.get_source_info()[0]
        content = StringList(api_rst(part, set(self.env.found_docs)), source=source)
        self.state.nested_parse(content, self.content_offset, container, match_titles=True)
        return container.children


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("iclr-api", IclrApi)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
