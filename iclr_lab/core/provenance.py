"""Where a shipped artifact came from, and whether it is still what was shipped.

* :func:`code_version`: the code version recorded beside trained weights and shipped tables;
* :func:`sha256` and :func:`check_sha256`: a shipped file's content hash, recorded by the script
  that made it (in the file's JSON record) and checked on every load, so that a flipped byte
  cannot load silently as different weights or different numbers;
* :func:`load_torch`: ``torch.load(weights_only=True)`` that turns every way a file can be bad
  (hash mismatch, truncated, corrupt, non-finite numbers) into one :class:`ShippedFileError` that
  names the file and says what is wrong.
"""

from __future__ import annotations

import hashlib
import pickle
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["ShippedFileError", "check_sha256", "code_version", "load_torch", "sha256"]


class ShippedFileError(OSError):
    """A shipped (or saved) file cannot be used: missing, truncated, corrupt, changed since its
    record, or holding non-finite numbers. The message names the file and what is wrong."""


def sha256(path: str | Path) -> str:
    """The hex SHA-256 of the file at ``path``."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sha256(path: str | Path, expected: str | None, *, remake: str = "") -> None:
    """Raise :class:`ShippedFileError` if the file at ``path`` is missing or its SHA-256 is not
    ``expected`` (``None``: the record has no hash, which is an error too). ``remake`` says how to
    make the file again (appended to the message)."""
    p = Path(path)
    hint = f"; {remake}" if remake else ""
    if not p.exists():
        raise ShippedFileError(f"{p}: missing{hint}")
    if not expected:
        raise ShippedFileError(f"{p}: its record holds no sha256 to check it against{hint}")
    got = sha256(p)
    if got != expected:
        raise ShippedFileError(f"{p}: corrupt or changed since it was made (sha256 {got[:16]}..., "
                               f"its record says {expected[:16]}...){hint}")


def _tensors(obj: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    import torch

    if isinstance(obj, torch.Tensor):
        yield where or "the file", obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _tensors(v, f"{where}.{k}" if where else str(k))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _tensors(v, f"{where}[{i}]")


def load_torch(path: str | Path, *, expected_sha256: str | None = None, remake: str = "") -> Any:
    """``torch.load(path, weights_only=True)``, checked: the SHA-256 first when ``expected_sha256``
    is given, then every way the file can fail to load, then every floating-point tensor in it
    must be finite. Any failure raises :class:`ShippedFileError` naming the file."""
    import torch

    p = Path(path)
    hint = f"; {remake}" if remake else ""
    if expected_sha256 is not None:
        check_sha256(p, expected_sha256, remake=remake)
    if not p.exists():
        raise ShippedFileError(f"{p}: missing{hint}")
    try:
        obj = torch.load(p, weights_only=True, map_location="cpu")
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError,
            zipfile.BadZipFile) as err:
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise ShippedFileError(f"{p}: cannot be read as a torch file, truncated or corrupt "
                               f"({first}){hint}") from err
    for name, t in _tensors(obj):
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            bad = int((~torch.isfinite(t)).sum())
            raise ShippedFileError(f"{p}: {name} holds {bad} non-finite value(s){hint}")
    return obj


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
