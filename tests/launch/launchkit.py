"""Fresh virtual environments that stand in for Binder and Colab, and a notebook runner inside them.

Each launch test builds its environment from scratch (``python -m venv``), the way a reader's Binder
image or Colab runtime is built, so that a dependency missing from ``binder/requirements.txt`` or from
the ``widgets`` extra fails here rather than for a reader. pip's cache keeps this to a minute or two.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Executes notebooks (args: one JSON list of [in, out] pairs) with nbclient, two at a time, and
#: prints one JSON line per notebook. Runs with the environment's own Python. Each notebook runs in
#: a process of its own (forked): two NotebookClients in threads of one process once lost a kernel's
#: reply, and the run waited out the cell timeout with the kernel idle.
#:
#: A cell that times out (seen for mtdao in two clean-clone ``make test`` runs, with the kernel at
#: 0 % CPU, and never alone; not understood yet) gets one more run in a fresh kernel, and the result
#: keeps what is needed to find the cause: the first error (it names the cell), and every thread's
#: stack in the kernel (``faulthandler`` on SIGUSR1, registered by :data:`KERNEL_STARTUP`) and in the
#: client at the moment of the timeout. Any other error fails at once.
RUNNER = textwrap.dedent('''
    import faulthandler, json, multiprocessing, os, signal, sys, tempfile, time
    from concurrent.futures import ProcessPoolExecutor
    from pathlib import Path
    import nbformat
    from nbclient import NotebookClient

    class Client(NotebookClient):
        stacks = ""

        async def _async_handle_timeout(self, timeout, cell=None):
            pid = self.km.provisioner.pid if self.km and self.km.provisioner else None
            if pid:
                os.kill(pid, signal.SIGUSR1)
                time.sleep(2)
                dump = Path(os.environ["ICLR_LAB_STACKS_DIR"]) / f"kernel-{pid}.txt"
                self.stacks = "kernel:\\n" + (dump.read_text() if dump.exists() else "(no dump)")
            with tempfile.TemporaryFile("w+") as f:
                faulthandler.dump_traceback(f, all_threads=True)
                f.seek(0)
                self.stacks += "\\nclient:\\n" + f.read()
            return await super()._async_handle_timeout(timeout, cell)

    def run(pair):
        src, dst = pair
        start = time.perf_counter()
        first_error, stacks = None, ""
        for attempt in range(2):
            nb = nbformat.read(src, as_version=4)
            client = Client(nb, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(Path(src).parent)}})
            error = None
            try:
                client.execute()
            except Exception as err:  # the test reports which notebook and which cell
                error = f"{type(err).__name__}: {str(err)[-3000:]}"
                if type(err).__name__ == "CellTimeoutError" and attempt == 0:
                    first_error, stacks = error, client.stacks
                    continue
            break
        nbformat.write(nb, dst)
        return {"notebook": src, "seconds": round(time.perf_counter() - start, 1), "error": error,
                "retried": first_error is not None, "first_error": first_error, "stacks": stacks[-20000:]}

    pairs = json.loads(sys.argv[1])
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork")) as pool:
        for result in pool.map(run, pairs):
            print(json.dumps(result), flush=True)
''')

#: IPython startup file of the test environments' kernels: SIGUSR1 writes every thread's stack to
#: ``$ICLR_LAB_STACKS_DIR/kernel-<pid>.txt`` (the runner sends it when a cell times out).
KERNEL_STARTUP = textwrap.dedent('''
    import faulthandler, os, signal
    _dir = os.environ.get("ICLR_LAB_STACKS_DIR")
    if _dir:
        _stacks = open(os.path.join(_dir, f"kernel-{os.getpid()}.txt"), "w")
        faulthandler.register(signal.SIGUSR1, file=_stacks, all_threads=True)
''')


def make_venv(path: Path) -> Path:
    """A fresh virtual environment at ``path``; returns its ``bin`` folder."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    bin_dir = path / "bin"
    pip(bin_dir, "install", "--quiet", "--upgrade", "pip")
    return bin_dir


def pip(bin_dir: Path, *args: str) -> None:
    out = subprocess.run([str(bin_dir / "python"), "-m", "pip", *args], capture_output=True, text=True)
    assert out.returncode == 0, f"pip {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"


def env_for(bin_dir: Path, home: Path) -> dict[str, str]:
    """The environment a notebook kernel of this venv sees: its own PATH, no progress bars, one
    thread, a private Jupyter config (nothing is written to the real home), and the smoke scale
    (``ICLR_LAB_SCALE=smoke``, read by every launch notebook's first cell): these tests check the
    reader's environment; the book build has already executed every chapter at book scale and
    asserted its claims."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(bin_dir.parent),
               ICLR_LAB_PROGRESS="0", OMP_NUM_THREADS="1", MPLBACKEND="Agg", ICLR_LAB_SCALE="smoke",
               JUPYTER_CONFIG_DIR=str(home / "jupyter-config"), JUPYTER_DATA_DIR=str(home / "jupyter-data"),
               JUPYTER_RUNTIME_DIR=str(home / "jupyter-runtime"), IPYTHONDIR=str(home / "ipython"))
    return env


def execute(bin_dir: Path, notebooks: list[Path], out_dir: Path, env: dict[str, str]) -> list[dict]:
    """Execute ``notebooks`` in the venv's kernel; returns one result per notebook."""
    out_dir.mkdir(parents=True, exist_ok=True)
    startup = Path(env["IPYTHONDIR"]) / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-dump-stacks.py").write_text(KERNEL_STARTUP)
    stacks = out_dir / "stacks"
    stacks.mkdir(exist_ok=True)
    env = {**env, "ICLR_LAB_STACKS_DIR": str(stacks)}
    pairs = [[str(nb), str(out_dir / nb.name)] for nb in notebooks]
    proc = subprocess.run([str(bin_dir / "python"), "-c", RUNNER, json.dumps(pairs)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def leftover_widgets(path: Path) -> int:
    """How many outputs of an executed notebook are progress-bar widgets (there should be none)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    count = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            plain = str(data.get("text/plain", ""))
            if "application/vnd.jupyter.widget-view+json" in data and ("HBox" in plain or "%|" in plain):
                count += 1
    return count
