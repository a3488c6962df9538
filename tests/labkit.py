"""Chromium, a JupyterLab server and the chapters' live explorers in it (imported as ``labkit``).

Shared by the site tests (``tests/site``: every chapter's explorer in the book's own environment) and
the launch tests (``tests/launch``: one chapter in the Binder-like environment), so that both drive
the explorers exactly the way a reader's browser does:

* :func:`explorer_notebooks` writes one small notebook per chapter: the chapter's own import
  statements, then its explorer cell(s) verbatim, so the notebook runs the explorer as the chapter
  does without the chapter's experiments;
* :class:`JupyterLab` starts one server of a given environment on 127.0.0.1, token-less, with private
  Jupyter directories and the news and update checks off;
* :class:`ExplorerPage` opens one notebook in a fresh page with every request that leaves
  127.0.0.1 aborted, runs it, waits for a chart (``svg``, ``img`` or ``canvas``) in each explorer's
  output, drags the explorer's first slider and waits for the chart to change, timing the redraw
  from the mouse's release; :func:`check_all` keeps two such pages in flight.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

CHROMIUM = os.environ.get("ICLR_LAB_CHROMIUM") or shutil.which("chromium") or shutil.which(
    "chromium-browser")
#: as root, in a container, with no network: the flags Debian's Chromium needs to start quietly
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-default-apps"]
NO_CHROMIUM = ("BROWSER TESTS SKIPPED: no Chromium on this machine and `apt-get install chromium` failed "
               "(see the output of `make site`); nothing was checked in a browser")

#: What an explorer's output shows once it has drawn its chart.
CHART = ".widget-interact .jp-OutputArea-output :is(svg, img, canvas)"


def _is_explorer_cell(source: str) -> bool:
    lines = [ln for ln in source.strip().splitlines() if ln.strip()]
    return bool(lines) and lines[-1].rstrip().endswith("explorer()")


def explorer_cells(chapter_md: Path) -> tuple[list[str], list[str]]:
    """The chapter's import statements (in order, from every code cell before its first explorer)
    and its explorer cells."""
    import jupytext

    nb = jupytext.read(chapter_md)
    imports: list[str] = []
    explorers: list[str] = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if _is_explorer_cell(cell.source):
            explorers.append(cell.source)
            continue
        if explorers:
            continue
        code = "\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        imports += [ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    return list(dict.fromkeys(imports)), explorers


def explorer_notebooks(chapters: list[Any], out_dir: Path) -> dict[str, Path]:
    """One notebook per chapter in ``out_dir`` (``<slug>.ipynb``): its imports, then its explorers."""
    import nbformat

    out_dir.mkdir(parents=True, exist_ok=True)
    made = {}
    for ch in chapters:
        imports, explorers = explorer_cells(ROOT / ch.chapter_path)
        assert explorers, f"{ch.slug}: the chapter has no cell ending in `explorer()`"
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell("\n".join(imports))]
        nb.cells += [nbformat.v4.new_code_cell(src) for src in explorers]
        path = out_dir / f"{ch.slug}.ipynb"
        nbformat.write(nb, path)
        made[ch.slug] = path
    return made


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class JupyterLab:
    """A JupyterLab server of the environment whose ``bin`` folder is ``bin_dir``, serving
    ``root_dir`` on 127.0.0.1 (a context manager; the server and its kernels stop on exit)."""

    def __init__(self, bin_dir: Path, root_dir: Path, home: Path, env: dict[str, str] | None = None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        settings = home / "lab-settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True, exist_ok=True)
        # no news and no update check: both would reach for the network
        (settings / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        self.env = dict(env if env is not None else os.environ)
        self.env.update(JUPYTER_CONFIG_DIR=str(home / "jupyter-config"),
                        JUPYTER_RUNTIME_DIR=str(home / "jupyter-runtime"),
                        JUPYTERLAB_SETTINGS_DIR=str(home / "lab-settings"),
                        JUPYTERLAB_WORKSPACES_DIR=str(home / "lab-workspaces"),
                        IPYTHONDIR=str(home / "ipython"), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                        OPENBLAS_NUM_THREADS="1", ICLR_LAB_PROGRESS="0", PYTHONHASHSEED="0")
        self.env["PATH"] = f"{bin_dir}{os.pathsep}{self.env.get('PATH', '')}"
        self.cmd = [str(bin_dir / "jupyter-lab"), "--no-browser", "--ServerApp.ip=127.0.0.1",
                    f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                    "--IdentityProvider.token=", "--ServerApp.password=",
                    "--ServerApp.disable_check_xsrf=True",
                    "--LabApp.expose_app_in_browser=True", f"--ServerApp.root_dir={root_dir}",
                    "--LabApp.news_url=", "--allow-root"]
        self.log = home / "jupyterlab.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> JupyterLab:
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=self.log.open("wb"),
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"JupyterLab exited:\n{self.log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{self.url}/api/status", timeout=2):
                    return self
            except OSError:
                time.sleep(0.3)
        raise AssertionError(f"JupyterLab did not start in 90 s:\n{self.log.read_text()[-3000:]}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@dataclass
class ExplorerRun:
    """What one chapter's notebook did in the browser."""

    slug: str
    charts: int = 0                      # explorers that drew a chart
    first_seconds: float = 0.0           # page open to the last explorer's first chart
    redraw_seconds: list[float] = field(default_factory=list)  # slider release to the new chart
    errors: list[str] = field(default_factory=list)            # console errors and kernel errors
    remote: list[str] = field(default_factory=list)            # requests that left the machine


