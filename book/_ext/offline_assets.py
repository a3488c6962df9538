"""Serve the book's JavaScript from ``_static/offline/`` instead of CDNs (a local Sphinx extension).

``tools/vendor_assets.py`` unpacks pinned releases of MathJax, vega, vega-lite, vega-embed,
require.js and the ipywidgets HTML manager into ``_assets/offline/``. This extension

1. fetches them if they are missing (the only step that needs the network; ``make`` runs it when it
   sets up ``.venv``), and adds ``_assets`` to ``html_static_path`` so they land in
   ``_static/offline/``;
2. after the build, rewrites the CDN addresses that Altair writes into every chart's loader script
   (``https://cdn.jsdelivr.net/npm/vega@6?noext`` ...) to the local copies, relative to each page;
3. warns (an error under ``-W``) if any page still loads a script from the network.

MathJax and the widget manager are pointed at the local copies in ``_config.yml``
(``mathjax_path``, ``nb_ipywidgets_js``), where Sphinx and myst-nb read them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
STATIC_DIR = "offline"  # under _static/; the theme already uses _static/vendor/

#: Altair's loader names each library; this is the file that serves it locally.
ALTAIR_FILES = {"vega": "vega.min.js", "vega-lib": "vega.min.js", "vega-lite": "vega-lite.min.js",
                "vega-embed": "vega-embed.min.js"}
ALTAIR_CDN = re.compile(r"https://cdn\.jsdelivr\.net/npm/(vega-lite|vega-embed|vega-lib|vega)"
                        r"(?:@[0-9][0-9.]*)?\?noext")
#: _config.yml gives the widget manager this stand-in for its CDN; each page gets its own relative path.
NPM_PLACEHOLDER = "ICLR_LAB_OFFLINE_NPM/"
#: sphinx-thebe writes this declaration twice into every page ("already declared" in the console).
THEBE_DECLARATION = re.compile(r"<script>const THEBE_JS_URL = [^<]*</script>\s*")
#: What a page must not load from the network: script sources and Altair's loader paths.
REMOTE_SCRIPT = re.compile(r"<script[^>]*\bsrc=\"(https?://[^\"]+)\"|\"(https?://[^\"]+\?noext)\"")


def _vendor() -> Any:
    spec = importlib.util.spec_from_file_location("vendor_assets", ROOT / "tools" / "vendor_assets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("vendor_assets", module)
    spec.loader.exec_module(module)
    return module


def add_static_assets(app: Sphinx, config: Config) -> None:
    vendor = _vendor()
    if not vendor.is_complete():
        logger.info("offline_assets: fetching the book's JavaScript from the npm registry ...")
        try:
            vendor.fetch()
        except RuntimeError as err:
            raise ExtensionError(f"offline_assets: {err}; run `python tools/vendor_assets.py` on a "
                                 "machine with access to the npm registry") from err
    config.html_static_path = [*config.html_static_path, str(ROOT / "_assets"),
                               str(Path(__file__).parent / "static")]
    # pydata-sphinx-theme logs a console error on a first visit unless it has a default mode
    config.html_context = {**config.html_context, "default_mode": "auto"}


def localise_pages(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    static = out / "_static" / STATIC_DIR
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        rel = Path(os.path.relpath(static, page.parent)).as_posix()
        new = ALTAIR_CDN.sub(lambda m, rel=rel: f"{rel}/{ALTAIR_FILES[m.group(1)]}?noext", text)
        new = new.replace(NPM_PLACEHOLDER, f"{rel}/npm/")
        for duplicate in THEBE_DECLARATION.findall(new)[1:]:
            new = _drop_last(new, duplicate)
        if new != text:
            page.write_text(new, encoding="utf-8")
        for m in REMOTE_SCRIPT.finditer(new):
            logger.warning(f"offline_assets: {page.relative_to(out)} loads {m.group(1) or m.group(2)} "
                           "from the network; vendor it in tools/vendor_assets.py")


def _drop_last(text: str, snippet: str) -> str:
    i = text.rfind(snippet)
    return text[:i] + text[i + len(snippet):]


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", add_static_assets)
    app.connect("build-finished", localise_pages)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
