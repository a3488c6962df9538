"""Paths and chapter lists shared by the site tests (imported as ``sitekit``)."""

from __future__ import annotations

from pathlib import Path

from iclr_lab.core.registry import Chapter, chapters

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(__import__("os").environ.get("ICLR_LAB_SITE", ROOT / "_build" / "html"))
ARTEFACTS = ROOT / "_build" / "site-tests"
CHAPTERS = chapters(available_only=True)


def page_of(chapter: Chapter) -> Path:
    """The built HTML page of ``chapter``."""
    return SITE / "book" / chapter.part / f"{chapter.slug}.html"