_WAIT_KERNEL = """async () => {
    const w = window.jupyterapp.shell.currentWidget;
    await w.context.ready; await w.sessionContext.ready;
    const k = w.sessionContext.session.kernel;
    for (let i = 0; i < 600 && k.status !== 'idle'; i++) await new Promise(r => setTimeout(r, 100));
    return k.status; }"""
_WAIT_IDLE = """async () => {
    // done when the kernel is idle again and every code cell has run (an execution count) or one
    // failed (run-all stops there)
    const w = window.jupyterapp.shell.currentWidget; const k = w.sessionContext.session.kernel;
    const code = () => w.content.widgets.filter(c => c.model.type === 'code');
    const failed = () => code().some(
        c => c.model.outputs.toJSON().some(o => o.output_type === 'error'));
    const done = () => k.status === 'idle'
        && (failed() || code().every(c => c.model.executionCount !== null));
    for (let i = 0; i < 3000 && !done(); i++) await new Promise(r => setTimeout(r, 100));
    return done(); }"""
#: the cells' error outputs, and anything written to stderr inside an explorer's output
_ERRORS = """() => window.jupyterapp.shell.currentWidget.content.widgets
    .flatMap(c => c.model.type !== 'code' ? [] : c.model.outputs.toJSON()
        .filter(o => o.output_type === 'error').map(o => `${o.ename}: ${o.evalue}`))
    .concat([...document.querySelectorAll(
        '.widget-interact [data-mime-type="application/vnd.jupyter.stderr"]')]
        .map(e => e.innerText.slice(0, 500)))"""
_FINGERPRINT = """(i) => { const e = document.querySelectorAll('.widget-interact')[i]
    .querySelector('.jp-OutputArea-output :is(svg, img, canvas)');
    return e ? (e.src || e.outerHTML).length + ':' + (e.src || e.outerHTML).slice(-4000) : ''; }"""


