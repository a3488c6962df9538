import contextlib
import ipaddress
import os
import pickle
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Tests never draw progress bars, and torch reductions stay reproducible.
os.environ.setdefault("ICLR_LAB_PROGRESS", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")


@contextlib.contextmanager
def no_network() -> Iterator[None]:
    """Refuse every connection that leaves the machine (loopback and Unix sockets still work, for
    the torch.distributed chapters); any attempt to fetch at run time raises."""
    real = socket.socket.connect

    def guarded(sock, address):
        host = address[0] if isinstance(address, tuple) else None
        if host is not None:
            try:
                local = ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
            except (OSError, ValueError):
                local = False
            if not local:
                raise OSError(f"network access at run time: tried to connect to {address}")
        return real(sock, address)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", guarded)
        mp.setattr(socket, "getaddrinfo", _local_only(socket.getaddrinfo))
        yield


def _local_only(getaddrinfo):
    def lookup(host, *args, **kwargs):
        if host not in (None, "localhost", "127.0.0.1", "::1", "") and not str(host).startswith("127."):
            raise OSError(f"network access at run time: tried to resolve {host!r}")
        return getaddrinfo(host, *args, **kwargs)

    return lookup


@pytest.fixture
def offline() -> Iterator[None]:
    """The test runs with :func:`no_network` in force."""
    with no_network():
        yield


@pytest.fixture(scope="session")
def smoke_report(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., object]:
    """``smoke_report(slug, seed, run=0)``: the chapter's ``reproduce(scale="smoke", seed=seed)``, run offline
    once per test session, shared by tests/test_chapters.py and the chapter's own tests.

    ``run`` numbers independent runs of the same seed: ``run=1`` is a second, separate
    ``reproduce()`` call (the determinism check compares it with ``run=0``). Under pytest-xdist the
    workers share one store (the session's temporary directory, a lock per run), so each run is
    computed by one worker only; every caller gets its own unpickled copy, so a test that changes
    a table cannot change another test's report.
    """
    from filelock import FileLock  # a dependency of torch

    from iclr_lab.core.registry import load

    base = tmp_path_factory.getbasetemp()
    store: Path = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "smoke-reports"
    store.mkdir(exist_ok=True)

    def get(slug: str, seed: int, run: int = 0):
        path = store / f"{slug}-seed{seed}-run{run}.pickle"
        with FileLock(f"{path}.lock"):
            if not path.exists():
                with no_network():
                    report = load(slug).reproduce(scale="smoke", seed=seed)
                part = path.with_suffix(".part")
                part.write_bytes(pickle.dumps(report))
                part.replace(path)
            data = path.read_bytes()
        return pickle.loads(data)

    return get
