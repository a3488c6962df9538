"""Tests of the book itself: the table of contents, the chapter template, paired notebooks, the intro
table, citations, and lint of the chapters' code cells."""

import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml

from iclr_lab.core.registry import PARTS, chapters

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import launch_notebooks  # noqa: E402  (tools/ is not a package)

TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
AVAILABLE = chapters(available_only=True)
CHAPTER_FILES = [ROOT / c.chapter_path for c in AVAILABLE]
TEMPLATE = [
    "The paper at a glance", "Learning objectives", "The problem", "The method", "Why it works",
    "Explore", "Reproduce the experiment", "Exercises", "Summary", "References",
]


def _toc_entries():
    yield None, TOC["root"]
    for part in TOC["parts"]:
        for ch in part["chapters"]:
            yield part["caption"], ch["file"]


def test_toc_lists_only_files_that_exist():
    for _, name in _toc_entries():
        assert (ROOT / f"{name}.md").exists(), name


def test_every_implemented_chapter_is_in_the_toc_under_its_part():
    captions = {name: caption for caption, name in _toc_entries()}
    for c in AVAILABLE:
        assert (ROOT / c.chapter_path).exists(), f"{c.slug}: module exists but chapter is missing"
        assert captions.get(c.chapter_path[:-3]) == PARTS[c.part], c.slug
    book_parts = [p["caption"] for p in TOC["parts"] if p["caption"] in PARTS.values()]
    assert book_parts == [v for v in PARTS.values() if v in book_parts], "parts in DESIGN order"


def test_every_part_with_a_chapter_has_an_api_page_in_the_toc():
    api = next(p for p in TOC["parts"] if p["caption"] == "API reference")
    pages = {s["file"] for ch in api["chapters"] for s in [ch, *ch.get("sections", [])]}
    for part in sorted({c.part for c in AVAILABLE}):
        page = ROOT / "book" / "api" / f"{part}.md"
        assert page.exists() and f"book/api/{part}" in pages, f"add book/api/{part}.md to the toc"
        assert f".. iclr-api:: {part}" in page.read_text()


@pytest.mark.parametrize("path", CHAPTER_FILES, ids=lambda p: p.stem)
def test_chapter_follows_the_template(path):
    text = path.read_text()
    nb = jupytext.read(path)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    headings = re.findall(r"^## (.+?)\s*$", markdown, flags=re.M)
    found = [h for h in headings if h in TEMPLATE]
    assert found == TEMPLATE, f"H2 sections must be, in order: {TEMPLATE}"
    assert len(re.findall(r"^# ", markdown, flags=re.M)) == 1, "one H1 title"
    assert "{cite" in text and "{glue:} scorecard" in text
    assert ":pyobject:" in text, "the chapter shows the package's own code"
    assert "prf:theorem" in text and "{exercise}" in text
    hidden = [c for c in nb.cells if c.cell_type == "code"
              and "remove-cell" in c.metadata.get("tags", [])]
    assert any("report.check()" in c.source for c in hidden), "a hidden cell asserts the claims"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert 'find_spec("iclr_lab")' in code[0].source, "first cell installs iclr_lab on Colab"
    assert "seed_everything" in code[1].source, "the setup cell seeds everything"
    assert f"../api/{path.parent.name}" in text, "the chapter links to its part's API reference"


@pytest.mark.parametrize("path", CHAPTER_FILES, ids=lambda p: p.stem)
def test_launch_notebook_is_generated_from_the_chapter(path):
    """``<slug>.ipynb`` is the chapter with its MyST rendered to plain Markdown (what Binder and Colab
    open), regenerated from the ``.md`` by ``python tools/launch_notebooks.py``."""
    ipynb = path.with_suffix(".ipynb")
    assert ipynb.exists(), f"run: python tools/launch_notebooks.py {path.relative_to(ROOT)}"
    header = jupytext.read(path).metadata.get("jupytext", {})
    assert "ipynb" not in header.get("formats", ""), (
        "the .md is not paired with the .ipynb (jupytext would overwrite the launch notebook): "
        "use `formats: md:myst` in the header")
    assert ipynb.read_text() == launch_notebooks.dumps(launch_notebooks.render(path)), (
        f"out of date: python tools/launch_notebooks.py {path.relative_to(ROOT)}")
    nb = nbformat.read(ipynb, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None
               for c in nb.cells if c.cell_type == "code")
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        prose = re.sub(r"```.*?```", "", cell.source, flags=re.S)  # code blocks may hold braces
        assert not re.search(r"\{[a-z][a-z0-9:-]*\}`", prose), f"a MyST role is left: {prose[:300]}"
        assert not re.search(r"^\s*(```|:::)\{", prose, flags=re.M), "a MyST directive is left"


def test_intro_table_matches_the_registry():
    intro = (ROOT / "book" / "intro.md").read_text()
    for c in chapters():
        row = next((ln for ln in intro.splitlines() if f"| `{c.slug}` |" in ln), None)
        assert row is not None, f"intro table lacks {c.slug}"
        if c.available:
            assert f"<{c.part}/{c.slug}>`" in row, f"{c.slug} is ready: link its chapter"
        else:
            assert row.rstrip().endswith("| planned |"), f"{c.slug} is not implemented yet"


def test_every_citation_has_a_bibtex_entry():
    bib = (ROOT / "book" / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,]+),", bib))
    cited = set()
    for md in (ROOT / "book").rglob("*.md"):
        for group in re.findall(r"\{cite(?::[pt])?\}`([^`]+)`", md.read_text()):
            cited |= {k.strip() for k in group.split(",")}
    assert cited <= keys, f"missing from references.bib: {sorted(cited - keys)}"


def test_chapter_code_cells_are_ruff_clean(tmp_path):
    for path in CHAPTER_FILES:
        nb = jupytext.read(path)
        # as .ipynb, so ruff applies its notebook rules (a cell may end in a bare expression)
        nbformat.write(nb, tmp_path / f"{path.stem}.ipynb")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                          "--config", str(ROOT / "pyproject.toml"),
                          "--ignore", "E402,E501,E731,E741", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
