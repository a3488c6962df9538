"""Every chapter's live explorer in a real JupyterLab (the book's own environment), in headless
Chromium, with the network cut.

One JupyterLab server serves one small notebook per chapter (the chapter's imports, then its
explorer cells verbatim: :func:`labkit.explorer_notebooks`); each notebook opens in a page of its
own, runs in its own kernel, and must, for every explorer it holds:

* draw a chart (``svg``, ``img`` or ``canvas``) in the explorer's output area;
* draw a different chart after its first slider is dragged and released;
* leave no error in the console or the outputs, and ask nothing of the network.

These are the checks that the tests driving ``w.result`` without a frontend cannot make: until
``Explorer`` displayed its result itself, every explorer showed its sliders over an empty output.
The table of first-draw and redraw times goes to ``_build/site-tests/explorers.json``, with a
screenshot of each explorer before and after the drag. It does not need the built site.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from labkit import (
    CHROMIUM,
    CHROMIUM_ARGS,
    NO_CHROMIUM,
    ExplorerRun,
    JupyterLab,
    check_all,
    explorer_cells,
    explorer_notebooks,
)
from sitekit import ARTEFACTS, CHAPTERS, ROOT


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ExplorerRun]:
    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    tmp = tmp_path_factory.mktemp("live-explorers")
    notebooks = explorer_notebooks(CHAPTERS, tmp / "notebooks")
    with JupyterLab(Path(sys.executable).parent, tmp / "notebooks", tmp / "home") as lab, \
            playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            done = check_all(browser, lab, notebooks, ARTEFACTS / "explorers")
        finally:
            browser.close()
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    (ARTEFACTS / "explorers.json").write_text(json.dumps([asdict(r) for r in done], indent=1))
    print("\nlive explorers in JupyterLab (first draw from page open; redraw from slider release):")
    for r in sorted(done, key=lambda r: -max(r.redraw_seconds, default=0)):
        redraw = ", ".join(f"{s:.2f}" for s in r.redraw_seconds) or "-"
        print(f"  {r.slug:24s} first {r.first_seconds:5.1f} s   redraw {redraw} s")
    return {r.slug: r for r in done}


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.slug)
def test_explorer_draws_and_redraws_offline(chapter, runs: dict[str, ExplorerRun]) -> None:
    run = runs[chapter.slug]
    _, cells = explorer_cells(ROOT / chapter.chapter_path)
    assert not run.errors, f"{chapter.slug}: errors in the page or the outputs: {run.errors}"
    assert not run.remote, f"{chapter.slug}: JupyterLab asked the network for {run.remote}"
    assert run.charts == len(cells), (f"{chapter.slug}: {run.charts} of {len(cells)} explorers drew a "
                                      "chart in their output")
    assert len(run.redraw_seconds) == len(cells), (f"{chapter.slug}: a chart did not change after its "
                                                   "slider moved")
