"""Time every chapter's live explorer from a slider release to its new chart, on one thread.

Usage: ``python benchmarks/explorer_redraw.py [--positions 5] [--only SLUG,...]``.

For each chapter, its explorer cells are built as the chapter builds them (the chapter's imports,
then the cell: ``tests/labkit.py``'s :func:`explorer_cells`), one after another in this process with
``torch.set_num_threads(1)``.
Each slider of each explorer is moved, one at a time, to ``--positions`` points spread over its
range and then back; one redraw is the process's CPU time (all its threads: vl-convert draws on its
own) from setting the value (what a slider release does through the widget's comm) to the chart's
SVG being ready:
``interactive.update`` recomputes the result, and :func:`iclr_lab.core.widgets.live_bundle` draws it
with vl-convert. The browser's own share (a comm round trip and painting an image) is not counted;
the live-explorer browser test (``tests/site/test_live_explorers.py``) prints the wall time of one
drag per explorer, including it.

Target (issue 27): every explorer's median redraw under 1 s. The table lists the median and the
slowest redraw of every explorer, slowest median first, and ends with MEETS or MISSES.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 1.0


def _positions(w: object, n: int) -> list[float]:
    lo, hi = float(w.min), float(w.max)  # type: ignore[attr-defined]
    return [lo + (hi - lo) * (i + 0.5) / n for i in range(n)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--positions", type=int, default=5, help="points per slider")
    p.add_argument("--only", default="", help="comma-separated slugs")
    args = p.parse_args()
    os.environ.setdefault("ICLR_LAB_PROGRESS", "0")
    import ipywidgets
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT / "tests"))
    from labkit import explorer_cells

    from iclr_lab.core.registry import chapters
    from iclr_lab.core.widgets import live_bundle

    wanted = {s for s in args.only.split(",") if s}
    rows = []
    for ch in chapters(available_only=True):
        if wanted and ch.slug not in wanted:
            continue
        imports, cells = explorer_cells(ROOT / ch.chapter_path)
        ns: dict[str, object] = {}
        exec("\n".join(imports), ns)  # noqa: S102 - the chapter's own import lines
        for cell in cells:
            w = eval(cell.strip().splitlines()[-1], ns)  # noqa: S307 - the chapter's own explorer call
            live_bundle(w.result)  # the first draw (warm-up), as the chapter's cell shows it
            times, walls = [], []
            for control in w.children:
                if not isinstance(control, ipywidgets.widgets.widget_float._Float | ipywidgets.IntSlider):
                    continue
                start_value = control.value
                is_log = isinstance(control, ipywidgets.FloatLogSlider)
                for v in [*_positions(control, args.positions), None]:
                    t, t_wall = time.process_time(), time.perf_counter()
                    if v is None:
                        control.value = start_value
                    elif is_log:
                        control.value = control.base ** v
                    else:
                        control.value = type(start_value)(round(v)) if isinstance(start_value, int) else v
                    live_bundle(w.result)
                    times.append(time.process_time() - t)
                    walls.append(time.perf_counter() - t_wall)
            name = ch.slug + (f" ({cell.strip().splitlines()[-1]})" if len(cells) > 1 else "")
            rows.append((name, statistics.median(times), max(times), statistics.median(walls), len(times)))
            print(f"  {name:44s} median {rows[-1][1]:5.2f} s   slowest {rows[-1][2]:5.2f} s   "
                  f"({len(times)} redraws)", flush=True)
    print("\nslowest medians first (CPU s, torch on one thread, value set -> SVG ready; wall for reference):")
    print(f"  {'explorer':44s} {'median':>7s} {'slowest':>8s} {'wall':>6s}")
    for name, med, worst, wall, _ in sorted(rows, key=lambda r: -r[1]):
        print(f"  {name:44s} {med:7.2f} {worst:8.2f} {wall:6.2f}")
    worst_median = max(r[1] for r in rows)
    print(f"\n{'MEETS' if worst_median < TARGET_S else 'MISSES'}: the slowest median redraw is "
          f"{worst_median:.2f} s (target < {TARGET_S:.0f} s)")


if __name__ == "__main__":
    main()
