"""Make JupyterLab open the book's MyST ``.md`` chapters as notebooks (through jupytext).

Writes ``<prefix>/share/jupyter/lab/settings/overrides.json`` for the running Python's environment, so
the setting lives in the project's virtual environment (or the Binder image), not in the user's home.
Used by ``make lab`` and ``binder/postBuild``.
"""

import json
import sys
from pathlib import Path

path = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
settings = json.loads(path.read_text()) if path.exists() else {}
viewers = {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}
settings.setdefault("@jupyterlab/docmanager-extension:plugin", {})["defaultViewers"] = viewers
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(settings, indent=2))
print(f"JupyterLab opens .md chapters as notebooks ({path})")
