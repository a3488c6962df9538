"""Execute every chapter once, two at a time, then build the book from the executed notebooks.

Jupyter Book 1.x executes chapters one after another. This script instead:

1. clears the jupyter-cache (so nothing stale is ever shown), adds every chapter of ``_toc.yml`` that
   has code cells, and executes them in parallel (one process per core, each chapter on one thread);
   each chapter leaves its report in ``_build/.scoreboard/`` (``ICLR_LAB_SCOREBOARD_DIR``);
2. stops at once, printing the traceback, if any chapter fails (a failed cell or a failed claim);
3. writes the execution times next to the reports and executes the pages that collect them
   (``book/scoreboard.md``);
4. runs ``jupyter-book build . -W -n --keep-going`` in cache mode, which reads the executed
   notebooks instead of executing them again, and fails on any warning;
5. prints each chapter's execution time against the 90 s budget.

Usage: ``python tools/build_book.py [--budget 90]`` (the Makefile's ``book`` and ``test`` targets).

``--only SLUG`` builds one chapter as a small book of its own (the chapter and its part's API page)
in ``_build/only-SLUG/``, with its own execution cache: several authors can check their chapters at
the same time without touching each other's builds. ``ICLR_LAB_SITE=_build/only-SLUG/html pytest
tests/site -k SLUG`` then checks its page.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / ".jupyter_cache"
SCOREBOARD = ROOT / "_build" / ".scoreboard"
#: Pages that summarise the executed chapters: executed after them, not timed as chapters.
SUMMARY_PAGES = {ROOT / "book" / "scoreboard.md"}


def toc_files() -> list[Path]:
    """Every source file listed in ``_toc.yml`` (root first), as a path with its extension."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    names = [toc["root"]]
    for part in toc.get("parts", []):
        names += [c["file"] for c in part.get("chapters", [])]
    return [ROOT / f"{n}.md" for n in names]


def executable(path: Path) -> bool:
    text = path.read_text()
    return text.startswith("---") and "kernelspec:" in text and "```{code-cell}" in text


def execute(chapters: list[Path], timeout: int, *, fresh: bool = True,
            executor: str = "local-parallel", cache_dir: Path = CACHE) -> dict[str, float]:
    """Execute ``chapters`` into the cache; returns seconds per chapter; exits on the first failure."""
    from jupyter_cache import get_cache
    from jupyter_cache.executors import load_executor

    if fresh:
        shutil.rmtree(cache_dir, ignore_errors=True)
    cache = get_cache(cache_dir)
    for path in chapters:
        cache.add_nb_to_project(str(path), read_data={"name": "jupytext", "type": "plugin"})
    result = load_executor(executor, cache).run_and_cache(timeout=timeout,
                                                          filter_uris=[str(p) for p in chapters])
    failed = result.excepted + result.errored
    for record in cache.list_project_records():
        if record.uri in failed:
            print(f"\n=== {Path(record.uri).relative_to(ROOT)} FAILED ===\n{record.traceback}",
                  file=sys.stderr)
    if failed:
        sys.exit(f"{len(failed)} chapter(s) failed to execute: see the tracebacks above")
    times = {}
    wanted = {str(p) for p in chapters}
    for record in cache.list_cache_records():
        if record.uri in wanted:
            times[str(Path(record.uri).relative_to(ROOT))] = float(record.data["execution_seconds"])
    return times



