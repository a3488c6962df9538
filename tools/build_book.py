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
5. prints each chapter's CPU and wall time, and fails if a chapter's CPU time is over the 90 s
   budget.

The budget is CPU time, not wall time: the user + system time of the chapter's kernel process
(and of any process it waited for), read from ``getrusage(RUSAGE_CHILDREN)`` in the process that
ran the kernel, before and after the chapter. Wall time depends on what else the machine is doing
(a chapter took 100 s on a busy machine and 41 s on an idle one); CPU time measures the chapter.
A line is printed as each chapter finishes.

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
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from jupyter_cache.executors.basic import ExecutionWorkerLocalMProc, ExecutionWorkerLocalSerial

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


def _children_cpu() -> float:
    """User + system seconds of this process's children that have ended and been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(project_nb: object, run: object) -> object:
    """Run one notebook (``run()``), print a line when it ends, and record its CPU and wall time in
    the cache folder (``<cache>/times/<name>.json``): the kernel is this process's child, and
    ends (and is waited for) before ``run`` returns."""
    uri = Path(project_nb.uri)  # type: ignore[attr-defined]
    cpu = _children_cpu()
    result = run()  # type: ignore[operator]
    cpu = _children_cpu() - cpu
    wall = float(result.time)  # type: ignore[attr-defined]
    name = str(uri.relative_to(ROOT)) if uri.is_relative_to(ROOT) else str(uri)
    status = "FAILED" if result.err else "done"  # type: ignore[attr-defined]
    print(f"  {status:6s} {name}: {cpu:6.1f} s CPU, {wall:6.1f} s wall", flush=True)
    TIMES_DIR.mkdir(parents=True, exist_ok=True)
    (TIMES_DIR / f"{name.replace('/', '__')}.json").write_text(
        json.dumps({"name": name, "cpu": cpu, "wall": wall}))
    return result


class TimedParallelWorker(ExecutionWorkerLocalMProc):
    """jupyter-cache's parallel worker, timed (:func:`_timed`)."""

    def execute(self, project_nb, data):  # type: ignore[no-untyped-def]
        return _timed(project_nb, lambda: ExecutionWorkerLocalMProc.execute(project_nb, data))


class TimedSerialWorker(ExecutionWorkerLocalSerial):
    """jupyter-cache's serial worker, timed (:func:`_timed`)."""

    def execute(self, project_nb, data):  # type: ignore[no-untyped-def]
        return _timed(project_nb, lambda: ExecutionWorkerLocalSerial.execute(project_nb, data))


#: where :func:`_timed` records each notebook's times (set by :func:`execute` before any worker starts)
TIMES_DIR = CACHE / "times"


def execute(chapters: list[Path], timeout: int, *, fresh: bool = True,
            executor: str = "local-parallel", cache_dir: Path = CACHE) -> dict[str, dict[str, float]]:
    """Execute ``chapters`` into the cache; returns ``{chapter: {"cpu": s, "wall": s}}``; exits on the
    first failure."""
    from jupyter_cache import get_cache
    from jupyter_cache.executors import load_executor

    global TIMES_DIR
    if fresh:
        shutil.rmtree(cache_dir, ignore_errors=True)
    TIMES_DIR = cache_dir / "times"
    shutil.rmtree(TIMES_DIR, ignore_errors=True)
    cache = get_cache(cache_dir)
    for path in chapters:
        cache.add_nb_to_project(str(path), read_data={"name": "jupytext", "type": "plugin"})
    runner = load_executor(executor, cache)
    runner._EXECUTION_WORKER = TimedParallelWorker if executor == "local-parallel" else TimedSerialWorker
    result = runner.run_and_cache(timeout=timeout, filter_uris=[str(p) for p in chapters])
    failed = result.excepted + result.errored
    if failed:
        # Once, alone: a kernel that never answers (its client waits on a message that was lost; seen
        # a few times in hundreds of runs, on idle and busy machines alike) or a port taken by another
        # kernel as it started fails a chapter that is fine. A real failure (a claim, an error in the
        # code) is deterministic and fails again, with its traceback below.
        for record in cache.list_project_records():
            if record.uri in failed:
                last = (record.traceback or "").strip().splitlines()[-1:] or ["(no traceback)"]
                print(f"  RETRY  {Path(record.uri).relative_to(ROOT)} once, alone: {last[0][:200]}",
                      flush=True)
        serial = load_executor("local-serial", cache)
        serial._EXECUTION_WORKER = TimedSerialWorker
        result = serial.run_and_cache(timeout=timeout, filter_uris=failed)
        failed = result.excepted + result.errored
    for record in cache.list_project_records():
        if record.uri in failed:
            print(f"\n=== {Path(record.uri).relative_to(ROOT)} FAILED ===\n{record.traceback}",
                  file=sys.stderr)
    if failed:
        sys.exit(f"{len(failed)} chapter(s) failed to execute: see the tracebacks above")
    times = {}
    for f in TIMES_DIR.glob("*.json"):
        t = json.loads(f.read_text())
        times[t.pop("name")] = t
    wanted = {str(p.relative_to(ROOT)) for p in chapters}
    assert wanted <= set(times), f"no times recorded for {sorted(wanted - set(times))}"
    return {name: times[name] for name in sorted(wanted)}


