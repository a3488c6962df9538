"""Fetch the book's JavaScript assets from the npm registry, so the built site works offline.

A page of the book needs MathJax (equations), vega, vega-lite and vega-embed (Altair charts), and
require.js plus the ipywidgets HTML manager (widgets saved in the page). By default all of them come
from CDNs; a reader without network, and the CI machine, would see raw LaTeX and no charts. This
script downloads pinned releases with ``npm pack``, checks each tarball against the integrity hash
recorded below, and unpacks only the files the pages load (plus each package's licence) into
``_assets/offline/``. The Sphinx extension ``book/_ext/offline_assets.py`` serves that folder as
``_static/offline/`` and points every page at it.

It runs once when ``make`` sets up ``.venv`` (the only step that needs the network); afterwards the
book builds with no network at all. Usage: ``python tools/vendor_assets.py [--force]``.

The versions match what the pinned Python packages emit: Altair 6.3 loads vega 6, vega-lite 6.4.1
and vega-embed 7; myst-nb 1.x loads require.js 2.3 and ``@jupyter-widgets/html-manager`` 1.0.6.
``tests/book/test_offline_assets.py`` fails when an upgrade of Altair changes the vega-lite version.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "_assets" / "offline"


@dataclass(frozen=True)
class Package:
    """One npm release: which files of it the pages load, and where they go under ``DEST``."""

    spec: str  # name@version, as npm pack takes it
    integrity: str  # npm's sha512 of the tarball
    license: str  # SPDX identifier, from the package's package.json
    files: tuple[tuple[str, str], ...]  # (glob inside the package, folder under DEST)


PACKAGES: tuple[Package, ...] = (
    Package("vega@6.4.0",
            "sha512-rHXCq2LpEWCLMjXBEj7hocY9G0/i5TGYRayGGSj06VTF4+l2IG2Z7oeZKCjWbUh/7hTE/mVhbaOPB72wCElh6g==",
            "BSD-3-Clause", (("build/vega.min.js", "."),)),
    Package("vega-lite@6.4.1",
            "sha512-KO3ybHNouRK4A0al/+2fN9UqgTEfxrd/ntGLY933Hg5UOYotDVQdshR3zn7OfXwQ7uj0W96Vfa5R+QxO8am3IQ==",
            "BSD-3-Clause", (("build/vega-lite.min.js", "."),)),
    Package("vega-embed@7.3.0",
            "sha512-wQ8s5GaSzqoKgmRfbRolgBrjE2CP7ZKHXqH7NijxMqPjpdWxSs4Dn8tvp9g0giQvh2cK+3p56sxjWWM0wNngGw==",
            "BSD-3-Clause", (("build/vega-embed.min.js", "."),)),
    Package("requirejs@2.3.8",
            "sha512-7/cTSLOdYkNBNJcDMWf+luFvMriVm7eYxp4BcFCsAX0wF421Vyce5SXP17c+Jd5otXKGNehIonFlyQXSowL6Mw==",
            "MIT", (("require.js", "."),)),
    Package("@jupyter-widgets/html-manager@1.0.6",
            "sha512-+Mn+Ra8wyIHrYaUpfmf9A3dsLkt/NuwzPQN8sthdxBD35VV5cOJbpmgMhNR27n/rmP3mKyEe0PWCJrtZrXTXDQ==",
            "BSD-3-Clause",
            # embed-amd.js finds its icon fonts under <data-jupyter-widgets-cdn>/<name>/dist/, so it
            # keeps the CDN's layout below npm/
            tuple((f"dist/{glob}", "npm/@jupyter-widgets/html-manager/dist") for glob in
                  ("embed-amd.js", "*.woff2", "*.woff", "*.ttf", "*.eot", "*.svg"))),
    Package("mathjax@3.2.2",
            "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
            "Apache-2.0",
            # The combined component, plus what it loads on demand: fonts, TeX extensions, the
            # accessibility and menu components (the speech engine is left out: 4 MB).
            (("es5/tex-mml-chtml.js", "mathjax"), ("es5/output/chtml/fonts/woff-v2/*", "mathjax"),
             ("es5/input/tex/extensions/*", "mathjax"), ("es5/a11y/*", "mathjax"),
             ("es5/ui/*", "mathjax"))),
)

LICENSE_NAMES = ("LICENSE", "LICENSE.md", "LICENSE.txt", "LICENCE")


def _stamp() -> str:
    """A fingerprint of :data:`PACKAGES`; a changed list re-fetches everything."""
    return hashlib.sha256(json.dumps([p.__dict__ for p in PACKAGES], sort_keys=True).encode()).hexdigest()


def is_complete(dest: Path = DEST) -> bool:
    """Whether ``dest`` holds every asset of the current :data:`PACKAGES` list."""
    stamp = dest / ".complete"
    return stamp.exists() and stamp.read_text().strip() == _stamp()


def _integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def _unpack(pkg: Package, tarball: Path, dest: Path) -> list[str]:
    written = []
    name = pkg.spec.rsplit("@", 1)[0]
    with tarfile.open(tarball) as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        for pattern, folder in pkg.files:
            # the leading "package/" is npm's; a pattern's "*" stays inside one folder
            hits = [m for m in members if fnmatch(m.name, f"package/{pattern}")
                    and m.name.count("/") == f"package/{pattern}".count("/")]
            if not hits:
                raise RuntimeError(f"{pkg.spec}: no file matches {pattern!r}")
            for m in hits:
                rel = Path(m.name).relative_to("package")
                target = dest / folder / rel.relative_to(_strip(pkg, pattern))
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(m)
                assert src is not None
                target.write_bytes(src.read())
                written.append(str(target.relative_to(dest)))
        licence = next((m for m in members if m.name in {f"package/{n}" for n in LICENSE_NAMES}), None)
        notice = dest / "licenses" / f"{name.replace('/', '__')}.txt"
        notice.parent.mkdir(parents=True, exist_ok=True)
        header = f"{pkg.spec} ({pkg.license}), from the npm registry\n\n"
        if licence is not None:
            src = tar.extractfile(licence)
            assert src is not None
            notice.write_text(header + src.read().decode("utf-8", "replace"))
        else:  # requirejs ships its licence in the README's header only
            notice.write_text(header + f"Licensed under {pkg.license}; see https://www.npmjs.com/package/{name}\n")
    return written


def _strip(pkg: Package, pattern: str) -> Path:
    """The leading folders dropped when copying: a file's own folder, except that MathJax keeps its
    layout below ``es5/`` (it finds its fonts and extensions relative to its own script)."""
    return Path("es5") if pkg.spec.startswith("mathjax@") else Path(pattern).parent


def fetch(dest: Path = DEST, *, force: bool = False) -> Path:
    """Download, verify and unpack every package into ``dest`` (no-op when already complete)."""
    if is_complete(dest) and not force:
        return dest
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: the book's offline assets come from the npm registry "
                           "(Debian: apt-get install npm)")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([npm, "pack", "--json", "--pack-destination", tmp,
                              *[p.spec for p in PACKAGES]],
                             capture_output=True, text=True, cwd=tmp, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"npm pack failed:\n{out.stderr[-2000:]}")
        packed = {f"{r['name']}@{r['version']}": Path(tmp) / r["filename"] for r in json.loads(out.stdout)}
        for pkg in PACKAGES:
            tarball = packed[pkg.spec]
            got = _integrity(tarball)
            if got != pkg.integrity:
                raise RuntimeError(f"{pkg.spec}: integrity mismatch (expected {pkg.integrity}, got {got})")
            _unpack(pkg, tarball, dest)
    (dest / ".complete").write_text(_stamp())
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="download again even if complete")
    args = ap.parse_args()
    try:
        path = fetch(force=args.force)
    except RuntimeError as err:
        sys.exit(f"vendor_assets: {err}")
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    print(f"offline assets in {path.relative_to(ROOT)} ({size / 2**20:.1f} MB)")


if __name__ == "__main__":
    main()
