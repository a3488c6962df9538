"""Time chapters side by side with a reference chapter at another commit: the measurement the
time clauses of the claims-protocol revisions ask for ("no chapter takes more CPU time than 0.75x
c2adc4f's doit").

    .venv/bin/python tools/side_by_side.py book/optimizers/dnt.md book/generative/rlr.md \
        --ref-commit c2adc4f --ref-chapter book/optimizers/doit.md --reps 3

Each round runs the reference chapter (from a git worktree of ``--ref-commit``), then each chapter
of this working tree, one at a time, each through ``tools/build_book.py``'s executor (jupyter-cache,
serial, one thread, the build's environment variables) in a fresh kernel, and records the kernel's
CPU seconds. It prints every run, each chapter's ratio to the reference run of its own round, and
the median ratio.

Run it on a quiet machine: nothing else running, no helpers, no build. Contention inflates
Python-bound chapters (the DOIT reference) far more than torch-bound ones, which makes every ratio
look better than it is. Even on a quiet machine, single runs vary by about 15 %, so compare medians
over several rounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))  # tools/ is not a package

from build_book import BUILD_ENV  # noqa: E402 - after the path it lives on

# run in a child process whose PYTHONPATH is the tree being timed, so the chapter imports that
# tree's iclr_lab; the executor is a copy of this tree's tools/build_book.py placed in that tree
_CHILD = """
import importlib.util, sys, tempfile
from pathlib import Path
tree, chapter = Path(sys.argv[1]), sys.argv[2]
spec = importlib.util.spec_from_file_location("bb", tree / "tools" / "_side_by_side_build_book.py")
bb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bb)
with tempfile.TemporaryDirectory() as cache:
    times = bb.execute([tree / chapter], 900, executor="local-serial", cache_dir=Path(cache))
print("CPU", times[chapter]["cpu"])
"""



def cpu_seconds(tree: Path, chapter: str) -> float:
    """The CPU seconds of one execution of ``chapter`` (a path relative to ``tree``)."""
    shutil.copy(ROOT / "tools" / "build_book.py", tree / "tools" / "_side_by_side_build_book.py")
    env = {**os.environ, **BUILD_ENV, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tree), chapter], env=env,
                         capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("CPU ")]
    if out.returncode or not lines:
        sys.exit(f"{tree / chapter} failed to execute:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return float(lines[-1].split()[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("chapters", nargs="+", help="chapters of this tree, e.g. book/optimizers/dnt.md")
    p.add_argument("--ref-commit", default="c2adc4f", help="commit of the reference chapter")
    p.add_argument("--ref-chapter", default="book/optimizers/doit.md")
    p.add_argument("--reps", type=int, default=3, help="rounds (default 3)")
    p.add_argument("--limit", type=float, default=0.75, help="ratio to flag (default 0.75)")
    args = p.parse_args()
    for ch in args.chapters:
        if not (ROOT / ch).is_file():
            p.error(f"no chapter {ch} in {ROOT}")
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "ref"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(ref),
                        args.ref_commit], check=True, capture_output=True)
        try:
            refs: list[float] = []
            runs: dict[str, list[float]] = {ch: [] for ch in args.chapters}
            for r in range(args.reps):
                refs.append(cpu_seconds(ref, args.ref_chapter))
                print(f"round {r + 1}: {args.ref_commit} {args.ref_chapter}: {refs[-1]:.1f} s",
                      flush=True)
                for ch in args.chapters:
                    runs[ch].append(cpu_seconds(ROOT, ch))
                    print(f"round {r + 1}: {ch}: {runs[ch][-1]:.1f} s "
                          f"({runs[ch][-1] / refs[-1]:.3f}x)", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(ref)],
                           check=False, capture_output=True)
            (ROOT / "tools" / "_side_by_side_build_book.py").unlink(missing_ok=True)
    print(f"\n{'chapter':40s} {'median s':>8s} {'median ratio':>12s} {'over':>6s}")
    print(f"{args.ref_commit + ' ' + args.ref_chapter:40s} {statistics.median(refs):8.1f}")
    for ch, values in runs.items():
        ratios = [v / ref_s for v, ref_s in zip(values, refs, strict=True)]
        over = sum(x > args.limit for x in ratios)
        print(f"{ch:40s} {statistics.median(values):8.1f} {statistics.median(ratios):12.3f} "
              f"{over:3d}/{len(ratios)}")


if __name__ == "__main__":
    main()
