"""Where a shipped artifact came from: the code version recorded beside trained weights."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["code_version"]


def code_version() -> str:
    """Package version plus the git commit of the working tree when there is one (``0.1.0+29fdd6a``).

    The commit is ``HEAD`` at the time of the call; uncommitted edits are not recorded, so train from
    a clean tree when the record matters.
    """
    from iclr_lab import __version__

    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return f"{__version__}+{sha}" if sha else __version__