def build_one(slug: str, budget: float, timeout: int) -> None:
    """Build chapter ``slug`` alone into ``_build/only-<slug>/`` (its own toc, config and cache)."""
    sys.path.insert(0, str(ROOT))
    from iclr_lab.core.registry import chapter

    ch = chapter(slug)
    out = ROOT / "_build" / f"only-{slug}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["cache"] = str(out / ".jupyter_cache")
    # paths in the config are relative to the repository; this copy lives elsewhere
    exts = config["sphinx"].get("local_extensions", {})
    config["sphinx"]["local_extensions"] = {k: str(ROOT / v) for k, v in exts.items()}
    config["bibtex_bibfiles"] = [str(ROOT / b) for b in config.get("bibtex_bibfiles", [])]
    if config.get("html", {}).get("favicon"):
        config["html"]["favicon"] = str(ROOT / config["html"]["favicon"])
    (out / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    api = [{"file": f"book/api/{name}"} for name in (ch.part, "core")
           if (ROOT / "book" / "api" / f"{name}.md").exists()]
    toc = {"format": "jb-book", "root": ch.chapter_path[:-3],
           "parts": [{"caption": "API reference", "chapters": api}]}
    (out / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    start = time.perf_counter()
    times = execute([ROOT / ch.chapter_path], timeout, cache_dir=out / ".jupyter_cache",
                    executor="local-serial")
    build = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "-W", "-n", "--keep-going",
         "--config", str(out / "_config.yml"), "--toc", str(out / "_toc.yml"), "--path-output", str(out)],
        cwd=ROOT)
    for name, sec in times.items():
        print(f"  {sec:7.1f} s  {name}" + ("" if sec <= budget else f"  OVER the {budget:.0f} s budget"))
    print(f"executing + building: {time.perf_counter() - start:.0f} s")
    if build.returncode != 0:
        sys.exit(f"jupyter-book build failed (exit {build.returncode})")
    if any(sec > budget for sec in times.values()):
        sys.exit(f"{slug} is over the {budget:.0f} s budget")
    print(f"page: {out / '_build' / 'html' / ch.chapter_path.replace('.md', '.html')}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=90.0, help="seconds allowed per chapter")
    p.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell")
    p.add_argument("--only", metavar="SLUG", help="build this chapter alone, into _build/only-SLUG/")
    args = p.parse_args()
    if args.only:
        os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                          PYTHONHASHSEED="0", ICLR_LAB_PROGRESS="0", MPLBACKEND="Agg")
        build_one(args.only, args.budget, args.timeout)
        return

    # One thread per chapter: small networks run faster that way, two chapters can run side by side,
    # and float reductions are reproducible. No progress bars in executed pages.
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                      PYTHONHASHSEED="0", ICLR_LAB_PROGRESS="0", MPLBACKEND="Agg",
                      ICLR_LAB_SCOREBOARD_DIR=str(SCOREBOARD))
    shutil.rmtree(SCOREBOARD, ignore_errors=True)
    pages = [p for p in toc_files() if executable(p)]
    chapters = [p for p in pages if p not in SUMMARY_PAGES]
    start = time.perf_counter()
    print(f"executing {len(chapters)} chapter(s), {os.cpu_count()} at a time ...", flush=True)
    times = execute(chapters, args.timeout)
    SCOREBOARD.mkdir(parents=True, exist_ok=True)
    (SCOREBOARD / "times.json").write_text(json.dumps(times, indent=1))
    summaries = [p for p in pages if p in SUMMARY_PAGES]
    if summaries:
        execute(summaries, args.timeout, fresh=False, executor="local-serial")
    executed = time.perf_counter() - start

    shutil.rmtree(ROOT / "_build" / "html", ignore_errors=True)
    shutil.rmtree(ROOT / "_build" / ".doctrees", ignore_errors=True)
    build = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "-W", "-n", "--keep-going"],
        cwd=ROOT,
    )
    total = time.perf_counter() - start

    print("\nchapter execution times (one thread each, two chapters at a time):")
    over = []
    for name, sec in sorted(times.items(), key=lambda kv: -kv[1]):
        flag = "" if sec <= args.budget else f"  OVER the {args.budget:.0f} s budget"
        over += [name] if flag else []
        print(f"  {sec:7.1f} s  {name}{flag}")
    print(f"executing: {executed:.0f} s; executing + building: {total:.0f} s")
    if build.returncode != 0:
        sys.exit(f"jupyter-book build failed (exit {build.returncode}); "
                 "per-notebook logs: _build/html/reports/")
    if over:
        sys.exit(f"{len(over)} chapter(s) over the {args.budget:.0f} s budget: {', '.join(over)}")
    print(f"book: {ROOT / '_build' / 'html' / 'index.html'}")


if __name__ == "__main__":
    main()
