"""The ``iclr-lab`` command (also ``python -m iclr_lab``).

::

    iclr-lab list
    iclr-lab reproduce SLUG [--scale book] [--seed 0] [--out DIR] [--json]
    iclr-lab reproduce --all [--scale book] [--seed 0] [--out DIR]
    iclr-lab stability SLUG [--blocks 8] [--jobs 1] [--out DIR]
    iclr-lab launch SLUG [--nproc N] [--backend gloo|nccl] [--scale book] [--seed 0] [--out DIR]

``reproduce`` prints the claims scorecard (or one JSON object with ``--json``), writes tables (CSV),
charts (HTML, PNG) and claims (JSON) to ``--out`` when given, and exits with status 1 when a claim that
is expected to hold fails. ``--all`` runs every implemented chapter and writes ``scoreboard.csv`` and
``scoreboard.md`` to ``--out`` (default ``iclr_lab_scoreboard``). At ``--scale smoke`` nothing is
judged: the values are listed, and the verdict line says "smoke scale: claims not judged".

``stability`` reruns a chapter at ``--blocks`` disjoint base seeds (``0, n, 2n, ...`` for a chapter
that runs ``n`` seeds) and writes the chapter's stability table (:mod:`iclr_lab.core.stability`):
into the package, where the book and ``reproduce`` read it, unless ``--out`` says elsewhere.

``launch`` runs a distributed chapter's training function on real ``torch.distributed`` processes
(DESIGN.md section 5). A chapter is launchable when its module defines

    launch(comm: Collective, scale: str = "book", seed: int = 0) -> dict[str, pandas.DataFrame]

which every process calls with its own :class:`~iclr_lab.core.collective.Collective`; the tables it
returns are the ones the simulator gives for the same world size, and must include ``final`` (one
row per run, with a ``final_loss`` column). Two ways to start it:

* on one machine, ``iclr-lab launch SLUG --nproc N`` spawns ``N`` processes on loopback, prints
  rank 0's ``final`` table, then runs the same function on the simulator with ``N`` threads and
  prints its table and the largest difference (``--no-compare`` skips that);
* on several machines, ``torchrun`` starts the processes and the command joins the group it
  describes (it sees ``RANK`` and ``WORLD_SIZE`` in the environment)::

      torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
          -m iclr_lab launch desloc --out runs/

``--out`` writes rank 0's tables as CSV (and the simulator's, when compared, to ``DIR/simulator``).
Each process runs one torch thread. ``launch`` runs only a chapter's own experiment: for your own
model and data, use the optimizer in your own ``torchrun`` script, ``DESLOC(...,
comm=init_from_env())``, as ``examples/desloc_torchrun.py`` does. A collective that fails because
another rank died ends in one line, ``iclr-lab: error: rank R of N: an all-reduce ... failed``, with
exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iclr_lab.core.registry import chapter, chapters
from iclr_lab.core.registry import reproduce as run_chapter
from iclr_lab.core.report import Report, timed
from iclr_lab.core.scales import SCALES

#: torch.distributed back ends of ``iclr-lab launch`` (as ``iclr_lab.core.collective.BACKENDS``,
#: repeated here so that ``iclr-lab --help`` does not import torch).
BACKENDS = ("gloo", "nccl")

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from iclr_lab import __version__

    p = argparse.ArgumentParser(
        prog="iclr-lab", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the experiments of the iclr_lab book and check each paper's claims.",
        epilog="examples:\n  iclr-lab list\n  iclr-lab reproduce vradam --seed 3 --json\n"
               "  iclr-lab launch desloc --nproc 2\n"
               "  iclr-lab reproduce --all --scale smoke --out runs/")
    p.add_argument("--version", action="version", version=f"iclr-lab {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="show the chapters and which are implemented")
    r = sub.add_parser("reproduce", help="run a chapter's experiment and check its claims")
    target = r.add_mutually_exclusive_group(required=True)
    target.add_argument("slug", nargs="?", help="chapter slug (see: iclr-lab list)")
    target.add_argument("--all", action="store_true", help="run every implemented chapter")
    r.add_argument("--scale", default="book", choices=SCALES,
                   help="smoke: seconds; book: <= 90 s per chapter; paper: closer to the paper")
    r.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    r.add_argument("--out", type=Path, help="write tables, charts and claims here")
    r.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    st = sub.add_parser(
        "stability", help="rerun a chapter at disjoint seed blocks and write its stability table",
        description="Rerun a chapter's reproduce() at BLOCKS disjoint base seeds (0, n, 2n, ... "
                    "for a chapter that runs n seeds) and write, for every claim and block, the "
                    "value and verdict of the method and of its control.")
    st.add_argument("slug", help="chapter slug (see: iclr-lab list)")
    st.add_argument("--blocks", type=int, default=8, help="seed blocks (default 8)")
    st.add_argument("--out", type=Path, help="write the table here instead of into the package")
    st.add_argument("--jobs", type=int, default=1,
                    help="blocks run at once, in worker processes of one torch thread each "
                         "(default 1; the numbers do not depend on it)")
    la = sub.add_parser(
        "launch", help="run a distributed chapter on real torch.distributed processes",
        description="Run a distributed chapter's training function on torch.distributed processes: "
                    "N local processes on loopback, or the processes torchrun started (when RANK "
                    "and WORLD_SIZE are set). Prints the final losses next to the simulator's.")
    la.add_argument("slug", help="chapter slug of a distributed chapter (e.g. desloc)")
    la.add_argument("--nproc", type=int, default=2,
                    help="processes to start on this machine (default 2; ignored under torchrun)")
    la.add_argument("--backend", choices=BACKENDS, default=None,
                    help="gloo (CPU) or nccl (one GPU per process); default: nccl if CUDA is "
                         "available, else gloo")
    la.add_argument("--scale", default="book", choices=SCALES, help="run size (default book)")
    la.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    la.add_argument("--out", type=Path, help="write rank 0's tables (CSV) here")
    la.add_argument("--no-compare", dest="compare", action="store_false",
                    help="do not rerun the same function on the simulator")
    return p


def _list() -> int:
    rows = [(c.slug, c.part, "yes" if c.available else "planned", c.short) for c in chapters()]
    widths = [max(len(r[i]) for r in rows + [("slug", "part", "ready", "paper")]) for i in range(4)]
    for r in [("slug", "part", "ready", "paper"), *rows]:
        print("  ".join(s.ljust(w) for s, w in zip(r, widths, strict=True)).rstrip())
    return 0


def _print_report(report: Report) -> None:
    print(f"{report.slug}  scale={report.scale}  seed={report.seed}  {report.seconds:.1f} s")
    print(f"  {report.tally()}")
    for t in report.tuning:
        print(f"  tuned {t.text}")
    for c in report.ordered_claims():
        source = "PILOT" if c.source == "pilot" else c.source
        verdict = report.verdict_of(c) if c.kind == "paper" else c.status
        print(f"  [{verdict:^19}] {c.kind:<10} {c.name}: measured {c.value_text} "
              f"(needs {c.bound}; threshold from {source}; {c.status})")
        extra = [c.statement]
        if c.control:
            extra.append(f"control: {c.control}: {c.control_text} "
                         f"({'passes' if c.control_passed else 'fails'})")
        elif c.no_control:
            extra.append(f"no control: {c.no_control}")
        if c.stability:
            extra.append(f"seed blocks: holds {c.stability.text}")
        if c.regime:
            extra.append(f"regime: {c.regime}")
        if c.paper:
            extra.append(f"paper: {c.paper}")
        for text in extra:
            for line in textwrap.wrap(text, 86):
                print(f"{'':34}{line}")
    if report.stale:
        print(f"  STALE stability table for {report.stale}: run `iclr-lab stability {report.slug}`")
    if report.stability_machine:
        print(f"  seed blocks measured on {report.stability_machine}, another kind of CPU: block 0 "
              "not compared with this run")


def _one(slug: str, args: argparse.Namespace) -> int:
    chapter(slug)  # a clear error for an unknown slug before anything heavy is imported
    report = run_chapter(slug, scale=args.scale, seed=args.seed)
    if args.out:
        report.save(args.out)
    if args.json:
        print(report.to_json())
    else:
        _print_report(report)
        if args.out:
            print(f"wrote tables, charts and claims to {args.out}")
    return 0 if report.ok else 1


def _all(args: argparse.Namespace) -> int:
    from iclr_lab.core.scoreboard import headlines, table

    out = args.out or Path("iclr_lab_scoreboard")
    reports, ok = [], True
    with timed() as elapsed:
        for ch in chapters(available_only=True):
            report = run_chapter(ch.slug, scale=args.scale, seed=args.seed)
            report.save(out / ch.slug)
            ok &= report.ok
            reports.append(report)
            if not args.json:
                _print_report(report)
    board = table(reports)
    board.to_csv(out / "scoreboard.csv", index=False)
    (out / "scoreboard.md").write_text(board.to_markdown(index=False) if _has_tabulate()
                                       else board.to_string(index=False))
    if args.json:
        print(json.dumps({"scale": args.scale, "seed": args.seed, "seconds": round(elapsed(), 3),
                          "ok": ok, "chapters": headlines(reports).to_dict("records"),
                          "reports": [r.to_dict() for r in reports]}))
    else:
        print(headlines(reports).to_string(index=False))
        if args.scale == "smoke":
            verdict = "smoke scale: claims not judged; the pipeline ran"
        else:
            verdict = "all expected claims hold" if ok else "SOME EXPECTED CLAIMS FAILED"
        print(f"scoreboard: {out / 'scoreboard.csv'}  ({elapsed():.0f} s, {verdict})")
    return 0 if ok else 1


def _stability(args: argparse.Namespace) -> int:
    from iclr_lab.core import stability
    from iclr_lab.core.validation import check_int

    chapter(args.slug)
    blocks = check_int("blocks", args.blocks, 2)

    jobs = check_int("jobs", args.jobs, 1)

    def show(b: int, seed: int, seconds: float) -> None:
        print(f"  block {b}: base seed {seed}, {seconds:.0f} s", file=sys.stderr)

    table = stability.measure(args.slug, blocks, jobs=jobs, on_block=show)
    path = stability.write(table, args.out)
    for name, entries in table["claims"].items():
        holds = sum(bool(e["passed"]) for e in entries)
        ctrl = [e["control_passed"] for e in entries if e["control_passed"] is not None]
        tail = f"; control fails {sum(not p for p in ctrl)}/{blocks}" if ctrl else ""
        print(f"  {name}: holds {holds}/{blocks}{tail}")
    print(f"wrote {path}")
    return 0


def _has_tabulate() -> bool:
    import importlib.util

    return importlib.util.find_spec("tabulate") is not None


def _launchable(slug: str) -> Any:
    from iclr_lab.core.registry import load

    chapter(slug)
    module = load(slug)
    if not callable(getattr(module, "launch", None)):
        launchable = [c.slug for c in chapters(available_only=True) if c.part == "distributed"]
        raise ValueError(f"chapter {slug!r} has no launch(comm, scale, seed) to run on "
                         f"torch.distributed; launchable chapters: {launchable}")
    return module


def _save_tables(tables: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        df.to_csv(out / f"{name}.csv", index=False)


def _final(tables: dict[str, Any], slug: str) -> Any:
    if "final" not in tables or "final_loss" not in tables["final"].columns:
        raise RuntimeError(f"{slug}.launch must return a 'final' table with a 'final_loss' column")
    return tables["final"]


def _launch(args: argparse.Namespace) -> int:
    import functools
    import os

    import pandas as pd

    from iclr_lab.core.collective import init_from_env, run_processes, run_simulated
    from iclr_lab.core.validation import check_int

    slug = args.slug
    module = _launchable(slug)
    check_int("seed", args.seed, 0, 2**32 - 1)
    train = functools.partial(module.launch, scale=args.scale, seed=args.seed)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by torchrun
        import torch.distributed as dist

        comm = init_from_env(args.backend)
        try:
            tables = train(comm)
        finally:
            dist.destroy_process_group()
        if comm.rank != 0:
            return 0
        nproc, how, compare = comm.world_size, "torchrun", False
    else:
        nproc = check_int("nproc", args.nproc, 1)
        backend = args.backend or ("nccl" if _cuda() else "gloo")
        tables = run_processes(train, nproc, backend)[0]
        how, compare = f"{nproc} local processes, {backend}", args.compare
    final = _final(tables, slug)
    with pd.option_context("display.width", 120, "display.max_columns", 20,
                           "display.float_format", "{:.9g}".format):
        print(f"{slug}: torch.distributed ({how}), scale={args.scale}, seed={args.seed}")
        print(final.to_string(index=False))
        if args.out:
            _save_tables(tables, args.out)
        if compare:
            simulated = run_simulated(train, nproc)[0]
            sim_final = _final(simulated, slug)
            print(f"\n{slug}: simulator ({nproc} threads), same function")
            print(sim_final.to_string(index=False))
            diff = (final["final_loss"] - sim_final["final_loss"]).abs().max()
            print(f"\nlargest |final loss, torch.distributed - simulator| = {diff:.3g}")
            if args.out:
                _save_tables(simulated, args.out / "simulator")
    if args.out:
        print(f"wrote the tables to {args.out}")
    return 0


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _check_out(out: Path | None) -> None:
    """Make sure ``--out`` is a directory this process can write, before anything runs (a book-scale
    run, or ``--all``, would otherwise be lost at the end). Creates it if needed."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        raise ValueError(f"--out {out}: cannot write there ({err.strerror or err})") from err


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 = every expected claim holds, 1 = an expected claim
    failed, 2 = a usage error or a file that cannot be read or written, named in one line)."""
    args = _parser().parse_args(argv)
    try:
        _check_out(getattr(args, "out", None))
        if args.command == "list":
            return _list()
        if args.command == "launch":
            return _launch(args)
        if args.command == "stability":
            return _stability(args)
        return _all(args) if args.all else _one(args.slug, args)
    except (ValueError, OSError) as err:  # bad argument, unreadable or unwritable file: one line
        print(f"iclr-lab: error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        # a rank of a torch.distributed group died (named by class: importing the collective here
        # would import torch for every command)
        if type(err).__name__ != "CollectiveError":
            raise
        print(f"iclr-lab: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