class ExplorerPage:
    """One chapter's explorer notebook in a fresh page, network cut: :meth:`start` opens it and
    starts running it, :meth:`finish` checks its explorers and closes the page. Two pages can be in
    flight at once, each with its own kernel (:func:`check_all`)."""

    def __init__(self, browser: Any, lab: JupyterLab, notebook: str, slug: str,
                 screenshots: Path | None = None, timeout_s: float = 120) -> None:
        self.lab, self.notebook, self.screenshots, self.timeout_s = lab, notebook, screenshots, timeout_s
        self.run = ExplorerRun(slug)
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000})
        self.page = self.context.new_page()
        self.page.route("**/*", self._route)
        self.page.on("console", lambda m: self.run.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.run.errors.append(f"uncaught: {e}"))

    def _route(self, r: Any) -> None:
        url = r.request.url
        if url.startswith(("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:")):
            r.continue_()
        else:
            self.run.remote.append(url)
            r.abort()

    def start(self) -> ExplorerPage:
        """Open the notebook, wait for its kernel, and start running every cell (without waiting)."""
        self.started = time.perf_counter()
        slug, page = self.run.slug, self.page
        # a workspace of its own: nothing that an earlier page left open is restored here
        page.goto(f"{self.lab.url}/lab/workspaces/{slug}/tree/{self.notebook}?reset", wait_until="load",
                  timeout=60_000)
        page.wait_for_function("window.jupyterapp && window.jupyterapp.shell.currentWidget "
                               "&& window.jupyterapp.shell.currentWidget.sessionContext", timeout=60_000)
        status = page.evaluate(_WAIT_KERNEL)
        assert status == "idle", f"{slug}: the kernel is {status!r}, not idle"
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        return self

    def finish(self) -> ExplorerRun:
        """Wait for every explorer's first chart, drag each one's first slider and time the redraw."""
        run, page = self.run, self.page
        try:
            assert page.evaluate(_WAIT_IDLE), f"{run.slug}: the notebook did not finish in 300 s"
            run.errors += page.evaluate(_ERRORS)
            n = page.locator(".widget-interact").count()
            if n == 0 or run.errors:
                run.errors += [] if run.errors else ["no explorer widget appeared"]
                return run
            page.wait_for_function(f"[...document.querySelectorAll('.widget-interact')].every(w => "
                                   f"w.querySelector('{CHART[len('.widget-interact '):]}'))",
                                   timeout=self.timeout_s * 1000)
            run.first_seconds = time.perf_counter() - self.started
            run.charts = n
            for i in range(n):
                self._drag(i)
            run.errors += page.evaluate(_ERRORS)  # a redraw that raised
        finally:
            try:
                page.evaluate("async () => { const w = window.jupyterapp.shell.currentWidget;"
                              " if (w && w.sessionContext) await w.sessionContext.shutdown(); }")
            except Exception:  # the page may be gone after a failure; the server stops anyway
                pass
            self.context.close()
        return run

    def _drag(self, i: int) -> None:
        page, slug = self.page, self.run.slug
        explorer = page.locator(".widget-interact").nth(i)
        explorer.scroll_into_view_if_needed()
        if self.screenshots is not None:
            self.screenshots.mkdir(parents=True, exist_ok=True)
            explorer.screenshot(path=str(self.screenshots / f"{slug}-{i}-before.png"))
        before = page.evaluate(_FINGERPRINT, i)
        handle = explorer.locator(".noUi-handle").first
        box = handle.bounding_box()
        assert box is not None, f"{slug}: explorer {i} has no slider handle to drag"
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + 90, y, steps=5)
        page.mouse.up()
        released = time.perf_counter()
        page.wait_for_function(f"(before) => {{ const f = ({_FINGERPRINT})({i}); "
                               f"return f !== before && f !== ''; }}", arg=before,
                               timeout=self.timeout_s * 1000)
        self.run.redraw_seconds.append(time.perf_counter() - released)
        if self.screenshots is not None:
            page.wait_for_timeout(200)
            explorer.screenshot(path=str(self.screenshots / f"{slug}-{i}-after.png"))


def check_all(browser: Any, lab: JupyterLab, notebooks: dict[str, Path],
              screenshots: Path | None = None) -> list[ExplorerRun]:
    """Every notebook's explorers, two pages in flight (one kernel runs while the other is checked)."""
    pending = [ExplorerPage(browser, lab, nb.name, slug, screenshots) for slug, nb in notebooks.items()]
    runs: list[ExplorerRun] = []
    in_flight: list[ExplorerPage] = []
    while pending or in_flight:
        while pending and len(in_flight) < 2:
            in_flight.append(pending.pop(0).start())
        runs.append(in_flight.pop(0).finish())
    return runs
