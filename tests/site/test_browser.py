"""Every chapter in a real browser (headless Chromium driven by Playwright), with the network cut.

For each chapter page served from ``_build/html`` on 127.0.0.1, with every request that leaves
127.0.0.1 aborted (so a page that still needs a CDN fails here exactly as it would for a reader
without network):

* each Altair chart rendered an SVG or a canvas;
* MathJax typeset the equations: no raw ``\\(`` or ``$$`` is left in the visible text;
* moving a slider bound to a chart changes the chart (every chapter with one; VRAdam has one);
* the console shows no error and no request left the machine;
* the scorecard fits the page width (no horizontal scroll bar, verdict line not cut off);
* a screenshot of the chapter's first chart is saved in ``_build/site-tests/`` as an artefact.

Chromium is Debian's (``make site`` installs it with apt if it is missing); Playwright drives it
through ``executable_path``, never downloading a browser of its own. If Chromium cannot be found
the tests are skipped with a loud reason, never silently.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from labkit import CHROMIUM, CHROMIUM_ARGS, NO_CHROMIUM
from sitekit import ARTEFACTS, CHAPTERS, page_of


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class Page:
    """One chapter page, loaded with the network cut and the console recorded."""

    def __init__(self, browser: Any, url: str) -> None:
        self.errors: list[str] = []
        self.remote: list[str] = []
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.route("**/*", self._route)
        self.page.goto(url, wait_until="load", timeout=60_000)
        self.page.wait_for_load_state("networkidle", timeout=60_000)

    def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(("http://127.0.0.1", "data:", "blob:")):
            route.continue_()
        else:
            self.remote.append(url)
            route.abort()

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="module", params=CHAPTERS, ids=lambda c: c.slug)
def chapter_page(request: pytest.FixtureRequest, browser: Any, server: str) -> Iterator[tuple[Any, Page]]:
    chapter = request.param
    path = page_of(chapter)
    assert path.exists(), f"{chapter.slug}: the built site has no page {path}"
    start = time.perf_counter()
    page = Page(browser, f"{server}/book/{chapter.part}/{chapter.slug}.html")
    # MathJax typesets asynchronously; its startup promise resolves when the page is done
    page.page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise",
                                timeout=30_000)
    page.page.evaluate("MathJax.startup.promise")
    page.page.wait_for_function(
        """() => [...document.querySelectorAll("div[id^='altair-viz']")]
                 .every(d => d.querySelector('svg, canvas') || d.querySelector('.error'))""",
        timeout=60_000)
    page.seconds = time.perf_counter() - start  # type: ignore[attr-defined]
    yield chapter, page
    page.close()


def test_every_chart_renders(chapter_page: tuple[Any, Page]) -> None:
    chapter, page = chapter_page
    charts = page.page.locator("div[id^='altair-viz']")
    n = charts.count()
    assert n > 0, f"{chapter.slug}: no Altair chart on the page"
    failed = [i for i in range(n) if charts.nth(i).locator("svg, canvas").count() == 0]
    messages = [charts.nth(i).inner_text()[:200] for i in failed]
    assert not failed, f"{chapter.slug}: charts {failed} did not render: {messages}"
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    charts.first.scroll_into_view_if_needed()
    charts.first.screenshot(path=str(ARTEFACTS / f"{chapter.slug}-first-chart.png"))


def test_mathjax_typeset_every_equation(chapter_page: tuple[Any, Page]) -> None:
    chapter, page = chapter_page
    assert page.page.locator("mjx-container").count() > 0, f"{chapter.slug}: MathJax rendered nothing"
    text = page.page.evaluate("document.querySelector('main').innerText")
    for raw in ("\\(", "\\[", "$$"):
        assert raw not in text, f"{chapter.slug}: raw {raw!r} left in the visible text"


def test_no_console_errors_and_nothing_fetched_from_the_network(chapter_page: tuple[Any, Page]) -> None:
    chapter, page = chapter_page
    assert not page.remote, f"{chapter.slug}: the page asked the network for {page.remote}"
    assert not page.errors, f"{chapter.slug}: console errors {page.errors}"


def test_a_bound_slider_moves_its_chart(chapter_page: tuple[Any, Page]) -> None:
    chapter, page = chapter_page
    charts = page.page.locator("div[id^='altair-viz']").filter(
        has=page.page.locator("input[type='range']"))
    if charts.count() == 0:
        assert chapter.slug != "vradam", "the VRAdam chapter has a slider chart (training_slider)"
        pytest.skip(f"{chapter.slug} has no slider bound to a chart")
    chart = charts.first
    slider = chart.locator("input[type='range']").first
    chart.scroll_into_view_if_needed()
    before = chart.screenshot()
    target = slider.evaluate("s => (Number(s.value) === Number(s.min) ? s.max : s.min)")
    slider.evaluate("(s, v) => { s.value = v; s.dispatchEvent(new Event('input', {bubbles: true})); }",
                    target)
    page.page.wait_for_timeout(500)
    after = chart.screenshot()
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    (ARTEFACTS / f"{chapter.slug}-slider-moved.png").write_bytes(after)
    assert before != after, f"{chapter.slug}: moving the slider to {target} did not change the chart"


def test_the_scorecard_fits_the_page_width(chapter_page: tuple[Any, Page]) -> None:
    """The glued scorecard needs no horizontal scroll bar and its verdict line is not cut off."""
    chapter, page = chapter_page
    wraps = page.page.locator(".iclr-lab-scorecard-wrap")
    assert wraps.count() >= 1, f"{chapter.slug}: no scorecard on the page"
    sizes = wraps.first.evaluate(
        """w => { const c = w.querySelector('caption');
                  return {scroll: w.scrollWidth, client: w.clientWidth,
                          caption: c ? c.scrollWidth - c.clientWidth : 0}; }""")
    assert sizes["scroll"] <= sizes["client"] + 1, (
        f"{chapter.slug}: the scorecard scrolls sideways ({sizes['scroll']} px of content in a "
        f"{sizes['client']} px box)")
    assert sizes["caption"] <= 1, f"{chapter.slug}: the verdict line is cut off"
