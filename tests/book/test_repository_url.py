"""The repository's address is stated once, in ``_config.yml`` (``repository.url``); everything that
names it (launch buttons, the install cells, ``[project.urls]``, the README, the launch notebooks)
must agree with it, so moving the repository is a change of one line plus regenerated files."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPO = CONFIG["repository"]["url"].rstrip("/")
OWNER, NAME = REPO.split("github.com/")[1].split("/")[:2]
PAGES = f"https://{OWNER}.github.io/{NAME}"
GITHUB = re.compile(r"github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?=[/?#\s\"')\]]|\.git|$)")
PAGES_URL = re.compile(r"https://([A-Za-z0-9-]+)\.github\.io/([A-Za-z0-9_.-]+)")


def _repos_named(text: str) -> set[tuple[str, str]]:
    # GitHub's own assets (badges, actions) are not a repository of ours
    return {m for m in GITHUB.findall(text) if m[0] not in ("actions", "jupyter-book", "executablebooks")}


def test_pyproject_urls_derive_from_the_config():
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Repository"] == REPO
    assert urls["Issues"] == f"{REPO}/issues"
    assert urls["Homepage"].rstrip("/") == PAGES


def test_readme_names_only_the_configured_repository():
    text = (ROOT / "README.md").read_text()
    assert _repos_named(text) == {(OWNER, NAME)}
    assert set(PAGES_URL.findall(text)) <= {(OWNER, NAME)}
    assert "](docs/" not in text, "images use absolute URLs, so they show on PyPI too"


def test_chapters_and_launch_notebooks_install_from_the_configured_repository():
    for path in sorted((ROOT / "book").rglob("*.md")) + sorted((ROOT / "book").rglob("*.ipynb")):
        text = path.read_text()
        for url in re.findall(r"git\+(https://[^\s\"\\]+)", text):
            assert url.rstrip("/") == REPO, f"{path.relative_to(ROOT)} installs from {url}, not {REPO}"


def test_tools_derive_the_address_instead_of_writing_it():
    for path in [*sorted((ROOT / "tools").glob("*.py")), *sorted((ROOT / "iclr_lab").rglob("*.py"))]:
        assert "iclr-lab/iclr_lab" not in path.read_text(), f"{path.relative_to(ROOT)} hard-codes it"
