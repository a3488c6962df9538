"""The ``iclr-lab`` command (also ``python -m iclr_lab``).

::

    iclr-lab list
    iclr-lab reproduce SLUG [--scale book] [--seed 0] [--out DIR] [--json]
    iclr-lab reproduce --all [--scale book] [--seed 0] [--out DIR]

``reproduce`` prints the claims scorecard (or one JSON object with ``--json``), writes tables (CSV),
charts (HTML, PNG) and claims (JSON) to ``--out`` when given, and exits with status 1 when a claim that
is expected to hold fails. ``--all`` runs every implemented chapter and writes ``scoreboard.csv`` and
``scoreboard.md`` to ``--out`` (default ``iclr_lab_scoreboard``).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from iclr_lab.core.registry import chapter, chapters
from iclr_lab.core.registry import reproduce as run_chapter
from iclr_lab.core.report import Report, timed
from iclr_lab.core.scales import SCALES

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from iclr_lab import __version__

    p = argparse.ArgumentParser(
        prog="iclr-lab", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the experiments of the iclr_lab book and check each paper's claims.",
        epilog="examples:\n  iclr-lab list\n  iclr-lab reproduce vradam --seed 3 --json\n"
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
    for c in report.ordered_claims():
        source = "PILOT" if c.source == "pilot" else c.source
        print(f"  [{c.status:^19}] {c.kind:<10} {c.name}: measured {c.value_text} "
              f"(needs {c.bound}; threshold from {source})")
        for line in textwrap.wrap(c.statement, 86):
            print(f"{'':34}{line}")
        if c.paper:
            for line in textwrap.wrap(f"paper: {c.paper}", 86):
                print(f"{'':34}{line}")


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
        print(f"scoreboard: {out / 'scoreboard.csv'}  ({elapsed():.0f} s, "
              f"{'all expected claims hold' if ok else 'SOME EXPECTED CLAIMS FAILED'})")
    return 0 if ok else 1


def _has_tabulate() -> bool:
    import importlib.util

    return importlib.util.find_spec("tabulate") is not None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 = every expected claim holds)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            return _list()
        return _all(args) if args.all else _one(args.slug, args)
    except ValueError as err:  # bad slug, scale or seed: one line, no traceback
        print(f"iclr-lab: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
