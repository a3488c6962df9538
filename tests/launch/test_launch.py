"""The chapters as readers launch them, each in a fresh environment built the way theirs is.

* **Binder**: ``binder/requirements.txt`` (the CPU wheel index line dropped: this machine cannot
  reach it, and ``torch==2.13.0`` resolves to the same CPU build here), then ``binder/postBuild``,
  then every chapter's launch notebook executed with nbclient at smoke scale (``ICLR_LAB_SCALE``:
  the environment is under test, not the claims, which the book build asserts); and that
  environment's own JupyterLab in Chromium, network cut, showing one chapter's live explorer and
  redrawing it when a slider moves (so a frontend package missing from the image, the widget
  manager for one, fails here).
* **Colab**: torch preinstalled (as on Colab), the package with the ``widgets`` extra that the
  notebook's first cell installs, then one chapter's launch notebook executed with nbclient. There
  is no myst-nb there, so the glued text is rendered by ``iclr_lab.core.book``.

Both run in ``make launch`` (part of ``make test``). They take minutes; ``make unit`` skips them.
"""

from __future__ import annotations

import re
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from labkit import CHROMIUM, CHROMIUM_ARGS, NO_CHROMIUM, ExplorerPage, JupyterLab, explorer_notebooks
from launchkit import ROOT, env_for, execute, leftover_widgets, make_venv, pip

from iclr_lab.core.registry import chapters

NOTEBOOKS = [ROOT / c.chapter_path.replace(".md", ".ipynb") for c in chapters(available_only=True)]


def _binder_requirements(tmp: Path) -> Path:
    lines = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    kept = [ln for ln in lines if not ln.strip().startswith(("--extra-index-url", "--index-url"))]
    assert len(kept) == len(lines) - 1, "binder/requirements.txt names the CPU wheel index once"
    path = tmp / "binder-requirements.txt"
    path.write_text("\n".join(kept) + "\n")
    return path


def test_binder_runtime_is_python_311():
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == "python-3.11"


@pytest.fixture(scope="module")
def binder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str], Path]]:
    """The Binder-like environment: its ``bin`` folder, the environment its kernels see, a scratch
    folder."""
    tmp_path = tmp_path_factory.mktemp("binder")
    bin_dir = make_venv(tmp_path / "binder-venv")
    pip(bin_dir, "install", "--quiet", "-r", str(_binder_requirements(tmp_path)))
    env = env_for(bin_dir, tmp_path)
    post = subprocess.run(["bash", str(ROOT / "binder" / "postBuild")], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert post.returncode == 0, post.stdout[-2000:] + post.stderr[-2000:]
    yield bin_dir, env, tmp_path


def test_binder_environment_runs_every_chapter(binder):
    bin_dir, env, tmp_path = binder
    results = execute(bin_dir, NOTEBOOKS, tmp_path / "executed", env)
    assert len(results) == len(NOTEBOOKS)
    for r in results:
        print(f"binder: {Path(r['notebook']).name} executed in {r['seconds']} s")
        if r["retried"]:
            # passes (the second run did), but loudly: the warning summary carries where it hung
            warnings.warn(f"{Path(r['notebook']).name}: a cell timed out and the notebook passed on a "
                          f"second run.\n{r['first_error'][:1500]}\n{r['stacks']}", stacklevel=1)
        assert r["error"] is None, f"{r['notebook']} failed on Binder:\n{r['error']}"
        out = tmp_path / "executed" / Path(r["notebook"]).name
        assert leftover_widgets(out) == 0, f"{out.name}: progress-bar widgets left in the outputs"


def test_binder_jupyterlab_shows_a_live_explorer(binder):
    """Binder opens JupyterLab: its explorer must draw and redraw there, offline."""
    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    bin_dir, env, tmp_path = binder
    (chosen,) = [c for c in chapters(available_only=True) if c.slug == "imitation_reward_class"]
    (notebook,) = explorer_notebooks([chosen], tmp_path / "explorer").values()
    with JupyterLab(bin_dir, notebook.parent, tmp_path / "lab-home", env=env) as lab, \
            playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            run = ExplorerPage(browser, lab, notebook.name, chosen.slug).start().finish()
        finally:
            browser.close()
    assert not run.errors and not run.remote, (run.errors, run.remote)
    assert run.charts == 1 and len(run.redraw_seconds) == 1, f"the explorer did not draw and redraw: {run}"


def test_colab_environment_runs_a_launch_notebook(tmp_path):
    bin_dir = make_venv(tmp_path / "colab-venv")
    # Colab ships torch, Jupyter and its kernel; the notebook's first cell adds iclr-lab[widgets]
    pip(bin_dir, "install", "--quiet", "torch==2.13.0", "ipykernel", "nbclient")
    pip(bin_dir, "install", "--quiet", f"{ROOT}[widgets]")
    env = env_for(bin_dir, tmp_path)
    check = subprocess.run([str(bin_dir / "python"), "-c", "import myst_nb"], env=env, capture_output=True)
    assert check.returncode != 0, "Colab has no myst-nb: the test environment must not either"
    chosen = [nb for nb in NOTEBOOKS if "discounted_oco" in nb.name] or NOTEBOOKS[:1]
    (result,) = execute(bin_dir, chosen, tmp_path / "executed", env)
    assert result["error"] is None, f"{result['notebook']} failed on Colab:\n{result['error']}"
    import nbformat

    nb = nbformat.read(tmp_path / "executed" / chosen[0].name, as_version=4)
    glued = [c for c in nb.cells if c.cell_type == "code" and "show_markdown(" in c.source]
    assert glued, "the launch notebook renders its measured numbers in code cells"
    for cell in glued:
        (shown,) = [o["data"]["text/markdown"] for o in cell.outputs if "text/markdown" in o.get("data", {})]
        assert "{glue" not in shown and re.search(r"\d", shown), "numbers filled in, no MyST role left"


def test_install_cells_point_at_the_configured_repository():
    import yaml

    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"].rstrip("/")
    for nb in NOTEBOOKS:
        text = nb.read_text()
        urls = set(re.findall(r"git\+(https://[^\s\"\\]+)", text))
        assert urls == {repo}, f"{nb.name} installs from {urls}, _config.yml says {repo}"
        assert "iclr-lab[widgets] @ git+" in text, f"{nb.name}: the install cell adds the widgets extra"
