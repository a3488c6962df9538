"""The built pages, read as HTML: structure, launch buttons, size and the data charts embed.

Each check runs for every chapter the registry finds, so a new chapter is held to the same rules.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from sitekit import CHAPTERS, ROOT, page_of

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPO = CONFIG["repository"]["url"].rstrip("/")
BRANCH = CONFIG["repository"].get("branch", "main")
OWNER_REPO = REPO.split("github.com/")[1]
MAX_SITE_MB = 60
MAX_ROWS = 5000


def _html(chapter, site: Path) -> str:
    path = page_of(chapter)
    assert path.exists(), f"{chapter.slug}: no built page at {path.relative_to(site)}"
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.slug)
def test_launch_buttons_open_this_chapters_notebook(chapter, site):
    html = _html(chapter, site)
    nb = f"book/{chapter.part}/{chapter.slug}.ipynb"
    assert (ROOT / nb).exists(), f"the launch notebook {nb} is missing"
    binder = (f"{CONFIG['launch_buttons']['binderhub_url'].rstrip('/')}/v2/gh/{OWNER_REPO}/{BRANCH}"
              f"?urlpath=lab/tree/{nb}")
    colab = f"{CONFIG['launch_buttons']['colab_url'].rstrip('/')}/github/{OWNER_REPO}/blob/{BRANCH}/{nb}"
    hrefs = set(re.findall(r'href="([^"]+)"', html))
    assert binder in hrefs or quote(binder, safe=":/?=&") in hrefs, f"{chapter.slug}: no Binder link {binder}"
    assert colab in hrefs, f"{chapter.slug}: no Colab link {colab}"
    assert f"{REPO}/edit/{BRANCH}/book/{chapter.part}/{chapter.slug}.md" in hrefs, "edit-this-page link"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.slug)
def test_chapter_page_structure(chapter, site):
    """Opens with the paper-at-a-glance box (scorecard inside), ends with exercises and solutions;
    theorems and exercises are rendered (sphinx-proof, sphinx-exercise); citations resolved."""
    html = _html(chapter, site)
    assert len(re.findall(r"<h1>[^<]*<a class=\"headerlink\"", html)) == 1, "one title"
    sections = re.findall(r'<section id="([^"]+)">\s*<h2>', html)
    assert sections[0] == "the-paper-at-a-glance", f"{chapter.slug}: first section is {sections[0]}"
    glance = html.split('id="the-paper-at-a-glance"')[1].split("<section id=")[0]
    assert "iclr-lab-scorecard" in glance and 'class="admonition' in glance, "the box with the scorecard"
    once = html.count("class='iclr-lab-scorecard'") == 1
    assert once, f"{chapter.slug}: the scorecard appears once per chapter"
    before_refs = [s for s in sections if s not in ("summary", "references")]
    assert before_refs[-1] == "exercises", f"{chapter.slug}: exercises close the chapter (before the summary)"
    exercises = html.split('id="exercises"')[1].split('id="summary"')[0]
    assert exercises.count('class="exercise') >= 3, "three or more exercises"
    assert exercises.count('class="solution') >= exercises.count('class="exercise'), "each has a solution"
    assert re.search(r'class="proof (theorem|lemma|proposition)', html), "a theorem block is rendered"
    assert 'class="bibtex-citation"' in html, "citations resolve into the bibliography"
    # a work cited by several chapters sits in each chapter's bibliography: the link stays on the page
    cite_links = re.findall(
        r'class="bibtex-citation"[^>]*>[^<]*<a class="reference internal" href="([^"]+)"', html)
    off_page = [h for h in cite_links if not h.startswith("#")]
    assert cite_links and not off_page, f"{chapter.slug}: citations link to another page: {off_page[:3]}"
    assert not re.search(r"\{(cite|eq|glue:text|prf:ref|ref)\}`", html), "no raw MyST role on the page"
    captions = re.findall(r'<span class="caption-number">(Exercise|Theorem) (\d+)', html)
    for kind in ("Exercise", "Theorem"):
        numbers = [int(n) for k, n in captions if k == kind]
        assert numbers == sorted(set(numbers)) and (not numbers or numbers[0] == 1), (
            f"{chapter.slug}: {kind.lower()}s are numbered from 1 within the chapter, got {numbers}")


def _vega_specs(html: str) -> list[dict]:
    specs = []
    # Altair's loader ends with `})(<spec>, {"mode": "vega-lite"});`
    for m in re.finditer(r"\}\)\((\{.*?\}), \{\"mode\": \"vega-lite\"\}\);", html, flags=re.S):
        specs.append(json.loads(m.group(1)))
    return specs


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.slug)
def test_charts_embed_at_most_5000_rows(chapter, site):
    specs = _vega_specs(_html(chapter, site))
    assert specs, f"{chapter.slug}: found no embedded chart spec"
    for spec in specs:
        for name, rows in spec.get("datasets", {}).items():
            assert len(rows) < MAX_ROWS, f"{chapter.slug}: dataset {name} embeds {len(rows)} rows"


def test_site_size_and_no_remote_scripts(site):
    total = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    assert total <= MAX_SITE_MB * 2**20, f"the built site is {total / 2**20:.1f} MB (limit {MAX_SITE_MB})"
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        remote = re.findall(r"<script[^>]*\bsrc=\"(https?://[^\"]+)\"", text)
        assert not remote, f"{page.relative_to(site)} loads scripts from the network: {remote}"