def print_times(times: dict[str, dict[str, float]], budget: float) -> list[str]:
    """The table of CPU and wall times, slowest CPU first; returns the chapters over ``budget``."""
    over = []
    print(f"  {'CPU s':>7s} {'wall s':>7s}  chapter (CPU budget {budget:.0f} s)")
    for name, t in sorted(times.items(), key=lambda kv: -kv[1]["cpu"]):
        flag = "" if t["cpu"] <= budget else f"  OVER the {budget:.0f} s CPU budget"
        over += [name] if flag else []
        print(f"  {t['cpu']:7.1f} {t['wall']:7.1f}  {name}{flag}")
    print(f"  {sum(t['cpu'] for t in times.values()):7.1f} {'':7s}  all chapters (CPU)")
    return over



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
    over = print_times(times, budget)
    print(f"executing + building: {time.perf_counter() - start:.0f} s")
    if build.returncode != 0:
        sys.exit(f"jupyter-book build failed (exit {build.returncode})")
    if over:
        sys.exit(f"{slug} is over the {budget:.0f} s CPU budget")
    print(f"page: {out / '_build' / 'html' / ch.chapter_path.replace('.md', '.html')}")


#: The environment every chapter executes in (the full build, ``--only`` and
#: ``tools/side_by_side.py``): one thread per chapter, reproducible hashing, no progress bars, and
#: each explorer's static rendering only (ICLR_LAB_STATIC_BUILD; see main).
BUILD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
             "PYTHONHASHSEED": "0", "ICLR_LAB_PROGRESS": "0", "MPLBACKEND": "Agg",
             "ICLR_LAB_STATIC_BUILD": "1"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=90.0, help="CPU seconds allowed per chapter")
    # a cell of the book takes at most about 40 s alone; 300 s leaves room for a busy machine and ends
    # a hung kernel early enough for its one retry (see execute)
    p.add_argument("--timeout", type=int, default=300, help="seconds allowed per cell")
    p.add_argument("--only", metavar="SLUG", help="build this chapter alone, into _build/only-SLUG/")
    args = p.parse_args()
    if args.only:
        os.environ.update(BUILD_ENV)
        build_one(args.only, args.budget, args.timeout)
        return

    # One thread per chapter: small networks run faster that way, two chapters can run side by side,
    # and float reductions are reproducible. No progress bars in executed pages.
    # ICLR_LAB_STATIC_BUILD: the pages show each explorer's static rendering, so its live output
    # is not drawn (iclr_lab.core.widgets.LiveResult).
    os.environ.update(BUILD_ENV, ICLR_LAB_SCOREBOARD_DIR=str(SCOREBOARD))
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
    over = print_times(times, args.budget)
    print(f"executing: {executed:.0f} s; executing + building: {total:.0f} s")
    if build.returncode != 0:
        sys.exit(f"jupyter-book build failed (exit {build.returncode}); "
                 "per-notebook logs: _build/html/reports/")
    if over:
        sys.exit(f"{len(over)} chapter(s) over the {args.budget:.0f} s CPU budget: {', '.join(over)}")
    print(f"book: {ROOT / '_build' / 'html' / 'index.html'}")


if __name__ == "__main__":
    main()
