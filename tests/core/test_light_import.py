import subprocess
import sys


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_iclr_lab_imports_neither_torch_nor_pandas():
    out = _run("import sys, iclr_lab, iclr_lab.core, iclr_lab.optimizers, iclr_lab.online;"
               "print(sorted(m for m in ('torch', 'pandas', 'altair') if m in sys.modules))")
    assert out == "[]"


def test_import_iclr_lab_is_fast():
    # best of three, so one slow start of a busy machine does not decide it
    best = min(_timed_import() for _ in range(3))
    assert best < 0.5, f"import iclr_lab took {best:.2f} s"


def _timed_import() -> float:
    # timed inside the child, so a slow interpreter start on a busy machine does not count
    return float(_run("import time; t = time.perf_counter(); import iclr_lab; "
                      "print(time.perf_counter() - t)"))
